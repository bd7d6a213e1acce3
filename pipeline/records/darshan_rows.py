"""The rows the Darshan job analysis gives its encoder and its diagnosis: the ``darshan.job``
fields of one log and the ``darshan.file`` fields of each of its files (seed 004 II-B, the job
and file tables), by the field names of their data streams' templates
(``mappings/component_template.logs-darshan.{job,file}@package.json``; a test checks the keys
against them). Units are in the names: ``_s`` seconds, ``_bytes_per_s`` bytes/s; a ratio is in
0..1 and None where its denominator is 0.
"""

from __future__ import annotations

from typing import TypedDict


class JobIdentity(TypedDict):
    """Who ran the job and when: the job id, ``uid``, ``user``/``exe``/``command_line`` (None
    when unknown), ``nprocs``, ``start_s``/``end_s`` (Unix seconds) and ``run_time_s``."""

    id: str
    uid: int
    user: str | None
    exe: str | None
    command_line: str | None
    nprocs: int
    start_s: float
    end_s: float
    run_time_s: float


class JobVolume(TypedDict):
    """Bytes and requests moved (``bytes_read`` .. ``writes``), the request ratios in 0..1
    (None where no POSIX request), ``sharing_ratio`` (processes per file) and ``pattern``."""

    bytes_read: int
    bytes_written: int
    reads: int
    writes: int
    read_ratio: float | None
    seq_ratio: float | None
    consec_ratio: float | None
    small_ratio: float | None
    small_1k_ratio: float | None
    sharing_ratio: float | None
    pattern: str | None


class JobInterfaces(TypedDict):
    """The I/O interfaces used (module names), the main one, and MPI-IO's collective share
    (``collective_ratio`` in 0..1, None without MPI-IO requests)."""

    interfaces: list[str]
    interface: str | None
    collective: bool
    collective_ratio: float | None


class JobTiming(TypedDict):
    """The I/O times in seconds (``io_time_s``: the critical path's union) and the bandwidths
    in bytes/s (None where the time is 0)."""

    io_time_s: float
    read_time_s: float
    write_time_s: float
    naive_bytes_per_s: float | None
    critical_bytes_per_s: float | None
    darshan_bytes_per_s: float | None
    read_bytes_per_s: float | None
    write_bytes_per_s: float | None


class DarshanJobRow(JobIdentity, JobVolume, JobInterfaces, JobTiming):
    """The ``darshan.job`` fields of one log (:func:`pipeline.reducers.darshan.summary.job_row`).

    Identity (``id`` .. ``run_time_s``), volume and request shares (``bytes_read`` ..
    ``pattern``: Equation 3's ratios over POSIX requests, Equation 5's ``sharing_ratio``),
    interfaces, layout (``ost_count``, ``file_count``, ``size_class``), timing and bandwidths
    (``io_time_s`` is the critical path's union; ``critical_bytes_per_s`` the bytes over it,
    ``naive_bytes_per_s`` over its span, ``darshan_bytes_per_s`` Darshan's
    ``agg_perf_by_slowest``), and ``partial`` (Darshan ran out of memory for records).
    """

    ost_count: int
    file_count: int
    size_class: str
    no_io: bool
    partial: bool
    max_meta_rank_s: float


class DarshanFileRow(TypedDict, total=False):
    """The ``darshan.file`` fields of one file (:func:`pipeline.reducers.darshan.rows.file_rows`).

    Every row has the identity, extent, counters and times; POSIX rows alone have the request
    shares (``consec_*``, ``seq_*``, ``small_*``, ``*not_aligned``: STDIO has none); ``osts`` is
    empty off Lustre, where ``stripe_size``, ``stripe_count`` and ``proc_per_ost`` are absent.
    """

    record_id: str
    name: str
    module: str
    nprocs: int
    shared: bool
    start_s: float
    end_s: float
    busy_s: float
    bytes_read: int
    bytes_written: int
    reads: int
    writes: int
    coll_reads: int
    coll_writes: int
    indep_reads: int
    indep_writes: int
    slowest_rank_bytes: int
    fastest_rank_bytes: int
    read_time_s: float
    write_time_s: float
    meta_time_s: float
    read_start_s: float
    read_end_s: float
    write_start_s: float
    write_end_s: float
    slowest_rank_time_s: float
    fastest_rank_time_s: float
    consec_reads: int
    consec_writes: int
    seq_reads: int
    seq_writes: int
    small_reads: int
    small_writes: int
    small_1k_reads: int
    small_1k_writes: int
    not_aligned: int
    mem_not_aligned: int
    osts: list[int]
    stripe_size: int
    stripe_count: int
    proc_per_ost: float


def counter(row: DarshanFileRow, key: str) -> float:
    """A numeric field of ``row`` by name (0 where the row has none: STDIO's request shares,
    the layout off Lustre); for the checks that run over several counters by name.

    Raises:
        TypeError: ``key`` names a field that is not a number.
    """
    value = row.get(key, 0)  # a name built at run time (small_reads ...)
    if not isinstance(value, int | float):
        raise TypeError(f"darshan.file.{key} is not a number: {value!r}")
    return float(value)


def direction_totals(job: DarshanJobRow, direction: str) -> tuple[int, float | None]:
    """``(bytes, bytes_per_s)`` of the job in ``direction`` (``read`` or ``write``)."""
    if direction == "read":
        return job["bytes_read"], job["read_bytes_per_s"]
    return job["bytes_written"], job["write_bytes_per_s"]
