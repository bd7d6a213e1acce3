"""The Drishti-style checks of :mod:`pipeline.reducers.insights`, one small function each.

Each check reads the :class:`Facts` of one job and returns ``(message, files)`` when its
trigger fires, else None. Thresholds are Drishti's (``drishti-io``
``drishti/includes/config.py``, ``thresholds``; reference/darshan-iominer.md 6); the checks
mirror the functions of ``drishti/includes/module.py`` named in the table of
:data:`pipeline.reducers.insights.TRIGGERS`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.records.darshan_rows import DarshanFileRow, DarshanJobRow, counter

Finding = tuple[str, tuple[str, ...]] | None
"""What a check returns: ``(message, files most concerned)``, or None when it does not fire."""

SMALL_SHARE = 0.1
"""``small_requests``: share of requests of at most 1 MiB."""
SMALL_COUNT = 1000
"""``small_requests_absolute``: and at least this many."""
MISALIGNED_SHARE = 0.1
"""``misaligned_requests``."""
RANDOM_SHARE = 0.2
"""``random_operations``."""
RANDOM_COUNT = 1000
"""``random_operations_absolute``."""
META_TIME_S = 30.0
"""``metadata_time_rank`` (s)."""
IMBALANCE = 0.15
"""``imbalance_stragglers``."""
STDIO_SHARE = 0.1
"""``interface_stdio``."""
INTENSITY = 0.1
"""``imbalance_operations``."""
COLLECTIVE_SHARE = 0.5
"""``collective_operations``."""
COLLECTIVE_COUNT = 1000
"""``collective_operations_absolute``."""
TOP_FILES = 3
"""Files named in a finding."""

_CB_NODES = re.compile(r"(?:^|;)cb_nodes=(\d+)")


@dataclass(frozen=True)
class Facts:
    """What the checks read of one job.

    Attributes:
        job: the ``darshan.job`` fields; files: its file rows; posix: the POSIX ones.
        hints: the MPI-IO hints string (``cb_nodes=4;...``); node_count: nodes (Slurm).
        reads / writes: POSIX requests.
    """

    job: DarshanJobRow
    files: Sequence[DarshanFileRow]
    posix: list[DarshanFileRow]
    hints: str
    node_count: int | None
    reads: float
    writes: float

    @property
    def ops(self) -> float:
        """POSIX requests, reads and writes."""
        return self.reads + self.writes


def facts(
    job: DarshanJobRow, files: Sequence[DarshanFileRow], hints: str, node_count: int | None
) -> Facts:
    """The :class:`Facts` of one job (its POSIX rows and request counts gathered once)."""
    posix = [f for f in files if f["module"] == "POSIX"]
    return Facts(job, files, posix, hints, node_count, _sum(posix, "reads"), _sum(posix, "writes"))


def _share(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _top(files: Sequence[DarshanFileRow], key: str) -> tuple[str, ...]:
    ranked = sorted((f for f in files if counter(f, key) > 0), key=lambda f: -counter(f, key))
    return tuple(str(f["name"]) for f in ranked[:TOP_FILES])


def _sum(files: Sequence[DarshanFileRow], key: str) -> float:
    return float(sum(counter(f, key) for f in files))


def stdio_share(f: Facts) -> Finding:
    """S01: STDIO carries more than :data:`STDIO_SHARE` of the bytes."""
    stdio = sum(r["bytes_read"] + r["bytes_written"] for r in f.files if r["module"] == "STDIO")
    share = _share(stdio, f.job["bytes_read"] + f.job["bytes_written"])
    if share <= STDIO_SHARE:
        return None
    return (
        f"STDIO carries {share:.0%} of the bytes: "
        "buffered stdio is slow for large parallel I/O; use POSIX or MPI-IO",
        (),
    )


def _intensive(read: float, written: float, total: float, writes_more: bool) -> str | None:
    """``"write"`` or ``"read"`` when ``|written - read| / total`` is over :data:`INTENSITY`
    and the larger side is the one ``writes_more`` asks for, else None."""
    if not (total > 0 and abs(written - read) / total > INTENSITY):
        return None
    if (written > read) != writes_more:
        return None
    return "write" if writes_more else "read"


def _operation_intensive(f: Facts, writes_more: bool) -> Finding:
    """P01/P02: |writes - reads| / requests over :data:`INTENSITY`, one way."""
    what = _intensive(f.reads, f.writes, f.ops, writes_more)
    if what is None:
        return None
    return f"{what}-operation intensive: {f.writes:.0f} writes, {f.reads:.0f} reads", ()


def write_operation_intensive(f: Facts) -> Finding:
    """P01: more write requests than reads, by over :data:`INTENSITY` of all."""
    return _operation_intensive(f, writes_more=True)


def read_operation_intensive(f: Facts) -> Finding:
    """P02: more read requests than writes, by over :data:`INTENSITY` of all."""
    return _operation_intensive(f, writes_more=False)


def _size_intensive(f: Facts, writes_more: bool) -> Finding:
    """P03/P04: |bytes written - read| / bytes over :data:`INTENSITY`, one way."""
    br, bw = f.job["bytes_read"], f.job["bytes_written"]
    what = _intensive(br, bw, br + bw, writes_more)
    if what is None:
        return None
    return f"{what}-size intensive: {bw} bytes written, {br} bytes read", ()


def write_size_intensive(f: Facts) -> Finding:
    """P03: more bytes written than read, by over :data:`INTENSITY` of all."""
    return _size_intensive(f, writes_more=True)


def read_size_intensive(f: Facts) -> Finding:
    """P04: more bytes read than written, by over :data:`INTENSITY` of all."""
    return _size_intensive(f, writes_more=False)


def _small(f: Facts, op: str, n_ops: float) -> Finding:
    """P05/P06: over :data:`SMALL_COUNT` requests of at most 1 MiB, over :data:`SMALL_SHARE`."""
    small = _sum(f.posix, f"small_{op}")
    if not (small > SMALL_COUNT and _share(small, n_ops) > SMALL_SHARE):
        return None
    return (
        f"{small:.0f} of {n_ops:.0f} {op} ({_share(small, n_ops):.0%}) are 1 MiB or "
        "smaller: aggregate them (collective buffering, larger transfers)",
        _top(f.posix, f"small_{op}"),
    )


def small_reads(f: Facts) -> Finding:
    """P05: many small reads."""
    return _small(f, "reads", f.reads)


def small_writes(f: Facts) -> Finding:
    """P06: many small writes."""
    return _small(f, "writes", f.writes)


def _misaligned(f: Facts, key: str, what: str) -> Finding:
    """P07/P08: over :data:`MISALIGNED_SHARE` of the requests misaligned."""
    bad = _sum(f.posix, key)
    if not (f.ops > 0 and bad / f.ops > MISALIGNED_SHARE):
        return None
    hint = " (align to the Lustre stripe size)" if what == "file" else ""
    return f"{bad / f.ops:.0%} of requests are misaligned in {what}{hint}", _top(f.posix, key)


def misaligned_memory(f: Facts) -> Finding:
    """P07: misaligned memory requests (``POSIX_MEM_NOT_ALIGNED``)."""
    return _misaligned(f, "mem_not_aligned", "memory")


def misaligned_file(f: Facts) -> Finding:
    """P08: misaligned file requests (``POSIX_FILE_NOT_ALIGNED``)."""
    return _misaligned(f, "not_aligned", "file")


def _random(f: Facts, op: str, n_ops: float) -> tuple[float, bool] | None:
    """``(random requests, whether they pass the thresholds)``; None without requests."""
    if n_ops <= 0:
        return None
    random = n_ops - _sum(f.posix, f"seq_{op}")
    return random, random > RANDOM_COUNT and random / n_ops > RANDOM_SHARE


def _random_ops(f: Facts, op: str, n_ops: float) -> Finding:
    """P11/P13: over :data:`RANDOM_COUNT` non-sequential requests, over :data:`RANDOM_SHARE`."""
    r = _random(f, op, n_ops)
    if r is None or not r[1]:
        return None
    random = r[0]
    return f"{random:.0f} {op} ({random / n_ops:.0%}) are random (not sequential)", _top(
        f.posix, op
    )


def _sequential_ops(f: Facts, op: str, n_ops: float) -> Finding:
    """P12/P14: requests there, and not random enough for P11/P13."""
    r = _random(f, op, n_ops)
    if r is None or r[1]:
        return None
    return f"{op} are mostly sequential ({1 - r[0] / n_ops:.0%})", ()


def random_reads(f: Facts) -> Finding:
    """P11: many random reads."""
    return _random_ops(f, "reads", f.reads)


def sequential_reads(f: Facts) -> Finding:
    """P12: reads mostly sequential."""
    return _sequential_ops(f, "reads", f.reads)


def random_writes(f: Facts) -> Finding:
    """P13: many random writes."""
    return _random_ops(f, "writes", f.writes)


def sequential_writes(f: Facts) -> Finding:
    """P14: writes mostly sequential."""
    return _sequential_ops(f, "writes", f.writes)


def long_metadata(f: Facts) -> Finding:
    """P17: a rank spent over :data:`META_TIME_S` in metadata operations."""
    meta = float(f.job.get("max_meta_rank_s") or 0.0)
    if meta <= META_TIME_S:
        return None
    return f"a rank spent {meta:.1f} s in metadata operations (open, stat...)", ()


def _shared_files(f: Facts) -> list[DarshanFileRow]:
    return [r for r in f.files if r["nprocs"] > 1 and r["shared"]]


def _data_imbalanced(r: DarshanFileRow) -> bool:
    nbytes = r["bytes_read"] + r["bytes_written"]
    slow, fast = r.get("slowest_rank_bytes") or 0, r.get("fastest_rank_bytes") or 0
    return bool(nbytes > 0 and abs(slow - fast) / nbytes > IMBALANCE)


def _time_imbalanced(r: DarshanFileRow) -> bool:
    slow, fast = r.get("slowest_rank_time_s") or 0.0, r.get("fastest_rank_time_s") or 0.0
    return bool(slow > 0 and (slow - fast) / slow > IMBALANCE)


def data_imbalance(f: Facts) -> Finding:
    """P18: shared files whose slowest and fastest ranks' bytes differ by over
    :data:`IMBALANCE` of the file's bytes."""
    bad = [r for r in _shared_files(f) if _data_imbalanced(r)]
    if not bad:
        return None
    return (
        f"{len(bad)} shared file(s) with data imbalance between ranks over {IMBALANCE:.0%}",
        tuple(str(r["name"]) for r in bad[:TOP_FILES]),
    )


