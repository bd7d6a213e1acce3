"""One Darshan log -> IOMiner's job row, file rows, critical path and contributing factors.

Seed 004: section II-B (the job and file tables), III-C..E (the first-order metrics: read
ratio, sequential ratio, file-sharing pattern, interface) and II-D (bandwidth on the critical
path, critical files, exclusive times, the five factors). Counter names and conventions are
those of reference/darshan-iominer.md 2.2; the choices made where the paper is silent are
documented on each function.

Everything is vectorised over records with numpy (no DataFrames): a log of a few thousand
records is analysed in a few milliseconds, far less than pydarshan takes to read it.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from pipeline.parsers.darshan import (
    INTERFACE_MODULES,
    STD_STREAM_IDS,
    STD_STREAM_NAMES,
    DarshanLog,
    ModuleTable,
)
from pipeline.reducers.factors import Direction, factor_arrays, weighted_means
from pipeline.reducers.sweep import CoveringSet, covering_set

F64 = npt.NDArray[np.float64]

SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")
"""Darshan size bins of requests up to 1 MiB (``DARSHAN_BUCKET_INC`` upper bounds inclusive)."""

SIZE_CLASSES: tuple[tuple[str, int], ...] = (("One", 1), ("Small", 1024), ("Medium", 8192))
"""Job size classes of seed 004 III-E by process count: One, Small (2-1024), Medium
(1025-8192); above: Large."""

_LOG_NAME = re.compile(r"^(?P<user>[^_]+)_(?P<exe>.+)_id(?P<jobid>\d+)")


@dataclass(frozen=True, slots=True)
class CriticalFile:
    """A file on the critical path.

    Attributes:
        key: ``module:record id``.
        name: file name (hashed in anonymized logs).
        exclusive_s: its exclusive time (s).
        share: ``exclusive_s`` / critical path length.
        osts: OST indices of its stripes; nprocs: processes that accessed it.
        stripe_count: its stripe count (0 off Lustre).
        factors: its own values of the factors (None where undefined).
    """

    key: str
    name: str
    exclusive_s: float
    share: float
    osts: tuple[int, ...]
    nprocs: int
    stripe_count: int
    factors: dict[str, float | None]


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


@dataclass(frozen=True)
class JobAnalysis:
    """Everything iolens derives from one Darshan log.

    Attributes:
        log: the log read.
        log_id: identity of the log (job id, start, file name): stable across re-reads.
        job: the ``darshan.job`` fields (see :func:`analyze`).
        files: one dict per file (``darshan.file`` fields), in record order.
        cover: the covering set of the busy intervals (critical path).
        critical: the critical files, largest exclusive time first.
        direction: the direction the factors are computed for (the one with more bytes).
        factors: the job's contributing factors (seed 004 II-D), weighted by exclusive time.
        osts: per-OST statistics of the job's files.
    """

    log: DarshanLog
    log_id: str
    job: dict[str, Any]
    files: list[dict[str, Any]]
    cover: CoveringSet
    critical: tuple[CriticalFile, ...]
    direction: Direction
    factors: dict[str, float | None]
    osts: tuple[OstStat, ...] = field(default=())


@dataclass
class _Files:
    """Per-file columns (one entry per (module, record id))."""

    module: list[str]
    ids: npt.NDArray[np.uint64]
    nprocs: npt.NDArray[np.int64]
    cols: dict[str, F64]
    start: F64
    end: F64
    busy: F64


_COUNTERS: dict[str, str] = {
    "bytes_read": "{p}_BYTES_READ",
    "bytes_written": "{p}_BYTES_WRITTEN",
    "reads": "{p}_READS",
    "writes": "{p}_WRITES",
    "read_time_s": "{p}_F_READ_TIME",
    "write_time_s": "{p}_F_WRITE_TIME",
    "meta_time_s": "{p}_F_META_TIME",
    "read_start_s": "{p}_F_READ_START_TIMESTAMP",
    "read_end_s": "{p}_F_READ_END_TIMESTAMP",
    "write_start_s": "{p}_F_WRITE_START_TIMESTAMP",
    "write_end_s": "{p}_F_WRITE_END_TIMESTAMP",
    "open_start_s": "{p}_F_OPEN_START_TIMESTAMP",
    "close_end_s": "{p}_F_CLOSE_END_TIMESTAMP",
    "slowest_rank_time_s": "{p}_F_SLOWEST_RANK_TIME",
    "fastest_rank_time_s": "{p}_F_FASTEST_RANK_TIME",
    "slowest_rank_bytes": "{p}_SLOWEST_RANK_BYTES",
    "fastest_rank_bytes": "{p}_FASTEST_RANK_BYTES",
}
"""``darshan.file`` name -> Darshan counter (``{p}``: POSIX, MPIIO or STDIO)."""

_POSIX_ONLY: dict[str, tuple[str, ...]] = {
    "consec_reads": ("POSIX_CONSEC_READS",),
    "consec_writes": ("POSIX_CONSEC_WRITES",),
    "seq_reads": ("POSIX_SEQ_READS",),
    "seq_writes": ("POSIX_SEQ_WRITES",),
    "small_reads": tuple(f"POSIX_SIZE_READ_{b}" for b in SMALL_BINS),
    "small_writes": tuple(f"POSIX_SIZE_WRITE_{b}" for b in SMALL_BINS),
    "small_1k_reads": tuple(f"POSIX_SIZE_READ_{b}" for b in SMALL_BINS[:2]),
    "small_1k_writes": tuple(f"POSIX_SIZE_WRITE_{b}" for b in SMALL_BINS[:2]),
    "not_aligned": ("POSIX_FILE_NOT_ALIGNED",),
    "mem_not_aligned": ("POSIX_MEM_NOT_ALIGNED",),
}
"""``darshan.file`` name -> the POSIX counters it sums (0 for STDIO, which has none)."""


@functools.lru_cache(maxsize=8)
def _counter_names(module: str) -> tuple[str, ...]:
    """The counters :func:`_record_columns` reads from ``module``, in order."""
    p = module.replace("-", "")
    names = [c.format(p=p) for c in _COUNTERS.values()]
    if module == "POSIX":
        names += [c for group in _POSIX_ONLY.values() for c in group]
    return tuple(names)


def _record_columns(t: ModuleTable) -> dict[str, F64]:
    """The per-record values the tables need, by ``darshan.file`` name (one gather of the
    counters, as float64, "not monitored" −1 read as 0)."""
    posix = t.module == "POSIX"
    block = t.block(_counter_names(t.module))
    cols = {key: block[:, i] for i, key in enumerate(_COUNTERS)}
    at = len(_COUNTERS)
    zeros = np.zeros(len(t), dtype=np.float64)
    for key, group in _POSIX_ONLY.items():
        if posix:
            cols[key] = (
                block[:, at : at + len(group)].sum(axis=1) if len(group) > 1 else block[:, at]
            )
            at += len(group)
        else:
            cols[key] = zeros
    return cols


def _first_positive(*arrays: F64) -> F64:
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
        cols: per-record columns of :func:`_record_columns`, each shape ``(n,)``.
        run_time_s: the job's run time.

    Returns:
        ``(start, end)`` arrays, shape ``(n,)``, seconds from job start; ``end == start`` for
        records without any time.
    """
    start = cols["open_start_s"].copy()
    missing = start <= 0
    if missing.any():
        first = _first_positive(cols["read_start_s"], cols["write_start_s"])
        start[missing] = first[missing]
    length = cols["read_time_s"] + cols["write_time_s"] + cols["meta_time_s"]
    shared = ranks < 0
    length[shared] = cols["slowest_rank_time_s"][shared]
    end = start + length
    per_rank = np.flatnonzero(~shared & (length > 0))
    if per_rank.size > 1:
        order = per_rank[np.lexsort((start[per_rank], ranks[per_rank]))]
        rk, st, ln = ranks[order].tolist(), start[order].tolist(), length[order].tolist()
        out = end[order].tolist()
        prev_rank, prev_end = None, 0.0
        for i, r in enumerate(rk):
            s = st[i] if r != prev_rank else max(st[i], prev_end)
            prev_end = s + ln[i]
            out[i], st[i], prev_rank = prev_end, s, r
        start[order] = st
        end[order] = out
    if run_time_s > 0:
        np.minimum(end, run_time_s, out=end)
        np.minimum(start, end, out=start)
    return start, end


