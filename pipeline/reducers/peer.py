"""Black-box peer comparison of one metric across the LUNs of one peer group (seed 001 §4.2).

The steps, all from seed 001 §4.2 "Overview" unless noted:

1. **Moving average** of width ``ma_width`` (15) per LUN. Edge handling: only *full* trailing
   windows are kept, so the first ``ma_width - 1`` raw samples yield no smoothed sample.
   Smoothed sample ``i`` is the mean of raw samples ``i .. i + ma_width - 1`` and carries the
   time of its last raw sample (sadc stamps interval *ends*, reference/sysstat.md §1.5).
2. **Windows** of ``win_size`` (60) smoothed samples shifted by ``win_shift`` (30): window ``j``
   holds smoothed samples ``[j*win_shift, j*win_shift + win_size)``, i.e. raw samples
   ``[j*win_shift, j*win_shift + win_size + ma_width - 2]`` (:func:`window_span`).
3. **Shared bins** per window from the pooled samples of all LUNs by the modified
   Freedman–Diaconis rule ``BinSize = 2 IQR(x) WinSize^(-1/3)``, ``Bins = ceil(Range(x)/BinSize)``
   with ``n = WinSize`` (not the pooled count), capped at ``bin_cap`` (§4.2 "CDF Distances",
   §4.2.2). See :func:`fd_bin_count` for the IQR = 0 fallback.
4. **CDF distances**: per-LUN cumulative histograms normalised to CDFs on the shared bins, and
   ``d(P, Q) = sum_i |P(i) - Q(i)|`` for every pair (a sum, not a mean: the seed's formula).
5. **Anomalous**: a LUN whose distances to *more than half* of its ``n - 1`` peers exceed the
   threshold (strictly greater). **Faulty**: anomalous in at least ``k`` of the last ``2k - 1``
   windows (§4.2 "Windowing and Anomaly Filtering").
6. **Threshold** per (peer group, metric): the maximum pairwise distance over every window of
   fault-free training data (§4.2.1 "captures the maximum expected deviation";
   :func:`threshold_rule`). With a strict ``>``, training data itself never yields an anomaly.

``anomaly_score`` (0-100, for Elastic-ML-like documents, reference/sysstat.md §4.2) is ``100 x``
the fraction of peers whose distance exceeds the threshold, so a LUN is anomalous exactly when
its score is above 50 (Kibana's "major" band and up).

Reducers are pure: values come in as arrays on a common time grid (already downsampled), no
file I/O, no clock. Values must be finite (a missing sample is the downsampler's business).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

THRESHOLDS_FORMAT = "iolens.peer_thresholds"
THRESHOLDS_VERSION = 1
THRESHOLD_RULE = "max_pairwise_distance"


@dataclass(frozen=True)
class PeerParams:
    """Parameters of the peer comparison; defaults are seed 001 §4.2's.

    Attributes:
        ma_width: moving-average width, samples (15).
        win_size: window length, smoothed samples (60).
        win_shift: shift between windows, samples (30); at most ``win_size``.
        k: faulty when anomalous in >= k of the last 2k-1 windows (3).
        bin_cap: upper limit of histogram bins per window (1000, §4.2.2).

    Raises:
        ValueError: a parameter out of range.
    """

    ma_width: int = 15
    win_size: int = 60
    win_shift: int = 30
    k: int = 3
    bin_cap: int = 1000

    def __post_init__(self) -> None:
        if self.ma_width < 1 or self.win_size < 2 or self.k < 1 or self.bin_cap < 1:
            raise ValueError(f"invalid peer parameters {self}")
        if not 1 <= self.win_shift <= self.win_size:
            raise ValueError(f"win_shift must lie in [1, win_size], got {self}")

    @property
    def history(self) -> int:
        """Number of windows the k-of-(2k-1) filter looks at."""
        return 2 * self.k - 1

    def to_dict(self) -> dict[str, int]:
        """JSON-able form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PeerParams:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: unknown keys or invalid values.
        """
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown peer parameter(s) {sorted(unknown)}")
        return cls(**{k: int(v) for k, v in data.items()})


def window_span(j: int, params: PeerParams) -> tuple[int, int]:
    """Raw sample indices ``(first, last)`` (inclusive) that window ``j`` depends on."""
    first = j * params.win_shift
    return first, first + params.win_size + params.ma_width - 2


def moving_average(values: F64, width: int) -> F64:
    """Trailing moving average over full windows only.

    Args:
        values: shape ``(n_luns, n)``.
        width: window width in samples, >= 1.

    Returns:
        Shape ``(n_luns, max(0, n - width + 1))``; column ``i`` is the mean of columns
        ``i .. i + width - 1``. The terms are added in a fixed order, so a value depends only
        on its own raw samples (streaming and batch agree to the bit).
    """
    n = values.shape[1] - width + 1
    if n <= 0:
        return np.empty((values.shape[0], 0), dtype=np.float64)
    acc = values[:, 0:n].copy()
    for i in range(1, width):
        acc += values[:, i : i + n]
    out: F64 = acc / width
    return out


def fd_bin_count(pooled: F64, win_size: int, bin_cap: int) -> int:
    """Number of shared bins for one window (seed 001 §4.2 "CDF Distances", §4.2.2).

    ``BinSize = 2 IQR(x) win_size^(-1/3)`` and ``Bins = ceil(Range(x) / BinSize)``, capped at
    ``bin_cap``; ``x`` holds the samples of all LUNs in the window but ``n = win_size`` (the
    seed: each histogram holds only WinSize samples). IQR uses numpy's linear percentiles.

    Fallback (not in the seed): all values equal (``Range = 0``) gives one bin; ``IQR = 0`` with
    ``Range > 0`` (more than half the pooled values identical, e.g. idle zeros or integer tps)
    gives ``bin_cap`` bins, i.e. ``BinSize = Range / bin_cap``, the finest resolution allowed.

    Args:
        pooled: the window's values of all LUNs, any shape, finite.
        win_size: samples per LUN histogram.
        bin_cap: maximum bins.

    Returns:
        The bin count in ``[1, bin_cap]``.
    """
    lo, hi = float(np.min(pooled)), float(np.max(pooled))
    span = hi - lo
    if span == 0.0:
        return 1
    q25, q75 = np.percentile(pooled, [25.0, 75.0])
    iqr = float(q75 - q25)
    if iqr == 0.0:
        return bin_cap
    bin_size = 2.0 * iqr * math.pow(win_size, -1.0 / 3.0)
    return max(1, min(bin_cap, math.ceil(span / bin_size)))


def cumulative_counts(window: F64, bins: int) -> I64:
    """Per-LUN cumulative histogram on ``bins`` equal bins spanning the pooled range.

    Bins are ``[e_i, e_{i+1})`` with ``e = linspace(min, max, bins + 1)``, the last one closed
    (numpy.histogram's convention).

    Args:
        window: shape ``(n_luns, win_size)``.
        bins: number of bins, >= 1.

    Returns:
        Shape ``(n_luns, bins)`` int64; column ``i`` counts samples in bins ``0..i``, so the
        last column is ``win_size``. Divided by ``win_size`` it is the CDF at the bins' upper
        edges.
    """
    n_luns = window.shape[0]
    edges = np.linspace(float(window.min()), float(window.max()), bins + 1)
    idx = np.clip(np.searchsorted(edges, window, side="right") - 1, 0, bins - 1)
    flat = (idx + np.arange(n_luns)[:, None] * bins).ravel()
    counts = np.bincount(flat, minlength=n_luns * bins).reshape(n_luns, bins)
    out: I64 = np.cumsum(counts, axis=1, dtype=np.int64)
    return out


def cdf_distances(window: F64, params: PeerParams) -> tuple[F64, int]:
    """Pairwise CDF distances of one window (seed 001 §4.2 "CDF Distances").

    ``d(P, Q) = sum_i |P(i) - Q(i)|`` over the shared bins, P and Q the CDFs of two LUNs.
    Computed on integer cumulative counts and divided by ``win_size`` once, so the matrix is
    exactly symmetric with a zero diagonal and zero for identical CDFs. Its range is
    ``[0, bins - 1]`` (the last CDF value is 1 for every LUN).

    Args:
        window: smoothed values, shape ``(n_luns, win_size)``.
        params: supplies ``win_size`` and ``bin_cap``.

    Returns:
        ``(distances, bins)``: shape ``(n_luns, n_luns)`` and the bin count used.
    """
    bins = fd_bin_count(window, params.win_size, params.bin_cap)
    cum = cumulative_counts(window, bins)
    diff = np.abs(cum[:, None, :] - cum[None, :, :]).sum(axis=2)
    dist: F64 = diff / float(window.shape[1])
    return dist, bins


def peers_exceeded(distances: F64, threshold: float) -> I64:
    """Per LUN, how many of its peers are farther than ``threshold`` (strict ``>``)."""
    over = distances > threshold
    np.fill_diagonal(over, False)
    out: I64 = over.sum(axis=1).astype(np.int64)
    return out


def majority_distance(distances: F64) -> F64:
    """Per LUN, the ``m``-th largest distance to its peers, ``m = floor((n - 1) / 2) + 1``.

    A LUN is anomalous exactly when this exceeds the threshold (more than half of its ``n - 1``
    peer distances do); it is the ``actual`` value of an ML-like record.
    """
    n = distances.shape[0]
    m = (n - 1) // 2 + 1
    peers = np.where(np.eye(n, dtype=bool), -np.inf, distances)
    out: F64 = -np.sort(-peers, axis=1)[:, m - 1]
    return out


def indicted(history: Sequence[bool], k: int) -> bool:
    """The k-of-(2k-1) filter: anomalous in at least ``k`` of the last ``2k - 1`` windows.

    Fewer than ``2k - 1`` windows seen so far: all of them count.
    """
    return sum(bool(a) for a in history[-(2 * k - 1) :]) >= k


def threshold_rule(window_max_distances: Sequence[float]) -> float:
    """The training rule (seed 001 §4.2.1): the largest pairwise distance of any window.

    Args:
        window_max_distances: per training window, its largest pairwise distance.

    Raises:
        ValueError: no training window.
    """
    if not window_max_distances:
        raise ValueError("no complete window in the training data")
    return float(max(window_max_distances))


@dataclass(frozen=True, eq=False)
class PeerSeries:
    """One metric of one peer group on a common time grid.

    Attributes:
        group: peer group name.
        metric: metric name (e.g. ``await``).
        luns: LUN names, one per row of ``values``, at least 3 (a majority needs 2 peers).
        times_s: sample end times, Unix s, strictly increasing, shape ``(n_samples,)``.
        values: shape ``(n_luns, n_samples)`` float64, finite.

    Raises:
        ValueError: shapes disagree, fewer than 3 LUNs, duplicate names, times not increasing,
            or non-finite values.
    """

    group: str
    metric: str
    luns: tuple[str, ...]
    times_s: F64
    values: F64

    def __post_init__(self) -> None:
        _check_block(self.luns, self.times_s, self.values)


def _check_block(luns: Sequence[str], times_s: F64, values: F64) -> None:
    if len(luns) < 3 or len(set(luns)) != len(luns):
        raise ValueError(f"peer comparison needs >= 3 distinct LUNs, got {list(luns)}")
    if values.ndim != 2 or times_s.ndim != 1 or values.shape != (len(luns), times_s.size):
        raise ValueError(
            f"values must have shape (n_luns={len(luns)}, n_samples={times_s.size}), "
            f"got {values.shape}"
        )
    if np.any(np.diff(times_s) <= 0):
        raise ValueError("sample times must be strictly increasing")
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite")


@dataclass(frozen=True, eq=False)
class WindowResult:
    """The outcome of one window.

    Attributes:
        group: peer group.
        metric: metric name.
        index: window number ``j`` (0 = the first complete window of the stream).
        start_s: time of the window's first smoothed sample (a sample end time, Unix s).
        end_s: time of its last smoothed sample.
        luns: LUN names, the row/column order of ``distances``.
        distances: pairwise CDF distances, shape ``(n_luns, n_luns)``.
        threshold: the threshold applied.
        bins: shared bins used.
        scores: per LUN, ``100 x`` the fraction of peers farther than the threshold (0-100).
        majority_distances: per LUN, :func:`majority_distance`.
        anomalous: LUNs anomalous in this window (score > 50), in ``luns`` order.
        faulty: LUNs indicted by the k-of-(2k-1) filter at this window, in ``luns`` order.
    """

    group: str
    metric: str
    index: int
    start_s: float
    end_s: float
    luns: tuple[str, ...]
    distances: F64
    threshold: float
    bins: int
    scores: tuple[float, ...]
    majority_distances: tuple[float, ...]
    anomalous: tuple[str, ...]
    faulty: tuple[str, ...]


def _evaluate(
    series_id: tuple[str, str, tuple[str, ...]],
    index: int,
    times_s: F64,
    window: F64,
    threshold: float,
    params: PeerParams,
    histories: Sequence[deque[bool]],
) -> WindowResult:
    """Analyse one window and push its flags into the per-LUN histories."""
    group, metric, luns = series_id
    dist, bins = cdf_distances(window, params)
    over = peers_exceeded(dist, threshold)
    n_peers = len(luns) - 1
    flags = [2 * int(c) > n_peers for c in over]
    for h, a in zip(histories, flags, strict=True):
        h.append(a)
    return WindowResult(
        group=group,
        metric=metric,
        index=index,
        start_s=float(times_s[0]),
        end_s=float(times_s[-1]),
        luns=luns,
        distances=dist,
        threshold=threshold,
        bins=bins,
        scores=tuple(100.0 * int(c) / n_peers for c in over),
        majority_distances=tuple(float(v) for v in majority_distance(dist)),
        anomalous=tuple(lun for lun, a in zip(luns, flags, strict=True) if a),
        faulty=tuple(
            lun for lun, h in zip(luns, histories, strict=True) if indicted(list(h), params.k)
        ),
    )


def iter_windows(smoothed: F64, params: PeerParams) -> Iterator[tuple[int, int]]:
    """``(j, start)`` of every complete window of a smoothed series of ``smoothed.shape[1]``."""
    n = smoothed.shape[1]
    j = 0
    while j * params.win_shift + params.win_size <= n:
        yield j, j * params.win_shift
        j += 1


def detect(series: PeerSeries, threshold: float, params: PeerParams) -> list[WindowResult]:
    """Batch peer comparison over a whole series (the reference for :class:`PeerDetector`).

    Args:
        series: the metric of one peer group.
        threshold: the trained distance threshold (:func:`train_threshold`).
        params: peer parameters.

    Returns:
        One result per complete window, in order; none if the series is shorter than
        ``win_size + ma_width - 1`` samples.
    """
    sm = moving_average(series.values, params.ma_width)
    st = series.times_s[params.ma_width - 1 :]
    histories: list[deque[bool]] = [deque(maxlen=params.history) for _ in series.luns]
    sid = (series.group, series.metric, series.luns)
    out = []
    for j, a in iter_windows(sm, params):
        b = a + params.win_size
        out.append(_evaluate(sid, j, st[a:b], sm[:, a:b], threshold, params, histories))
    return out


@dataclass(frozen=True)
class TrainedThreshold:
    """A threshold and how many windows it was learned from."""

    threshold: float
    windows: int


def train_threshold(values: F64, params: PeerParams) -> TrainedThreshold:
    """Learn a distance threshold from fault-free data (seed 001 §4.2.1, :func:`threshold_rule`).

    Args:
        values: fault-free samples of one metric of one peer group, ``(n_luns, n_samples)``.
        params: the parameters the detector will run with (the distances depend on them).

    Raises:
        ValueError: fewer than ``win_size + ma_width - 1`` samples (no complete window).
    """
    sm = moving_average(values, params.ma_width)
    maxima = [
        float(cdf_distances(sm[:, a : a + params.win_size], params)[0].max())
        for _, a in iter_windows(sm, params)
    ]
    return TrainedThreshold(threshold_rule(maxima), len(maxima))


@dataclass(frozen=True)
class ThresholdEntry:
    """The trained threshold of one (peer group, metric)."""

    group: str
    metric: str
    threshold: float
    windows: int


@dataclass(frozen=True)
class Thresholds:
    """Trained thresholds with their provenance; stored by the CLI as a versioned JSON file.

    Attributes:
        entries: one per (group, metric), unique.
        params: the peer parameters used in training (detection must use the same).
        trained_from_s: first training sample time, Unix s.
        trained_until_s: last training sample time, Unix s.
        rule: name of the training rule.
        version: file format version.

    Raises:
        ValueError: duplicate (group, metric) entries.
    """

    entries: tuple[ThresholdEntry, ...]
    params: PeerParams
    trained_from_s: float
    trained_until_s: float
    rule: str = THRESHOLD_RULE
    version: int = THRESHOLDS_VERSION

    def __post_init__(self) -> None:
        if len(self._by_key) != len(self.entries):
            raise ValueError("duplicate (group, metric) in thresholds")

    @cached_property
    def _by_key(self) -> dict[tuple[str, str], float]:
        return {(e.group, e.metric): e.threshold for e in self.entries}

    def get(self, group: str, metric: str) -> float:
        """The threshold of ``(group, metric)``.

        Raises:
            KeyError: not trained; the message names the pair and the training period.
        """
        try:
            return self._by_key[(group, metric)]
        except KeyError:
            raise KeyError(
                f"no peer threshold for group {group!r} metric {metric!r} "
                f"(trained {self.trained_from_s}..{self.trained_until_s}); retrain"
            ) from None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (``format``, ``version``, provenance, ``params``, ``thresholds``)."""
        return {
            "format": THRESHOLDS_FORMAT,
            "version": self.version,
            "rule": self.rule,
            "trained_from_s": self.trained_from_s,
            "trained_until_s": self.trained_until_s,
            "params": self.params.to_dict(),
            "thresholds": [asdict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Thresholds:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: another format or version, or malformed content.
        """
        if data.get("format") != THRESHOLDS_FORMAT or data.get("version") != THRESHOLDS_VERSION:
            raise ValueError(
                f"not an {THRESHOLDS_FORMAT} v{THRESHOLDS_VERSION} document: "
                f"format={data.get('format')!r} version={data.get('version')!r}"
            )
        try:
            entries = tuple(
                ThresholdEntry(
                    str(e["group"]), str(e["metric"]), float(e["threshold"]), int(e["windows"])
                )
                for e in data["thresholds"]
            )
            return cls(
                entries=entries,
                params=PeerParams.from_dict(data["params"]),
                trained_from_s=float(data["trained_from_s"]),
                trained_until_s=float(data["trained_until_s"]),
                rule=str(data["rule"]),
                version=int(data["version"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed thresholds document: {exc!r}") from exc


def train_thresholds(series: Sequence[PeerSeries], params: PeerParams) -> Thresholds:
    """Train every (group, metric) of fault-free ``series``.

    Raises:
        ValueError: no series, a (group, metric) twice, or a series without a complete window.
    """
    if not series:
        raise ValueError("no training series")
    entries = []
    for s in series:
        t = train_threshold(s.values, params)
        entries.append(ThresholdEntry(s.group, s.metric, t.threshold, t.windows))
    return Thresholds(
        entries=tuple(entries),
        params=params,
        trained_from_s=min(float(s.times_s[0]) for s in series),
        trained_until_s=max(float(s.times_s[-1]) for s in series),
    )


@dataclass
class PeerDetector:
    """Streaming peer comparison of one (group, metric); equals :func:`detect` on the same data.

    State between calls: the last ``ma_width - 1`` raw samples, the last ``win_size - 1``
    smoothed samples (fewer when windows just completed) and the last ``2k - 1`` anomaly flags
    per LUN, so memory is bounded whatever the stream length.

    Attributes:
        group: peer group.
        metric: metric name.
        luns: LUN names (>= 3), the row order of every block passed to :meth:`add`.
        threshold: the distance threshold.
        params: peer parameters.
    """

    group: str
    metric: str
    luns: tuple[str, ...]
    threshold: float
    params: PeerParams = field(default_factory=PeerParams)
    _raw: F64 = field(init=False, repr=False)
    _sm: F64 = field(init=False, repr=False)
    _sm_t: F64 = field(init=False, repr=False)
    _sm_seen: int = field(init=False, default=0)
    _next_window: int = field(init=False, default=0)
    _last_t: float = field(init=False, default=-math.inf)
    _hist: list[deque[bool]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.luns)
        _check_block(self.luns, np.empty(0), np.empty((n, 0)))
        self._raw = np.empty((n, 0), dtype=np.float64)
        self._sm = np.empty((n, 0), dtype=np.float64)
        self._sm_t = np.empty(0, dtype=np.float64)
        self._hist = [deque(maxlen=self.params.history) for _ in self.luns]

    def state(self) -> dict[str, Any]:
        """JSON-able state: resume with :meth:`restore` (e.g. after a restart)."""
        return {
            "luns": list(self.luns),
            "threshold": self.threshold,
            "params": self.params.to_dict(),
            "raw": self._raw.tolist(),
            "sm": self._sm.tolist(),
            "sm_t": self._sm_t.tolist(),
            "sm_seen": self._sm_seen,
            "next_window": self._next_window,
            "last_t": None if math.isinf(self._last_t) else self._last_t,
            "hist": [list(h) for h in self._hist],
        }

    @classmethod
    def restore(cls, group: str, metric: str, state: Mapping[str, Any]) -> PeerDetector:
        """A detector continuing exactly where :meth:`state` was taken.

        Raises:
            ValueError: malformed state.
        """
        luns = tuple(state["luns"])
        det = cls(
            group, metric, luns, float(state["threshold"]), PeerParams.from_dict(state["params"])
        )
        n = len(luns)
        det._raw = np.asarray(state["raw"], dtype=np.float64).reshape(n, -1)
        det._sm = np.asarray(state["sm"], dtype=np.float64).reshape(n, -1)
        det._sm_t = np.asarray(state["sm_t"], dtype=np.float64)
        det._sm_seen = int(state["sm_seen"])
        det._next_window = int(state["next_window"])
        det._last_t = -math.inf if state["last_t"] is None else float(state["last_t"])
        det._hist = [deque((bool(x) for x in h), maxlen=det.params.history) for h in state["hist"]]
        if len(det._hist) != n or det._sm.shape[1] != det._sm_t.size:
            raise ValueError("detector state does not match its LUNs")
        return det

    @property
    def last_time_s(self) -> float:
        """End time of the last sample added (-inf before the first)."""
        return self._last_t

    @property
    def held_samples(self) -> tuple[int, int]:
        """``(raw, smoothed)`` samples held between calls (at most ``ma_width - 1`` and
        ``win_size - 1``)."""
        return self._raw.shape[1], self._sm.shape[1]

    def add(self, times_s: npt.ArrayLike, values: npt.ArrayLike) -> list[WindowResult]:
        """Append samples and return the windows they complete, in order.

        Args:
            times_s: sample end times, Unix s, shape ``(m,)``, strictly increasing and after
                every earlier sample.
            values: shape ``(n_luns, m)`` (or ``(n_luns,)`` for one sample), rows in ``luns``
                order.

        Raises:
            ValueError: wrong shape, times not increasing, or non-finite values.
        """
        t = np.atleast_1d(np.asarray(times_s, dtype=np.float64))
        v = np.asarray(values, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        _check_block(self.luns, t, v)
        if t.size == 0:
            return []
        if t[0] <= self._last_t:
            raise ValueError(f"sample time {t[0]} is not after the previous one {self._last_t}")
        self._last_t = float(t[-1])
        p = self.params
        raw = np.concatenate([self._raw, v], axis=1)
        new_sm = moving_average(raw, p.ma_width)
        new_t = t[t.size - new_sm.shape[1] :] if new_sm.shape[1] else t[:0]
        held = min(raw.shape[1], p.ma_width - 1)
        self._raw = raw[:, raw.shape[1] - held :].copy()  # a view would pin the whole block
        sm = np.concatenate([self._sm, new_sm], axis=1)
        sm_t = np.concatenate([self._sm_t, new_t])
        first = self._sm_seen - self._sm.shape[1]  # stream index of sm[:, 0]
        self._sm_seen += new_sm.shape[1]
        out = []
        sid = (self.group, self.metric, self.luns)
        while self._next_window * p.win_shift + p.win_size <= self._sm_seen:
            a = self._next_window * p.win_shift - first
            b = a + p.win_size
            out.append(
                _evaluate(
                    sid, self._next_window, sm_t[a:b], sm[:, a:b], self.threshold, p, self._hist
                )
            )
            self._next_window += 1
        keep = max(0, self._sm_seen - self._next_window * p.win_shift)
        self._sm = sm[:, sm.shape[1] - keep :].copy()
        self._sm_t = sm_t[sm_t.size - keep :].copy()
        return out
