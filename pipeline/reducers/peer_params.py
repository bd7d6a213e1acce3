"""Parameters of the peer comparison and the series it compares (seed 001 §4.2).

:class:`PeerParams` holds the seed's knobs (moving-average width, window size and shift, the
``k`` of the k-of-(2k-1) filter, the bin cap); :class:`PeerSeries` is one metric of one peer group
on a common time grid, the input of every later stage.

The steps, all from seed 001 §4.2 "Overview" unless noted, each in a module of its own:

0. **Downsampling** to 15 s by cumulative sums, before any of this
   (:mod:`pipeline.reducers.downsample`).
1. **Moving average** of width ``ma_width`` (15) per LUN. Edge handling: only *full* trailing
   windows are kept, so the first ``ma_width - 1`` raw samples yield no smoothed sample.
   Smoothed sample ``i`` is the mean of raw samples ``i .. i + ma_width - 1`` and carries the
   time of its last raw sample (sadc stamps interval *ends*, reference/sysstat.md §1.5).
2. **Windows** of ``win_size`` (60) smoothed samples shifted by ``win_shift`` (30): window ``j``
   holds smoothed samples ``[j*win_shift, j*win_shift + win_size)``, i.e. raw samples
   ``[j*win_shift, j*win_shift + win_size + ma_width - 2]`` (:func:`window_span`). Steps 1-2:
   :mod:`pipeline.reducers.peer_windows`.
3. **Shared bins** per window from the pooled samples of all LUNs by the modified
   Freedman–Diaconis rule ``BinSize = 2 IQR(x) WinSize^(-1/3)``, ``Bins = ceil(Range(x)/BinSize)``
   with ``n = WinSize`` (not the pooled count), capped at ``bin_cap`` (§4.2 "CDF Distances",
   §4.2.2). See :func:`fd_bin_count` for the IQR = 0 fallback.
4. **CDF distances**: per-LUN cumulative histograms normalised to CDFs on the shared bins, and
   ``d(P, Q) = sum_i |P(i) - Q(i)|`` for every pair (a sum, not a mean: the seed's formula).
   Steps 3-4: :mod:`pipeline.reducers.peer_cdf`.
5. **Anomalous**: a LUN whose distances to *more than half* of its ``n - 1`` peers exceed the
   threshold (strictly greater). **Faulty**: anomalous in at least ``k`` of the last ``2k - 1``
   windows (§4.2 "Windowing and Anomaly Filtering"): :mod:`pipeline.reducers.peer_flags`
   (batch, :func:`detect`) and :mod:`pipeline.reducers.peer_stream` (:class:`PeerDetector`).
6. **Threshold** per (peer group, metric): the maximum pairwise distance over every window of
   fault-free training data (§4.2.1 "captures the maximum expected deviation";
   :func:`threshold_rule`). With a strict ``>``, training data itself never yields an anomaly:
   :mod:`pipeline.reducers.peer_thresholds`.
7. **Persistence ordering** of the anomalous LUNs (§4.3): :mod:`pipeline.reducers.persistence`.

``anomaly_score`` (0-100, for Elastic-ML-like documents, reference/sysstat.md §4.2) is ``100 x``
the fraction of peers whose distance exceeds the threshold, so a LUN is anomalous exactly when
its score is above 50 (Kibana's "major" band and up).

Reducers are pure: values come in as arrays on a common time grid (already downsampled), no
file I/O, no clock. Values must be finite (a missing sample is the downsampler's business).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

from pipeline.records.json import JsonObject

F64 = npt.NDArray[np.float64]


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
    def min_samples(self) -> int:
        """Smoothed samples a LUN needs in a window to be compared in it: half the window,
        rounded up (fewer, after a gap in its data, and the window is skipped for that LUN)."""
        return (self.win_size + 1) // 2

    @property
    def history(self) -> int:
        """Number of windows the k-of-(2k-1) filter looks at."""
        return 2 * self.k - 1

    def to_dict(self) -> dict[str, int]:
        """JSON-able form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: JsonObject) -> PeerParams:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: unknown keys or invalid values.
        """
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown peer parameter(s) {sorted(unknown)}")
        return cls(**{k: int(v) for k, v in data.items()})


@dataclass(frozen=True, eq=False)
class PeerSeries:
    """One metric of one peer group on a common time grid.

    Attributes:
        group: peer group name.
        metric: metric name (e.g. ``await``).
        luns: LUN names, one per row of ``values``, at least 3 (a majority needs 2 peers).
        times_s: sample end times, Unix s, strictly increasing, shape ``(n_samples,)``.
        values: shape ``(n_luns, n_samples)`` float64, finite.
        present: shape of ``values``, False where a LUN has no sample at a grid time (its
            server's sadc was not running, a file is missing): the value there is not data
            and is ignored. None: every sample is present.

    Raises:
        ValueError: shapes disagree, fewer than 3 LUNs, duplicate names, times not increasing,
            or non-finite values.
    """

    group: str
    metric: str
    luns: tuple[str, ...]
    times_s: F64
    values: F64
    present: npt.NDArray[np.bool_] | None = None

    def __post_init__(self) -> None:
        check_block(self.luns, self.times_s, self.values)
        check_present(self.values, self.present)

    def masked(self) -> F64:
        """``values`` with NaN where a sample is missing (what the windows are computed on)."""
        return with_gaps(self.values, self.present)


def check_present(values: F64, present: npt.NDArray[np.bool_] | None) -> None:
    """Check a presence mask against its values.

    Raises:
        ValueError: ``present`` is not None and its shape differs from ``values``'.
    """
    if present is not None and np.shape(present) != values.shape:
        raise ValueError(
            f"present must have the shape of values {values.shape}, got {np.shape(present)}"
        )


def with_gaps(values: F64, present: npt.NDArray[np.bool_] | None) -> F64:
    """``values`` (shape ``(n_luns, n)``) with NaN where ``present`` is False (a copy), or
    ``values`` itself when ``present`` is None or all True."""
    if present is None or bool(np.all(present)):
        return values
    out: F64 = np.where(present, values, np.nan)
    return out


def check_block(luns: Sequence[str], times_s: F64, values: F64) -> None:
    """Check a block of samples of ``luns``: the invariants of :class:`PeerSeries`.

    Args:
        luns: LUN names, at least 3, distinct.
        times_s: sample end times, Unix s, shape ``(n,)``, strictly increasing.
        values: shape ``(len(luns), n)``, finite.

    Raises:
        ValueError: naming the broken invariant.
    """
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