def _group_files(log: DarshanLog) -> tuple[_Files, dict[str, Any]]:
    """Aggregate POSIX and STDIO records per file; join MPI-IO's counts by record id."""
    modules: list[str] = []
    ids_l, nprocs_l = [], []
    cols_l: dict[str, list[F64]] = {}
    start_l, end_l, busy_l = [], [], []
    extra: dict[str, Any] = {"max_meta_rank_s": 0.0, "records": 0}
    mpi = log.tables.get("MPI-IO")
    coll: dict[int, tuple[float, float, float, float]] = {}
    if mpi is not None and len(mpi):
        u, inv = np.unique(mpi.ids, return_inverse=True)
        sums = [
            np.bincount(inv, weights=mpi.col(n), minlength=len(u))
            for n in ("MPIIO_COLL_READS", "MPIIO_COLL_WRITES")
        ]
        indep = [
            np.bincount(
                inv,
                weights=mpi.col(f"MPIIO_INDEP_{op}")
                + mpi.col(f"MPIIO_SPLIT_{op}")
                + mpi.col(f"MPIIO_NB_{op}"),
                minlength=len(u),
            )
            for op in ("READS", "WRITES")
        ]
        for k, rid in enumerate(u.tolist()):
            coll[int(rid)] = (sums[0][k], sums[1][k], indep[0][k], indep[1][k])
    meta_ranks: list[npt.NDArray[np.int64]] = []
    meta_times: list[F64] = []
    for mod in ("POSIX", "STDIO"):  # in this order: _file_rows relies on it
        t = log.tables.get(mod)
        if t is None or not len(t):
            continue
        names = log.names
        drop = [i in STD_STREAM_IDS or names.get(i, "") in STD_STREAM_NAMES for i in t.ids.tolist()]
        if any(drop):
            t = t.select(~np.array(drop, dtype=bool))
            if not len(t):
                continue
        extra["records"] += len(t)
        cols = _record_columns(t)
        start, end = busy_intervals(t.ranks, cols, log.run_time_s)
        own = t.ranks >= 0
        meta_ranks.append(t.ranks[own])
        meta_times.append(cols["meta_time_s"][own])
        busy = end > start
        if len(set(t.ids.tolist())) == len(t):
            # one record per file (N-N, or every file reduced over all ranks): nothing to merge
            u, inv, k = t.ids, np.arange(len(t)), len(t)
            nprocs = np.where(t.ranks < 0, log.nprocs, 1).astype(np.int64)
            agg = dict(cols)
            fs, fe, fb = np.where(busy, start, 0.0), np.where(busy, end, 0.0), end - start
        else:
            u, inv = np.unique(t.ids, return_inverse=True)
            k = len(u)
            shared = np.bincount(inv, weights=(t.ranks < 0).astype(np.float64), minlength=k)
            nrec = np.bincount(inv, minlength=k)
            nprocs = np.where(shared > 0, log.nprocs, nrec).astype(np.int64)
            agg = _reduce_per_file(
                {
                    **cols,
                    "busy_start_s": np.where(busy, start, 0.0),
                    "busy_end_s": np.where(busy, end, 0.0),
                    "slowest_busy_s": end - start,
                },
                inv,
                k,
            )
            fs = agg.pop("busy_start_s")
            fe = agg.pop("busy_end_s")
            fb = agg.pop("slowest_busy_s")
        # record-level busy intervals and columns stay available for the sweep
        extra.setdefault("intervals", []).append((len(modules) + inv, start, end))
        extra.setdefault("record_cols", []).append((t.ranks, cols))
        modules += [mod] * k
        ids_l.append(u)
        nprocs_l.append(nprocs)
        for name, v in agg.items():
            cols_l.setdefault(name, []).append(v)
        start_l.append(fs)
        end_l.append(fe)
        busy_l.append(fb)
        if mod == "POSIX":
            cr = np.zeros(k)
            cw = np.zeros(k)
            ir = np.zeros(k)
            iw = np.zeros(k)
            for j, rid in enumerate(u.tolist()):
                c = coll.get(int(rid))
                if c is not None:
                    cr[j], cw[j], ir[j], iw[j] = c
        else:
            cr = cw = ir = iw = np.zeros(k)
        for name, v in (
            ("coll_reads", cr),
            ("coll_writes", cw),
            ("indep_reads", ir),
            ("indep_writes", iw),
        ):
            cols_l.setdefault(name, []).append(v)
    ranks_all = np.concatenate(meta_ranks) if meta_ranks else np.zeros(0, np.int64)
    extra["max_meta_rank_s"] = (
        float(np.bincount(ranks_all, weights=np.concatenate(meta_times)).max())
        if len(ranks_all)
        else 0.0
    )
    if not ids_l:
        empty = np.zeros(0)
        return _Files(
            [], np.zeros(0, np.uint64), np.zeros(0, np.int64), {}, empty, empty, empty
        ), extra
    files = _Files(
        modules,
        np.concatenate(ids_l),
        np.concatenate(nprocs_l),
        {n: v[0] if len(v) == 1 else np.concatenate(v) for n, v in cols_l.items()},
        np.concatenate(start_l),
        np.concatenate(end_l),
        np.concatenate(busy_l),
    )
    return files, extra


