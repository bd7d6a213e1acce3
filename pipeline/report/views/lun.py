"""The report's LUN health view (seed 001): the operator's view of the peer comparison.

Await and %util of every LUN over time (``metrics-sysstat.diskio``) and the latest persistence
ranking of the peer comparison, highest accumulators first (``metrics-iolens.persistence``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from pipeline.report.views.base import Fetch, Section, fetch_frame, figure, section

NOTE = (
    "Downsampled sysstat disk metrics (metrics-sysstat.diskio) and the hourly persistence "
    "ranking of the peer comparison (metrics-iolens.persistence)."
)

RANKED = 20
"""LUNs shown in the persistence ranking."""


def disk_figures(fetch: Fetch) -> list[go.Figure]:
    """Await (ms) and %util per LUN (``host/device``) over time; none without documents."""
    fields = {
        "time": "@timestamp",
        "host": "host.name",
        "lun": "system.diskio.name",
        "await": "sysstat.disk.await",
        "util": "sysstat.disk.util",
    }
    df = fetch_frame(fetch, "metrics-sysstat.diskio", fields, ["host.name"])
    if df.empty:
        return []
    df["name"] = df["host"].astype(str) + "/" + df["lun"].astype(str)
    figures = []
    for metric, unit in (("await", "ms"), ("util", "%")):
        fig = figure(f"{'await' if metric == 'await' else '%util'} per LUN", unit)
        for name, part in df.groupby("name"):
            fig.add_scatter(x=part["time"], y=part[metric], mode="lines", name=str(name))
        figures.append(fig)
    return figures


def ranking_figure(fetch: Fetch) -> go.Figure | None:
    """The latest persistence ranking as horizontal bars, rank 1 on top."""
    fields = {
        "time": "@timestamp",
        "lun": "iolens.persistence.lun",
        "group": "iolens.persistence.group",
        "value": "iolens.persistence.value",
        "rank": "iolens.persistence.rank",
    }
    rank = fetch_frame(fetch, "metrics-iolens.persistence", fields)
    if rank.empty:
        return None
    last = rank[rank["time"] == rank["time"].max()].sort_values("rank").head(RANKED)
    fig = figure(f"persistence ranking at {last['time'].iloc[0]:%Y-%m-%d %H:%M}", "")
    fig.add_bar(x=last["value"], y=last["lun"].astype(str), orientation="h", name="rank")
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(title="accumulated anomaly")
    return fig


def lun_section(fetch: Fetch) -> Section | None:
    """Seed 001's operator view: await and %util per LUN, and the persistence ranking."""
    return section("LUN health", NOTE, [*disk_figures(fetch), ranking_figure(fetch)])
