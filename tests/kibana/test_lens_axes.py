"""The Lens charts' axes in ``kibana/``: every date axis says what its time is, in the same words
as the report's time axes, every axis is titled with its unit, and shares never share an axis
with counts.

What ``@timestamp`` is, per stream, is what its encoder writes (:data:`TIME_OF`); where
``docs/reference/fields.md`` says it, the test checks the table against that sentence too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pipeline.kibana import load
from pipeline.report.views.base import TIME_TITLE

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = load(ROOT / "kibana")
VIEWS = {o["id"]: o for o in OBJECTS if o["type"] == "index-pattern"}
LENS = [o for o in OBJECTS if o["type"] == "lens"]
XY = [o for o in LENS if o["attributes"]["visualizationType"] == "lnsXY"]

TIME_OF: Mapping[str, str] = {
    # the end of the interval the document summarises: the report's TIME_TITLE
    "fio.latency": TIME_TITLE,  # sink/documents.py latency_document: interval start + length
    "fio.histogram": TIME_TITLE,  # formats/fio/encode.py: the record's window end
    "sysstat.diskio": TIME_TITLE,  # formats/sysstat/encode.py: the interval end
    "iolens.pipeline": TIME_TITLE,  # jobs/health.py: the tick; counts since the previous one
    "iolens.service_rate": TIME_TITLE,  # jobs/health.py: the estimate's end (converged)
    # not an interval's end: said as it is
    "lmt.ost": "time (interval start, UTC)",  # formats/lmt/encode.py
    "darshan.job": "time (job start, UTC)",  # formats/darshan/encode.py
    "iolens.io_diagnosis": "time (job start, UTC)",  # formats/darshan/encode.py
    "iolens.peer_anomaly": "time (window start, UTC)",  # sink/documents.py, as Elastic ML
    "iolens.request": "time (request start, UTC)",  # formats/events/encode.py: first event
}
"""Dataset -> the title of a date axis over its ``@timestamp``."""

DOCUMENTED = {
    "the interval's end": TIME_TITLE,
    "the window's end": TIME_TITLE,  # a fio record's window is its interval
    "the window's start": "time (window start, UTC)",
    "the job's start": "time (job start, UTC)",
    "its first event": "time (request start, UTC)",
}
"""``docs/reference/fields.md``'s words for ``@timestamp`` -> the axis title they give."""

DATASET = re.compile(r'data_stream\.dataset\s*:\s*"([^"]+)"')
STREAM = re.compile(r"^(?:logs|metrics)-(.+)-\*$")


def dataset(lens: Mapping[str, Any]) -> str:
    """The one dataset a Lens chart reads: named in its query, else its data view's only one."""
    named = DATASET.findall(lens["attributes"]["state"]["query"]["query"])
    if named:
        return str(named[0])
    [ref] = [r for r in lens["references"] if r["type"] == "index-pattern"]
    match = STREAM.match(VIEWS[ref["id"]]["attributes"]["title"])
    assert match, f"{lens['id']}: its data view spans several streams and no query picks one"
    return match[1]


def columns(lens: Mapping[str, Any]) -> dict[str, Any]:
    layers = lens["attributes"]["state"]["datasourceStates"]["formBased"]["layers"]
    return {cid: col for layer in layers.values() for cid, col in layer["columns"].items()}


def test_the_table_follows_the_field_reference() -> None:
    text = (ROOT / "docs" / "reference" / "fields.md").read_text(encoding="utf-8")
    said = dict(
        re.findall(r"`(?:logs|metrics)-([\w.]+)-<namespace>`.*?`@timestamp` is ([^;.]+)", text)
    )
    assert said, "fields.md no longer says what @timestamp is"
    for name, words in said.items():
        if name in TIME_OF:
            assert DOCUMENTED[words] == TIME_OF[name], name
    assert {"fio.latency", "darshan.job", "iolens.peer_anomaly", "iolens.request"} <= set(said)


@pytest.mark.parametrize("lens", LENS, ids=lambda o: o["id"])
def test_every_date_axis_says_what_its_time_is(lens: Mapping[str, Any]) -> None:
    dates = [c for c in columns(lens).values() if c["operationType"] == "date_histogram"]
    if not dates:
        return
    title = TIME_OF[dataset(lens)]
    for col in dates:
        assert (col["label"], col.get("customLabel")) == (title, True)
    vis = lens["attributes"]["state"]["visualization"]
    if lens["attributes"]["visualizationType"] == "lnsXY":
        assert vis["xTitle"] == title
        assert vis["axisTitlesVisibilitySettings"] == {"x": True, "yLeft": True, "yRight": True}


def test_interval_end_streams_read_as_the_report() -> None:
    vis = {o["id"]: o["attributes"]["state"]["visualization"] for o in XY}
    ends = sorted(
        i.removeprefix("iolens-lens-") for i, v in vis.items() if v.get("xTitle") == TIME_TITLE
    )
    assert TIME_TITLE == "time (interval end, UTC)"
    assert ends == [
        "fio-cluster-percentiles",
        "fio-histogram-percentiles",
        "fio-host-p99",
        "fio-samples",
        "incident-await",
        "incident-fio-jobs",
        "lun-await",
        "lun-util",
        "pipe-lag-deadletters",
        "pipe-service-rate",
        "pipe-throughput",
    ]


UNIT = re.compile(
    r", (ms|s|B/s|items/s|count|percent|0-1|0-100)$|\(duration\)$|\(OSTs, processes per OST\)$"
)
"""How an axis title ends: its unit (``duration``: the data view shows ns as a duration)."""


@pytest.mark.parametrize("lens", XY, ids=lambda o: o["id"])
def test_every_value_axis_is_titled_with_its_unit(lens: Mapping[str, Any]) -> None:
    vis = lens["attributes"]["state"]["visualization"]
    assert UNIT.search(vis["yTitle"]), vis["yTitle"]
    right = {
        c["forAccessor"]
        for layer in vis["layers"]
        for c in layer.get("yConfig", ())
        if c["axisMode"] == "right"
    }
    if right:
        assert UNIT.search(vis["yRightTitle"]), vis["yRightTitle"]


def test_factor_shares_and_counts_are_on_axes_of_their_own() -> None:
    [lens] = [o for o in XY if o["id"] == "iolens-lens-hpc-diagnosis-factors"]
    vis = lens["attributes"]["state"]["visualization"]
    [layer] = vis["layers"]
    modes = {c["forAccessor"]: c["axisMode"] for c in layer["yConfig"]}
    assert modes == {
        "ost_count": "right",
        "proc_per_ost": "right",
        "small": "left",
        "small_1k": "left",
        "non_consec": "left",
        "coll": "left",
    }
    assert vis["yLeftExtent"] == {"mode": "custom", "lowerBound": 0, "upperBound": 1}
    assert (vis["yTitle"], vis["yRightTitle"]) == (
        "mean share, 0-1",
        "mean count (OSTs, processes per OST)",
    )


def test_seconds_and_counts_are_on_axes_of_their_own() -> None:
    [lens] = [o for o in XY if o["id"] == "iolens-lens-pipe-lag-deadletters"]
    vis = lens["attributes"]["state"]["visualization"]
    [layer] = vis["layers"]
    assert {c["forAccessor"]: c["axisMode"] for c in layer["yConfig"]} == {
        "lag": "left",
        "letters": "right",
    }
    assert (vis["yTitle"], vis["yRightTitle"]) == ("largest lag, s", "new dead letters, count")