_INT_COLUMNS = (
    "bytes_read",
    "bytes_written",
    "reads",
    "writes",
    "coll_reads",
    "coll_writes",
    "indep_reads",
    "indep_writes",
    "slowest_rank_bytes",
    "fastest_rank_bytes",
)
_POSIX_COLUMNS = (
    "consec_reads",
    "consec_writes",
    "seq_reads",
    "seq_writes",
    "small_reads",
    "small_writes",
    "small_1k_reads",
    "small_1k_writes",
    "not_aligned",
    "mem_not_aligned",
)
_FLOAT_COLUMNS = (
    "read_time_s",
    "write_time_s",
    "meta_time_s",
    "read_start_s",
    "read_end_s",
    "write_start_s",
    "write_end_s",
    "slowest_rank_time_s",
    "fastest_rank_time_s",
)


def _file_rows(log: DarshanLog, files: _Files) -> list[dict[str, Any]]:
    """One dict per file, by ``darshan.file`` field name; undefined values are left out
    (STDIO's request shares, stripes off Lustre). Built column-wise: each row is one
    ``dict(zip(names, values))``."""
    c = files.cols
    n = len(files.ids)
    if not n:
        return []
    ids = files.ids.tolist()
    nprocs = files.nprocs.tolist()
    base_cols: list[list[Any]] = [
        [str(i) for i in ids],
        [log.names.get(i, str(i)) for i in ids],
        files.module,
        nprocs,
        [p > 1 for p in nprocs],
        files.start.tolist(),
        files.end.tolist(),
        files.busy.tolist(),
    ]
    # one conversion per type: the integer columns (the shared ones, then POSIX's), the floats
    ints = np.stack([c[k] for k in (*_INT_COLUMNS, *_POSIX_COLUMNS)]).astype(np.int64).tolist()
    floats = np.stack([c[k] for k in _FLOAT_COLUMNS]).tolist()
    value_cols = ints[: len(_INT_COLUMNS)] + floats
    posix_cols = ints[len(_INT_COLUMNS) :]
    npos = files.module.count("POSIX")  # POSIX files come first, then STDIO ones (_group_files)
    rows: list[dict[str, Any]] = [
        dict(zip(_POSIX_KEYS, values, strict=False))
        for values in zip(*(c[:npos] for c in (*base_cols, *value_cols, *posix_cols)), strict=True)
    ]
    rows += [
        dict(zip(_STDIO_KEYS, values, strict=False))
        for values in zip(*(c[npos:] for c in (*base_cols, *value_cols)), strict=True)
    ]
    # (the keys and each row's values are built to the same length: no strict check per row)
    get = log.layouts.get
    for row, i, procs in zip(rows, ids, nprocs, strict=True):
        lay = get(i)
        if lay is None:
            row["osts"] = []
        else:
            row["osts"] = list(lay.osts)
            row["stripe_size"] = lay.stripe_size
            count = row["stripe_count"] = lay.stripe_count
            if count:
                row["proc_per_ost"] = procs / count
    return rows


