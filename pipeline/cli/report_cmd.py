"""``iolens report [--since T] [--until T] [--out report.html]``: the dashboards as one HTML file.

The views of the Kibana dashboards (fio latency, LUN health, HPC I/O, requests, pipeline
health) as interactive plots in one self-contained file (plotly.js inline), for places without
Kibana; built from searches that the embedded development server answers too. ``--since`` and
``--until`` take ISO 8601 times (a date, or date and time; UTC unless an offset is given) or a
duration back from now (``90m``, ``6h``, ``7d``). Without either, the report covers the last
7 days, and a data stream with nothing in them is shown over the 7 days up to its newest
document instead (named under the report's heading): a cluster that holds only older data, such
as the demo's recordings, still gets a full report.
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.errors import ConfigError
from pipeline.report.html import SECTIONS, build, figure_count
from pipeline.report.views.base import searcher

_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_SPAN = timedelta(days=7)
"""The range of a report without ``--since``/``--until``."""


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "the dashboards' views as one self-contained HTML file", __doc__)
    p.add_argument("--since", help="start: ISO time or a duration ago (default: 7d)")
    p.add_argument("--until", help="end: ISO time or a duration ago (default: now)")
    p.add_argument("--out", type=Path, default=Path("report.html"), help="the HTML file")


def when(text: str, now: datetime) -> datetime:
    """An ISO 8601 time (UTC when it has no offset) or a duration before ``now``.

    Raises:
        ConfigError: neither.
    """
    m = _AGO.fullmatch(text.strip())
    if m:
        return now - timedelta(seconds=float(m[1]) * _UNITS[m[2]])
    try:
        t = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(
            f"{text!r} is neither an ISO 8601 time nor a duration such as 6h or 7d"
        ) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def run(args: argparse.Namespace) -> int:
    """Query, render, write; prints what it left out."""
    now = datetime.now(UTC)
    since = when(args.since or "7d", now)
    until = when(args.until, now) if args.until else now
    if since >= until:
        raise ConfigError(f"--since ({since:%Y-%m-%d %H:%M}) is not before --until")
    settings = settings_from_args(args)
    latest = None if args.since or args.until else DEFAULT_SPAN
    with Cluster(settings) as cluster:
        write_report(
            cluster.client, settings.elasticsearch.namespace, args.out, (since, until), latest
        )
    return 0


def write_report(
    client: Any,
    namespace: str,
    out: Path,
    span: tuple[datetime, datetime],
    latest: timedelta | None,
) -> None:
    """Query the views over ``span`` (``latest``: as :func:`~pipeline.report.html.searcher`),
    write the page to ``out`` and say on stderr what it holds.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
        OSError: ``out`` cannot be written.
    """
    console = Console(stderr=True)
    shifted: dict[str, tuple[datetime, datetime]] = {}
    fetch = searcher(client, namespace, *span, latest=latest, shifted=shifted)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("querying", total=len(SECTIONS))

        def step(name: str) -> None:
            progress.update(task, advance=1, description=f"querying {name}")

        page, shown, empty = build(fetch, *span, on_section=step, shifted=shifted)
    out.write_text(page, encoding="utf-8")
    console.print(
        f"{out}: {figure_count(shown)} plots in {len(shown)} sections"
        + (f"; no data for {', '.join(empty)}" if empty else "")
        + (f"; older data shown for {', '.join(sorted(shifted))}" if shifted else ""),
        soft_wrap=True,
        highlight=False,
    )
