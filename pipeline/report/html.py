"""``iolens report``: the dashboards' views as one self-contained HTML file.

For places without Kibana: the same views as the dashboards (fio latency, LUN health, HPC I/O,
requests, pipeline health), as interactive plotly figures in one HTML file that carries
plotly.js inline and needs no network. Every figure is built from plain searches (documents
fetched with ``search_after`` and summed here, no aggregation the embedded development server
lacks), over ``[since, until)`` of ``@timestamp``. A section whose data streams hold nothing in
that range is left out, and the report says so, so that every plot shown has data.

Views (each a function ``(fetch) -> list[Figure]``):

* incidents, first and only when the range holds some (:mod:`pipeline.report.incident`): the
  latest incidents, each with its summary, its fields and one figure of fio job latency, await,
  the peer comparison's score and the Darshan jobs on a shared time axis;
* fio latency (seed 000): cluster-wide p50/p90/p95/p99/p99.9 per direction over time, the p99 of
  each host, samples per interval, and a heatmap of the per-record latency histograms;
* LUN health (seed 001): await and %util of every LUN over time, colored by peer group, and the
  persistence ranking (the highest accumulators of the last hour ranked);
* HPC I/O (seed 004): Darshan jobs' bandwidth against the bytes they moved, the low-bandwidth
  jobs' factors, and the OSTs' load from LMT;
* requests (seed 002): request duration per cluster of the workload model and the clusters'
  frequencies;
* pipeline health (seed 003): the stages' service rates over time.
"""

from __future__ import annotations

import html
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from pipeline.report.incident import NOTE as INCIDENT_NOTE
from pipeline.report.incident import incident_panels
from pipeline.sink.search import iter_hits

PERCENTILES = ("p50", "p90", "p95", "p99", "p99_9")
"""The latency percentiles drawn, as the latency documents name them."""

Fetch = Callable[[str, Sequence[str], Sequence[str]], list[Mapping[str, Any]]]
"""``(data stream, fields to fetch, sort fields) -> _source`` of every document in range."""


@dataclass(frozen=True)
class Section:
    """One view of the report: a title, a line of explanation and its figures; ``headers[k]``
    (escaped HTML) is shown above figure ``k``."""

    title: str
    note: str
    figures: tuple[go.Figure, ...]
    headers: tuple[str, ...] = ()


def searcher(client: Any, namespace: str, since: datetime, until: datetime) -> Fetch:
    """A :data:`Fetch` over ``<stream>-<namespace>`` in ``[since, until)``.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """
    query = {
        "range": {
            "@timestamp": {
                "gte": since.astimezone(UTC).isoformat(),
                "lt": until.astimezone(UTC).isoformat(),
            }
        }
    }

    def fetch(stream: str, fields: Sequence[str], sort: Sequence[str]) -> list[Mapping[str, Any]]:
        order = [{f: "asc"} for f in ("@timestamp", *sort)]
        return [
            h["_source"]
            for h in iter_hits(client, f"{stream}-{namespace}", query, order, source=list(fields))
        ]

    return fetch


def _get(doc: Mapping[str, Any], path: str) -> Any:
    cur: Any = doc
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _frame(docs: Iterable[Mapping[str, Any]], fields: Mapping[str, str]) -> pd.DataFrame:
    """Documents as a table: column -> dotted field path; ``@timestamp`` parsed (UTC)."""
    rows = [{col: _get(d, path) for col, path in fields.items()} for d in docs]
    df = pd.DataFrame(rows, columns=list(fields))
    if "time" in df and len(df):
        df["time"] = pd.to_datetime(df["time"], utc=True)
    return df


def _figure(title: str, y_title: str, *, log_y: bool = False) -> go.Figure:
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


def incident_section(fetch: Fetch) -> Section | None:
    """The latest incidents, each with its summary, fields and figure (seeds 000, 001, 004)."""
    panels = incident_panels(fetch)
    if not panels:
        return None
    figures, headers = tuple(p.figure for p in panels), tuple(p.header_html for p in panels)
    return Section("Incidents", INCIDENT_NOTE, figures, headers)


# -- fio latency -------------------------------------------------------------------------------