_BASE_KEYS = ("record_id", "name", "module", "nprocs", "shared", "start_s", "end_s", "busy_s")
_STDIO_KEYS = (*_BASE_KEYS, *_INT_COLUMNS, *_FLOAT_COLUMNS)
_POSIX_KEYS = (*_STDIO_KEYS, *_POSIX_COLUMNS)
"""A file row's keys before its Lustre layout (``osts``, and on Lustre ``stripe_size``,
``stripe_count`` and, with a stripe count, ``proc_per_ost``)."""


_POSIX_TOTALS = (
    "reads",
    "writes",
    "bytes_read",
    "bytes_written",
    "coll_reads",
    "coll_writes",
    "indep_reads",
    "indep_writes",
    "seq_reads",
    "seq_writes",
    "consec_reads",
    "consec_writes",
    "small_reads",
    "small_writes",
    "small_1k_reads",
    "small_1k_writes",
)
"""The per-file columns :func:`analyze` totals over the POSIX files."""


def _reduce_per_file(columns: dict[str, F64], inv: npt.NDArray[np.intp], k: int) -> dict[str, F64]:
    """Record columns reduced per file in a few whole-array operations: ``*_start_s`` by the
    smallest value > 0 (0 when none is), ``*_end_s`` and the slowest/fastest-rank values by
    maximum, everything else by sum.

    Args:
        columns: per-record columns, each shape ``(n,)``.
        inv: file index of each record, shape ``(n,)`` (``np.unique``'s inverse).
        k: number of files.
    """
    names = list(columns)
    block = np.column_stack([columns[nm] for nm in names]) if names else np.zeros((len(inv), 0))
    if k == len(inv):  # one record per file, the common case: a permutation
        out = np.empty_like(block)
        out[inv] = block
        return {nm: out[:, j] for j, nm in enumerate(names)}
    order = np.argsort(inv, kind="stable")
    sorted_block = block[order]
    starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])
    is_min = np.array([nm.endswith("_start_s") for nm in names], dtype=bool)
    is_max = np.array(
        [nm.endswith("_end_s") or nm.startswith(("slowest", "fastest")) for nm in names],
        dtype=bool,
    )
    result = np.add.reduceat(sorted_block, starts, axis=0)
    if is_max.any():
        result[:, is_max] = np.maximum.reduceat(sorted_block[:, is_max], starts, axis=0)
    if is_min.any():
        firsts = np.where(sorted_block[:, is_min] > 0, sorted_block[:, is_min], np.inf)
        mins = np.minimum.reduceat(firsts, starts, axis=0)
        mins[~np.isfinite(mins)] = 0.0
        result[:, is_min] = mins
    return {nm: result[:, j] for j, nm in enumerate(names)}


