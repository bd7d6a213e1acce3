"""``iolens report``: the dashboards' views as one self-contained HTML file.

For places without Kibana: the same views as the dashboards (fio latency, LUN health, HPC I/O,
requests, pipeline health), as interactive plotly figures in one HTML file that carries
plotly.js inline and needs no network. Every figure is built from plain searches (documents
fetched with ``search_after`` and summed here, no aggregation the embedded development server
lacks), over ``[since, until)`` of ``@timestamp``. A section whose data streams hold nothing in
that range is left out, and the report says so, so that every plot shown has data.

Views (each a function ``(fetch) -> Section | None`` in :mod:`pipeline.report.views`):

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from plotly.offline import get_plotlyjs

from pipeline.report.views.base import Fetch, Section
from pipeline.report.views.fio import fio_section
from pipeline.report.views.hpc import hpc_section
from pipeline.report.views.incidents import incident_section
from pipeline.report.views.lun import lun_section
from pipeline.report.views.pipeline_health import pipeline_section
from pipeline.report.views.requests import requests_section

__all__ = ["QUIET", "SECTIONS", "build", "figure_count", "render"]

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

STYLE = (
    "<style>body{font-family:sans-serif;margin:24px;color:#222}"
    "h2{border-bottom:1px solid #ccc;padding-bottom:4px}.note{color:#555}</style>"
)


def build(
    fetch: Fetch,
    since: datetime,
    until: datetime,
    *,
    on_section: Callable[[str], None] = lambda name: None,
    shifted: Mapping[str, tuple[datetime, datetime]] | None = None,
) -> tuple[str, list[Section], list[str]]:
    """The report.

    Args:
        fetch: searches (see :func:`searcher`).
        since, until: the range shown (for the heading).
        on_section: called with each view's name before it is queried (a progress bar).
        shifted: the streams ``fetch`` read in another range (``searcher``'s ``shifted``,
            filled while the views run), named under the heading.

    Returns:
        ``(html, sections shown, names of the views left out for lack of data)``.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """
    shown, empty = run_views(fetch, on_section)
    return render(shown, empty, since, until, shifted or {}), shown, empty


def run_views(fetch: Fetch, on_section: Callable[[str], None]) -> tuple[list[Section], list[str]]:
    """Each view of :data:`SECTIONS` in order: ``(sections with figures, names of the views
    without data)``, the :data:`QUIET` ones left out of the second list."""
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
    return shown, empty


def render(
    sections: Sequence[Section],
    empty: Sequence[str],
    since: datetime,
    until: datetime,
    shifted: Mapping[str, tuple[datetime, datetime]] | None = None,
) -> str:
    """One self-contained HTML page: plotly.js inline, then each section's figures (``shifted``:
    streams shown in another range, as :func:`build`)."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>iolens report</title>',
        STYLE,
        f"<script>{get_plotlyjs()}</script></head><body>",
        "<h1>iolens report</h1>",
        f"<p class=note>{html.escape(_when(since))} to {html.escape(_when(until))}</p>",
    ]
    parts += [
        f"<p class=note>Nothing in this range in {html.escape(stream)}: its newest data is shown, "
        f"{html.escape(_when(lo))} to {html.escape(_when(hi))}.</p>"
        for stream, (lo, hi) in sorted((shifted or {}).items())
    ]
    if empty:
        parts.append(
            f"<p class=note>No data in this range for: {html.escape(', '.join(empty))}.</p>"
        )
    for n, section in enumerate(sections):
        parts += _section_html(n, section)
    parts.append("</body></html>")
    return "\n".join(parts)


def _section_html(n: int, section: Section) -> list[str]:
    """The HTML parts of section number ``n``: heading, note, each header and figure."""
    parts = [
        f"<h2>{html.escape(section.title)}</h2>",
        f"<p class=note>{html.escape(section.note)}</p>",
    ]
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
    return parts


def _when(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def figure_count(sections: Iterable[Section]) -> int:
    """How many plots the sections hold."""
    return sum(len(s.figures) for s in sections)
