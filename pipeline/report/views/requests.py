"""The report's requests view (seed 002): request durations per cluster of the workload model
(``logs-iolens.request``) and each cluster's requests and outliers."""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go

from pipeline.report.views.base import Fetch, Section, fetch_frame, figure, log_axis

CLUSTER_TITLE = "workload cluster (model #cluster)"
"""The x axis of both figures: one category per cluster of a workload model."""
DURATION_TITLE = "request duration, ms"

NOTE = (
    "Requests extracted from event logs (logs-iolens.request) by cluster of their workload model."
)


def requests_section(fetch: Fetch) -> Section | None:
    """Seed 002: request durations per cluster (ms, log scale), and the clusters' frequencies
    (counts)."""
    fields = {
        "time": "@timestamp",
        "model": "iolens.request.model",
        "cluster": "iolens.request.cluster",
        "duration": "iolens.request.duration_ms",
        "outlier": "iolens.request.outlier",
    }
    df = fetch_frame(fetch, "logs-iolens.request", fields, ["iolens.request.id"])
    if df.empty:
        return None
    df["label"] = df["model"].fillna("-").astype(str) + " #" + df["cluster"].astype(str)
    durations = figure("request duration per cluster", DURATION_TITLE, x_title=CLUSTER_TITLE)
    for label, part in df.groupby("label"):
        durations.add_box(y=part["duration"], name=str(label), boxpoints="outliers")
    log_axis(durations, "y", df["duration"], DURATION_TITLE)
    return Section("Requests", NOTE, (durations, _frequency_figure(df)))


def _frequency_figure(df: pd.DataFrame) -> go.Figure:
    """Requests and outliers per cluster ``label`` of the requests table ``df``."""
    counts = df.groupby("label").agg(requests=("duration", "size"), outliers=("outlier", "sum"))
    title = "workload model: requests and outliers per cluster"
    fig = figure(title, "requests, count", x_title=CLUSTER_TITLE)
    fig.add_bar(x=list(counts.index), y=counts["requests"], name="requests")
    fig.add_bar(x=list(counts.index), y=counts["outliers"].astype(int), name="outliers")
    return fig
