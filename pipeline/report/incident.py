"""The report's Incidents view: each incident on one time axis with the streams it correlates.

An incident (``logs-iolens.incident``, a document updated in place, ``@timestamp`` = its start)
is a LUN the peer comparison marks persistently anomalous (seed 001), with the fio jobs whose
job-scope intervals broke the latency SLA (seed 000) and the Darshan jobs whose critical files
sit on the LUN (seed 004). A document, shortened::

    {"@timestamp": "2026-11-25T15:40:10.000Z", "host": {"name": "labhost"},
     "iolens": {"incident": {"id": "Qm9...", "status": "closed",
        "start": "2026-11-25T15:40:10.000Z", "end": "2026-11-25T15:43:14.000Z",
        "updated": "2026-11-25T15:45:00.000Z", "lun": "labhost/loop3", "peer_group": "labhost",
        "metric": "await", "jobs": ["4243"], "fio_jobs": ["labhost/3"], "fio_breaches": 57,
        "sla": {"percentile": 95.0, "under_ms": 10.0}, "summary": "labhost/loop3 (...) was ..."}}}

The :data:`MAX_INCIDENTS` latest (by start; of one id, the highest ``updated``) are drawn as
four rows sharing the time axis: the SLA percentile of each fio job (job scope, ``mixed``, ms,
the SLA dashed), await per LUN of the peer group (ms), the peer comparison's record score per
LUN (0-100) and the Darshan jobs as spans from start to end; the incident's own fio jobs, LUN and
Darshan jobs in :data:`HIGHLIGHT`, the rest :data:`MUTED`, ``[start, end]`` (``updated`` while
open) shaded on every row. The lines sit at their intervals' ends (the peer scores at their
windows' ends), as on every time axis of the report, and break where intervals are missing.
Plain searches, one per stream.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipeline.records.json import Source
from pipeline.report.incident_streams import Fetch, Streams, fetch_streams
from pipeline.report.views.base import TIME_TITLE, add_line

MAX_INCIDENTS = 5
"""Incidents drawn, the latest (by start) first."""
HIGHLIGHT, MUTED = "#d62728", "#b0b7c3"
"""Line colours of the incident's own fio jobs, LUN and Darshan jobs, and of everything else."""
SHADE = "rgba(214, 39, 40, 0.12)"
"""Fill of the incident's ``[start, end]`` on every row."""
PAD_MIN = timedelta(minutes=2)
"""Least time shown before the start and after the end (else a quarter of the duration)."""
ROWS = (
    "fio p{pct} per job",
    "await per LUN",
    "peer comparison: record score per LUN",
    "Darshan jobs (start to end)",
)
"""The rows' titles, top to bottom."""
Y_TITLES = ("p{pct} latency, ms", "await, ms", "record score, 0-100", "Darshan job")
"""The rows' y axis titles (their units)."""
NOTE = (
    "Storage incidents (logs-iolens.incident), the latest first, each on one time axis with fio "
    "job latency, await, the peer comparison's score and the Darshan jobs; the incident's own "
    "jobs and LUN in red, its span shaded."
)


@dataclass(frozen=True)
class Incident:
    """An incident as its latest revision says (``iolens.incident.*``; times UTC).

    ``end``/``duration_s`` are None while it is open; ``sla_under_ms`` is the latency limit of
    the ``sla_percentile`` (0-100) and ``fio_jobs`` name jobs as ``host/prefix.job``.
    """

    id: str
    status: str
    start: datetime
    end: datetime | None
    updated: datetime
    lun: str
    peer_group: str
    metric: str
    mount_point: str | None
    windows: int
    max_score: float
    persistence_rank: int | None
    persistence_value: float | None
    jobs: tuple[str, ...]
    critical_files: tuple[str, ...]
    fio_breaches: int
    fio_jobs: tuple[str, ...]
    sla_percentile: float
    sla_under_ms: float
    duration_s: float | None
    summary: str

    @property
    def until(self) -> datetime:
        """The end of the shaded span: ``end``, or ``updated`` while open."""
        return self.end or self.updated

    @property
    def percentile_field(self) -> str:
        """The latency document's field of the SLA percentile: 95 -> ``p95``, 99.9 -> ``p99_9``."""
        return f"p{self.sla_percentile:g}".replace(".", "_")


@dataclass(frozen=True)
class IncidentPanel:
    """What the report shows of one incident: a header (escaped HTML) and its figure."""

    incident: Incident
    header_html: str
    figure: go.Figure