def _union(starts: F64, ends: F64) -> float:
    """Length of the union of intervals (sorted starts, running maximum of the ends)."""
    ok = ends > starts
    if not ok.any():
        return 0.0
    order = np.argsort(starts[ok], kind="stable")
    s, e = starts[ok][order], ends[ok][order]
    reach = np.maximum.accumulate(e)
    gaps = np.clip(s[1:] - reach[:-1], 0.0, None).sum()
    return float(reach[-1] - s[0] - gaps)


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def _darshan_time_by_slowest(log: DarshanLog) -> float:
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


def sharing_pattern(log: DarshanLog, files: _Files) -> str | None:
    """The job's file-sharing pattern (seed 004 III-D): ``1-1``, ``N-1``, ``N-N`` or ``N-M``.

    ``1-1`` for one process. Otherwise, if files opened by several processes carry at least as
    many bytes as files of one process: ``N-1`` when each such file was opened by all processes
    (IOMiner counts a series of shared files, one per time step, as N-1), else ``N-M``. If
    unique files carry more: ``N-N`` when every process owns one (and only one) unique file,
    else ``N-M`` (a subset per file, or several files per process). None without data files.
    """
    if not len(files.ids):
        return None
    if log.nprocs <= 1:
        return "1-1"
    data = files.cols["bytes_read"] + files.cols["bytes_written"]
    shared = files.nprocs > 1
    if data[shared].sum() >= data[~shared].sum() and shared.any():
        return "N-1" if bool((files.nprocs[shared] >= log.nprocs).all()) else "N-M"
    unique = int((~shared & (data > 0)).sum())
    return "N-N" if unique == log.nprocs else "N-M"


