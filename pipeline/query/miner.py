"""The IOMiner entry point: a time range and a cluster, from which tables load as tuples.

Seed 004, section II-A, Algorithm 1 lines 2-12: instantiate IOMiner, ``init_stores`` for a
period, ``load`` each table. In IOMiner ``init_stores`` converts raw logs into its storage
format once (section II-B); in iolens the shippers have already indexed the tables as data
streams (see :mod:`pipeline.query.tables`), so ``init_stores`` only sets the period that loads
read, and ``load`` queries the table's data stream with a range filter on ``@timestamp``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

import pandas as pd  # type: ignore[import-untyped]

from pipeline.query.quantity import ColumnError, normalize
from pipeline.query.reader import data_fields, iter_pages, sortable
from pipeline.query.tables import Table, flatten, frame, table
from pipeline.query.tuples import Tuples
from pipeline.records.json import Query, Response
from pipeline.settings import Settings
from pipeline.sink.client import Client, make_client
from pipeline.sink.search import FieldCaps, field_caps

TimeLike = dt.datetime | dt.date | str | int | float
"""A datetime or date (naive means UTC), an ISO-8601 string (no offset means UTC), or epoch
seconds."""


def to_timestamp(value: TimeLike) -> pd.Timestamp:
    """``value`` as a tz-aware UTC timestamp (see :data:`TimeLike`).

    Raises:
        ValueError: a string that is not ISO-8601, or a missing value.
        TypeError: another type (booleans included).
    """
    if isinstance(value, bool) or not isinstance(value, dt.date | str | int | float):
        raise TypeError(f"a time must be a datetime, ISO-8601 string or epoch seconds: {value!r}")
    if isinstance(value, int | float):
        ts = pd.Timestamp(value, unit="s", tz="UTC")
    else:
        ts = pd.Timestamp(value)
    if pd.isna(ts):
        raise ValueError(f"not a time: {value!r}")
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


def _iso(ts: pd.Timestamp) -> str:
    return str(ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")


class Selection(TypedDict, total=False):
    """What a load reads of a table: the keyword arguments of :meth:`IOMiner.load` and
    :meth:`IOMiner.iter_frames` (each may be left out or None: everything)."""

    columns: Sequence[str] | None
    job_ids: Sequence[str | int] | None
    query: Query | None


@dataclass(frozen=True)
class _Plan:
    table: Table
    index: str
    query: Query
    source: list[str] | None
    columns: list[str] | None
    dates: frozenset[str]
    caps: FieldCaps


class IOMiner:
    """IOMiner's query interface over one cluster and data stream namespace (seed 004 §II-A).

    Args:
        client: an Elasticsearch client (closing it stays the caller's job).
        namespace: data stream namespace, the ``<ns>`` of ``logs-darshan.job-<ns>``; ``*``
            reads every namespace.
        page_size: hits per search request while loading (at most 10,000).
        pit: read with a point in time: None when the cluster supports it (else plain
            ``search_after``), True always (fail without), False never.
        keep_alive: how long a point in time lives between two pages (e.g. ``"2m"``).

    Raises:
        ValueError: an empty namespace or a page size outside 1..10,000.
    """

    def __init__(
        self,
        client: Client,
        namespace: str = "default",
        *,
        page_size: int = 5000,
        pit: bool | None = None,
        keep_alive: str = "2m",
    ) -> None:
        if not namespace:
            raise ValueError("namespace must not be empty")
        if not 1 <= page_size <= 10_000:
            raise ValueError(f"page_size must be within 1..10000, not {page_size}")
        self.client = client
        self.namespace = namespace
        self.page_size = page_size
        self.pit = pit
        self.keep_alive = keep_alive
        self._range: tuple[pd.Timestamp, pd.Timestamp] | None = None
        self._owns_client = False

    @classmethod
    def from_settings(
        cls, settings: Settings, *, url: str | None = None, **options: Any
    ) -> IOMiner:
        """A miner on the configured cluster and namespace, with a client it closes itself.

        Args:
            settings: the iolens configuration (``elasticsearch`` section).
            url: overrides ``elasticsearch.url`` (e.g. the embedded server's).
            options: ``page_size``, ``pit``, ``keep_alive`` as for the constructor.
        """
        client = make_client(settings.elasticsearch, url)
        miner = cls(client, settings.elasticsearch.namespace, **options)
        miner._owns_client = True
        return miner

    def close(self) -> None:
        """Close the client if :meth:`from_settings` made it; otherwise do nothing."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> IOMiner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def init_stores(self, start: TimeLike, end: TimeLike) -> None:
        """Set the period loads read: documents with ``start <= @timestamp < end``.

        Seed 004 Algorithm 1 line 4. Nothing is converted or copied: the tables are the
        indexed data streams. Until it is called, loads read all time.

        Raises:
            ValueError: ``end`` is not after ``start``, or a time cannot be read.
            TypeError: a time of another type (see :data:`TimeLike`).
        """
        lo, hi = to_timestamp(start), to_timestamp(end)
        if hi <= lo:
            raise ValueError(f"the end {hi.isoformat()} is not after the start {lo.isoformat()}")
        self._range = (lo, hi)

    @property
    def time_range(self) -> tuple[pd.Timestamp, pd.Timestamp] | None:
        """The half-open UTC period ``[start, end)`` loads read, or None for all time."""
        return self._range

    def index(self, table_name: str) -> str:
        """The data stream a table is read from (``"darshan job"`` ->
        ``logs-darshan.job-<namespace>``).

        Raises:
            ValueError: unknown table.
        """
        return table(table_name).index(self.namespace)

    def load(self, table_name: str, **selection: Unpack[Selection]) -> Tuples:
        """All rows of a table in the period, as :class:`~pipeline.query.tuples.Tuples`.

        Seed 004 Algorithm 1 lines 6-12. Rows come in ``@timestamp`` order; columns follow
        :mod:`pipeline.query.tables` (contract columns first, all-null where no document has
        them); ``timestamp`` and the fields the cluster maps as ``date`` are tz-aware UTC
        datetimes. A missing data stream gives an empty table with the contract columns.

        Args:
            table_name: ``"darshan job"``, ``"darshan file"``, ``"slurm"``, ``"lmt"`` or
                ``"io_diagnosis"`` (any case; spaces, dashes or underscores).
            columns: read only these columns (``_source`` includes), in this order; names as
                users write them (``"bytes written"``).
            job_ids: only these scheduler job ids (a ``terms`` filter on the job id field).
            query: an Elasticsearch query clause ANDed with the rest (e.g.
                ``{"term": {"darshan.file.module": "POSIX"}}``).

        Raises:
            ValueError: unknown table, or ``job_ids`` for a table without job ids (``lmt``,
                ``io_diagnosis``).
            ColumnError: (a ``KeyError``) a requested column the table does not have; the
                message lists those it has.
            ClusterUnavailable: the cluster cannot answer now
                (:class:`pipeline.sink.search.ClusterUnavailable`).
        """
        plan = self._plan(table_name, **selection)
        rows = [
            flatten(hit.get("_source", {}), plan.table)
            for page in self._pages(plan)
            for hit in page
        ]
        df = frame(rows, plan.table, columns=plan.columns, dates=plan.dates)
        return Tuples(df, table=plan.table.name)

    def iter_frames(
        self, table_name: str, **selection: Unpack[Selection]
    ) -> Generator[pd.DataFrame, None, None]:
        """The rows of :meth:`load` as one DataFrame per page of ``page_size`` hits.

        For tables too large to hold at once. Each frame has the same column rules as
        :meth:`load`; a missing data stream or no match yields nothing. Closing the generator
        early (``close()``, or leaving a ``for`` loop over it and dropping it) closes the
        point in time.

        Raises:
            The same as :meth:`load`.
        """
        plan = self._plan(table_name, **selection)
        for page in self._pages(plan):
            rows = [flatten(hit.get("_source", {}), plan.table) for hit in page]
            yield frame(rows, plan.table, columns=plan.columns, dates=plan.dates)

    def _pages(self, plan: _Plan) -> Iterator[list[Response]]:
        return iter_pages(
            self.client,
            plan.index,
            plan.query,
            keys=plan.table.keys,
            caps=plan.caps,
            source=plan.source,
            page_size=self.page_size,
            pit=self.pit,
            keep_alive=self.keep_alive,
        )

    def _plan(
        self,
        table_name: str,
        *,
        columns: Sequence[str] | None = None,
        job_ids: Sequence[str | int] | None = None,
        query: Query | None = None,
    ) -> _Plan:
        """What to ask for one load: the index, the query, the ``_source`` paths, the columns
        and which of them are dates (from the data stream's field capabilities)."""
        tbl = table(table_name)
        index = tbl.index(self.namespace)
        if job_ids is not None and tbl.job_id_field is None:
            raise ValueError(f"table {tbl.name} has no job id to select by")
        caps = field_caps(self.client, index)
        fields = data_fields(caps)
        paths = _column_paths(tbl, fields)
        dates = _date_columns(tbl, fields)
        wanted = None if columns is None else _wanted(tbl, paths, columns)
        source = None if wanted is None else list(dict.fromkeys(paths[c] for c in wanted))
        filters: list[Query] = []
        if self._range is not None:
            filters.append(_period_filter(*self._range))
        if job_ids is not None and tbl.job_id_field is not None:
            field = sortable(caps, tbl.job_id_field) or tbl.job_id_field
            filters.append({"terms": {field: [str(j) for j in job_ids]}})
        if query is not None:
            filters.append(dict(query))
        body = {"bool": {"filter": filters}} if filters else {"match_all": {}}
        return _Plan(tbl, index, body, source, wanted, dates, caps)


def _column_paths(tbl: Table, fields: Mapping[str, set[str]]) -> dict[str, str]:
    """Column -> the document path it is read from: the indexed fields first (in path order),
    then the table's contract columns that no indexed field gives."""
    paths: dict[str, str] = {}
    for path in sorted(fields):
        col = tbl.column_of(path)
        if col is not None:
            paths.setdefault(col, path)
    for col in tbl.columns:
        paths.setdefault(col, tbl.path_of(col))
    return paths


def _date_columns(tbl: Table, fields: Mapping[str, set[str]]) -> frozenset[str]:
    """The columns of fields the cluster maps as ``date`` or ``date_nanos``."""
    return frozenset(
        paths_col
        for path, types in fields.items()
        if types & {"date", "date_nanos"} and (paths_col := tbl.column_of(path)) is not None
    )


def _wanted(tbl: Table, paths: Mapping[str, str], columns: Sequence[str]) -> list[str]:
    """The requested ``columns`` normalised.

    Raises:
        ColumnError: a column the table does not have.
    """
    wanted: list[str] = []
    for name in columns:
        col = normalize(name)
        if col not in paths:
            extra = sorted(c for c in paths if c not in tbl.columns)
            raise ColumnError(name, [*tbl.columns, *extra], f"table {tbl.name}")
        wanted.append(col)
    return wanted


def _period_filter(lo: pd.Timestamp, hi: pd.Timestamp) -> Query:
    """The ``range`` clause of ``lo <= @timestamp < hi``."""
    return {
        "range": {
            "@timestamp": {"gte": _iso(lo), "lt": _iso(hi), "format": "strict_date_optional_time"}
        }
    }
