"""What every view of the report is built from: plain searches over a time range, documents as
tables, one figure style, and the :class:`Section` a view returns.

A document fetched is its ``_source``; a table is a :class:`pandas.DataFrame` whose columns are
named by the view (``{"time": "@timestamp", "lun": "system.diskio.name"}``), ``time`` parsed as
UTC. Searches use ``search_after`` and no aggregation, so the embedded development server can
answer them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go

from pipeline.records.json import Source
from pipeline.sink.search import iter_hits, newest

Fetch = Callable[[str, Sequence[str], Sequence[str]], list[Source]]
"""``(data stream, fields to fetch, sort fields) -> _source`` of every document in range."""


@dataclass(frozen=True)
class Section:
    """One view of the report: a title, a line of explanation and its figures; ``headers[k]``
    (escaped HTML) is shown above figure ``k``."""

    title: str
    note: str
    figures: tuple[go.Figure, ...]
    headers: tuple[str, ...] = ()


def searcher(
    client: Any,
    namespace: str,
    since: datetime,
    until: datetime,
    *,
    latest: timedelta | None = None,
    shifted: dict[str, tuple[datetime, datetime]] | None = None,
) -> Fetch:
    """A :data:`Fetch` over ``<stream>-<namespace>`` in ``[since, until)``.

    Args:
        latest: when a stream has nothing in the range, fetch the span ``latest`` up to its
            newest document instead (what ``iolens report`` does without ``--since``: the last
            7 days, or a quiet stream's newest 7 days); None: never.
        shifted: filled with each stream fetched that way and the range it was fetched in.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """

    def fetch_range(
        stream: str, lo: datetime, hi: datetime, fields: Sequence[str], sort: Sequence[str]
    ) -> list[Source]:
        query = {
            "range": {
                "@timestamp": {
                    "gte": lo.astimezone(UTC).isoformat(),
                    "lt": hi.astimezone(UTC).isoformat(),
                }
            }
        }
        order = [{f: "asc"} for f in ("@timestamp", *sort)]
        index = f"{stream}-{namespace}"
        return [h["_source"] for h in iter_hits(client, index, query, order, source=list(fields))]

    def fetch(stream: str, fields: Sequence[str], sort: Sequence[str]) -> list[Source]:
        docs = fetch_range(stream, since, until, fields, sort)
        if docs or latest is None:
            return docs
        last = newest(client, f"{stream}-{namespace}")
        if last is None:
            return docs
        hi = datetime.fromtimestamp(float(last) / 1000, tz=UTC) + timedelta(milliseconds=1)
        if shifted is not None:
            shifted[stream] = (hi - latest, hi)
        return fetch_range(stream, hi - latest, hi, fields, sort)

    return fetch


def field(doc: Source, path: str) -> Any:
    """The value at dotted ``path`` of ``doc``; ``None`` when a part is missing."""
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def frame(docs: Iterable[Source], fields: Mapping[str, str]) -> pd.DataFrame:
    """Documents as a table: column -> dotted field path; ``@timestamp`` parsed (UTC)."""
    rows = [{col: field(d, path) for col, path in fields.items()} for d in docs]
    df = pd.DataFrame(rows, columns=list(fields))
    if "time" in df and len(df):
        df["time"] = pd.to_datetime(df["time"], utc=True)
    return df


def fetch_frame(
    fetch: Fetch, stream: str, fields: Mapping[str, str], sort: Sequence[str] = ()
) -> pd.DataFrame:
    """The documents of ``stream`` in range as a table (see :func:`frame`)."""
    return frame(fetch(stream, list(fields.values()), list(sort)), fields)


def figure(title: str, y_title: str, *, log_y: bool = False) -> go.Figure:
    """An empty figure in the report's style (white, 380 px high, legend below)."""
    fig = go.Figure()
    fig.update_layout(
        title=title,
        yaxis_title=y_title,
        template="plotly_white",
        height=380,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h", "y": -0.15},
    )
    if log_y:
        fig.update_yaxes(type="log")
    return fig


def section(title: str, note: str, figures: Sequence[go.Figure | None]) -> Section | None:
    """A :class:`Section` of the figures drawn (``None`` ones left out); ``None`` when none was."""
    drawn = tuple(f for f in figures if f is not None)
    return Section(title, note, drawn) if drawn else None