def time_imbalance(f: Facts) -> Finding:
    """P19: shared files whose slowest rank took over :data:`IMBALANCE` longer than the
    fastest."""
    bad = [r for r in _shared_files(f) if _time_imbalanced(r)]
    if not bad:
        return None
    return (
        f"{len(bad)} shared file(s) where the slowest rank took over {IMBALANCE:.0%} "
        "longer than the fastest (stragglers)",
        tuple(str(r["name"]) for r in bad[:TOP_FILES]),
    )


def _uses_mpiio(f: Facts) -> bool:
    return "MPI-IO" in f.job["interfaces"]


def no_mpiio(f: Facts) -> Finding:
    """M01: several processes doing I/O, and no MPI-IO."""
    job = f.job
    if _uses_mpiio(f) or not (job["nprocs"] > 1 and not job["no_io"]):
        return None
    return (
        f"{job['nprocs']} processes and no MPI-IO: consider MPI-IO "
        "or a library on it (HDF5, PnetCDF) for collective I/O",
        (),
    )


def _no_collective(f: Facts, op: str) -> Finding:
    """M02/M03: no collective operation, and over :data:`COLLECTIVE_COUNT` independent ones
    making over :data:`COLLECTIVE_SHARE` of them."""
    if not _uses_mpiio(f):
        return None
    coll, indep = _sum(f.files, f"coll_{op}"), _sum(f.files, f"indep_{op}")
    if coll > 0 or not (
        indep > COLLECTIVE_COUNT and _share(indep, indep + coll) > COLLECTIVE_SHARE
    ):
        return None
    return (
        f"{indep:.0f} independent MPI-IO {op} and no collective ones: use MPI_File_{op[:-1]}_all",
        _top(f.files, f"indep_{op}"),
    )


