"""Step 3: group a log's records per file, the rows of IOMiner's file table (seed 004 II-B).

A file is one (module, record id). POSIX and STDIO records are grouped, in this order (POSIX
files first: :mod:`.rows` and :mod:`.summary` rely on it); the standard streams are left out;
MPI-IO's collective and independent operation counts are joined to the POSIX file of the same
record id (MPI-IO sits on POSIX: its bytes would count twice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pipeline.records.darshan_log import STD_STREAM_IDS, STD_STREAM_NAMES, DarshanLog, ModuleTable
from pipeline.reducers.darshan.records import record_columns
from pipeline.reducers.darshan.times import busy_intervals

F64 = npt.NDArray[np.float64]
MpiioCounts = dict[int, tuple[float, float, float, float]]
"""Record id -> (collective reads, collective writes, independent reads, independent writes)."""

GROUPED_MODULES = ("POSIX", "STDIO")
"""The modules whose records become files, in the order their files are listed."""

_MPIIO_COLUMNS = ("coll_reads", "coll_writes", "indep_reads", "indep_writes")


@dataclass
class FileTable:
    """Per-file columns, one entry per (module, record id), POSIX files first.

    Attributes:
        module: ``POSIX`` or ``STDIO`` per file.
        ids: record ids, shape ``(k,)`` uint64.
        nprocs: processes that opened each file (all of them for a record of rank −1).
        cols: per-file values by ``darshan.file`` name, each shape ``(k,)``.
        start: first busy start (s from job start; 0 without busy time).
        end: last busy end (s).
        busy: the longest record's busy time (s).
    """

    module: list[str]
    ids: npt.NDArray[np.uint64]
    nprocs: npt.NDArray[np.int64]
    cols: dict[str, F64]
    start: F64
    end: F64
    busy: F64


@dataclass(frozen=True)
class ModuleRecords:
    """One module's records (standard streams left out), kept for the critical path.

    Attributes:
        ranks: shape ``(n,)``; cols: :func:`~pipeline.reducers.darshan.records.record_columns`.
        file_index: each record's file, an index into the :class:`FileTable`.
        start / end: the records' busy intervals (:func:`busy_intervals`).
    """

    ranks: npt.NDArray[np.int64]
    cols: dict[str, F64]
    file_index: npt.NDArray[np.intp]
    start: F64
    end: F64


@dataclass(frozen=True)
class GroupedFiles:
    """The result of :func:`group_files`.

    Attributes:
        files: the per-file table.
        records: the record-level intervals and columns, one entry per module grouped.
        max_meta_rank_s: the largest total metadata time of one rank (Drishti's P17).
    """

    files: FileTable
    records: tuple[ModuleRecords, ...]
    max_meta_rank_s: float


class _Group(NamedTuple):
    """One module's files: ids, each record's file, nprocs, columns and busy times."""

    ids: npt.NDArray[np.uint64]
    inv: npt.NDArray[np.intp]
    nprocs: npt.NDArray[np.int64]
    cols: dict[str, F64]
    start: F64
    end: F64
    busy: F64


def bytes_moved(files: FileTable) -> tuple[float, float]:
    """``(bytes read, bytes written)`` over all files (POSIX + STDIO)."""
    if not len(files.ids):
        return 0.0, 0.0
    return float(files.cols["bytes_read"].sum()), float(files.cols["bytes_written"].sum())


def mpiio_counts(log: DarshanLog) -> MpiioCounts:
    """MPI-IO's operation counts summed per record id (independent = INDEP + SPLIT + NB)."""
    mpi = log.tables.get("MPI-IO")
    if mpi is None or not len(mpi):
        return {}
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
    return {
        int(rid): (sums[0][k], sums[1][k], indep[0][k], indep[1][k])
        for k, rid in enumerate(u.tolist())
    }


def data_records(log: DarshanLog, module: str) -> ModuleTable | None:
    """``module``'s records without the standard streams; None when none is left."""
    t = log.tables.get(module)
    if t is None or not len(t):
        return None
    names = log.names
    drop = [i in STD_STREAM_IDS or names.get(i, "") in STD_STREAM_NAMES for i in t.ids.tolist()]
    if any(drop):
        t = t.select(~np.array(drop, dtype=bool))
        if not len(t):
            return None
    return t


def _group_module(
    t: ModuleTable, cols: dict[str, F64], start: F64, end: F64, nprocs: int
) -> _Group:
    """One module's records grouped per record id (``nprocs``: the job's process count)."""
    busy = end > start
    if len(set(t.ids.tolist())) == len(t):
        # one record per file (N-N, or every file reduced over all ranks): nothing to merge
        procs = np.where(t.ranks < 0, nprocs, 1).astype(np.int64)
        fs, fe = np.where(busy, start, 0.0), np.where(busy, end, 0.0)
        return _Group(t.ids, np.arange(len(t)), procs, dict(cols), fs, fe, end - start)
    u, inv = np.unique(t.ids, return_inverse=True)
    k = len(u)
    shared = np.bincount(inv, weights=(t.ranks < 0).astype(np.float64), minlength=k)
    nrec = np.bincount(inv, minlength=k)
    procs = np.where(shared > 0, nprocs, nrec).astype(np.int64)
    timed = {
        **cols,
        "busy_start_s": np.where(busy, start, 0.0),
        "busy_end_s": np.where(busy, end, 0.0),
        "slowest_busy_s": end - start,
    }
    agg = reduce_per_file(timed, inv, k)
    fs, fe, fb = agg.pop("busy_start_s"), agg.pop("busy_end_s"), agg.pop("slowest_busy_s")
    return _Group(u, inv, procs, agg, fs, fe, fb)


def _mpiio_columns(ids: npt.NDArray[np.uint64], counts: MpiioCounts, posix: bool) -> list[F64]:
    """The files' MPI-IO counts (:data:`_MPIIO_COLUMNS`); zeros for STDIO files."""
    k = len(ids)
    if not posix:
        return [np.zeros(k)] * len(_MPIIO_COLUMNS)
    out = [np.zeros(k) for _ in _MPIIO_COLUMNS]
    for j, rid in enumerate(ids.tolist()):
        c = counts.get(int(rid))
        if c is not None:
            out[0][j], out[1][j], out[2][j], out[3][j] = c
    return out


def max_meta_rank_s(records: tuple[ModuleRecords, ...]) -> float:
    """The largest sum of ``F_META_TIME`` over one rank's own records (rank −1 left out)."""
    own = [r.ranks >= 0 for r in records]
    ranks = [r.ranks[o] for r, o in zip(records, own, strict=True)]
    if not ranks or not sum(len(r) for r in ranks):
        return 0.0
    times = np.concatenate([r.cols["meta_time_s"][o] for r, o in zip(records, own, strict=True)])
    return float(np.bincount(np.concatenate(ranks), weights=times).max())


def group_files(log: DarshanLog) -> GroupedFiles:
    """Aggregate POSIX and STDIO records per file; join MPI-IO's counts by record id.

    Args:
        log: the log read.

    Returns:
        The :class:`GroupedFiles`: the file table (empty without POSIX or STDIO data
        records), the record-level intervals, and the largest metadata time of one rank.
    """
    counts = mpiio_counts(log)
    modules: list[str] = []
    groups: list[_Group] = []
    records: list[ModuleRecords] = []
    for mod in GROUPED_MODULES:
        t = data_records(log, mod)
        if t is None:
            continue
        cols = record_columns(t)
        start, end = busy_intervals(t.ranks, cols, log.run_time_s)
        g = _group_module(t, cols, start, end, log.nprocs)
        records.append(ModuleRecords(t.ranks, cols, len(modules) + g.inv, start, end))
        mpiio = _mpiio_columns(g.ids, counts, mod == "POSIX")
        groups.append(g._replace(cols={**g.cols, **dict(zip(_MPIIO_COLUMNS, mpiio, strict=True))}))
        modules += [mod] * len(g.ids)
    return GroupedFiles(_concat(modules, groups), tuple(records), max_meta_rank_s(tuple(records)))


def _concat(modules: list[str], groups: list[_Group]) -> FileTable:
    """The modules' files in one :class:`FileTable`."""
    if not groups:
        empty = np.zeros(0)
        return FileTable([], np.zeros(0, np.uint64), np.zeros(0, np.int64), {}, empty, empty, empty)
    names = list(groups[0].cols)
    return FileTable(
        modules,
        np.concatenate([g.ids for g in groups]),
        np.concatenate([g.nprocs for g in groups]),
        {
            n: groups[0].cols[n]
            if len(groups) == 1
            else np.concatenate([g.cols[n] for g in groups])
            for n in names
        },
        np.concatenate([g.start for g in groups]),
        np.concatenate([g.end for g in groups]),
        np.concatenate([g.busy for g in groups]),
    )


def reduce_per_file(columns: dict[str, F64], inv: npt.NDArray[np.intp], k: int) -> dict[str, F64]:
    """Record columns reduced per file in a few whole-array operations.

    ``*_start_s`` by the smallest value > 0 (0 when none is), ``*_end_s`` and the
    slowest/fastest-rank values by maximum, everything else by sum.

    Args:
        columns: per-record columns, each shape ``(n,)``.
        inv: file index of each record, shape ``(n,)`` (``np.unique``'s inverse).
        k: number of files.

    Returns:
        The same keys, each shape ``(k,)``.
    """
    names = list(columns)
    block = np.column_stack([columns[nm] for nm in names]) if names else np.zeros((len(inv), 0))
    if k == len(inv):  # one record per file, the common case: a permutation
        out = np.empty_like(block)
        out[inv] = block
        return {nm: out[:, j] for j, nm in enumerate(names)}
    order = np.argsort(inv, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(inv[order]) != 0])
    result = _reduce_runs(block[order], starts, names)
    return {nm: result[:, j] for j, nm in enumerate(names)}


def _reduce_runs(
    sorted_block: npt.NDArray[np.float64], starts: npt.NDArray[np.intp], names: list[str]
) -> npt.NDArray[np.float64]:
    """Each run of rows beginning at ``starts`` reduced to one row, column by column as
    :func:`reduce_per_file` says (``names``: the columns)."""
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
    return np.asarray(result, dtype=np.float64)