def _time(value: Any) -> datetime:  # "2026-11-25T15:40:10.000Z" -> aware (UTC)
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def parse_incident(source: Source) -> Incident:
    """An :class:`Incident` from a document's ``_source``.

    Raises:
        KeyError: ``iolens.incident`` lacks ``id``, ``start``, ``updated`` or ``lun``.
    """
    i = source["iolens"]["incident"]
    sla = i.get("sla") or {}
    rank, value = i.get("persistence_rank"), i.get("persistence_value")
    return Incident(
        id=str(i["id"]),
        status=str(i.get("status", "open")),
        start=_time(i["start"]),
        end=None if i.get("end") is None else _time(i["end"]),
        updated=_time(i["updated"]),
        lun=str(i["lun"]),
        peer_group=str(i.get("peer_group", "")),
        metric=str(i.get("metric", "")),
        mount_point=i.get("mount_point"),
        windows=int(i.get("windows", 0)),
        max_score=float(i.get("max_score", 0.0)),
        persistence_rank=None if rank is None else int(rank),
        persistence_value=None if value is None else float(value),
        jobs=tuple(str(j) for j in i.get("jobs", ())),
        critical_files=tuple(str(f) for f in i.get("critical_files", ())),
        fio_breaches=int(i.get("fio_breaches", 0)),
        fio_jobs=tuple(str(j) for j in i.get("fio_jobs", ())),
        sla_percentile=float(sla.get("percentile", 95.0)),
        sla_under_ms=float(sla.get("under_ms", 0.0)),
        duration_s=i.get("duration_s"),
        summary=str(i.get("summary") or source.get("message") or ""),
    )


def latest_incidents(docs: Iterable[Source], limit: int = MAX_INCIDENTS) -> list[Incident]:
    """The ``limit`` latest incidents by start (ties: by id), latest first; of documents sharing
    an id (a revision written before the in-place update), the highest ``updated``."""
    latest: dict[str, Incident] = {}
    for doc in docs:
        inc = parse_incident(doc)
        if inc.id not in latest or inc.updated > latest[inc.id].updated:
            latest[inc.id] = inc
    ordered = sorted(latest.values(), key=lambda i: (i.start, i.id), reverse=True)
    return ordered[:limit]


# -- one figure per incident -------------------------------------------------------------------


def _plain(t: Any) -> pd.Timestamp:
    """``t`` as a UTC time without a zone: plotly.js reads no offsets in dates (a ``+00:00``
    makes it take a shared time axis for numbers), and columns of times are sent that way."""
    stamp = pd.Timestamp(t)
    return stamp.tz_convert(None) if stamp.tzinfo is not None else stamp


def _span(inc: Incident) -> tuple[pd.Timestamp, pd.Timestamp]:
    """The time shown: the incident with a margin (PAD_MIN, or a quarter of its duration)."""
    pad = max(PAD_MIN, (inc.until - inc.start) / 4)
    return pd.Timestamp(inc.start - pad), pd.Timestamp(inc.until + pad)


def _lines(
    fig: go.Figure, row: int, df: pd.DataFrame, y: str, own: set[str], scale: float = 1.0
) -> None:
    """One line per ``name`` in ``df`` (``df[y] / scale`` over ``time``, broken in its gaps);
    those whose ``match`` (else ``name``) is in ``own`` highlighted and drawn last."""
    key = "match" if "match" in df else "name"
    groups = sorted(df.groupby("name"), key=lambda g: (str(g[1][key].iloc[0]) in own, str(g[0])))
    for name, part in groups:
        mine = str(part[key].iloc[0]) in own
        add_line(
            fig,
            part,
            y,
            scale=scale,
            name=str(name),
            line={"color": HIGHLIGHT if mine else MUTED, "width": 2.5 if mine else 1},
            legendgroup=f"row{row}",
            showlegend=mine,
            row=row,
            col=1,
        )


def _shown(df: pd.DataFrame, lo: pd.Timestamp, hi: pd.Timestamp) -> pd.DataFrame:
    """The rows around ``[lo, hi]``: the lines run on to the edges of the axis."""
    margin = hi - lo
    return df[(df["time"] >= lo - margin) & (df["time"] <= hi + margin)].sort_values("time")


def _peers(inc: Incident, streams: Streams) -> set[str]:
    """The LUNs compared with the incident's: its peer group's, else those of its host."""
    peer = streams.peer
    group = set(peer.loc[peer["group"] == inc.peer_group, "name"].astype(str))
    if group:
        return group | {inc.lun}
    host = inc.lun.split("/", 1)[0]
    return {n for n in streams.disk["name"].astype(str) if n.split("/", 1)[0] == host} | {inc.lun}


def _darshan(fig: go.Figure, inc: Incident, jobs: pd.DataFrame, lo: Any, hi: Any) -> None:
    """Row 4: each Darshan job overlapping the span as a bar from its start to its end."""
    shown = jobs[(jobs["end"] >= lo) & (jobs["start"] <= hi)].sort_values("start")
    for job in shown.itertuples():
        mine = job.job in inc.jobs
        fig.add_scatter(
            x=[_plain(job.start), _plain(job.end)],
            y=[f"job {job.job}"] * 2,
            mode="lines",
            name=f"job {job.job}",
            hovertext=str(job.exe),
            line={"color": HIGHLIGHT if mine else MUTED, "width": 10 if mine else 6},
            legendgroup="row4",
            showlegend=mine,
            row=4,
            col=1,
        )