def _collective(f: Facts, op: str) -> Finding:
    """M04/M05: collective operations used."""
    coll = _sum(f.files, f"coll_{op}")
    if not _uses_mpiio(f) or coll <= 0:
        return None
    return f"collective {op} used ({coll:.0f} operations)", ()


def no_collective_reads(f: Facts) -> Finding:
    """M02: independent MPI-IO reads only."""
    return _no_collective(f, "reads")


def no_collective_writes(f: Facts) -> Finding:
    """M03: independent MPI-IO writes only."""
    return _no_collective(f, "writes")


def collective_reads(f: Facts) -> Finding:
    """M04: collective reads used."""
    return _collective(f, "reads")


def collective_writes(f: Facts) -> Finding:
    """M05: collective writes used."""
    return _collective(f, "writes")


def _aggregators(f: Facts) -> tuple[int, int] | None:
    """``(cb_nodes hint, node count)`` of an MPI-IO job when both are known."""
    m = _CB_NODES.search(f.hints or "")
    if not _uses_mpiio(f) or m is None or not f.node_count:
        return None
    return int(m.group(1)), f.node_count


def too_many_aggregators(f: Facts) -> Finding:
    """M08: more MPI-IO aggregators than nodes."""
    a = _aggregators(f)
    if a is None or a[0] <= a[1]:
        return None
    return f"{a[0]} MPI-IO aggregators on {a[1]} nodes", ()


def too_few_aggregators(f: Facts) -> Finding:
    """M09: fewer MPI-IO aggregators than nodes."""
    a = _aggregators(f)
    if a is None or a[0] >= a[1]:
        return None
    return f"{a[0]} MPI-IO aggregators for {a[1]} nodes: set cb_nodes={a[1]}", ()


def one_aggregator_per_node(f: Facts) -> Finding:
    """M10: one MPI-IO aggregator per node."""
    a = _aggregators(f)
    if a is None or a[0] != a[1]:
        return None
    return f"one MPI-IO aggregator per node ({a[0]})", ()
