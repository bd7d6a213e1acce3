"""One Darshan log -> IOMiner's job row, file rows, critical path and contributing factors.

Seed 004: section II-B (the job and file tables), III-C..E (the first-order metrics: read
ratio, sequential ratio, file-sharing pattern, interface) and II-D (bandwidth on the critical
path, critical files, exclusive times, the five factors). Counter names and conventions are
those of reference/darshan-iominer.md 2.2; the choices made where the paper is silent are
documented on each step of :mod:`pipeline.reducers.darshan`.

Everything is vectorised over records with numpy (no DataFrames): a log of a few thousand
records is analysed in a few milliseconds, far less than pydarshan takes to read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.records.darshan_log import DarshanLog
from pipeline.records.darshan_rows import DarshanFileRow, DarshanJobRow
from pipeline.reducers.darshan.critical import (
    CriticalFile,
    attribute_factors,
    critical_files,
    critical_path,
    factor_direction,
    job_factors,
)
from pipeline.reducers.darshan.files import group_files
from pipeline.reducers.darshan.osts import OstStat, ost_stats
from pipeline.reducers.darshan.rows import file_rows
from pipeline.reducers.darshan.summary import (
    job_row,
    log_identity,
)
from pipeline.reducers.factors import Direction
from pipeline.reducers.sweep import CoveringSet

__all__ = [
    "JobAnalysis",
    "analyze",
]


@dataclass(frozen=True)
class JobAnalysis:
    """Everything iolens derives from one Darshan log.

    Attributes:
        log: the log read.
        log_id: identity of the log (job id, start, file name): stable across re-reads.
        job: the ``darshan.job`` fields (:mod:`pipeline.reducers.darshan.summary`).
        files: one dict per file (``darshan.file`` fields), in record order.
        cover: the covering set of the busy intervals (critical path).
        critical: the critical files, largest exclusive time first.
        direction: the direction the factors are computed for (the one with more bytes).
        factors: the job's contributing factors (seed 004 II-D), weighted by exclusive time.
        osts: per-OST statistics of the job's files.
    """

    log: DarshanLog
    log_id: str
    job: DarshanJobRow
    files: list[DarshanFileRow]
    cover: CoveringSet
    critical: tuple[CriticalFile, ...]
    direction: Direction
    factors: dict[str, float | None]
    osts: tuple[OstStat, ...] = field(default=())


def analyze(log: DarshanLog) -> JobAnalysis:
    """Derive the job row, the file rows and the critical path of one log.

    The steps of :mod:`pipeline.reducers.darshan`, in order: group the records per file, the
    file rows, the critical path, the factors of the critical files (in the direction with
    more bytes), the job row (its fields and bandwidths:
    :mod:`pipeline.reducers.darshan.summary`), the per-OST speeds.
    """
    grouped = group_files(log)
    rows = file_rows(log, grouped.files)
    cover = critical_path(grouped.records)
    direction = factor_direction(grouped.files)
    attribution = attribute_factors(grouped.files, rows, cover, direction)
    ost_count = len({o for r in rows for o in r["osts"]})
    return JobAnalysis(
        log,
        log_identity(log),
        job_row(log, grouped, cover, ost_count),
        rows,
        cover,
        critical_files(rows, cover, attribution),
        direction,
        job_factors(attribution, ost_count),
        ost_stats(rows),
    )
