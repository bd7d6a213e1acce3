"""The sweep line of IOMiner's root-cause analysis: critical files and their exclusive times.

Seed 004, section II-D, Algorithm 2. A job's files (or per-rank file records) are busy during
intervals; the *critical path* is the union of those intervals (the time the job does I/O, idle
gaps excluded), the *critical files* are a minimum set of files whose intervals cover it, and a
critical file's *exclusive time* is the part of the critical path it alone is charged with.

The sweep visits intervals in order of start time, O(n log n) for the sort; then each step of
the critical path is one binary search (the intervals reaching furthest so far are known for
every prefix):

* a busy period starts at the first start not yet covered;
* from every interval that starts within the covered range, the one reaching furthest extends
  it; that interval's file is charged the newly covered length (its exclusive time).

This is the classic greedy minimum cover of a union of intervals, so the chosen intervals are a
minimum set, their exclusive times tile the union without overlap and sum to its length exactly.
For the seed's Figure 3 (File1 0-10, File3 4-8, File2 6-12, File4 16-18) it gives (File1, 0, 10),
(File2, 10, 12), (File4, 16, 18): exclusive times 10, 2 and 2 s, as in the paper. IOMiner's own
code picks the longest still-active interval and rescans the active set on each removal, which is
O(n²) in the worst case; its covering set has the same total.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True, slots=True)
class Segment:
    """One stretch of the critical path and the interval charged with it.

    Attributes:
        label: the label of the covering interval (a file name or record id).
        index: position of that interval in the input.
        start: where the stretch begins (same unit as the input, usually s).
        end: where it ends; ``end > start``.
    """

    label: Hashable
    index: int
    start: float
    end: float

    @property
    def length(self) -> float:
        """``end - start``."""
        return self.end - self.start


@dataclass(frozen=True)
class CoveringSet:
    """The result of :func:`covering_set`.

    Attributes:
        segments: the critical path in time order; consecutive segments of one busy period touch.
        exclusive: exclusive time per label, largest first (labels of critical files only).
        union: total length of the union of all input intervals (= sum of exclusive times).
        span: last end minus first start over all non-empty intervals (0 when there are none);
            ``span - union`` is the idle time between busy periods.
    """

    segments: tuple[Segment, ...]
    exclusive: dict[Hashable, float]
    union: float
    span: float

    @property
    def critical(self) -> tuple[Hashable, ...]:
        """Labels of the critical files, largest exclusive time first."""
        return tuple(self.exclusive)


def covering_set(
    starts: npt.ArrayLike, ends: npt.ArrayLike, labels: Sequence[Hashable] | None = None
) -> CoveringSet:
    """Critical path, critical files and exclusive times of a set of busy intervals.

    Args:
        starts: interval starts, shape ``(n,)``, any unit (seconds from job start in iolens).
        ends: interval ends, shape ``(n,)``. Intervals with ``end <= start`` or a NaN bound are
            empty and ignored.
        labels: a label per interval (file name, record id); several intervals may share one
            label, and their exclusive times add up. Default: the interval's index.

    Returns:
        The :class:`CoveringSet`. Ties (equal reach) go to the interval that starts first, then
        to the lower index, so the result is deterministic.

    Raises:
        ValueError: the arrays or labels differ in length.
    """
    s, e = _intervals(starts, ends, labels)
    keep = np.flatnonzero(np.isfinite(s) & np.isfinite(e) & (e > s))
    if keep.size == 0:
        return CoveringSet((), {}, 0.0, 0.0)
    order = keep[np.lexsort((keep, s[keep]))]
    segments = _critical_path(s[order], e[order], order, labels)
    ranked, union = _exclusive_times(segments)
    span = float(np.max(e[keep]) - np.min(s[keep]))
    return CoveringSet(tuple(segments), ranked, union, span)


def _exclusive_times(segments: Sequence[Segment]) -> tuple[dict[Hashable, float], float]:
    """Exclusive time per label, largest first, and their sum (the union's length)."""
    exclusive: dict[Hashable, float] = {}
    lengths = [seg.end - seg.start for seg in segments]
    for seg, length in zip(segments, lengths, strict=True):
        exclusive[seg.label] = exclusive.get(seg.label, 0.0) + length
    ranked = dict(sorted(exclusive.items(), key=lambda kv: -kv[1]))
    return ranked, float(sum(lengths))


def _intervals(
    starts: npt.ArrayLike, ends: npt.ArrayLike, labels: Sequence[Hashable] | None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """``starts`` and ``ends`` as float arrays.

    Raises:
        ValueError: the arrays or labels differ in length.
    """
    s = np.asarray(starts, dtype=np.float64)
    e = np.asarray(ends, dtype=np.float64)
    if s.shape != e.shape or s.ndim != 1:
        raise ValueError(f"starts and ends must be 1-d of one length, not {s.shape}, {e.shape}")
    if labels is not None and len(labels) != len(s):
        raise ValueError(f"{len(labels)} labels for {len(s)} intervals")
    return s, e


def _critical_path(
    ss: npt.NDArray[np.float64],
    ee: npt.NDArray[np.float64],
    order: npt.NDArray[np.intp],
    labels: Sequence[Hashable] | None,
) -> list[Segment]:
    """The sweep over non-empty intervals sorted by start (``ss``, ``ee``; ``order``: their
    input indices): in each busy period, from the covered point on, the interval started by
    then that reaches furthest, until none reaches past it."""
    n = len(order)
    # best[p]: among the first p+1 intervals (by start), the first one reaching furthest
    reach = np.maximum.accumulate(ee)
    new_max = ee > np.concatenate(([-np.inf], reach[:-1]))
    best = np.maximum.accumulate(np.where(new_max, np.arange(n), 0)).tolist()
    first, last, idx = ss.tolist(), ee.tolist(), order.tolist()
    segments: list[Segment] = []
    i = 0
    while i < n:  # one busy period per turn
        covered = first[i]
        while True:
            p = bisect_right(first, covered, lo=i) - 1
            b = best[p]
            if last[b] <= covered:
                break
            j = idx[b]
            label = labels[j] if labels is not None else j
            segments.append(Segment(label, j, covered, last[b]))
            covered = last[b]
        i = p + 1
    return segments


def weighted_factor(
    values: dict[Hashable, float | None], exclusive: dict[Hashable, float]
) -> float | None:
    """A contributing factor of a job: the critical files' values weighted by exclusive time.

    Seed 004, Equation 2: ``P = sum(p_i * t_i) / sum(t_i)`` over the critical files ``i`` with
    exclusive times ``t_i``. Files whose value is undefined (``None``: e.g. a small-I/O share of
    a file without reads or writes) are left out of both sums.

    Returns:
        The weighted mean, or None when no critical file has a value.
    """
    num = den = 0.0
    for label, t in exclusive.items():
        v = values.get(label)
        if v is None or t <= 0:
            continue
        num += v * t
        den += t
    return num / den if den > 0 else None