def _marks(fig: go.Figure, inc: Incident) -> None:
    """The SLA as a dashed line on row 1 and the incident's span shaded on every row."""
    fig.add_hline(
        y=inc.sla_under_ms,
        line_dash="dash",
        line_color=HIGHLIGHT,
        annotation_text=f"SLA: p{inc.sla_percentile:g} under {inc.sla_under_ms:g} ms",
        row=1,
        col=1,
        exclude_empty_subplots=False,
    )
    shade = {"fillcolor": SHADE, "line_width": 0, "layer": "below"}
    for row in range(1, 5):
        fig.add_vrect(
            _plain(inc.start),
            _plain(inc.until),
            row=row,
            col=1,
            exclude_empty_subplots=False,
            **shade,
        )


def incident_figure(inc: Incident, streams: Streams) -> go.Figure:
    """Four rows sharing the time axis (see the module docstring), the span shaded on each."""
    lo, hi = _span(inc)
    fig = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        subplot_titles=[ROWS[0].format(pct=f"{inc.sla_percentile:g}"), *ROWS[1:]],
        row_heights=[0.3, 0.25, 0.25, 0.2],
    )
    _lines(fig, 1, _shown(streams.fio, lo, hi), inc.percentile_field, set(inc.fio_jobs), 1e6)
    disk = _shown(streams.disk, lo, hi)
    _lines(fig, 2, disk[disk["name"].isin(_peers(inc, streams))], "await", {inc.lun})
    peer = _shown(streams.peer, lo, hi)
    peer = peer[(peer["group"] == inc.peer_group) & (peer["metric"] == inc.metric)]
    _lines(fig, 3, peer, "score", {inc.lun})
    _darshan(fig, inc, streams.darshan, lo, hi)
    _marks(fig, inc)
    fig.update_xaxes(type="date", range=[_plain(lo), _plain(hi)])  # a date axis without jobs
    fig.update_xaxes(title=TIME_TITLE, row=4, col=1)
    for row, title in enumerate(Y_TITLES, start=1):
        fig.update_yaxes(title=title.format(pct=f"{inc.sla_percentile:g}"), row=row, col=1)
    fig.update_layout(
        title=f"{inc.lun}: {inc.start:%Y-%m-%d %H:%M:%S} UTC ({inc.status})",
        template="plotly_white",
        height=900,
        margin={"l": 60, "r": 20, "t": 70, "b": 40},
        legend={"orientation": "h", "yanchor": "top", "y": -0.1},
    )
    return fig


def _fmt(value: Any) -> str:
    if value is None or value == ():
        return "-"
    if isinstance(value, datetime):
        return f"{value:%Y-%m-%d %H:%M:%S} UTC"
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def header_html(inc: Incident) -> str:
    """The summary sentence and a table of the incident's fields (escaped HTML)."""
    rank = None if inc.persistence_rank is None else f"#{inc.persistence_rank}"
    rows = [
        ("status", inc.status),
        ("start", inc.start),
        ("end", inc.end or "open"),
        ("duration (s)", inc.duration_s),
        ("LUN", inc.lun),
        ("mount point", inc.mount_point),
        ("peer group / metric", f"{inc.peer_group} / {inc.metric}"),
        ("faulty windows", inc.windows),
        ("highest record score", inc.max_score),
        ("persistence rank / value", f"{_fmt(rank)} / {_fmt(inc.persistence_value)}"),
        ("Darshan jobs", inc.jobs),
        ("critical files on the LUN", inc.critical_files),
        ("fio SLA breaches", inc.fio_breaches),
        ("fio jobs over the SLA", inc.fio_jobs),
        ("SLA", f"p{inc.sla_percentile:g} under {inc.sla_under_ms:g} ms"),
    ]
    cells = "".join(
        f'<tr><th style="text-align:left;padding:2px 12px 2px 0">{html.escape(k)}</th>'
        f"<td>{html.escape(_fmt(v))}</td></tr>"
        for k, v in rows
    )
    return (
        f'<p class="incident-summary"><strong>{html.escape(inc.summary)}</strong></p>'
        f'<table class="incident" style="border-collapse:collapse;font-size:90%">{cells}</table>'
    )


def incident_panels(fetch: Fetch, limit: int = MAX_INCIDENTS) -> list[IncidentPanel]:
    """The ``limit`` latest incidents of the range, each with its header and figure; empty when
    the range holds none (the other streams are then not searched)."""
    sort = ["iolens.incident.id", "iolens.incident.updated"]
    docs = fetch("logs-iolens.incident", ["@timestamp", "message", "iolens.incident"], sort)
    incidents = latest_incidents(docs, limit)
    if not incidents:
        return []
    streams = fetch_streams(fetch, {i.percentile_field for i in incidents})
    return [IncidentPanel(i, header_html(i), incident_figure(i, streams)) for i in incidents]
