"""Step 6: the ``darshan.job`` row, IOMiner's job table (seed 004 II-B, III-C..E).

First-order metrics (read ratio, sequential/consecutive/small ratios, Equation 3), the
file-sharing pattern (III-D), the I/O interface (III-E), the job size class, and the
bandwidths (Equation 1 and the critical path of II-D).

Job fields (``darshan.job.*``), in this order: ``id, uid, user, exe, command_line, nprocs,
start_s, end_s, run_time_s, bytes_read, bytes_written, reads, writes, read_ratio, seq_ratio,
consec_ratio, small_ratio, small_1k_ratio, sharing_ratio, pattern, interfaces, interface,
collective, collective_ratio, ost_count, file_count, size_class, no_io, io_time_s,
read_time_s, write_time_s, naive_bytes_per_s, critical_bytes_per_s, darshan_bytes_per_s,
read_bytes_per_s, write_bytes_per_s, partial, max_meta_rank_s``. Ratios are None where their
denominator is 0. Sequential, consecutive and small ratios are over POSIX requests
(Equation 3); bytes are POSIX + STDIO (MPI-IO sits on POSIX and would count twice); the
standard streams are left out. ``sharing_ratio`` is processes / files (Equation 5).
Bandwidths (bytes/s):

* naive: bytes / (last end - first start) of the files' busy intervals (Equation 1);
* critical: bytes / length of the critical path (the union of the busy intervals, II-D);
* darshan: POSIX bytes (all records) / Darshan's ``agg_time_by_slowest``, which is
  ``agg_perf_by_slowest`` of ``darshan-parser --perf``;
* read / write: the direction's bytes / union of its records' read (write) intervals
  ``[F_READ_START, F_READ_START + F_READ_TIME]`` (the slowest rank's share of the time for
  a record reduced over all ranks).

The user is not in a Darshan log: it comes from the log name ``<user>_<exe>_id<jobid>_...``
when the name follows Darshan's convention.
"""

from __future__ import annotations

import os
import re

import numpy as np

from pipeline.records.darshan_log import INTERFACE_MODULES, DarshanLog
from pipeline.records.darshan_rows import (
    DarshanJobRow,
    JobIdentity,
    JobInterfaces,
    JobTiming,
    JobVolume,
)
from pipeline.reducers.darshan.files import FileTable, GroupedFiles, bytes_moved
from pipeline.reducers.darshan.times import darshan_time_by_slowest, direction_unions
from pipeline.reducers.sweep import CoveringSet

SIZE_CLASSES: tuple[tuple[str, int], ...] = (("One", 1), ("Small", 1024), ("Medium", 8192))
"""Job size classes of seed 004 III-E by process count: One, Small (2-1024), Medium
(1025-8192); above: Large."""

