"""Anomalous and faulty LUNs per window: the majority rule and the k-of-(2k-1) filter (seed 001
§4.2 "Overview", "Windowing and Anomaly Filtering").

A LUN is **anomalous** in a window when its CDF distances to *more than half* of its ``n - 1``
peers exceed the threshold (strictly greater); it is **faulty** when anomalous in at least ``k``
of the last ``2k - 1`` windows. ``anomaly_score`` (0-100, for Elastic-ML-like documents,
reference/sysstat.md §4.2) is ``100 x`` the fraction of peers whose distance exceeds the
threshold, so a LUN is anomalous exactly when its score is above 50 (Kibana's "major" band and
up). :func:`detect` runs the whole comparison over a series in one go; the streaming
:class:`~pipeline.reducers.peer_stream.PeerDetector` gives the same results.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.reducers.peer_cdf import window_distances
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_windows import iter_windows, moving_average

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

SeriesId = tuple[str, str, tuple[str, ...]]
"""``(group, metric, luns)`` of the series a window belongs to."""


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
        samples: per LUN, smoothed samples present in the window (``win_size`` unless its data
            has a gap); empty for a result built without it.
        skipped: LUNs not compared in this window (fewer than ``min_samples`` samples, or
            fewer than 3 LUNs with enough, or too few times in common): distances and
            majority distance NaN, score 0, never anomalous or faulty, no flag pushed into
            their k-of-(2k-1) history.
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
    samples: tuple[int, ...] = ()
    skipped: tuple[str, ...] = ()


def skip_reason(r: WindowResult, lun: str, min_samples: int) -> str | None:
    """Why ``lun`` was not compared in window ``r`` (None: it was): ``too_few_samples`` (a
    gap in its own data: fewer than ``min_samples``) or ``too_few_peers`` (fewer than 3 LUNs
    of the group had enough samples, or too few times in common)."""
    if lun not in r.skipped:
        return None
    if r.samples and r.samples[r.luns.index(lun)] < min_samples:
        return "too_few_samples"
    return "too_few_peers"


def _verdicts(
    luns: tuple[str, ...],
    over: I64,
    compared: npt.NDArray[np.bool_],
    histories: Sequence[deque[bool]],
    k: int,
) -> tuple[tuple[float, ...], tuple[str, ...], tuple[str, ...]]:
    """``(scores, anomalous, faulty)`` of one window; pushes the flags of the ``compared``
    LUNs into their ``histories`` (the others are left out of the window)."""
    n_peers = max(1, int(compared.sum()) - 1)
    flags = [bool(c) and 2 * int(o) > n_peers for o, c in zip(over, compared, strict=True)]
    for h, a, c in zip(histories, flags, compared, strict=True):
        if c:
            h.append(a)
    scores = tuple(100.0 * int(o) / n_peers for o in over)
    anomalous = tuple(lun for lun, a in zip(luns, flags, strict=True) if a)
    faulty = tuple(
        lun
        for lun, h, c in zip(luns, histories, compared, strict=True)
        if c and indicted(list(h), k)
    )
    return scores, anomalous, faulty


def _majority(dist: F64, compared: npt.NDArray[np.bool_]) -> F64:
    """:func:`majority_distance` among the ``compared`` LUNs, NaN for the others."""
    out: F64 = np.full(dist.shape[0], np.nan)
    keep = np.flatnonzero(compared)
    if keep.size:
        out[keep] = majority_distance(dist[np.ix_(keep, keep)])
    return out


def evaluate_window(
    series_id: SeriesId,
    index: int,
    times_s: F64,
    window: F64,
    threshold: float,
    params: PeerParams,
    histories: Sequence[deque[bool]],
) -> WindowResult:
    """Analyse window ``index`` (smoothed ``window``, shape ``(n_luns, win_size)``, NaN where
    missing, at ``times_s``) and push its anomaly flags into the per-LUN ``histories``.

    Only LUNs with at least ``params.min_samples`` samples present are compared, on the times
    they all have, and only when there are 3 of them (a majority needs 2 peers) and
    ``min_samples`` such times (:func:`~pipeline.reducers.peer_cdf.window_distances`); the
    others are ``skipped``."""
    group, metric, luns = series_id
    dist, bins, present, compared = window_distances(window, params)
    over = peers_exceeded(np.where(np.isnan(dist), 0.0, dist), threshold)
    over[~compared] = 0
    scores, anomalous, faulty = _verdicts(luns, over, compared, histories, params.k)
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
        scores=scores,
        majority_distances=tuple(float(v) for v in _majority(dist, compared)),
        anomalous=anomalous,
        faulty=faulty,
        samples=tuple(int(n) for n in present),
        skipped=tuple(lun for lun, c in zip(luns, compared, strict=True) if not c),
    )


def detect(series: PeerSeries, threshold: float, params: PeerParams) -> list[WindowResult]:
    """Batch peer comparison over a whole series (the reference for the streaming detector).

    Args:
        series: the metric of one peer group.
        threshold: the trained distance threshold
            (:func:`~pipeline.reducers.peer_thresholds.train_threshold`).
        params: peer parameters.

    Returns:
        One result per complete window, in order; none if the series is shorter than
        ``win_size + ma_width - 1`` samples.
    """
    sm = moving_average(series.masked(), params.ma_width)
    st = series.times_s[params.ma_width - 1 :]
    histories: list[deque[bool]] = [deque(maxlen=params.history) for _ in series.luns]
    sid = (series.group, series.metric, series.luns)
    out = []
    for j, a in iter_windows(sm, params):
        b = a + params.win_size
        out.append(evaluate_window(sid, j, st[a:b], sm[:, a:b], threshold, params, histories))
    return out
