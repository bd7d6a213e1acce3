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

from pipeline.report.views.base import (
    Fetch,
    Section,
    add_line,
    fetch_frame,
    field,
    gaps,
    log_axis,
    time_figure,
)

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


LATENCY_TITLE = "completion latency, ms"
"""The title of the latency axes (log scale)."""


def percentile_figures(cluster: pd.DataFrame) -> list[go.Figure]:
    """One figure per direction: the cluster-wide percentiles over time (ms, log scale), each
    line broken where intervals are missing."""
    figures = []
    for ddir, part in cluster.groupby("ddir"):
        fig = time_figure(f"fio completion latency, cluster-wide, {ddir}", LATENCY_TITLE)
        drawn = [p for p in PERCENTILES if part[p].notna().any()]
        for p in drawn:
            add_line(fig, part, p, scale=1e6, name=p.replace("_", "."))
        log_axis(
            fig, "y", pd.concat([part[p] / 1e6 for p in drawn]) if drawn else [], LATENCY_TITLE
        )
        figures.append(fig)
    return figures


def host_p99_figure(hosts: pd.DataFrame) -> go.Figure:
    """The p99 of each host over time (ms, log scale; its ``mixed`` direction when it has one)."""
    title = "fio p99 completion latency per host (all directions)"
    fig = time_figure(title, LATENCY_TITLE)
    mixed = hosts[hosts["ddir"] == "mixed"]
    shown = mixed if not mixed.empty else hosts
    for host, part in shown.groupby("host"):
        add_line(fig, part, "p99", scale=1e6, name=str(host))
    log_axis(fig, "y", shown["p99"] / 1e6, LATENCY_TITLE)
    return fig


def samples_figure(cluster: pd.DataFrame) -> go.Figure:
    """Samples per interval, stacked by direction (``mixed`` left out)."""
    fig = time_figure("fio samples per interval, cluster-wide", "samples, count")
    for ddir, part in cluster.groupby("ddir"):
        if ddir != "mixed":
            fig.add_bar(x=part["time"], y=part["samples"], name=str(ddir))
    fig.update_layout(barmode="stack")
    return fig


def heat_cells(fetch: Fetch) -> dict[tuple[str, float], int]:
    """Samples per (record ``@timestamp`` to the second, UTC; latency quarter decade: the
    floor of 4 x log10(ms) / 4) of the per-record histograms (``metrics-fio.histogram``)."""
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
    return cells


def heatmap_figure(fetch: Fetch) -> go.Figure | None:
    """Samples per (time, latency quarter decade) from the per-record histograms; the time is
    each record's ``@timestamp`` (its window's end), a missing interval an empty column. None
    without histograms."""
    cells = heat_cells(fetch)
    if not cells:
        return None
    stamps = sorted({t for t, _b in cells})
    lo, hi = min(b for _t, b in cells), max(b for _t, b in cells)
    bins = [lo + k / 4 for k in range(round((hi - lo) * 4) + 1)]  # every quarter decade
    z = [[cells.get((t, b), 0) or None for t in stamps] for b in bins]
    times = [pd.Timestamp(t) for t in stamps]
    for i in reversed(gaps(times)):  # a missing interval: an empty column, not a wide cell
        times.insert(i, times[i - 1] + (times[i] - times[i - 1]) / 2)
        for row in z:
            row.insert(i, None)
    title = "latency, ms (quarter-decade bins)"
    fig = time_figure("fio completion latency heatmap (samples)", title)
    edges = [10**b for b in (*bins, hi + 0.25)]  # bin b: [10**b, 10**(b + 1/4)) ms
    fig.add_heatmap(x=times, y=edges, z=z, colorscale="Viridis", colorbar={"title": "samples"})
    log_axis(fig, "y", edges, title)
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