def ost_stats(
    files: list[dict[str, Any]], min_files: int = 3, ratio: float = 0.25
) -> tuple[OstStat, ...]:
    """Per-OST speed of a job's files, and which OSTs are far slower than the rest.

    Each file's bandwidth is its bytes over its busy time (pytokio's ``darshan_bad_ost`` idea,
    reference/darshan-iominer.md 6): files on a degraded OST run slow whatever the
    application does, so an OST whose median file bandwidth is below ``ratio`` times the
    median over the job's OSTs is marked slow. Needs at least three OSTs with ``min_files``
    files each (fewer OSTs leave nothing to compare with).

    Args:
        files: rows of :func:`analyze` (``osts``, ``busy_s``, ``bytes_read``, ``bytes_written``,
            ``end_s``).
        min_files: files an OST needs to be compared.
        ratio: the slowness cut.

    Returns:
        One :class:`OstStat` per OST the job's files are on, by OST index.
    """
    picked = [
        (f["osts"], nbytes / f["busy_s"], f["end_s"])
        for f in files
        if f["osts"] and f["busy_s"] > 0 and (nbytes := f["bytes_read"] + f["bytes_written"]) > 0
    ]
    if not picked:
        return ()
    lists, bws, ends = zip(*picked, strict=True)
    counts = [len(o) for o in lists]
    ost = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=sum(counts))
    bw = np.repeat(np.array(bws, dtype=np.float64), counts)
    end = np.repeat(np.array(ends, dtype=np.float64), counts)
    order = np.lexsort((bw, ost))  # by OST, then bandwidth: each OST's files in a run
    ost, bw, end = ost[order], bw[order], end[order]
    first = np.flatnonzero(np.r_[True, ost[1:] != ost[:-1]])
    n = np.diff(np.r_[first, len(ost)])
    med = _sorted_median(bw, first, n)
    last = np.maximum.reduceat(end, first)
    eligible = n >= min_files
    slow = np.zeros(len(first), dtype=bool)
    if eligible.sum() >= 3:
        em = np.sort(med[eligible])
        overall = _sorted_median(em, np.zeros(1, np.intp), np.array([len(em)]))[0]
        slow = eligible & (med < ratio * overall)
    return tuple(
        map(
            OstStat._make,
            zip(
                ost[first].tolist(),
                n.tolist(),
                med.tolist(),
                last.tolist(),
                slow.tolist(),
                strict=True,
            ),
        )
    )


