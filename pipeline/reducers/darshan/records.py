"""Step 1: gather the Darshan counters each analysis step reads, per record, as columns.

Counter names and conventions are those of reference/darshan-iominer.md 2.2: ``{p}`` is the
module prefix (``POSIX``, ``MPIIO``, ``STDIO``); the size histogram and the CONSEC/SEQ counters
exist in POSIX only. Darshan's −1 ("not monitored") reads as 0.
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from pipeline.records.darshan_log import ModuleTable

F64 = npt.NDArray[np.float64]

SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")
"""Darshan size bins of requests up to 1 MiB (``DARSHAN_BUCKET_INC`` upper bounds inclusive)."""

COUNTERS: dict[str, str] = {
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

POSIX_ONLY: dict[str, tuple[str, ...]] = {
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
def counter_names(module: str) -> tuple[str, ...]:
    """The counters :func:`record_columns` reads from ``module``, in order."""
    p = module.replace("-", "")
    names = [c.format(p=p) for c in COUNTERS.values()]
    if module == "POSIX":
        names += [c for group in POSIX_ONLY.values() for c in group]
    return tuple(names)


def record_columns(t: ModuleTable) -> dict[str, F64]:
    """The per-record values the tables need, by ``darshan.file`` name.

    One gather of the counters, as float64, "not monitored" −1 read as 0.

    Args:
        t: one module's records (``n`` of them).

    Returns:
        The keys of :data:`COUNTERS` then of :data:`POSIX_ONLY` (zeros outside POSIX), each
        shape ``(n,)``.
    """
    posix = t.module == "POSIX"
    block = t.block(counter_names(t.module))
    cols = {key: block[:, i] for i, key in enumerate(COUNTERS)}
    at = len(COUNTERS)
    zeros = np.zeros(len(t), dtype=np.float64)
    for key, group in POSIX_ONLY.items():
        if posix:
            cols[key] = (
                block[:, at : at + len(group)].sum(axis=1) if len(group) > 1 else block[:, at]
            )
            at += len(group)
        else:
            cols[key] = zeros
    return cols
