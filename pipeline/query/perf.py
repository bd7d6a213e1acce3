"""IOMiner's ``extract_perf_factors``: low-bandwidth jobs, their critical files and factors.

Seed 004, section II-D (Algorithm 1 lines 23-25, Algorithm 2, Equation 2). For each job in
job x file tuples (or file tuples alone):

1. The job's I/O time in a direction is the *critical path*: the union of its files' busy
   intervals in that direction (``read_start_s``/``read_end_s``, ``write_start_s``/
   ``write_end_s``; ``both``: ``start_s``/``end_s``; seconds from the job's start). Idle gaps
   between I/O phases do not count, which is why this is more accurate than the job-level
   ``(last end - first start)`` of Equation 1 (the seed's Figure 3: 14 s, not 18 s).
2. Its bandwidth is its files' bytes in the direction (``bytes_read``, ``bytes_written``, or
   both) divided by that time. Jobs with ``low <= bandwidth < high`` are kept; jobs without
   busy time in the direction have no bandwidth and are left out.
3. The critical files and their exclusive times come from the sweep line,
   :func:`pipeline.reducers.sweep.covering_set`; rows sharing a file name are one file.
4. Small, Small<1KiB, Non-consec, Coll and Proc/OST are per-file values
   (:func:`pipeline.reducers.factors.file_factors`, counters summed over the file's rows,
   ``nprocs`` and ``stripe_count`` their maximum) averaged over the critical files weighted by
   exclusive time (:func:`pipeline.reducers.sweep.weighted_factor`, Equation 2); OST# is the
   number of distinct OSTs over all the job's files (``osts`` arrays).

File columns are read by their names in the ``darshan.file`` table, or with the ``_file``
suffix :meth:`~pipeline.query.tuples.Tuples.join` gives them where they clash with job
columns. A job with several Darshan logs (one per step) has several job rows, so a join on the
job id pairs each file with every log of its job; rows whose job log id (``log_id``) differs
from the file's (``log_id_file``) are such pairs and are dropped. Several rows of one file
within one log (per-rank records) all count.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd  # type: ignore[import-untyped]

from pipeline.query.quantity import ColumnError, finite_or_none
from pipeline.reducers.factors import COUNT_COLUMNS, Direction, file_factors
from pipeline.reducers.sweep import covering_set, weighted_factor

log = logging.getLogger(__name__)

RESULT_COLUMNS: tuple[str, ...] = (
    "job_id",
    "bandwidth_bytes_per_s",
    "io_time_s",
    "small",
    "small_1k",
    "non_consec",
    "coll",
    "ost_count",
    "proc_per_ost",
    "critical_files",
)
"""Columns of :func:`perf_factors`' result, in order."""

_WEIGHTED = ("small", "small_1k", "non_consec", "coll", "proc_per_ost")
_INTERVALS: dict[str, tuple[str, str]] = {
    "read": ("read_start_s", "read_end_s"),
    "write": ("write_start_s", "write_end_s"),
    "both": ("start_s", "end_s"),
}
_BYTES: dict[str, tuple[str, ...]] = {
    "read": ("bytes_read",),
    "write": ("bytes_written",),
    "both": ("bytes_read", "bytes_written"),
}
_COUNTS = COUNT_COLUMNS
_MAXIMA = ("nprocs", "stripe_count")
_LOG_PAIRS = (("log_id", "log_id_file"), ("log_id_job", "log_id"))
"""(job-side, file-side) log id columns after ``job.join(file)`` / ``file.join(job)``."""


def _file_column(df: pd.DataFrame, name: str, required: bool = True) -> str | None:
    for candidate in (f"{name}_file", name):
        if candidate in df.columns:
            return candidate
    if required:
        raise ColumnError(name, [str(c) for c in df.columns], "extract_perf_factors needs it")
    return None


def _same_log(df: pd.DataFrame) -> pd.Series | None:
    """Rows whose job row and file row come from one Darshan log (None: no job log id)."""
    for job_col, file_col in _LOG_PAIRS:
        if job_col in df.columns and file_col in df.columns:
            j, f = df[job_col], df[file_col]
            return j.isna() | f.isna() | (j == f)
    return None


def _osts(values: Iterable[Any]) -> set[int]:
    out: set[int] = set()
    for v in values:
        if isinstance(v, list | tuple | np.ndarray):
            out.update(int(x) for x in v if finite_or_none(x) is not None)
        elif finite_or_none(v) is not None:
            out.add(int(v))
    return out


def _counters(rows: pd.DataFrame) -> dict[str, float | None]:
    c: dict[str, float | None] = {}
    for name in _COUNTS:
        c[name] = finite_or_none(pd.to_numeric(rows[name], errors="coerce").sum(min_count=1))
    for name in _MAXIMA:
        c[name] = finite_or_none(pd.to_numeric(rows[name], errors="coerce").max())
    return c


@dataclass(frozen=True)
class JobPerf:
    """One job's result in a direction: a row of :func:`perf_factors`.

    Attributes:
        job_id: the job id, as the ``job_id`` column held it.
        bandwidth_bytes_per_s: the job's bytes in the direction / ``io_time_s``, bytes/s.
        io_time_s: critical-path length (union of the files' busy intervals), s; > 0.
        factors: weighted factor by name (the :data:`_WEIGHTED` names: ``small``,
            ``small_1k``, ``non_consec``, ``coll``, ``proc_per_ost``); NaN when no critical
            file defines it.
        ost_count: distinct OSTs over all the job's files.
        critical_files: ``(file name, exclusive time s)`` of the critical files.
    """

    job_id: Hashable
    bandwidth_bytes_per_s: float
    io_time_s: float
    factors: dict[str, float]
    ost_count: int
    critical_files: list[tuple[str, float]]

    def row(self) -> dict[str, object]:
        """The result row: :data:`RESULT_COLUMNS` -> value."""
        return {
            "job_id": self.job_id,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "io_time_s": self.io_time_s,
            **self.factors,
            "ost_count": self.ost_count,
            "critical_files": self.critical_files,
        }