def _sorted_median(values: F64, first: npt.NDArray[np.intp], n: npt.NDArray[np.intp]) -> F64:
    """Median of each run ``values[first[i] : first[i] + n[i]]`` of ascending values: the middle
    one, or the mean of the two middle ones (``statistics.median``'s definition)."""
    lo = values[first + (n - 1) // 2]
    hi = values[first + n // 2]
    return np.asarray((lo + hi) / 2, dtype=np.float64)


def log_identity(log: DarshanLog) -> str:
    """Identity of a log: job id, start (ms) and file name without directories."""
    return f"{log.jobid}:{round(log.start_s * 1000)}:{os.path.basename(log.path)}"


def analyze(log: DarshanLog) -> JobAnalysis:
    """Derive the job row, the file rows and the critical path of one log.

    Job fields (``darshan.job.*``): ``id, uid, user, exe, nprocs, start_s, end_s, run_time_s,
    bytes_read, bytes_written, reads, writes, read_ratio, seq_ratio, consec_ratio, small_ratio,
    small_1k_ratio, sharing_ratio, pattern, interfaces, interface, collective,
    collective_ratio, ost_count, file_count, size_class, no_io, io_time_s, read_time_s,
    write_time_s, naive_bytes_per_s, critical_bytes_per_s, darshan_bytes_per_s,
    read_bytes_per_s, write_bytes_per_s, partial``. Ratios are None where their denominator
    is 0. Sequential, consecutive and small ratios are over POSIX requests (Equation 3); bytes
    are POSIX + STDIO (MPI-IO sits on POSIX and would count twice); the standard streams are
    left out. ``sharing_ratio`` is processes / files (Equation 5). Bandwidths (bytes/s):

    * naive: bytes / (last end - first start) of the files' busy intervals (Equation 1);
    * critical: bytes / length of the critical path (the union of the busy intervals, II-D);
    * darshan: POSIX bytes (all records) / Darshan's ``agg_time_by_slowest``, which is
      ``agg_perf_by_slowest`` of ``darshan-parser --perf``;
    * read / write: the direction's bytes / union of its records' read (write) intervals
      ``[F_READ_START, F_READ_START + F_READ_TIME]`` (the slowest rank's share of the time for
      a record reduced over all ranks).

    The user is not in a Darshan log: it comes from the log name
    ``<user>_<exe>_id<jobid>_...`` when the name follows Darshan's convention.
    """
    files, extra = _group_files(log)
    n = len(files.ids)
    c = files.cols
    rows = _file_rows(log, files)
    bytes_read = float(c["bytes_read"].sum()) if n else 0.0
    bytes_written = float(c["bytes_written"].sum()) if n else 0.0
    total = bytes_read + bytes_written
    npos = files.module.count("POSIX")  # POSIX files come first

    # the POSIX files' totals of the columns the job's ratios need, in one reduction
    sums = np.stack([c[k][:npos] for k in _POSIX_TOTALS]).sum(axis=1) if npos else None
    totals = dict(
        zip(
            _POSIX_TOTALS,
            sums.tolist() if sums is not None else [0.0] * len(_POSIX_TOTALS),
            strict=True,
        )
    )
    psum = totals.__getitem__

    p_ops = psum("reads") + psum("writes")
    # busy intervals of records, labelled by file
    starts: list[F64] = []
    ends: list[F64] = []
    labels: list[Hashable] = []
    for file_index, s_, e_ in extra.get("intervals", []):
        starts.append(s_)
        ends.append(e_)
        labels += file_index.tolist()
    st = np.concatenate(starts) if starts else np.zeros(0)
    en = np.concatenate(ends) if ends else np.zeros(0)
    cover = covering_set(st, en, labels)  # labelled by file index
    read_u, write_u = _direction_unions(extra, log.run_time_s)
    span = cover.span
    direction: Direction = "write" if bytes_written >= bytes_read else "read"
    crit = np.array(list(cover.exclusive), dtype=np.intp)
    excl = np.array(list(cover.exclusive.values()), dtype=np.float64)
    stripes = np.array([r.get("stripe_count", 0) for r in rows], dtype=np.float64)
    counted = np.arange(n) < npos
    arrays = factor_arrays(c, counted, files.nprocs, stripes, direction) if n else {}
    names = ("small", "small_1k", "non_consec", "coll", "proc_per_ost")
    picked = {k: arrays[k][crit] for k in names} if n else {}
    per_file = (  # each critical file's own factors, None where undefined (NaN)
        [
            {k: (v if v == v else None) for k, v in zip(names, values, strict=False)}
            for values in zip(*(picked[k].tolist() for k in names), strict=True)
        ]
        if n
        else []
    )
    critical: list[CriticalFile] = []
    for j, (i, t_excl) in enumerate(zip(crit.tolist(), excl.tolist(), strict=True)):
        r = rows[i]
        critical.append(
            CriticalFile(
                f"{r['module']}:{r['record_id']}",
                r["name"],
                t_excl,
                t_excl / cover.union if cover.union > 0 else 0.0,
                tuple(r["osts"]),
                r["nprocs"],
                r.get("stripe_count") or 0,
                per_file[j],
            )
        )
    all_osts = {o for r in rows for o in r["osts"]}
    factors: dict[str, float | None] = (
        dict(zip(names, weighted_means([picked[k] for k in names], excl), strict=True))
        if n
        else dict.fromkeys(names)
    )
    factors["ost_count"] = float(len(all_osts))
    coll_ops = psum("coll_reads") + psum("coll_writes")
    mpi_ops = coll_ops + psum("indep_reads") + psum("indep_writes")
    interfaces = sorted(
        {INTERFACE_MODULES[m] for m in log.modules if m in INTERFACE_MODULES}
        - ({"POSIX"} if "POSIX" in log.modules and not len(log.tables.get("POSIX", ())) else set())
    )
    if coll_ops > 0:
        interface: str | None = "MPI-IO collective"
    elif mpi_ops > 0:
        interface = "MPI-IO independent"
    elif psum("bytes_read") + psum("bytes_written") > 0 or p_ops > 0:
        interface = "POSIX"
    elif total > 0:
        interface = "STDIO"
    else:
        interface = None
    darshan_t = _darshan_time_by_slowest(log)
    pt = log.tables.get("POSIX")
    # Darshan's own figure counts every POSIX record, the standard streams included
    posix_bytes = (
        float((pt.col("POSIX_BYTES_READ") + pt.col("POSIX_BYTES_WRITTEN")).sum()) if pt else 0.0
    )
    m = _LOG_NAME.match(os.path.basename(log.path))
    exe_tokens = log.exe.split()
    job: dict[str, Any] = {
        "id": log.jobid,
        "uid": log.uid,
        "user": m.group("user") if m else None,
        "exe": os.path.basename(exe_tokens[0]) if exe_tokens else None,
        "command_line": log.exe or None,
        "nprocs": log.nprocs,
        "start_s": log.start_s,
        "end_s": log.end_s,
        "run_time_s": log.run_time_s,
        "bytes_read": int(bytes_read),
        "bytes_written": int(bytes_written),
        "reads": int(c["reads"].sum()) if n else 0,
        "writes": int(c["writes"].sum()) if n else 0,
        "read_ratio": _ratio(bytes_read, total),
        "seq_ratio": _ratio(psum("seq_reads") + psum("seq_writes"), p_ops),
        "consec_ratio": _ratio(psum("consec_reads") + psum("consec_writes"), p_ops),
        "small_ratio": _ratio(psum("small_reads") + psum("small_writes"), p_ops),
        "small_1k_ratio": _ratio(psum("small_1k_reads") + psum("small_1k_writes"), p_ops),
        "sharing_ratio": _ratio(float(log.nprocs), float(n)),
        "pattern": sharing_pattern(log, files),
        "interfaces": interfaces,
        "interface": interface,
        "collective": coll_ops > 0,
        "collective_ratio": _ratio(coll_ops, mpi_ops),
        "ost_count": len(all_osts),
        "file_count": n,
        "size_class": size_class(log.nprocs),
        "no_io": total <= 0,
        "io_time_s": cover.union,
        "read_time_s": read_u,
        "write_time_s": write_u,
        "naive_bytes_per_s": _ratio(total, span),
        "critical_bytes_per_s": _ratio(total, cover.union),
        "darshan_bytes_per_s": _ratio(posix_bytes, darshan_t),
        "read_bytes_per_s": _ratio(bytes_read, read_u),
        "write_bytes_per_s": _ratio(bytes_written, write_u),
        "partial": bool(log.partial),
        "max_meta_rank_s": extra["max_meta_rank_s"],
    }
    return JobAnalysis(
        log,
        log_identity(log),
        job,
        rows,
        cover,
        tuple(critical),
        direction,
        factors,
        ost_stats(rows),
    )


def size_class(nprocs: int) -> str:
    """``One``, ``Small``, ``Medium`` or ``Large`` (:data:`SIZE_CLASSES`)."""
    for name, top in SIZE_CLASSES:
        if nprocs <= top:
            return name
    return "Large"


def _direction_unions(extra: dict[str, Any], run_time_s: float) -> tuple[float, float]:
    """Union lengths of the records' read intervals and of their write intervals:
    ``[F_<OP>_START, F_<OP>_START + F_<OP>_TIME]``, for a record reduced over all ranks the
    slowest rank's share of the time (its time in proportion to the record's whole time)."""
    parts: dict[str, tuple[list[F64], list[F64]]] = {"read": ([], []), "write": ([], [])}
    for ranks, cols in extra.get("record_cols", []):
        shared = ranks < 0
        whole = (
            cols["read_time_s"] + cols["write_time_s"] + cols["meta_time_s"]
            if shared.any()
            else None
        )
        for op, (starts, ends) in parts.items():
            s = cols[f"{op}_start_s"]
            dt = cols[f"{op}_time_s"]
            if whole is not None:
                share = np.divide(dt, whole, out=np.zeros_like(dt), where=whole > 0)
                dt = np.where(shared, cols["slowest_rank_time_s"] * share, dt)
            ok = (s > 0) & (dt > 0)
            e = s + dt
            if run_time_s > 0:
                e = np.minimum(e, run_time_s)
            starts.append(s[ok])
            ends.append(e[ok])
    read, write = (
        _union(np.concatenate(starts), np.concatenate(ends)) if starts else 0.0
        for starts, ends in parts.values()
    )
    return read, write
