"""The report's fio latency view (seed 000): the live percentile plots.

Cluster-wide p50/p90/p95/p99/p99.9 per direction over time, the p99 of each host, samples per
interval (``metrics-fio.latency``; of each interval the latest revision, the one that merged the
most records), and a heatmap of the per-record latency histograms (``metrics-fio.histogram``).
"""

from __future__ import annotations

import math
from collections import defaultdict

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go

from pipeline.report.views.base import Fetch, Section, fetch_frame, field, figure

PERCENTILES = ("p50", "p90", "p95", "p99", "p99_9")
"""The latency percentiles drawn, as the latency documents name them."""

NOTE = (
    "Merged percentiles of every interval (the latest revision of each), from "
    "metrics-fio.latency; the heatmap sums the per-record histograms of metrics-fio.histogram."
)

_FIELDS = {
    "time": "@timestamp",
    "scope": "iolens.scope",
    "host": "host.name",
    "ddir": "fio.ddir",
    "start": "fio.interval.start_ms",
    "records": "fio.records",
    "samples": "fio.clat_ns.samples",
    **{p: f"fio.clat_ns.{p}" for p in PERCENTILES},
}


def latest_intervals(fetch: Fetch) -> pd.DataFrame:
    """``metrics-fio.latency`` in range, each interval's latest revision, by time."""
    df = fetch_frame(fetch, "metrics-fio.latency", _FIELDS)
    if df.empty:
        return df
    # each key's latest revision: the one that merged the most records
    df = df.sort_values("records").drop_duplicates(["scope", "host", "ddir", "start"], keep="last")
    return df.sort_values("time")


def percentile_figures(cluster: pd.DataFrame) -> list[go.Figure]:
    """One figure per direction: the cluster-wide percentiles over time (ms, log scale)."""
    figures = []
    for ddir, part in cluster.groupby("ddir"):
        fig = figure(f"fio completion latency, cluster-wide, {ddir}", "ms", log_y=True)
        for p in PERCENTILES:
            if part[p].notna().any():
                name = p.replace("_", ".")
                fig.add_scatter(x=part["time"], y=part[p] / 1e6, mode="lines", name=name)
        figures.append(fig)
    return figures


def host_p99_figure(hosts: pd.DataFrame) -> go.Figure:
    """The p99 of each host over time (its ``mixed`` direction when it has one)."""
    fig = figure("fio p99 completion latency per host (all directions)", "ms", log_y=True)
    mixed = hosts[hosts["ddir"] == "mixed"]
    for host, part in (mixed if not mixed.empty else hosts).groupby("host"):
        fig.add_scatter(x=part["time"], y=part["p99"] / 1e6, mode="lines", name=str(host))
    return fig


def samples_figure(cluster: pd.DataFrame) -> go.Figure:
    """Samples per interval, stacked by direction (``mixed`` left out)."""
    fig = figure("fio samples per interval, cluster-wide", "samples")
    for ddir, part in cluster.groupby("ddir"):
        if ddir != "mixed":
            fig.add_bar(x=part["time"], y=part["samples"], name=str(ddir))
    fig.update_layout(barmode="stack")
    return fig


def heatmap_figure(fetch: Fetch) -> go.Figure | None:
    """Samples per (time, latency decade/4) from the per-record histograms."""
    fields = ["@timestamp", "fio.clat_ns.histogram"]
    cells: dict[tuple[str, float], int] = defaultdict(int)
    for d in fetch("metrics-fio.histogram", fields, ["fio.ddir", "host.name"]):
        hist = field(d, "fio.clat_ns.histogram")
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
    fig = figure("fio completion latency heatmap (samples)", "latency, ms (log bins)")
    fig.add_heatmap(
        x=pd.to_datetime(times, utc=True),
        y=[10**b for b in bins],
        z=z,
        colorscale="Viridis",
        colorbar={"title": "samples"},
    )
    fig.update_yaxes(type="log")
    return fig


def fio_section(fetch: Fetch) -> Section | None:
    """Seed 000's live percentile plots, per host, samples per interval, a heatmap."""
    df = latest_intervals(fetch)
    if df.empty:
        return None
    cluster, hosts = df[df["scope"] == "cluster"], df[df["scope"] == "host"]
    figures = percentile_figures(cluster)
    if not hosts.empty:
        figures.append(host_p99_figure(hosts))
    if not cluster.empty:
        figures.append(samples_figure(cluster))
    heat = heatmap_figure(fetch)
    if heat is not None:
        figures.append(heat)
    return Section("fio latency", NOTE, tuple(figures))
