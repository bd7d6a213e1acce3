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

The checks are the rows of :data:`TRIGGERS`, run in order; each is a small function of
:mod:`pipeline.reducers.insight_checks` with its threshold constant and the Drishti function it
follows (``drishti-io`` ``drishti/includes/module.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pipeline.records.darshan_rows import DarshanFileRow, DarshanJobRow
from pipeline.reducers import insight_checks as c
from pipeline.reducers.insight_checks import (
    COLLECTIVE_COUNT,
    COLLECTIVE_SHARE,
    IMBALANCE,
    INTENSITY,
    META_TIME_S,
    MISALIGNED_SHARE,
    RANDOM_COUNT,
    RANDOM_SHARE,
    SMALL_COUNT,
    SMALL_SHARE,
    STDIO_SHARE,
    Facts,
    Finding,
)

__all__ = [
    "TRIGGERS",
    "Insight",
    "Level",
    "Trigger",
    "insights",
]

Level = Literal["high", "warn", "info", "ok"]


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


@dataclass(frozen=True)
class Trigger:
    """One row of :data:`TRIGGERS`.

    Attributes:
        code: Drishti's code; level: the level of its finding.
        thresholds: the constants it compares with (shares in [0, 1], counts, seconds).
        source: the Drishti function it follows (``drishti/includes/module.py``).
        check: the check (:mod:`pipeline.reducers.insight_checks`).
    """

    code: str
    level: Level
    thresholds: tuple[float, ...]
    source: str
    check: Callable[[Facts], Finding]


T = Trigger
TRIGGERS: tuple[Trigger, ...] = (
    T("S01", "warn", (STDIO_SHARE,), "check_stdio", c.stdio_share),
    T("P01", "info", (INTENSITY,), "check_operation_intensive", c.write_operation_intensive),
    T("P02", "info", (INTENSITY,), "check_operation_intensive", c.read_operation_intensive),
    T("P03", "info", (INTENSITY,), "check_size_intensive", c.write_size_intensive),
    T("P04", "info", (INTENSITY,), "check_size_intensive", c.read_size_intensive),
    T("P05", "high", (SMALL_SHARE, SMALL_COUNT), "check_small_operation", c.small_reads),
    T("P06", "high", (SMALL_SHARE, SMALL_COUNT), "check_small_operation", c.small_writes),
    T("P07", "high", (MISALIGNED_SHARE,), "check_misaligned", c.misaligned_memory),
    T("P08", "high", (MISALIGNED_SHARE,), "check_misaligned", c.misaligned_file),
    T("P11", "high", (RANDOM_SHARE, RANDOM_COUNT), "check_random_operation", c.random_reads),
    T("P12", "ok", (RANDOM_SHARE, RANDOM_COUNT), "check_random_operation", c.sequential_reads),
    T("P13", "high", (RANDOM_SHARE, RANDOM_COUNT), "check_random_operation", c.random_writes),
    T("P14", "ok", (RANDOM_SHARE, RANDOM_COUNT), "check_random_operation", c.sequential_writes),
    T("P17", "high", (META_TIME_S,), "check_long_metadata", c.long_metadata),
    T("P18", "high", (IMBALANCE,), "check_shared_data_imblance", c.data_imbalance),
    T("P19", "high", (IMBALANCE,), "check_shared_time_imbalance", c.time_imbalance),
    T("M01", "warn", (), "check_mpiio", c.no_mpiio),
    # reads (M02 or M04) before writes (M03 or M05): the order of Drishti's report
    T(
        "M02",
        "high",
        (COLLECTIVE_SHARE, COLLECTIVE_COUNT),
        "check_mpi_collective_read_operation",
        c.no_collective_reads,
    ),
    T("M04", "ok", (), "check_mpi_collective_read_operation", c.collective_reads),
    T(
        "M03",
        "high",
        (COLLECTIVE_SHARE, COLLECTIVE_COUNT),
        "check_mpi_collective_write_operation",
        c.no_collective_writes,
    ),
    T("M05", "ok", (), "check_mpi_collective_write_operation", c.collective_writes),
    T("M08", "warn", (), "check_mpi_aggregator", c.too_many_aggregators),
    T("M09", "warn", (), "check_mpi_aggregator", c.too_few_aggregators),
    T("M10", "ok", (), "check_mpi_aggregator", c.one_aggregator_per_node),
)
"""The checks of the module docstring, in the order their findings are listed."""
del T


def insights(
    job: DarshanJobRow,
    files: Sequence[DarshanFileRow],
    hints: str = "",
    node_count: int | None = None,
) -> list[Insight]:
    """Run the checks of :data:`TRIGGERS`.

    Args:
        job: the ``darshan.job`` fields of :func:`~pipeline.reducers.darshan_job.analyze`.
        files: its file rows.
        hints: the MPI-IO hints string of the log (``cb_nodes=4;...``).
        node_count: nodes of the job (from Slurm), for M08-M10.

    Returns:
        The findings in the order of the table.
    """
    f = c.facts(job, files, hints, node_count)
    out: list[Insight] = []
    for t in TRIGGERS:
        found = t.check(f)
        if found is not None:
            out.append(Insight(t.code, t.level, found[0], found[1]))
    return out
