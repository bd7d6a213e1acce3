"""The report's HPC I/O view (seed 004): Darshan jobs, their diagnoses, and Lustre OST load.

Each job's critical-path bandwidth against the data it moved (``logs-darshan.job``), the mean
share of each factor of the low-bandwidth jobs' root-cause diagnoses
(``logs-iolens.io_diagnosis``), and the load of each OST from LMT (``metrics-lmt.ost``).
"""

from __future__ import annotations

import plotly.graph_objects as go

from pipeline.report.views.base import Fetch, Section, fetch_frame, figure, section

NOTE = (
    "Darshan job rows (logs-darshan.job), the root-cause diagnoses of low-bandwidth jobs "
    "(logs-iolens.io_diagnosis) and per-OST load (metrics-lmt.ost)."
)

FACTORS = ("ost_count", "small", "small_1k", "non_consec", "coll", "proc_per_ost")
"""The diagnosis factors drawn (``iolens.io_diagnosis.factors.<name>``)."""

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
    fig = figure("Darshan jobs: critical-path bandwidth against data moved", "MiB/s")
    fig.add_scatter(
        x=moved,
        y=jobs["bw"] / MIB,
        mode="markers",
        text=jobs["exe"].astype(str),
        marker={"size": 8},
        name="jobs",
    )
    fig.update_xaxes(title="MiB read + written", type="log")
    fig.update_yaxes(type="log")
    return fig


def factors_figure(fetch: Fetch) -> go.Figure | None:
    """The mean share of each factor over the diagnoses in range."""
    fields = {f: f"iolens.io_diagnosis.factors.{f}" for f in FACTORS}
    diag = fetch_frame(fetch, "logs-iolens.io_diagnosis", fields)
    if diag.empty:
        return None
    fig = figure("low-bandwidth jobs: contributing factors (mean share)", "share")
    fig.add_bar(x=list(FACTORS), y=[diag[f].astype(float).mean() for f in FACTORS])
    return fig


def ost_load_figure(fetch: Fetch) -> go.Figure | None:
    """Read + write MiB/s of each OST over time."""
    fields = {
        "time": "@timestamp",
        "ost": "lmt.ost.name",
        "read": "lmt.ost.read_bytes_per_s",
        "write": "lmt.ost.write_bytes_per_s",
    }
    lmt = fetch_frame(fetch, "metrics-lmt.ost", fields, ["lmt.ost.name"])
    if lmt.empty:
        return None
    load = lmt.assign(total=(lmt["read"].fillna(0) + lmt["write"].fillna(0)) / MIB)
    fig = figure("OST load from LMT (read + write)", "MiB/s")
    for ost, part in load.groupby("ost"):
        fig.add_scatter(x=part["time"], y=part["total"], mode="lines", name=str(ost))
    return fig


def hpc_section(fetch: Fetch) -> Section | None:
    """Seed 004: Darshan jobs' bandwidth, low-bandwidth factors, OST load."""
    figures = [bandwidth_figure(fetch), factors_figure(fetch), ost_load_figure(fetch)]
    return section("HPC I/O", NOTE, figures)
