"""Every figure of the report reads right: log axes with readable ticks, every axis titled with
its unit, one title on every time axis, shares never on an axis with counts, and lines broken
where intervals are missing.

The figures are those :func:`pipeline.report.html.build` draws from documents shaped as the
pipeline writes them: the fixtures of ``test_html_sections`` (LUN health, HPC I/O, requests,
pipeline health) and ``test_incident_section`` (the Incidents view and fio's latency
documents), plus fio histogram records and host-scope latencies made here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go
import pytest

from pipeline.report.html import build
from pipeline.report.views.base import TIME_TITLE, gapped, gaps, log_ticks
from pipeline.report.views.hpc import COUNTS, SHARES, factors_figure, ost_load_figure
from tests.report.test_html_sections import DOCS
from tests.report.test_incident_section import T0, fake_fetch, iso, latency, stream_docs

EVERY_VIEW = ["Incidents", "fio latency", "LUN health", "HPC I/O", "Requests", "Pipeline health"]


def histogram(t: datetime) -> dict[str, Any]:
    """A ``metrics-fio.histogram`` record ending at ``t``: bins from 50 us to 20 ms (ns)."""
    values = [5e4, 3e5, 1.2e6, 2e7]
    return {
        "@timestamp": iso(t),
        "fio": {"clat_ns": {"histogram": {"values": values, "counts": [4, 9, 3, 1]}}},
    }


def host_latency(t: datetime, host: str, ddir: str, p99_ms: float) -> dict[str, Any]:
    """A host-scope ``metrics-fio.latency`` document of the interval ending at ``t``."""
    doc = latency(t, "host", ddir, None, p99_ms / 2)
    doc["host"] = {"name": host}
    doc["fio"]["clat_ns"] |= {f"p{p}": p99_ms * 1e6 * f for p, f in ((50, 0.1), (99, 1.0))}
    return doc


def every_view_docs() -> dict[str, list[dict[str, Any]]]:
    """Documents for every view of the report."""
    docs = stream_docs()
    times = [T0 + timedelta(seconds=10 * k) for k in range(12)]
    docs["metrics-fio.latency"] += [
        latency(t, "cluster", "read", None, 0.3 + k) for k, t in enumerate(times)
    ]
    docs["metrics-fio.latency"] += [
        host_latency(t, h, "mixed", 2.0) for t in times for h in ("a", "b")
    ]
    docs["metrics-fio.histogram"] = [histogram(t) for t in times]
    for stream, more in DOCS.items():
        docs[stream] = docs.get(stream, []) + more
    return docs


def figures_of(docs: Mapping[str, list[dict[str, Any]]]) -> list[go.Figure]:
    _page, shown, _empty = build(fake_fetch(docs), T0, T0 + timedelta(hours=1))
    return [f for s in shown for f in s.figures]


ALL = figures_of(every_view_docs())


def test_the_sweep_covers_every_view() -> None:
    _page, shown, empty = build(fake_fetch(every_view_docs()), T0, T0 + timedelta(hours=1))
    assert [s.title for s in shown] == EVERY_VIEW and empty == []
    assert len(ALL) == 2 + 5 + 3 + 3 + 2 + 1  # fio: mixed and read, per host, samples, heatmap


def axes(fig: go.Figure) -> Iterator[tuple[str, Any]]:
    """``(name, axis)`` of every axis the figure's layout or traces name (``xaxis``, ``yaxis2``)."""
    names = {k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis"))}
    for trace in fig.data:
        for ref in (trace.xaxis or "x", trace.yaxis or "y"):
            names.add(f"{ref[0]}axis{ref[1:]}")
    for name in sorted(names):
        yield name, fig.layout[name]


def title_of(fig: go.Figure, axis: Any) -> str | None:
    """An axis' title; a matching axis (a shared time axis) has the title of the one it matches."""
    if axis.matches:
        axis = fig.layout[f"{axis.matches[0]}axis{axis.matches[1:]}"]
    return axis.title.text


def is_time(values: Sequence[Any] | None) -> bool:
    return any(
        isinstance(v, datetime | np.datetime64) for v in (values if values is not None else ())
    )


@pytest.mark.parametrize("fig", ALL, ids=lambda f: f.layout.title.text)
def test_every_axis_is_titled_and_every_log_axis_has_readable_ticks(fig: go.Figure) -> None:
    for name, axis in axes(fig):
        assert title_of(fig, axis), f"{name} has no title"
        if axis.type != "log":
            continue
        assert axis.tickmode == "array" and axis.tickvals, f"{name}: plotly's minor digits"
        assert axis.dtick not in ("D1", "D2")
        assert list(axis.ticktext) == [f"{v:g}" for v in axis.tickvals]
        assert (
            axis.range[0] < np.log10(axis.tickvals[0]) < np.log10(axis.tickvals[-1]) < axis.range[1]
        )


@pytest.mark.parametrize("fig", ALL, ids=lambda f: f.layout.title.text)
def test_every_time_axis_says_interval_end_utc(fig: go.Figure) -> None:
    for trace in fig.data:
        if not is_time(trace.x):
            continue
        ref = trace.xaxis or "x"
        axis = fig.layout[f"xaxis{ref[1:]}"]
        assert title_of(fig, axis) == TIME_TITLE == "time (interval end, UTC)"
        if trace.type == "scatter" and "lines" in trace.mode and not trace.name.startswith("job "):
            assert trace.connectgaps is False
    for name, axis in axes(fig):
        if axis.type == "date":
            assert title_of(fig, axis) == TIME_TITLE, name


def test_log_axes_of_the_report() -> None:
    """The latency, bandwidth, duration and rate axes are logarithmic, ticked 1-2-5."""
    logs = {
        (f.layout.title.text, n): list(a.ticktext)
        for f in ALL
        for n, a in axes(f)
        if a.type == "log"
    }
    assert logs == {
        ("fio completion latency, cluster-wide, mixed", "yaxis"): ["20", "50", "100"],
        ("fio completion latency, cluster-wide, read", "yaxis"): [
            "0.2",
            "0.5",
            "1",
            "2",
            "5",
            "10",
            "20",
        ],
        ("fio p99 completion latency per host (all directions)", "yaxis"): ["1", "2", "5"],
        # bins 0.05 ms (floor: 10**-1.5) to 20 ms (up to 10**1.5): edges 0.032 to 32 ms
        ("fio completion latency heatmap (samples)", "yaxis"): [
            "0.02",
            "0.05",
            "0.1",
            "0.2",
            "0.5",
            "1",
            "2",
            "5",
            "10",
            "20",
            "50",
        ],
        ("Darshan jobs: critical-path bandwidth against data moved", "xaxis"): [
            "1000",
            "2000",
            "5000",
        ],
        ("Darshan jobs: critical-path bandwidth against data moved", "yaxis"): [
            "50",
            "100",
            "200",
            "500",
        ],
        ("request duration per cluster", "yaxis"): ["10", "20", "50"],
        ("service rates of the pipeline's stages", "yaxis"): [
            "100",
            "200",
            "500",
            "1000",
            "2000",
            "5000",
        ],
    }


@pytest.mark.parametrize(
    ("values", "ticks"),
    [
        ([0.3, 12.0], [0.2, 0.5, 1, 2, 5, 10, 20]),
        ([15.0, 45.0], [10, 20, 50]),
        ([50.0], [20, 50, 100]),  # one value on a tick: the ticks either side too
        ([1e-3, 2e2, 1e5], [1e-3, 1e-2, 1e-1, 1, 10, 100, 1e3, 1e4, 1e5]),  # 8 decades: each
        ([2.5e-7, None, float("nan"), 0.0, -3.0], [2e-7, 5e-7]),
        ([None, float("nan"), 0.0, float("inf")], []),
    ],
)
def test_log_ticks(values: list[Any], ticks: list[float]) -> None:
    vals, text = log_ticks(values)
    assert vals == pytest.approx(ticks, rel=1e-12)
    assert text == [f"{t:g}" for t in vals]


def test_log_tick_labels_read_as_values() -> None:
    assert log_ticks([0.3, 0.9])[1] == ["0.2", "0.5", "1"]  # 0.3 ms is between 0.2 and 0.5
    assert log_ticks([3e-6, 9e6])[1][:2] == ["1e-06", "1e-05"]


# -- shares and counts ------------------------------------------------------------------------


def factors_fig(factors: Mapping[str, float]) -> go.Figure:
    docs = [{"iolens": {"io_diagnosis": {"factors": dict(factors)}}}]
    fig = factors_figure(
        lambda stream, fields, sort: docs if stream == "logs-iolens.io_diagnosis" else []
    )
    assert fig is not None
    return fig


def test_shares_and_counts_of_the_factors_are_on_axes_of_their_own() -> None:
    factors = {"ost_count": 24.0, "proc_per_ost": 2.7, "small": 0.5, "small_1k": 0.2}
    fig = factors_fig(factors | {"non_consec": 0.1, "coll": 0.0})
    by_axis: dict[str, list[float]] = {}
    for trace in fig.data:
        by_axis.setdefault(trace.yaxis, []).extend(trace.y)
    assert by_axis == {"y": [0.5, 0.2, 0.1, 0.0], "y2": [24.0, 2.7]}
    for values in by_axis.values():  # no axis holds a count above 1.5 beside a share
        assert not (max(values) > 1.5 and any(0 <= v <= 1 for v in values))
    shares, counts = fig.data
    assert list(shares.x) == list(SHARES.values()) and list(counts.x) == list(COUNTS.values())
    assert list(shares.text) == ["0.50", "0.20", "0.10", "0.00"]
    assert list(counts.text) == ["24.0", "2.7"]
    assert list(fig.layout.yaxis.range) == [0, 1]
    assert fig.layout.yaxis.title.text == "mean share, 0-1"
    assert fig.layout.yaxis2.title.text == "mean count (OSTs, processes per OST)"
    assert fig.layout.title.text == "low-bandwidth jobs: contributing factors (mean of 1 diagnosis)"


@pytest.mark.parametrize("fig", ALL, ids=lambda f: f.layout.title.text)
def test_no_figure_puts_shares_beside_counts_above_one(fig: go.Figure) -> None:
    """A bar of a share (0-1) and a bar above 1.5 never share an axis."""
    by_axis: dict[str, list[float]] = {}
    for trace in fig.data:
        if trace.type != "bar" or is_time(trace.x):
            continue
        if trace.orientation == "h":  # the values run along the x axis
            by_axis.setdefault(trace.xaxis or "x", []).extend(float(v) for v in trace.x)
        else:
            by_axis.setdefault(trace.yaxis or "y", []).extend(float(v) for v in trace.y)
    for values in by_axis.values():
        has_share = any(0 < v < 1 for v in values)
        assert not (has_share and max(values) > 1.5)


# -- gaps -------------------------------------------------------------------------------------


def at(k: int, step_s: int) -> datetime:
    return T0 + timedelta(seconds=k * step_s)


@pytest.mark.parametrize(
    ("seconds", "found"),
    [
        ([0, 10, 20, 40, 50], [3]),  # 20 -> 40: one 10 s interval missing
        ([0, 10, 20, 36, 46], [3]),  # 16 s > 1.5 x 10 s
        ([0, 10, 20, 35, 45], []),  # 15 s = 1.5 x 10 s: late, not missing
        ([0, 10, 10, 20, 50], [4]),  # repeated times are not steps
        ([0, 60], []),  # one step: nothing to compare it with
        ([], []),
    ],
)
def test_gaps(seconds: list[int], found: list[int]) -> None:
    assert gaps([at(1, s) for s in seconds]) == found


def test_a_series_with_a_missing_interval_gets_a_none_in_the_gap() -> None:
    times = pd.Series([at(k, 10) for k in (3, 0, 1, 2, 5, 6)]).dt.tz_convert(UTC)
    xs, ys = gapped(times, [3.0, 0.0, 1.0, 2.0, float("nan"), 6.0])
    plain = [pd.Timestamp(at(k, 10)).tz_convert(None) for k in (0, 1, 2, 3, 4, 5, 6)]
    assert xs == plain  # sorted, UTC without a zone; 4 is the middle of the gap 3 -> 5
    assert ys == [0.0, 1.0, 2.0, 3.0, None, None, 6.0]  # the gap, then the NaN


def gap_docs() -> dict[str, list[dict[str, Any]]]:
    """Each time series of the views with its interval number 5 (of 10) missing."""
    keep = [k for k in range(10) if k != 5]
    return {
        "metrics-fio.latency": [latency(at(k, 10), "cluster", "read", None, 1.0) for k in keep]
        + [host_latency(at(k, 10), "a", "mixed", 2.0) for k in keep],
        "metrics-fio.histogram": [histogram(at(k, 10)) for k in keep],
        "metrics-sysstat.diskio": [
            {
                "@timestamp": iso(at(k, 60)),
                "host": {"name": "fs1"},
                "system": {"diskio": {"name": "sdb"}},
                "sysstat": {"disk": {"await": 1.0, "util": 5.0}},
            }
            for k in keep
        ],
        "metrics-lmt.ost": [
            {
                "@timestamp": iso(at(k, 60)),
                "lmt": {
                    "ost": {
                        "name": "OST0001",
                        "read_bytes_per_s": 2**20,
                        "write_bytes_per_s": 2**21,
                        "interval_s": 60.0,
                    }
                },
            }
            for k in keep
        ],
        "metrics-iolens.service_rate": [
            {
                "@timestamp": iso(at(k, 60)),
                "iolens": {"service_rate": {"stage": "sink", "rate_per_s": 180.0}},
            }
            for k in keep
        ],
    }


def test_every_time_series_is_broken_where_an_interval_is_missing() -> None:
    lines = [
        (f.layout.title.text, t)
        for f in figures_of(gap_docs())
        for t in f.data
        if t.type == "scatter" and "lines" in t.mode
    ]
    assert {title for title, _t in lines} == {
        "fio completion latency, cluster-wide, read",
        "fio p99 completion latency per host (all directions)",
        "await per LUN",
        "%util per LUN",
        "OST load from LMT (read + write)",
        "service rates of the pipeline's stages",
    }
    for title, trace in lines:
        step = 10 if title.startswith("fio") else 60
        shift = 60 if title.startswith("OST") else 0  # LMT's points sit at their intervals' ends
        assert list(trace.y).count(None) == 1, title
        gap = list(trace.y).index(None)
        assert pd.Timestamp(trace.x[gap]) == pd.Timestamp(
            at(5, step) + timedelta(seconds=shift)
        ).tz_convert(None)
        assert trace.connectgaps is False


def test_the_heatmap_leaves_a_missing_interval_empty() -> None:
    [heat] = [f for f in figures_of(gap_docs()) if f.data and f.data[0].type == "heatmap"]
    cells = heat.data[0]
    column = [pd.Timestamp(x) for x in cells.x].index(pd.Timestamp(at(5, 10)).tz_convert(None))
    assert all(row[column] is None for row in cells.z)
    assert len(cells.y) == len(cells.z) + 1  # bin edges: bin b is [10**b, 10**(b + 1/4)) ms


def test_lmt_points_sit_at_their_intervals_end() -> None:
    start = "2026-11-22T10:00:00.000Z"
    docs = [
        {
            "@timestamp": start,
            "lmt": {"ost": {"name": "OST0002", "read_bytes_per_s": 2**20, "interval_s": 30.0}},
        }
    ]
    fig = ost_load_figure(lambda stream, fields, sort: docs)
    assert fig is not None
    [trace] = fig.data
    assert list(trace.x) == [pd.Timestamp("2026-11-22T10:00:30")]
    assert list(trace.y) == [1.0]  # MiB/s; the unknown write rate is not taken for 0
    assert fig.layout.xaxis.title.text == TIME_TITLE and fig.layout.xaxis.type == "date"


def test_the_incident_rows_break_where_an_interval_is_missing() -> None:
    docs = stream_docs()
    gone = iso(T0 + timedelta(minutes=11))  # 15:41, inside the incident (15:40:10 to 15:43:14)
    docs["metrics-sysstat.diskio"] = [
        d for d in docs["metrics-sysstat.diskio"] if d["@timestamp"] != gone
    ]
    figure = figures_of(docs)[0]
    await_lines = [t for t in figure.data if t.yaxis == "y2"]
    assert {t.name for t in await_lines} == {f"labhost/loop{k}" for k in range(1, 5)}
    for trace in await_lines:
        gap = list(trace.y).index(None)
        assert pd.Timestamp(trace.x[gap]) == pd.Timestamp(gone).tz_convert(None)
        assert list(trace.y).count(None) == 1 and trace.connectgaps is False
    fio_lines = [t for t in figure.data if t.yaxis == "y"]
    assert fio_lines and all(None not in t.y for t in fio_lines)  # every 10 s: nothing missing
    assert figure.layout.xaxis4.title.text == TIME_TITLE and figure.layout.xaxis4.type == "date"
    assert [figure.layout[f"yaxis{k}"].title.text for k in ("", 2, 3, 4)] == [
        "p95 latency, ms",
        "await, ms",
        "record score, 0-100",
        "Darshan job",
    ]
