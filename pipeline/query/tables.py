"""IOMiner's tables as iolens data streams: which stream, and how documents become columns.

Seed 004, section II-B: IOMiner reshapes each tool's logs into tables (Darshan job, Darshan
file, Slurm, LMT) joinable on the job id. In iolens those tables already exist: they are the
indexed data streams. A :class:`Table` says where one lives and how a document's ``_source``
flattens into a row:

=============  ==================================  ==========================================
table          data stream                         columns
=============  ==================================  ==========================================
darshan_job    ``logs-darshan.job-<ns>``           ``darshan.job.<x>`` -> ``<x>``;
                                                   ``darshan.job.id`` -> ``job_id``;
                                                   ``darshan.log.<x>`` -> ``log_<x>``
darshan_file   ``logs-darshan.file-<ns>``          ``darshan.file.<x>`` -> ``<x>``;
                                                   ``darshan.job.id`` -> ``job_id``;
                                                   ``darshan.log.<x>`` -> ``log_<x>``
slurm          ``logs-slurm.job-<ns>``             ``slurm.job.<x>`` -> ``<x>``;
                                                   ``slurm.job.id`` -> ``slurm_id`` (JobIDRaw);
                                                   ``slurm.job.job_id`` -> ``job_id``
lmt            ``metrics-lmt.ost-<ns>``            ``lmt.ost.<x>`` -> ``<x>``;
                                                   ``lmt.ost.name`` -> ``ost_name``;
                                                   ``lmt.ost.index`` -> ``ost_index``
io_diagnosis   ``logs-iolens.io_diagnosis-<ns>``   ``iolens.io_diagnosis.<x>`` -> ``<x>``;
                                                   ``darshan.job.id`` -> ``job_id``;
                                                   ``darshan.log.id`` -> ``log_id``;
                                                   ``factors.<f>`` -> ``factors_<f>``
=============  ==================================  ==========================================

In every table ``@timestamp`` becomes ``timestamp``; ECS bookkeeping (``data_stream``,
``event``, ``ecs``, ``agent``) is dropped; any other field keeps its path with ``.`` -> ``_``
(``host.name`` -> ``host_name``). Nested objects flatten the same way; arrays (``osts``,
``interfaces``, lists of objects) stay whole, one Python list per cell.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import pandas as pd  # type: ignore[import-untyped]

from pipeline.query.quantity import normalize
from pipeline.records.json import Source

DROPPED: frozenset[str] = frozenset({"data_stream", "event", "ecs", "agent"})
"""Top-level ECS objects that are bookkeeping, not data."""

TIMESTAMP = "@timestamp"

Row: TypeAlias = dict[str, object]
"""One row (tuple) of a table: column name -> value (a JSON scalar as the document held it, an
array kept whole, or what pandas holds in a frame's cell: a ``Timestamp``, NaN, None)."""


@dataclass(frozen=True)
class Table:
    """Where one IOMiner table lives and how its documents flatten into columns.

    Attributes:
        name: canonical table name (``darshan_job``).
        stream: data stream name with ``{namespace}`` left to fill in.
        prefix: the table's own field prefix, stripped from column names (with its dot).
        renames: exact field path -> column name, applied first.
        prefix_renames: (field prefix, column prefix) pairs, e.g. ``darshan.log.`` -> ``log_``.
        columns: the columns of the field contract, in display order; an empty table still
            has them, and loaded tables show them first.
        dates: columns that hold times besides ``timestamp`` (converted when the cluster maps
            them as ``date``).
        job_id_field: the field holding the scheduler job id (for ``job_ids=``), or None.
        keys: fields that identify a document together with ``@timestamp`` (the sort that
            makes plain ``search_after`` paging exact).
        alias: suffix stem for clashing columns when this table is joined on the right.
    """

    name: str
    stream: str
    prefix: str
    renames: Mapping[str, str] = field(default_factory=dict)
    prefix_renames: tuple[tuple[str, str], ...] = ()
    columns: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    job_id_field: str | None = None
    keys: tuple[str, ...] = ()
    alias: str = "right"

    def index(self, namespace: str) -> str:
        """The data stream of ``namespace`` (e.g. ``logs-darshan.job-default``)."""
        return self.stream.format(namespace=namespace)

    def column_of(self, path: str) -> str | None:
        """The column a field path lands in; None for dropped bookkeeping fields."""
        if path.split(".", 1)[0] in DROPPED:
            return None
        if path == TIMESTAMP:
            return "timestamp"
        if path in self.renames:
            return self.renames[path]
        for pre, col_pre in self.prefix_renames:
            if path.startswith(pre):
                return col_pre + path[len(pre) :].replace(".", "_")
        if path.startswith(self.prefix):
            return path[len(self.prefix) :].replace(".", "_")
        return path.replace(".", "_")

    def path_of(self, column: str) -> str:
        """The field path of a contract column (the inverse of :meth:`column_of`)."""
        if column == "timestamp":
            return TIMESTAMP
        for path, col in self.renames.items():
            if col == column:
                return path
        for pre, col_pre in self.prefix_renames:
            if column.startswith(col_pre):
                return pre + column[len(col_pre) :]
        return self.prefix + column


_LOG = (("darshan.log.", "log_"),)


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            name="darshan_job",
            stream="logs-darshan.job-{namespace}",
            prefix="darshan.job.",
            renames={"darshan.job.id": "job_id"},
            prefix_renames=_LOG,
            columns=_words(
                "timestamp job_id uid user exe nprocs start end run_time_s bytes_read "
                "bytes_written reads writes read_ratio seq_ratio consec_ratio small_ratio "
                "small_1k_ratio sharing_ratio pattern interfaces interface collective ost_count "
                "file_count size_class no_io io_time_s read_time_s write_time_s "
                "naive_bytes_per_s critical_bytes_per_s darshan_bytes_per_s read_bytes_per_s "
                "write_bytes_per_s partial log_id log_name log_version"
            ),
            dates=("start", "end"),
            job_id_field="darshan.job.id",
            keys=("darshan.job.id", "darshan.log.id"),
            alias="job",
        ),
        Table(
            name="darshan_file",
            stream="logs-darshan.file-{namespace}",
            prefix="darshan.file.",
            renames={"darshan.job.id": "job_id"},
            prefix_renames=_LOG,
            columns=_words(
                "timestamp job_id log_id record_id name module nprocs shared bytes_read "
                "bytes_written reads writes consec_reads consec_writes seq_reads seq_writes "
                "small_reads small_writes small_1k_reads small_1k_writes coll_reads coll_writes "
                "indep_reads indep_writes start_s end_s read_start_s read_end_s write_start_s "
                "write_end_s busy_s read_time_s write_time_s meta_time_s stripe_size "
                "stripe_count osts proc_per_ost"
            ),
            job_id_field="darshan.job.id",
            keys=("darshan.log.id", "darshan.file.record_id", "darshan.file.module"),
            alias="file",
        ),
        Table(
            name="slurm",
            stream="logs-slurm.job-{namespace}",
            prefix="slurm.job.",
            renames={"slurm.job.id": "slurm_id", "slurm.job.job_id": "job_id"},
            columns=_words(
                "timestamp slurm_id job_id step user name start end elapsed_s state "
                "node_count tasks nodes"
            ),
            dates=("start", "end"),
            job_id_field="slurm.job.job_id",
            keys=("slurm.job.id",),
            alias="slurm",
        ),
        Table(
            name="lmt",
            stream="metrics-lmt.ost-{namespace}",
            prefix="lmt.ost.",
            renames={"lmt.ost.name": "ost_name", "lmt.ost.index": "ost_index"},
            columns=_words(
                "timestamp ost_name fs ost_index read_bytes write_bytes read_bytes_per_s "
                "write_bytes_per_s interval_s reset gap"
            ),
            keys=("lmt.ost.fs", "lmt.ost.name"),
            alias="lmt",
        ),
        Table(
            name="io_diagnosis",
            stream="logs-iolens.io_diagnosis-{namespace}",
            prefix="iolens.io_diagnosis.",
            renames={"darshan.job.id": "job_id", "darshan.log.id": "log_id"},
            columns=_words(
                "timestamp job_id log_id exe user nprocs low_bandwidth low_directions direction "
                "read_bytes_per_s write_bytes_per_s critical_bytes_per_s naive_bytes_per_s "
                "io_time_s span_s critical_file_count critical_files factors_ost_count "
                "factors_small factors_small_1k factors_non_consec factors_coll "
                "factors_proc_per_ost slow_osts insights causes"
            ),
            job_id_field="iolens.io_diagnosis.job_id",
            keys=("iolens.io_diagnosis.job_id", "iolens.io_diagnosis.log_id"),
            alias="diagnosis",
        ),
    )
}
"""The loadable tables by canonical name."""