def fio_section(fetch: Fetch) -> Section | None:
    """Seed 000's live percentile plots, per host, samples per interval, a heatmap."""
    fields = {
        "time": "@timestamp",
        "scope": "iolens.scope",
        "host": "host.name",
        "ddir": "fio.ddir",
        "start": "fio.interval.start_ms",
        "records": "fio.records",
        "samples": "fio.clat_ns.samples",
        **{p: f"fio.clat_ns.{p}" for p in PERCENTILES},
    }
    df = _frame(fetch("metrics-fio.latency", list(fields.values()), []), fields)
    if df.empty:
        return None
    # each key's latest revision: the one that merged the most records
    df = df.sort_values("records").drop_duplicates(["scope", "host", "ddir", "start"], keep="last")
    df = df.sort_values("time")
    figures: list[go.Figure] = []
    cluster = df[df["scope"] == "cluster"]
    for ddir, part in cluster.groupby("ddir"):
        fig = _figure(f"fio completion latency, cluster-wide, {ddir}", "ms", log_y=True)
        for p in PERCENTILES:
            if part[p].notna().any():
                name = p.replace("_", ".")
                fig.add_scatter(x=part["time"], y=part[p] / 1e6, mode="lines", name=name)
        figures.append(fig)
    hosts = df[df["scope"] == "host"]
    if not hosts.empty:
        fig = _figure("fio p99 completion latency per host (all directions)", "ms", log_y=True)
        mixed = hosts[hosts["ddir"] == "mixed"]
        for host, part in (mixed if not mixed.empty else hosts).groupby("host"):
            fig.add_scatter(x=part["time"], y=part["p99"] / 1e6, mode="lines", name=str(host))
        figures.append(fig)
    if not cluster.empty:
        fig = _figure("fio samples per interval, cluster-wide", "samples")
        for ddir, part in cluster.groupby("ddir"):
            if ddir != "mixed":
                fig.add_bar(x=part["time"], y=part["samples"], name=str(ddir))
        fig.update_layout(barmode="stack")
        figures.append(fig)
    heat = _fio_heatmap(fetch)
    if heat is not None:
        figures.append(heat)
    return Section(
        "fio latency",
        "Merged percentiles of every interval (the latest revision of each), from "
        "metrics-fio.latency; the heatmap sums the per-record histograms of metrics-fio.histogram.",
        tuple(figures),
    )


def _fio_heatmap(fetch: Fetch) -> go.Figure | None:
    """Samples per (time, latency decade/4) from the per-record histograms."""
    fields = ["@timestamp", "fio.clat_ns.histogram"]
    cells: dict[tuple[str, float], int] = defaultdict(int)
    for d in fetch("metrics-fio.histogram", fields, ["fio.ddir", "host.name"]):
        hist = _get(d, "fio.clat_ns.histogram")
        if not hist:
            continue
        t = str(d["@timestamp"])[:19]
        for v, c in zip(hist["values"], hist["counts"], strict=True):
            if v > 0 and c > 0:
                cells[(t, math.floor(math.log10(v / 1e6) * 4) / 4)] += int(c)
    if not cells:
        return None
    times = sorted({t for t, _b in cells})
    bins = sorted({b for _t, b in cells})
    z = [[cells.get((t, b), 0) or None for t in times] for b in bins]
    fig = _figure("fio completion latency heatmap (samples)", "latency, ms (log bins)")
    fig.add_heatmap(
        x=pd.to_datetime(times, utc=True),
        y=[10**b for b in bins],
        z=z,
        colorscale="Viridis",
        colorbar={"title": "samples"},
    )
    fig.update_yaxes(type="log")
    return fig


# -- LUN health --------------------------------------------------------------------------------


def lun_section(fetch: Fetch) -> Section | None:
    """Seed 001's operator view: await and %util per LUN, and the persistence ranking."""
    fields = {
        "time": "@timestamp",
        "host": "host.name",
        "lun": "system.diskio.name",
        "await": "sysstat.disk.await",
        "util": "sysstat.disk.util",
    }
    df = _frame(fetch("metrics-sysstat.diskio", list(fields.values()), ["host.name"]), fields)
    figures: list[go.Figure] = []
    if not df.empty:
        df["name"] = df["host"].astype(str) + "/" + df["lun"].astype(str)
        for metric, unit in (("await", "ms"), ("util", "%")):
            fig = _figure(f"{'await' if metric == 'await' else '%util'} per LUN", unit)
            for name, part in df.groupby("name"):
                fig.add_scatter(x=part["time"], y=part[metric], mode="lines", name=str(name))
            figures.append(fig)
    pfields = {
        "time": "@timestamp",
        "lun": "iolens.persistence.lun",
        "group": "iolens.persistence.group",
        "value": "iolens.persistence.value",
        "rank": "iolens.persistence.rank",
    }
    rank = _frame(fetch("metrics-iolens.persistence", list(pfields.values()), []), pfields)
    if not rank.empty:
        last = rank[rank["time"] == rank["time"].max()].sort_values("rank").head(20)
        fig = _figure(f"persistence ranking at {last['time'].iloc[0]:%Y-%m-%d %H:%M}", "")
        fig.add_bar(x=last["value"], y=last["lun"].astype(str), orientation="h", name="rank")
        fig.update_yaxes(autorange="reversed")
        fig.update_xaxes(title="accumulated anomaly")
        figures.append(fig)
    if not figures:
        return None
    return Section(
        "LUN health",
        "Downsampled sysstat disk metrics (metrics-sysstat.diskio) and the hourly persistence "
        "ranking of the peer comparison (metrics-iolens.persistence).",
        tuple(figures),
    )


