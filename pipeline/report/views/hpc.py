"""The report's HPC I/O view (seed 004): Darshan jobs, their diagnoses, and Lustre OST load.

Each job's critical-path bandwidth against the data it moved (``logs-darshan.job``), the mean
factors of the low-bandwidth jobs' root-cause diagnoses (``logs-iolens.io_diagnosis``: the
shares on an axis of their own, 0-1, beside the counts, OSTs and processes per OST), and the
load of each OST from LMT (``metrics-lmt.ost``, whose ``@timestamp`` is an interval's start:
each point is drawn at its interval's end, as every time axis of the report).
"""

from __future__ import annotations

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from pipeline.report.views.base import (
    Fetch,
    Section,
    add_line,
    fetch_frame,
    figure,
    log_axis,
    section,
    style,
    time_figure,
)

NOTE = (
    "Darshan job rows (logs-darshan.job), the root-cause diagnoses of low-bandwidth jobs "
    "(logs-iolens.io_diagnosis) and per-OST load (metrics-lmt.ost)."
)

SHARES = {
    "small": "requests of at most 1 MiB",
    "small_1k": "requests under 1 KiB",
    "non_consec": "non-consecutive requests",
    "coll": "collective requests",
}
"""The diagnosis factors that are shares (0-1) of the critical files' requests, weighted by
exclusive time (``iolens.io_diagnosis.factors.<name>``), and how the chart names them."""
COUNTS = {"ost_count": "OSTs", "proc_per_ost": "processes per OST"}
"""The diagnosis factors that are counts, weighted the same way, and how the chart names them."""
FACTORS = (*SHARES, *COUNTS)
"""Every diagnosis factor drawn."""

MIB = 2**20


def bandwidth_figure(fetch: Fetch) -> go.Figure | None:
    """Each job's critical-path bandwidth (MiB/s) against the MiB it read and wrote."""
    fields = {
        "time": "@timestamp",
        "exe": "darshan.job.exe",
        "job": "darshan.job.id",
        "bytes_read": "darshan.job.bytes_read",
        "bytes_written": "darshan.job.bytes_written",
        "bw": "darshan.job.critical_bytes_per_s",
        "nprocs": "darshan.job.nprocs",
    }
    jobs = fetch_frame(fetch, "logs-darshan.job", fields, ["darshan.log.id"])
    jobs = jobs[jobs["bw"].notna()] if not jobs.empty else jobs
    if jobs.empty:
        return None
    moved = (jobs["bytes_read"].fillna(0) + jobs["bytes_written"].fillna(0)) / MIB
    bandwidth = jobs["bw"] / MIB
    x_title, y_title = "data moved (read + written), MiB", "critical-path bandwidth, MiB/s"
    title = "Darshan jobs: critical-path bandwidth against data moved"
    fig = figure(title, y_title, x_title=x_title)
    fig.add_scatter(
        x=moved,
        y=bandwidth,
        mode="markers",
        text=jobs["exe"].astype(str),
        marker={"size": 8},
        name="jobs",
    )
    log_axis(fig, "x", moved, x_title)
    log_axis(fig, "y", bandwidth, y_title)
    return fig


def factors_figure(fetch: Fetch) -> go.Figure | None:
    """The mean of each factor over the diagnoses in range: the shares (0-1) on the left, on an
    axis from 0 to 1, the counts (OSTs, processes per OST) on the right, on an axis of their
    own, each bar labelled with its value. None without diagnoses."""
    fields = {f: f"iolens.io_diagnosis.factors.{f}" for f in FACTORS}
    diag = fetch_frame(fetch, "logs-iolens.io_diagnosis", fields)
    if diag.empty:
        return None
    mean = {f: float(pd.to_numeric(diag[f], errors="coerce").mean()) for f in FACTORS}
    fig = make_subplots(
        rows=1,
        cols=2,
        column_widths=[0.65, 0.35],
        horizontal_spacing=0.12,
        subplot_titles=("shares of the critical files' requests", "counts"),
    )
    for col, names, fmt in ((1, SHARES, ".2f"), (2, COUNTS, ".1f")):
        values = [mean[f] for f in names]
        fig.add_bar(
            x=list(names.values()),
            y=values,
            text=[f"{v:{fmt}}" for v in values],
            name="mean share" if col == 1 else "mean count",
            row=1,
            col=col,
        )
    n = len(diag)
    title = (
        f"low-bandwidth jobs: contributing factors (mean of {n} diagnos{'is' if n == 1 else 'es'})"
    )
    style(fig, title).update_layout(showlegend=False, margin_t=80)
    fig.update_xaxes(title="factor")
    fig.update_yaxes(title="mean share, 0-1", range=[0, 1], row=1, col=1)
    fig.update_yaxes(title="mean count (OSTs, processes per OST)", rangemode="tozero", row=1, col=2)
    return fig


def ost_load_figure(fetch: Fetch) -> go.Figure | None:
    """Read + write MiB/s of each OST over time, each point at its interval's end (the
    document's ``@timestamp``, the interval's start, plus ``lmt.ost.interval_s``; a document
    without it is left out), a line broken where intervals are missing. An interval whose rates
    are unknown (a counter reset) is a gap too. None without documents."""
    fields = {
        "start": "@timestamp",
        "ost": "lmt.ost.name",
        "read": "lmt.ost.read_bytes_per_s",
        "write": "lmt.ost.write_bytes_per_s",
        "interval_s": "lmt.ost.interval_s",
    }
    lmt = fetch_frame(fetch, "metrics-lmt.ost", fields, ["lmt.ost.name"])
    if lmt.empty:
        return None
    end = pd.to_datetime(lmt["start"], utc=True) + pd.to_timedelta(
        pd.to_numeric(lmt["interval_s"], errors="coerce"), unit="s"
    )
    total = lmt[["read", "write"]].apply(pd.to_numeric, errors="coerce").sum(axis=1, min_count=1)
    load = lmt.assign(time=end, total=total / MIB).dropna(subset=["time"])
    if load.empty:
        return None
    fig = time_figure("OST load from LMT (read + write)", "bandwidth, MiB/s")
    for ost, part in load.groupby("ost"):
        add_line(fig, part, "total", name=str(ost))
    return fig


def hpc_section(fetch: Fetch) -> Section | None:
    """Seed 004: Darshan jobs' bandwidth, low-bandwidth factors, OST load."""
    figures = [bandwidth_figure(fetch), factors_figure(fetch), ost_load_figure(fetch)]
    return section("HPC I/O", NOTE, figures)