POSIX_TOTALS = (
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
"""The per-file columns :func:`job_row` totals over the POSIX files."""

_LOG_NAME = re.compile(r"^(?P<user>[^_]+)_(?P<exe>.+)_id(?P<jobid>\d+)")


def ratio(num: float, den: float) -> float | None:
    """``num / den``; None when ``den`` is not positive."""
    return num / den if den > 0 else None


def log_identity(log: DarshanLog) -> str:
    """Identity of a log: job id, start (ms) and file name without directories."""
    return f"{log.jobid}:{round(log.start_s * 1000)}:{os.path.basename(log.path)}"


def size_class(nprocs: int) -> str:
    """``One``, ``Small``, ``Medium`` or ``Large`` (:data:`SIZE_CLASSES`)."""
    for name, top in SIZE_CLASSES:
        if nprocs <= top:
            return name
    return "Large"


def posix_totals(files: FileTable) -> dict[str, float]:
    """The POSIX files' totals of :data:`POSIX_TOTALS`, in one reduction (0.0 without)."""
    npos = files.module.count("POSIX")  # POSIX files come first
    if not npos:
        return dict.fromkeys(POSIX_TOTALS, 0.0)
    sums = np.stack([files.cols[k][:npos] for k in POSIX_TOTALS]).sum(axis=1)
    return dict(zip(POSIX_TOTALS, sums.tolist(), strict=True))


def sharing_pattern(log: DarshanLog, files: FileTable) -> str | None:
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


def main_interface(totals: dict[str, float], total_bytes: float) -> str | None:
    """The job's interface (seed 004 III-E): ``MPI-IO collective`` when any collective
    operation, ``MPI-IO independent`` with MPI-IO operations, else ``POSIX`` with POSIX data or
    requests, else ``STDIO`` with any bytes; None without I/O."""
    coll_ops = totals["coll_reads"] + totals["coll_writes"]
    mpi_ops = coll_ops + totals["indep_reads"] + totals["indep_writes"]
    posix_bytes = totals["bytes_read"] + totals["bytes_written"]
    if coll_ops > 0:
        return "MPI-IO collective"
    if mpi_ops > 0:
        return "MPI-IO independent"
    if posix_bytes > 0 or totals["reads"] + totals["writes"] > 0:
        return "POSIX"
    return "STDIO" if total_bytes > 0 else None


def interfaces_used(log: DarshanLog) -> list[str]:
    """The interfaces whose modules the log holds, sorted (POSIX only with records)."""
    empty_posix = "POSIX" in log.modules and not len(log.tables.get("POSIX", ()))
    return sorted(
        {INTERFACE_MODULES[m] for m in log.modules if m in INTERFACE_MODULES}
        - ({"POSIX"} if empty_posix else set())
    )


def darshan_bytes_per_s(log: DarshanLog) -> float | None:
    """Darshan's ``agg_perf_by_slowest`` (bytes/s): POSIX bytes of every record, the standard
    streams included, over :func:`darshan_time_by_slowest`."""
    pt = log.tables.get("POSIX")
    posix_bytes = (
        float((pt.col("POSIX_BYTES_READ") + pt.col("POSIX_BYTES_WRITTEN")).sum()) if pt else 0.0
    )
    return ratio(posix_bytes, darshan_time_by_slowest(log))


def identity_fields(log: DarshanLog) -> JobIdentity:
    """``id, uid, user, exe, command_line, nprocs, start_s, end_s, run_time_s``.

    The user is not in a Darshan log: it comes from the log name ``<user>_<exe>_id<jobid>_...``
    when the name follows Darshan's convention.
    """
    m = _LOG_NAME.match(os.path.basename(log.path))
    exe_tokens = log.exe.split()
    return {
        "id": log.jobid,
        "uid": log.uid,
        "user": m.group("user") if m else None,
        "exe": os.path.basename(exe_tokens[0]) if exe_tokens else None,
        "command_line": log.exe or None,
        "nprocs": log.nprocs,
        "start_s": log.start_s,
        "end_s": log.end_s,
        "run_time_s": log.run_time_s,
    }


def volume_fields(log: DarshanLog, files: FileTable, totals: dict[str, float]) -> JobVolume:
    """``bytes_read, bytes_written, reads, writes``, the request ratios over POSIX requests
    (Equation 3), ``sharing_ratio`` (processes / files, Equation 5) and ``pattern``."""
    n = len(files.ids)
    bytes_read, bytes_written = bytes_moved(files)
    p_ops = totals["reads"] + totals["writes"]
    return {
        "bytes_read": int(bytes_read),
        "bytes_written": int(bytes_written),
        "reads": int(files.cols["reads"].sum()) if n else 0,
        "writes": int(files.cols["writes"].sum()) if n else 0,
        "read_ratio": ratio(bytes_read, bytes_read + bytes_written),
        "seq_ratio": ratio(totals["seq_reads"] + totals["seq_writes"], p_ops),
        "consec_ratio": ratio(totals["consec_reads"] + totals["consec_writes"], p_ops),
        "small_ratio": ratio(totals["small_reads"] + totals["small_writes"], p_ops),
        "small_1k_ratio": ratio(totals["small_1k_reads"] + totals["small_1k_writes"], p_ops),
        "sharing_ratio": ratio(float(log.nprocs), float(n)),
        "pattern": sharing_pattern(log, files),
    }


def interface_fields(log: DarshanLog, totals: dict[str, float], total: float) -> JobInterfaces:
    """``interfaces, interface, collective, collective_ratio`` (seed 004 III-E)."""
    coll_ops = totals["coll_reads"] + totals["coll_writes"]
    mpi_ops = coll_ops + totals["indep_reads"] + totals["indep_writes"]
    return {
        "interfaces": interfaces_used(log),
        "interface": main_interface(totals, total),
        "collective": coll_ops > 0,
        "collective_ratio": ratio(coll_ops, mpi_ops),
    }


def timing_fields(log: DarshanLog, grouped: GroupedFiles, cover: CoveringSet) -> JobTiming:
    """``io_time_s`` (the critical path), ``read_time_s``, ``write_time_s`` (the unions of the
    records' read and write intervals) and the bandwidths (bytes/s) of the module docstring."""
    bytes_read, bytes_written = bytes_moved(grouped.files)
    total = bytes_read + bytes_written
    records = [(r.ranks, r.cols) for r in grouped.records]
    read_s, write_s = direction_unions(records, log.run_time_s)
    return {
        "io_time_s": cover.union,
        "read_time_s": read_s,
        "write_time_s": write_s,
        "naive_bytes_per_s": ratio(total, cover.span),
        "critical_bytes_per_s": ratio(total, cover.union),
        "darshan_bytes_per_s": darshan_bytes_per_s(log),
        "read_bytes_per_s": ratio(bytes_read, read_s),
        "write_bytes_per_s": ratio(bytes_written, write_s),
    }


def job_row(
    log: DarshanLog, grouped: GroupedFiles, cover: CoveringSet, ost_count: int
) -> DarshanJobRow:
    """The ``darshan.job`` fields, in the order of the module docstring.

    Args:
        log: the log; grouped: its files and records; cover: its critical path.
        ost_count: distinct OSTs of the job's files.
    """
    files = grouped.files
    totals = posix_totals(files)
    bytes_read, bytes_written = bytes_moved(files)
    total = bytes_read + bytes_written
    row: DarshanJobRow = {
        **identity_fields(log),
        **volume_fields(log, files, totals),
        **interface_fields(log, totals, total),
        "ost_count": ost_count,
        "file_count": len(files.ids),
        "size_class": size_class(log.nprocs),
        "no_io": total <= 0,
        **timing_fields(log, grouped, cover),
        "partial": bool(log.partial),
        "max_meta_rank_s": grouped.max_meta_rank_s,
    }
    return row