# -- HPC I/O -----------------------------------------------------------------------------------


def hpc_section(fetch: Fetch) -> Section | None:
    """Seed 004: Darshan jobs' bandwidth, low-bandwidth factors, OST load."""
    fields = {
        "time": "@timestamp",
        "exe": "darshan.job.exe",
        "job": "darshan.job.id",
        "bytes_read": "darshan.job.bytes_read",
        "bytes_written": "darshan.job.bytes_written",
        "bw": "darshan.job.critical_bytes_per_s",
        "nprocs": "darshan.job.nprocs",
    }
    jobs = _frame(fetch("logs-darshan.job", list(fields.values()), ["darshan.log.id"]), fields)
    figures: list[go.Figure] = []
    jobs = jobs[jobs["bw"].notna()] if not jobs.empty else jobs
    if not jobs.empty:
        moved = (jobs["bytes_read"].fillna(0) + jobs["bytes_written"].fillna(0)) / 2**20
        fig = _figure("Darshan jobs: critical-path bandwidth against data moved", "MiB/s")
        fig.add_scatter(
            x=moved,
            y=jobs["bw"] / 2**20,
            mode="markers",
            text=jobs["exe"].astype(str),
            marker={"size": 8},
            name="jobs",
        )
        fig.update_xaxes(title="MiB read + written", type="log")
        fig.update_yaxes(type="log")
        figures.append(fig)
    dfields = {f: f"iolens.io_diagnosis.factors.{f}" for f in _FACTORS}
    diag = _frame(fetch("logs-iolens.io_diagnosis", list(dfields.values()), []), dfields)
    if not diag.empty:
        fig = _figure("low-bandwidth jobs: contributing factors (mean share)", "share")
        fig.add_bar(x=list(_FACTORS), y=[diag[f].astype(float).mean() for f in _FACTORS])
        figures.append(fig)
    lfields = {
        "time": "@timestamp",
        "ost": "lmt.ost.name",
        "read": "lmt.ost.read_bytes_per_s",
        "write": "lmt.ost.write_bytes_per_s",
    }
    lmt = _frame(fetch("metrics-lmt.ost", list(lfields.values()), ["lmt.ost.name"]), lfields)
    if not lmt.empty:
        load = lmt.assign(total=(lmt["read"].fillna(0) + lmt["write"].fillna(0)) / 2**20)
        fig = _figure("OST load from LMT (read + write)", "MiB/s")
        for ost, part in load.groupby("ost"):
            fig.add_scatter(x=part["time"], y=part["total"], mode="lines", name=str(ost))
        figures.append(fig)
    if not figures:
        return None
    return Section(
        "HPC I/O",
        "Darshan job rows (logs-darshan.job), the root-cause diagnoses of low-bandwidth jobs "
        "(logs-iolens.io_diagnosis) and per-OST load (metrics-lmt.ost).",
        tuple(figures),
    )


_FACTORS = ("ost_count", "small", "small_1k", "non_consec", "coll", "proc_per_ost")


# -- requests ----------------------------------------------------------------------------------


