"""The report's pipeline-health view (seed 003): the service rates of the pipeline's own
stages over time (``metrics-iolens.service_rate``)."""

from __future__ import annotations

from pipeline.report.views.base import Fetch, Section, fetch_frame, figure

NOTE = "Non-blocking service rates of the pipeline's own stages (metrics-iolens.service_rate)."


def pipeline_section(fetch: Fetch) -> Section | None:
    """Seed 003: the stages' service rates over time."""
    fields = {
        "time": "@timestamp",
        "stage": "iolens.service_rate.stage",
        "rate": "iolens.service_rate.rate_per_s",
        "throughput": "iolens.service_rate.throughput_per_s",
    }
    df = fetch_frame(fetch, "metrics-iolens.service_rate", fields)
    if df.empty:
        return None
    fig = figure("service rates of the pipeline's stages", "items/s", log_y=True)
    for stage, part in df.groupby("stage"):
        fig.add_scatter(x=part["time"], y=part["rate"], mode="lines+markers", name=str(stage))
    return Section("Pipeline health", NOTE, (fig,))
