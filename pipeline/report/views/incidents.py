"""The report's Incidents view (the figures themselves: :mod:`pipeline.report.incident`)."""

from __future__ import annotations

from pipeline.report.incident import NOTE as INCIDENT_NOTE
from pipeline.report.incident import incident_panels
from pipeline.report.views.base import Fetch, Section


def incident_section(fetch: Fetch) -> Section | None:
    """The latest incidents, each with its summary, fields and figure (seeds 000, 001, 004)."""
    panels = incident_panels(fetch)
    if not panels:
        return None
    figures, headers = tuple(p.figure for p in panels), tuple(p.header_html for p in panels)
    return Section("Incidents", INCIDENT_NOTE, figures, headers)
