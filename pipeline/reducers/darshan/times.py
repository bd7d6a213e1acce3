"""Step 2: when each record was busy, and how long the job spent reading and writing.

IOMiner's interval model (reference/darshan-iominer.md 2.3): a record is busy from its open
for its read + write + meta time; a rank does one thing at a time. The read (write) time of a
job is the union of its records' read (write) intervals; Darshan's own figure is
``agg_time_by_slowest`` of ``darshan-parser --perf``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from pipeline.records.darshan_log import DarshanLog

F64 = npt.NDArray[np.float64]
RecordColumns = tuple[npt.NDArray[np.int64], dict[str, F64]]
"""One module's ``(ranks, columns)`` (:func:`pipeline.reducers.darshan.records.record_columns`)."""


def first_positive(*arrays: F64) -> F64:
    """Element-wise minimum over the arrays of the values > 0 (0 where none is)."""
    stacked = np.vstack(arrays)
    masked = np.where(stacked > 0, stacked, np.inf)
    out = masked.min(axis=0)
    out[~np.isfinite(out)] = 0.0
    return np.asarray(out, dtype=np.float64)


def busy_intervals(
    ranks: npt.NDArray[np.int64], cols: dict[str, F64], run_time_s: float
) -> tuple[F64, F64]:
    """IOMiner's busy interval of each record (reference/darshan-iominer.md 2.3).

    A record starts at its open (``F_OPEN_START_TIMESTAMP``; its first read or write when the
    open was not timed) and lasts its read + write + meta time; a record reduced over all ranks
    (rank −1) lasts ``F_SLOWEST_RANK_TIME``. A rank's records whose intervals overlap are laid
    end to end (IOMiner's ``AdjustTiming``: one rank does one thing at a time). Ends are clamped
    to the run time: blocking opens of FIFOs can report more meta time than the job ran.

    Args:
        ranks: shape ``(n,)``.
        cols: per-record columns of :func:`~pipeline.reducers.darshan.records.record_columns`,
            each shape ``(n,)``.
        run_time_s: the job's run time.

    Returns:
        ``(start, end)`` arrays, shape ``(n,)``, seconds from job start; ``end == start`` for
        records without any time.
    """
    start = _record_starts(cols)
    length = cols["read_time_s"] + cols["write_time_s"] + cols["meta_time_s"]
    shared = ranks < 0
    length[shared] = cols["slowest_rank_time_s"][shared]
    end = start + length
    per_rank = np.flatnonzero(~shared & (length > 0))
    if per_rank.size > 1:
        _lay_end_to_end(ranks, start, end, length, per_rank)
    if run_time_s > 0:
        np.minimum(end, run_time_s, out=end)
        np.minimum(start, end, out=start)
    return start, end


def _record_starts(cols: dict[str, F64]) -> F64:
    """Each record's open, or its first read or write when the open was not timed."""
    start = cols["open_start_s"].copy()
    missing = start <= 0
    if missing.any():
        first = first_positive(cols["read_start_s"], cols["write_start_s"])
        start[missing] = first[missing]
    return start


def _lay_end_to_end(
    ranks: npt.NDArray[np.int64], start: F64, end: F64, length: F64, picked: npt.NDArray[np.intp]
) -> None:
    """IOMiner's ``AdjustTiming`` on records ``picked``, in place: each rank's records, in
    order of start, begin no earlier than the end of the rank's previous one."""
    order = picked[np.lexsort((start[picked], ranks[picked]))]
    rk, st, ln = ranks[order].tolist(), start[order].tolist(), length[order].tolist()
    out = end[order].tolist()
    prev_rank, prev_end = None, 0.0
    for i, r in enumerate(rk):
        s = st[i] if r != prev_rank else max(st[i], prev_end)
        prev_end = s + ln[i]
        out[i], st[i], prev_rank = prev_end, s, r
    start[order] = st
    end[order] = out


def union_length(starts: F64, ends: F64) -> float:
    """Length of the union of intervals (sorted starts, running maximum of the ends)."""
    ok = ends > starts
    if not ok.any():
        return 0.0
    order = np.argsort(starts[ok], kind="stable")
    s, e = starts[ok][order], ends[ok][order]
    reach = np.maximum.accumulate(e)
    gaps = np.clip(s[1:] - reach[:-1], 0.0, None).sum()
    return float(reach[-1] - s[0] - gaps)


def _op_intervals(
    ranks: npt.NDArray[np.int64], cols: dict[str, F64], op: str, run_time_s: float
) -> tuple[F64, F64]:
    """The records' ``op`` (``read``/``write``) intervals that have a start and a length."""
    shared = ranks < 0
    s = cols[f"{op}_start_s"]
    dt = cols[f"{op}_time_s"]
    if shared.any():
        whole = cols["read_time_s"] + cols["write_time_s"] + cols["meta_time_s"]
        share = np.divide(dt, whole, out=np.zeros_like(dt), where=whole > 0)
        dt = np.where(shared, cols["slowest_rank_time_s"] * share, dt)
    ok = (s > 0) & (dt > 0)
    e = s + dt
    if run_time_s > 0:
        e = np.minimum(e, run_time_s)
    return s[ok], e[ok]


def direction_unions(records: Sequence[RecordColumns], run_time_s: float) -> tuple[float, float]:
    """Union lengths (s) of the records' read intervals and of their write intervals.

    Intervals are ``[F_<OP>_START, F_<OP>_START + F_<OP>_TIME]``; for a record reduced over all
    ranks, the slowest rank's share of the time (its time in proportion to the record's whole
    time). Ends are clamped to the run time.

    Args:
        records: each module's ``(ranks, columns)``.
        run_time_s: the job's run time.

    Returns:
        ``(read_s, write_s)``; 0.0 without records.
    """
    if not records:
        return 0.0, 0.0
    unions = []
    for op in ("read", "write"):
        parts = [_op_intervals(ranks, cols, op, run_time_s) for ranks, cols in records]
        starts = np.concatenate([s for s, _ in parts])
        ends = np.concatenate([e for _, e in parts])
        unions.append(union_length(starts, ends))
    return unions[0], unions[1]


def darshan_time_by_slowest(log: DarshanLog) -> float:
    """Darshan's ``agg_time_by_slowest`` of the POSIX module (``darshan-parser --perf``).

    The slowest rank's total read + write + meta time over the files it alone opened, plus,
    for each file shared by all ranks (rank −1), ``POSIX_F_SLOWEST_RANK_TIME``. It equals
    pydarshan's ``accumulate_records(...).derived_metrics.agg_time_by_slowest``.
    """
    t = log.tables.get("POSIX")
    if t is None or not len(t):
        return 0.0
    total = t.col("POSIX_F_READ_TIME") + t.col("POSIX_F_WRITE_TIME") + t.col("POSIX_F_META_TIME")
    shared = t.ranks < 0
    per_rank = np.bincount(t.ranks[~shared], weights=total[~shared]) if (~shared).any() else [0.0]
    return float(np.max(per_rank)) + float(t.col("POSIX_F_SLOWEST_RANK_TIME")[shared].sum())
