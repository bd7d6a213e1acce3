"""What every view of the report is built from: plain searches over a time range, documents as
tables, one figure style, and the :class:`Section` a view returns.

A document fetched is its ``_source``; a table is a :class:`pandas.DataFrame` whose columns are
named by the view (``{"time": "@timestamp", "lun": "system.diskio.name"}``), ``time`` parsed as
UTC. Searches use ``search_after`` and no aggregation, so the embedded development server can
answer them.

Every figure reads the same way: each axis is titled with its unit, every time axis is
:data:`TIME_TITLE` (a view whose stream dates something else than an interval's end moves its
points there first), a logarithmic axis carries explicit 1-2-5 or decade ticks
(:func:`log_axis`; plotly's own log ticks label the minor ones with bare digits, so 0.3 ms reads
"3"), and a line is broken where a series misses intervals (:func:`add_line`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any, Literal

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


TIME_TITLE = "time (interval end, UTC)"
"""The title of every time axis: a point sits at the end of the interval it summarises, in UTC.
That is the ``@timestamp`` of fio's latency and histogram records, of sysstat's disk intervals
and of the service-rate estimates (the end of the periods sampled); LMT's (an interval's start)
is moved to the interval's end, and the peer comparison's windows are drawn at their ends."""

GAP_FACTOR = 1.5
"""A step between consecutive points of a series longer than this many times the series'
median step is a gap: the line is broken there."""

LOG_125_DECADES = 4.0
"""A log axis spanning at most this many decades is ticked at 1, 2 and 5 of each decade; a
wider one at each decade only."""
LOG_PAD = 0.05
"""Decades a log axis shows beyond its outer ticks."""


def style(fig: go.Figure, title: str, *, height: int = 380) -> go.Figure:
    """``fig`` in the report's style (white, ``height`` px high, legend below), titled."""
    fig.update_layout(
        title=title,
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 40},
        legend={"orientation": "h", "yanchor": "top", "y": -0.3},
    )
    return fig


def figure(title: str, y_title: str, *, x_title: str) -> go.Figure:
    """An empty figure in the report's style, its axes titled (units included: ``"await, ms"``;
    a time axis :data:`TIME_TITLE`)."""
    fig = style(go.Figure(), title)
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return fig


def time_figure(title: str, y_title: str) -> go.Figure:
    """An empty :func:`figure` over time: a date x axis titled :data:`TIME_TITLE` (a date axis
    even before, or without, a trace)."""
    fig = figure(title, y_title, x_title=TIME_TITLE)
    fig.update_xaxes(type="date")
    return fig


def log_ticks(values: Iterable[Any]) -> tuple[list[float], list[str]]:
    """Tick values and their labels for a log axis over ``values``.

    Ticks at 1, 2 and 5 of each decade (at each decade only over more than
    :data:`LOG_125_DECADES`), from the last at or below the least value to the first at or
    above the largest (and the ticks either side when that is one tick), labelled in full:
    ``0.2``, ``50``, ``1e-05``, ``1e+06``. Values that are None, NaN, infinite or not positive
    are passed over (a log axis cannot show them); none left: ``([], [])``.

    Example: ``log_ticks([0.3, 12])`` is ``([0.2, 0.5, 1, 2, 5, 10, 20], ["0.2", ..., "20"])``.
    """
    shown = [float(v) for v in values if v is not None and not pd.isna(v)]
    shown = [v for v in shown if math.isfinite(v) and v > 0]
    if not shown:
        return [], []
    lo, hi = min(shown), max(shown)
    steps = (1, 2, 5) if math.log10(hi / lo) <= LOG_125_DECADES else (1,)
    decades = range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 2)
    ticks = [float(f"{m}e{d}") for d in decades for m in steps]
    first = max(i for i, t in enumerate(ticks) if t <= lo)
    last = min(i for i, t in enumerate(ticks) if t >= hi)
    if first == last:  # one value on a tick: the ticks either side too
        first, last = first - 1, last + 1
    kept = ticks[first : last + 1]
    return kept, [f"{t:g}" for t in kept]


def log_axis(
    fig: go.Figure, axis: Literal["x", "y"], values: Iterable[Any], title: str, **where: Any
) -> None:
    """Make ``fig``'s ``axis`` (of the subplot ``where``: ``row=``, ``col=``) logarithmic with
    the ticks of :func:`log_ticks` over the ``values`` it shows, its range from the first tick
    to the last (:data:`LOG_PAD` beyond, so that both are shown), titled ``title`` (with its
    unit: ``"latency, ms"``). Without a positive value it stays linear, only titled."""
    tickvals, ticktext = log_ticks(values)
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    if not tickvals:
        update(title=title, **where)
        return
    shown = [math.log10(tickvals[0]) - LOG_PAD, math.log10(tickvals[-1]) + LOG_PAD]
    ticks = {"tickmode": "array", "tickvals": tickvals, "ticktext": ticktext}
    update(title=title, type="log", range=shown, **ticks, **where)


def gaps(times: Sequence[Any]) -> list[int]:
    """The positions ``i`` of the sorted ``times`` (datetimes) where the step from ``i - 1`` is
    longer than :data:`GAP_FACTOR` times the median of the positive steps: the intervals
    missing there. Fewer than two positive steps: no gap can be told, ``[]``."""
    steps = [(b - a).total_seconds() for a, b in pairwise(times)]
    positive = [s for s in steps if s > 0]
    if len(positive) < 2:
        return []
    limit = GAP_FACTOR * statistics.median(positive)
    return [i + 1 for i, s in enumerate(steps) if s > limit]


def gapped(
    times: Iterable[Any], values: Iterable[Any]
) -> tuple[list[pd.Timestamp], list[float | None]]:
    """A time series as plotly draws it: sorted by time, times as UTC without a zone (plotly.js
    reads no offsets), NaN as None, and in each of its :func:`gaps` a point at the middle of the
    gap with value None, which breaks the line (``connectgaps=False``)."""
    pairs = sorted(
        [
            (_plain_utc(t), None if v is None or pd.isna(v) else float(v))
            for t, v in zip(times, values, strict=True)
            if not pd.isna(t)
        ],
        key=lambda p: p[0],
    )
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    for i in reversed(gaps(xs)):
        xs.insert(i, xs[i - 1] + (xs[i] - xs[i - 1]) / 2)
        ys.insert(i, None)
    return xs, ys


def _plain_utc(t: Any) -> pd.Timestamp:
    """``t`` in UTC without a zone (a zone-less ``t`` is taken as UTC)."""
    stamp = pd.Timestamp(t)
    return stamp.tz_convert(UTC).tz_localize(None) if stamp.tzinfo is not None else stamp


def add_line(
    fig: go.Figure,
    part: pd.DataFrame,
    y: str,
    *,
    time: str = "time",
    scale: float = 1.0,
    **trace: Any,
) -> None:
    """One line of ``part[y] / scale`` over ``part[time]``, broken in its gaps (:func:`gapped`);
    ``trace``: the other scatter properties (``name``, ``row``, ``col``, ``mode``: default
    ``lines``)."""
    xs, ys = gapped(part[time], pd.to_numeric(part[y], errors="coerce") / scale)
    fig.add_scatter(x=xs, y=ys, connectgaps=False, **({"mode": "lines"} | trace))


def section(title: str, note: str, figures: Sequence[go.Figure | None]) -> Section | None:
    """A :class:`Section` of the figures drawn (``None`` ones left out); ``None`` when none was."""
    drawn = tuple(f for f in figures if f is not None)
    return Section(title, note, drawn) if drawn else None