def table(name: str) -> Table:
    """The table called ``name`` (``"darshan job"``, ``"darshan_job"``, ``"Darshan-Job"``...).

    Raises:
        ValueError: no such table; the message lists the tables.
    """
    t = TABLES.get(normalize(name))
    if t is None:
        raise ValueError(f"unknown table {name!r}; tables: {', '.join(TABLES)}")
    return t


def flatten(source: Source, tbl: Table) -> Row:
    """One row from a document's ``_source``: nested objects walked, arrays kept whole.

    Dotted keys (``{"darshan.job.id": ...}``) and nested objects give the same columns.
    """
    row: Row = {}

    def walk(obj: Source, path: str) -> None:
        for key, value in obj.items():
            p = f"{path}.{key}" if path else str(key)
            if isinstance(value, Mapping):
                walk(value, p)
                continue
            col = tbl.column_of(p)
            if col is not None:
                row[col] = value

    walk(source, "")
    return row


def _one_time(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return pd.NaT
    if isinstance(value, str):
        return pd.Timestamp(value)
    return pd.Timestamp(value, unit="ms")


def to_utc(values: pd.Series) -> pd.Series:
    """Times as tz-aware UTC datetimes.

    Strings are ISO-8601 (an offset is honoured, none means UTC); numbers are epoch
    milliseconds, Elasticsearch's default ``date`` format besides ISO-8601.
    """
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        return values.dt.tz_localize("UTC") if values.dt.tz is None else values.dt.tz_convert("UTC")
    present = values.dropna()
    if present.empty:
        return pd.Series(pd.NaT, index=values.index, dtype="datetime64[ns, UTC]")
    if bool(present.map(lambda v: isinstance(v, str)).all()):
        return pd.to_datetime(values, utc=True, format="ISO8601")
    if pd.api.types.is_numeric_dtype(values.dtype):
        return pd.to_datetime(values, utc=True, unit="ms")
    return pd.to_datetime(values.map(_one_time), utc=True)


def frame(
    rows: Sequence[Mapping[str, object]],
    tbl: Table,
    *,
    columns: Sequence[str] | None = None,
    dates: Iterable[str] = (),
) -> pd.DataFrame:
    """A DataFrame of flattened rows with the table's column order and time columns.

    Args:
        rows: rows from :func:`flatten`.
        tbl: their table.
        columns: exactly these columns in this order (missing ones all-null); default: the
            contract columns first, then any others in order of first appearance.
        dates: columns to convert with :func:`to_utc` besides ``timestamp`` (those the cluster
            maps as ``date``); absent ones are ignored.

    Returns:
        The frame; with no rows it has the columns and no rows.
    """
    order = _column_order(rows, tbl) if columns is None else list(columns)
    df = pd.DataFrame(list(rows), columns=order)
    for col in {"timestamp", *dates}:
        if col in df.columns:
            df[col] = to_utc(df[col])
    return df


def _column_order(rows: Sequence[Mapping[str, object]], tbl: Table) -> list[str]:
    """The table's contract columns, then the rows' others in order of first appearance."""
    seen = dict.fromkeys(tbl.columns)
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)
