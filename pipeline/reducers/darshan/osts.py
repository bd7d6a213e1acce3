"""Step 7: per-OST speed of a job's files, and the OSTs far slower than the rest.

pytokio's ``darshan_bad_ost`` idea (reference/darshan-iominer.md 6): files on a degraded OST
run slow whatever the application does, so comparing the OSTs of one job finds the bad one.
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pipeline.records.darshan_rows import DarshanFileRow

F64 = npt.NDArray[np.float64]

MIN_FILES = 3
"""Files an OST needs to be compared."""

SLOW_RATIO = 0.25
"""An OST is slow below this share of the median over the job's OSTs."""


class OstStat(NamedTuple):
    """Files of one job striped on one OST, and how fast they went.

    Attributes:
        ost: the Lustre OST index.
        files: files of the job with a stripe on it.
        median_bytes_per_s: median over those files of bytes / busy time.
        last_end_s: the latest busy end of those files (s from job start).
        slow: the OST is far slower than the job's other OSTs (:func:`ost_stats`).
    """

    ost: int
    files: int
    median_bytes_per_s: float
    last_end_s: float
    slow: bool


def _file_bandwidths(files: list[DarshanFileRow]) -> tuple[npt.NDArray[np.int64], F64, F64]:
    """``(ost, bytes_per_s, end_s)`` of every (file, OST) pair of files with bytes and busy
    time, sorted by OST then bandwidth (each OST's files in a run)."""
    picked = [
        (f["osts"], nbytes / f["busy_s"], f["end_s"])
        for f in files
        if f["osts"] and f["busy_s"] > 0 and (nbytes := f["bytes_read"] + f["bytes_written"]) > 0
    ]
    if not picked:
        return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
    lists, bws, ends = zip(*picked, strict=True)
    counts = [len(o) for o in lists]
    ost = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=sum(counts))
    bw = np.repeat(np.array(bws, dtype=np.float64), counts)
    end = np.repeat(np.array(ends, dtype=np.float64), counts)
    order = np.lexsort((bw, ost))
    return ost[order], bw[order], end[order]


def ost_stats(
    files: list[DarshanFileRow], min_files: int = MIN_FILES, ratio: float = SLOW_RATIO
) -> tuple[OstStat, ...]:
    """Per-OST speed of a job's files, and which OSTs are far slower than the rest.

    Each file's bandwidth is its bytes over its busy time; an OST whose median file bandwidth
    is below ``ratio`` times the median over the job's OSTs is marked slow. Needs at least
    three OSTs with ``min_files`` files each (fewer OSTs leave nothing to compare with).

    Args:
        files: file rows (``osts``, ``busy_s``, ``bytes_read``, ``bytes_written``, ``end_s``).
        min_files: files an OST needs to be compared.
        ratio: the slowness cut.

    Returns:
        One :class:`OstStat` per OST the job's files are on, by OST index.
    """
    ost, bw, end = _file_bandwidths(files)
    if not len(ost):
        return ()
    first = np.flatnonzero(np.r_[True, ost[1:] != ost[:-1]])
    n = np.diff(np.r_[first, len(ost)])
    med = sorted_median(bw, first, n)
    last = np.maximum.reduceat(end, first)
    slow = _slow(med, n >= min_files, ratio)
    columns = (ost[first].tolist(), n.tolist(), med.tolist(), last.tolist(), slow.tolist())
    return tuple(map(OstStat._make, zip(*columns, strict=True)))


def _slow(med: F64, eligible: npt.NDArray[np.bool_], ratio: float) -> npt.NDArray[np.bool_]:
    """OSTs whose median ``med`` is below ``ratio`` times the median over the ``eligible``
    ones; none unless three OSTs at least are eligible."""
    if eligible.sum() < 3:
        return np.zeros(len(med), dtype=bool)
    em = np.sort(med[eligible])
    overall = sorted_median(em, np.zeros(1, np.intp), np.array([len(em)]))[0]
    return np.asarray(eligible & (med < ratio * overall))


def sorted_median(values: F64, first: npt.NDArray[np.intp], n: npt.NDArray[np.intp]) -> F64:
    """Median of each run ``values[first[i] : first[i] + n[i]]`` of ascending values: the middle
    one, or the mean of the two middle ones (``statistics.median``'s definition)."""
    lo = values[first + (n - 1) // 2]
    hi = values[first + n // 2]
    return np.asarray((lo + hi) / 2, dtype=np.float64)