def requests_section(fetch: Fetch) -> Section | None:
    """Seed 002: request durations per cluster, and the clusters' frequencies."""
    fields = {
        "time": "@timestamp",
        "model": "iolens.request.model",
        "cluster": "iolens.request.cluster",
        "duration": "iolens.request.duration_ms",
        "outlier": "iolens.request.outlier",
    }
    df = _frame(fetch("logs-iolens.request", list(fields.values()), ["iolens.request.id"]), fields)
    if df.empty:
        return None
    df["label"] = df["model"].fillna("-").astype(str) + " #" + df["cluster"].astype(str)
    figures: list[go.Figure] = []
    fig = _figure("request duration per cluster", "ms", log_y=True)
    for label, part in df.groupby("label"):
        fig.add_box(y=part["duration"], name=str(label), boxpoints="outliers")
    figures.append(fig)
    counts = df.groupby("label").agg(requests=("duration", "size"), outliers=("outlier", "sum"))
    fig = _figure("workload model: requests and outliers per cluster", "requests")
    fig.add_bar(x=list(counts.index), y=counts["requests"], name="requests")
    fig.add_bar(x=list(counts.index), y=counts["outliers"].astype(int), name="outliers")
    figures.append(fig)
    return Section(
        "Requests",
        "Requests extracted from event logs (logs-iolens.request) by cluster of their workload "
        "model.",
        tuple(figures),
    )


# -- pipeline health ---------------------------------------------------------------------------


def pipeline_section(fetch: Fetch) -> Section | None:
    """Seed 003: the stages' service rates over time."""
    fields = {
        "time": "@timestamp",
        "stage": "iolens.service_rate.stage",
        "rate": "iolens.service_rate.rate_per_s",
        "throughput": "iolens.service_rate.throughput_per_s",
    }
    df = _frame(fetch("metrics-iolens.service_rate", list(fields.values()), []), fields)
    if df.empty:
        return None
    fig = _figure("service rates of the pipeline's stages", "items/s", log_y=True)
    for stage, part in df.groupby("stage"):
        fig.add_scatter(x=part["time"], y=part["rate"], mode="lines+markers", name=str(stage))
    return Section(
        "Pipeline health",
        "Non-blocking service rates of the pipeline's own stages (metrics-iolens.service_rate).",
        (fig,),
    )


SECTIONS: tuple[Callable[[Fetch], Section | None], ...] = (
    incident_section,
    fio_section,
    lun_section,
    hpc_section,
    requests_section,
    pipeline_section,
)
"""Every view, in report order."""

QUIET = frozenset({"incident"})
"""Views left out without being named when empty: a range without incidents lacks no data."""


def build(
    fetch: Fetch,
    since: datetime,
    until: datetime,
    *,
    on_section: Callable[[str], None] = lambda name: None,
) -> tuple[str, list[Section], list[str]]:
    """The report.

    Args:
        fetch: searches (see :func:`searcher`).
        since, until: the range shown (for the heading).
        on_section: called with each view's name before it is queried (a progress bar).

    Returns:
        ``(html, sections shown, names of the views left out for lack of data)``.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """
    shown: list[Section] = []
    empty: list[str] = []
    for view in SECTIONS:
        name = view.__name__.removesuffix("_section")
        on_section(name)
        section = view(fetch)
        if section is None or not section.figures:
            if name not in QUIET:
                empty.append(name)
        else:
            shown.append(section)
    return render(shown, empty, since, until), shown, empty


def render(
    sections: Sequence[Section], empty: Sequence[str], since: datetime, until: datetime
) -> str:
    """One self-contained HTML page: plotly.js inline, then each section's figures."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>iolens report</title>',
        "<style>body{font-family:sans-serif;margin:24px;color:#222}"
        "h2{border-bottom:1px solid #ccc;padding-bottom:4px}.note{color:#555}</style>",
        f"<script>{get_plotlyjs()}</script></head><body>",
        "<h1>iolens report</h1>",
        f"<p class=note>{html.escape(_when(since))} to {html.escape(_when(until))}</p>",
    ]
    if empty:
        parts.append(
            f"<p class=note>No data in this range for: {html.escape(', '.join(empty))}.</p>"
        )
    for n, section in enumerate(sections):
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts.append(f"<p class=note>{html.escape(section.note)}</p>")
        for k, fig in enumerate(section.figures):
            parts.extend(section.headers[k : k + 1])
            parts.append(
                fig.to_html(
                    full_html=False,
                    include_plotlyjs=False,
                    div_id=f"plot-{n}-{k}",
                    config={"displaylogo": False},
                )
            )
    parts.append("</body></html>")
    return "\n".join(parts)


def _when(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def figure_count(sections: Iterable[Section]) -> int:
    """How many plots the sections hold."""
    return sum(len(s.figures) for s in sections)