def _job_row(job_id: Hashable, part: pd.DataFrame, direction: Direction) -> JobPerf | None:
    start, end = _INTERVALS[direction]
    labels = [str(n) for n in part["name"].tolist()]
    cs = covering_set(
        pd.to_numeric(part[start], errors="coerce").to_numpy(np.float64),
        pd.to_numeric(part[end], errors="coerce").to_numpy(np.float64),
        labels,
    )
    if cs.union <= 0:
        return None
    nbytes = sum(float(pd.to_numeric(part[b], errors="coerce").sum()) for b in _BYTES[direction])
    values: dict[str, dict[Hashable, float | None]] = {f: {} for f in _WEIGHTED}
    label_of_row = pd.Series(labels, index=part.index)
    for label in cs.exclusive:
        ff = file_factors(_counters(part[label_of_row == label]), direction)
        for f in _WEIGHTED:
            values[f][label] = cast(float | None, getattr(ff, f))
    factors: dict[str, float] = {}
    for f in _WEIGHTED:
        w = weighted_factor(values[f], cs.exclusive)
        factors[f] = math.nan if w is None else w
    return JobPerf(
        job_id=job_id,
        bandwidth_bytes_per_s=nbytes / cs.union,
        io_time_s=cs.union,
        factors=factors,
        ost_count=len(_osts(part["osts"].tolist())),
        critical_files=[(str(k), float(t)) for k, t in cs.exclusive.items()],
    )


def perf_factors(df: pd.DataFrame, low: float, high: float, direction: str) -> pd.DataFrame:
    """One row per job whose bandwidth in ``direction`` lies in ``[low, high)`` bytes/s.

    Args:
        df: job x file rows (or file rows) with ``job_id`` and the ``darshan.file`` columns
            ``name``, the direction's interval and byte columns, ``reads``, ``writes``,
            ``small_*``, ``small_1k_*``, ``consec_*``, ``coll_*``, ``nprocs``,
            ``stripe_count`` and ``osts`` (bare or with the ``_file`` suffix).
        low: lowest bandwidth kept, bytes/s.
        high: bandwidth bound, bytes/s, exclusive.
        direction: ``read``, ``write`` or ``both``.

    Returns:
        Columns :data:`RESULT_COLUMNS`: ``job_id``; ``bandwidth_bytes_per_s`` (bytes / I/O
        time); ``io_time_s`` (critical-path length, s); ``small``, ``small_1k``,
        ``non_consec``, ``coll``, ``proc_per_ost`` (exclusive-time weighted, NaN when no
        critical file defines them); ``ost_count`` (int); ``critical_files`` (list of
        ``(name, exclusive_s)``, largest first). Rows in job id order.

    Raises:
        ColumnError: a needed column is missing (the message lists those present).
        ValueError: an unknown direction, or bounds that are NaN or with ``low > high``.
    """
    _check_arguments(df, low, high, direction)
    files, mixed_logs = _file_rows(df, direction)
    rows: list[dict[str, object]] = []
    for job_id, part in files.groupby("job_id", sort=True):
        if mixed_logs:
            _warn_mixed_logs(job_id, part)
        perf = _job_row(job_id, part, cast(Direction, direction))
        if perf is not None and low <= perf.bandwidth_bytes_per_s < high:
            rows.append(perf.row())
    out = pd.DataFrame(rows, columns=list(RESULT_COLUMNS))
    for f in (*_WEIGHTED, "bandwidth_bytes_per_s", "io_time_s"):
        out[f] = out[f].astype(np.float64)
    out["ost_count"] = out["ost_count"].astype(np.int64)
    return out


def _check_arguments(df: pd.DataFrame, low: float, high: float, direction: str) -> None:
    """Raise what :func:`perf_factors` raises for a bad direction, bounds or missing job id."""
    if direction not in _INTERVALS:
        raise ValueError(f"direction must be read, write or both, not {direction!r}")
    if math.isnan(low) or math.isnan(high) or low > high:
        raise ValueError(f"bandwidth bounds must satisfy low <= high, not {low}, {high}")
    if "job_id" not in df.columns:
        raise ColumnError("job_id", [str(c) for c in df.columns], "extract_perf_factors")


def _warn_mixed_logs(job_id: Any, part: pd.DataFrame) -> None:
    """Warn when a job's files come from several Darshan logs (times relative to each)."""
    if part["log_id"].nunique() > 1:
        log.warning(
            "job %s: files from %d Darshan logs share one time axis here, but their times "
            "are relative to each log's start; filter on log_id to analyse them apart",
            job_id,
            part["log_id"].nunique(),
        )


def _file_rows(df: pd.DataFrame, direction: str) -> tuple[pd.DataFrame, bool]:
    """``job_id`` and the file columns the analysis of ``direction`` needs, under their bare
    names, rows of one Darshan log per file only; and whether ``log_id`` is among them.

    Raises:
        ColumnError: a needed column is missing.
    """
    needed = ["name", *_INTERVALS[direction], *_BYTES[direction], *_COUNTS, *_MAXIMA, "osts"]
    found = {n: _file_column(df, n) for n in needed}
    found["log_id"] = _file_column(df, "log_id", required=False)
    present = {n: c for n, c in found.items() if c is not None}
    same = _same_log(df)
    rows_in = df if same is None else df[same]
    files = rows_in[["job_id", *present.values()]].set_axis(["job_id", *present], axis=1)
    return files, "log_id" in present
