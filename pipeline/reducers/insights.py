"""Drishti-style insight checks on one analysed Darshan log.

Drishti (``drishti-io``; reference/darshan-iominer.md 6) turns Darshan counters into short
recommendations with fixed thresholds. iolens runs the same checks, with the same codes and
thresholds, on the job and file rows of :func:`pipeline.reducers.darshan_job.analyze`, so its
users see familiar findings next to IOMiner's critical path:

====  ==========================================================  ======
code  finding                                                     level
====  ==========================================================  ======
S01   STDIO carries > 10 % of the bytes                           warn
P01   write-operation intensive (|W - R| / ops > 10 %)            info
P02   read-operation intensive                                    info
P03   write-size intensive (|bytes W - R| / bytes > 10 %)         info
P04   read-size intensive                                         info
P05   small reads (<= 1 MiB) > 10 % of reads and > 1000           high
P06   small writes                                                high
P07   misaligned memory requests > 10 %                           high
P08   misaligned file requests > 10 %                             high
P11   random reads (ops - sequential) > 20 % and > 1000           high
P12   reads mostly sequential                                     ok
P13   random writes                                               high
P14   writes mostly sequential                                    ok
P17   a rank spent > 30 s in metadata operations                  high
P18   shared-file data imbalance between ranks > 15 %             high
P19   shared-file time imbalance between ranks > 15 %             high
M01   several processes and no MPI-IO                             warn
M02   independent MPI-IO reads > 50 % and > 1000, no collective   high
M03   independent MPI-IO writes                                   high
M04   collective reads used                                       ok
M05   collective writes used                                      ok
M08   more MPI-IO aggregators (``cb_nodes``) than nodes           warn
M09   fewer aggregators than nodes                                warn
M10   one aggregator per node                                     ok
====  ==========================================================  ======

M08-M10 need the node count (Slurm); they are skipped without it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Level = Literal["high", "warn", "info", "ok"]

SMALL_SHARE = 0.1
SMALL_COUNT = 1000
MISALIGNED_SHARE = 0.1
RANDOM_SHARE = 0.2
RANDOM_COUNT = 1000
META_TIME_S = 30.0
IMBALANCE = 0.15
STDIO_SHARE = 0.1
INTENSITY = 0.1
COLLECTIVE_SHARE = 0.5
COLLECTIVE_COUNT = 1000
TOP_FILES = 3

_CB_NODES = re.compile(r"(?:^|;)cb_nodes=(\d+)")


@dataclass(frozen=True)
class Insight:
    """One finding.

    Attributes:
        code: Drishti's code (``P05``) or iolens' own (``IOM01``: see :mod:`io_diagnosis`).
        level: ``high`` (a likely cause), ``warn``, ``info`` or ``ok``.
        message: one sentence with the numbers.
        files: names of the files most concerned (up to three), if any.
    """

    code: str
    level: Level
    message: str
    files: tuple[str, ...] = ()


def _share(num: float, den: float) -> float:
    return num / den if den > 0 else 0.0


def _top(files: Sequence[dict[str, Any]], key: str) -> tuple[str, ...]:
    ranked = sorted((f for f in files if (f.get(key) or 0) > 0), key=lambda f: -(f[key] or 0))
    return tuple(str(f["name"]) for f in ranked[:TOP_FILES])


def _sum(files: Sequence[dict[str, Any]], key: str) -> float:
    return float(sum(f.get(key) or 0 for f in files))


def insights(
    job: dict[str, Any],
    files: Sequence[dict[str, Any]],
    hints: str = "",
    node_count: int | None = None,
) -> list[Insight]:
    """Run the checks of the module docstring.

    Args:
        job: the ``darshan.job`` fields of :func:`~pipeline.reducers.darshan_job.analyze`.
        files: its file rows.
        hints: the MPI-IO hints string of the log (``cb_nodes=4;...``).
        node_count: nodes of the job (from Slurm), for M08-M10.

    Returns:
        The findings in the order of the table.
    """
    out: list[Insight] = []
    posix = [f for f in files if f["module"] == "POSIX"]
    stdio_bytes = sum(f["bytes_read"] + f["bytes_written"] for f in files if f["module"] == "STDIO")
    total = job["bytes_read"] + job["bytes_written"]
    if _share(stdio_bytes, total) > STDIO_SHARE:
        out.append(
            Insight(
                "S01",
                "warn",
                f"STDIO carries {_share(stdio_bytes, total):.0%} of the bytes: "
                "buffered stdio is slow for large parallel I/O; use POSIX or MPI-IO",
            )
        )
    reads, writes = _sum(posix, "reads"), _sum(posix, "writes")
    ops = reads + writes
    if ops > 0 and abs(writes - reads) / ops > INTENSITY:
        code, what = ("P01", "write") if writes > reads else ("P02", "read")
        out.append(
            Insight(
                code, "info", f"{what}-operation intensive: {writes:.0f} writes, {reads:.0f} reads"
            )
        )
    br, bw = job["bytes_read"], job["bytes_written"]
    if total > 0 and abs(bw - br) / total > INTENSITY:
        code, what = ("P03", "write") if bw > br else ("P04", "read")
        out.append(
            Insight(code, "info", f"{what}-size intensive: {bw} bytes written, {br} bytes read")
        )
    for code, op, n_ops in (("P05", "reads", reads), ("P06", "writes", writes)):
        small = _sum(posix, f"small_{op}")
        if small > SMALL_COUNT and _share(small, n_ops) > SMALL_SHARE:
            out.append(
                Insight(
                    code,
                    "high",
                    f"{small:.0f} of {n_ops:.0f} {op} ({_share(small, n_ops):.0%}) are 1 MiB or "
                    "smaller: aggregate them (collective buffering, larger transfers)",
                    _top(posix, f"small_{op}"),
                )
            )
    for code, key, what in (
        ("P07", "mem_not_aligned", "memory"),
        ("P08", "not_aligned", "file"),
    ):
        bad = _sum(posix, key)
        if ops > 0 and bad / ops > MISALIGNED_SHARE:
            hint = " (align to the Lustre stripe size)" if what == "file" else ""
            out.append(
                Insight(
                    code,
                    "high",
                    f"{bad / ops:.0%} of requests are misaligned in {what}{hint}",
                    _top(posix, key),
                )
            )
    for codes, op, n_ops in ((("P11", "P12"), "reads", reads), (("P13", "P14"), "writes", writes)):
        if n_ops <= 0:
            continue
        random = n_ops - _sum(posix, f"seq_{op}")
        if random > RANDOM_COUNT and random / n_ops > RANDOM_SHARE:
            out.append(
                Insight(
                    codes[0],
                    "high",
                    f"{random:.0f} {op} ({random / n_ops:.0%}) are random (not sequential)",
                    _top(posix, f"{op}"),
                )
            )
        else:
            out.append(
                Insight(codes[1], "ok", f"{op} are mostly sequential ({1 - random / n_ops:.0%})")
            )
    meta = float(job.get("max_meta_rank_s") or 0.0)
    if meta > META_TIME_S:
        out.append(
            Insight(
                "P17", "high", f"a rank spent {meta:.1f} s in metadata operations (open, stat...)"
            )
        )
    data_imb, time_imb = [], []
    for f in files:
        if f["nprocs"] <= 1 or not f["shared"]:
            continue
        nbytes = f["bytes_read"] + f["bytes_written"]
        slow_b, fast_b = f.get("slowest_rank_bytes") or 0, f.get("fastest_rank_bytes") or 0
        if nbytes > 0 and abs(slow_b - fast_b) / nbytes > IMBALANCE:
            data_imb.append(f)
        slow_t, fast_t = f.get("slowest_rank_time_s") or 0.0, f.get("fastest_rank_time_s") or 0.0
        if slow_t > 0 and (slow_t - fast_t) / slow_t > IMBALANCE:
            time_imb.append(f)
    if data_imb:
        out.append(
            Insight(
                "P18",
                "high",
                f"{len(data_imb)} shared file(s) with data imbalance between ranks over "
                f"{IMBALANCE:.0%}",
                tuple(str(f["name"]) for f in data_imb[:TOP_FILES]),
            )
        )
    if time_imb:
        out.append(
            Insight(
                "P19",
                "high",
                f"{len(time_imb)} shared file(s) where the slowest rank took over {IMBALANCE:.0%} "
                "longer than the fastest (stragglers)",
                tuple(str(f["name"]) for f in time_imb[:TOP_FILES]),
            )
        )
    out += _mpiio_checks(job, files, hints, node_count)
    return out


def _mpiio_checks(
    job: dict[str, Any], files: Sequence[dict[str, Any]], hints: str, node_count: int | None
) -> list[Insight]:
    out: list[Insight] = []
    if "MPI-IO" not in job["interfaces"]:
        if job["nprocs"] > 1 and not job["no_io"]:
            out.append(
                Insight(
                    "M01",
                    "warn",
                    f"{job['nprocs']} processes and no MPI-IO: consider MPI-IO "
                    "or a library on it (HDF5, PnetCDF) for collective I/O",
                )
            )
        return out
    for (bad, good), op in ((("M02", "M04"), "reads"), (("M03", "M05"), "writes")):
        coll, indep = _sum(files, f"coll_{op}"), _sum(files, f"indep_{op}")
        if coll > 0:
            out.append(Insight(good, "ok", f"collective {op} used ({coll:.0f} operations)"))
        elif indep > COLLECTIVE_COUNT and _share(indep, indep + coll) > COLLECTIVE_SHARE:
            out.append(
                Insight(
                    bad,
                    "high",
                    f"{indep:.0f} independent MPI-IO {op} and no collective ones: use "
                    f"MPI_File_{op[:-1]}_all",
                    _top(files, f"indep_{op}"),
                )
            )
    m = _CB_NODES.search(hints or "")
    if m is not None and node_count:
        cb = int(m.group(1))
        if cb > node_count:
            out.append(Insight("M08", "warn", f"{cb} MPI-IO aggregators on {node_count} nodes"))
        elif cb < node_count:
            out.append(
                Insight(
                    "M09",
                    "warn",
                    f"{cb} MPI-IO aggregators for {node_count} nodes: set cb_nodes={node_count}",
                )
            )
        else:
            out.append(Insight("M10", "ok", f"one MPI-IO aggregator per node ({cb})"))
    return out
