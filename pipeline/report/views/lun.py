"""The report's LUN health view (seed 001): the operator's view of the peer comparison.

Await and %util of every LUN over time (``metrics-sysstat.diskio``) and the latest persistence
ranking of the peer comparison, highest accumulators first (``metrics-iolens.persistence``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from pipeline.report.views.base import (
    Fetch,
    Section,
    add_line,
    fetch_frame,
    figure,
    section,
    time_figure,
)

NOTE = (
    "Downsampled sysstat disk metrics (metrics-sysstat.diskio) and the hourly persistence "
    "ranking of the peer comparison (metrics-iolens.persistence)."
)

RANKED = 20
"""LUNs shown in the persistence ranking."""


METRICS = (("await", "await per LUN", "await, ms"), ("util", "%util per LUN", "%util, percent"))
"""Of each disk figure: the column drawn, the figure's title and its y axis title."""


def disk_figures(fetch: Fetch) -> list[go.Figure]:
    """Await (ms) and %util (percent, 0-100) per LUN (``host/device``) over time, at each
    interval's end, a line broken where intervals are missing; none without documents."""
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
    for metric, title, y_title in METRICS:
        fig = time_figure(title, y_title)
        for name, part in df.groupby("name"):
            add_line(fig, part, metric, name=str(name))
        figures.append(fig)
    return figures


def ranking_figure(fetch: Fetch) -> go.Figure | None:
    """The latest persistence ranking as horizontal bars, rank 1 on top (its ``@timestamp``,
    the end of the ranking period, an hour by default, in the title)."""
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
    title = f"persistence ranking, period ending {last['time'].iloc[0]:%Y-%m-%d %H:%M} UTC"
    x_title = "persistence accumulator, windows (+1 anomalous, -1 not)"
    fig = figure(title, "LUN (host/device)", x_title=x_title)
    fig.add_bar(x=last["value"], y=last["lun"].astype(str), orientation="h", name="rank")
    fig.update_yaxes(autorange="reversed")
    return fig


def lun_section(fetch: Fetch) -> Section | None:
    """Seed 001's operator view: await and %util per LUN, and the persistence ranking."""
    return section("LUN health", NOTE, [*disk_figures(fetch), ranking_figure(fetch)])
