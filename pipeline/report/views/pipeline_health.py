"""The report's pipeline-health view (seed 003): the service rates of the pipeline's own
stages over time (``metrics-iolens.service_rate``).

A document's ``@timestamp`` is when its estimate converged: the end of the sampling periods it
was made from, drawn on the report's time axis (:data:`~pipeline.report.views.base.TIME_TITLE`).
"""

from __future__ import annotations

from pipeline.report.views.base import (
    Fetch,
    Section,
    add_line,
    fetch_frame,
    log_axis,
    time_figure,
)

NOTE = "Non-blocking service rates of the pipeline's own stages (metrics-iolens.service_rate)."


def pipeline_section(fetch: Fetch) -> Section | None:
    """Seed 003: the stages' service rates over time (items/s, log scale), each line broken
    where estimates are missing."""
    fields = {
        "time": "@timestamp",
        "stage": "iolens.service_rate.stage",
        "rate": "iolens.service_rate.rate_per_s",
        "throughput": "iolens.service_rate.throughput_per_s",
    }
    df = fetch_frame(fetch, "metrics-iolens.service_rate", fields)
    if df.empty:
        return None
    y_title = "service rate, items/s"
    fig = time_figure("service rates of the pipeline's stages", y_title)
    for stage, part in df.groupby("stage"):
        add_line(fig, part, "rate", name=str(stage), mode="lines+markers")
    log_axis(fig, "y", df["rate"], y_title)
    return Section("Pipeline health", NOTE, (fig,))
