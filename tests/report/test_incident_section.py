"""The report's Incidents section, from documents shaped as the pipeline writes them.

The incident documents follow the ``logs-iolens.incident`` shape (ECS base of
``DocContext.base`` with ``event.kind: alert``); the other streams carry the fields their
builders write (``latency_document``, ``diskio_document``, ``peer_anomaly_document``,
``job_document``), reduced to what the section reads plus the fields it must ignore (other
scopes, directions, metrics and hosts). The fake fetch returns, like ``_source`` filtering, only
the fields asked for. The integration test indexes the same documents into the embedded server
through the templates in ``mappings/`` and reads them back with the report's searcher.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import plotly.graph_objects as go
import pytest
from elasticsearch import Elasticsearch

from pipeline.report.html import build
from pipeline.report.incident import (
    HIGHLIGHT,
    MUTED,
    incident_panels,
    latest_incidents,
    parse_incident,
)
from pipeline.report.incident_streams import Fetch
from pipeline.report.views.base import searcher
from pipeline.sink.capabilities import Capabilities
from pipeline.sink.search import refresh
from pipeline.sink.templates import install, load_templates

T0 = datetime(2026, 11, 25, 15, 30, tzinfo=UTC)
START = datetime(2026, 11, 25, 15, 40, 10, tzinfo=UTC)
END = datetime(2026, 11, 25, 15, 43, 14, tzinfo=UTC)
SUMMARY = (
    "labhost/loop3 (/var/lib/iolens-lab/mnt/lun3) was persistently slow among its peers from "
    "15:40:10 to 15:43:14 UTC: 12 faulty windows, fio jobs labhost/3 over p95 < 10 ms 57 times, "
    "Darshan jobs 4243 and 4247 <critical files> on it."
)


def plain(t: datetime) -> pd.Timestamp:
    """A UTC time as the figure carries it: without a zone."""
    return pd.Timestamp(t).tz_convert(None)


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def incident_doc(
    ident: str,
    start: datetime,
    end: datetime | None,
    updated: datetime,
    summary: str = SUMMARY,
    lun: str = "labhost/loop3",
) -> dict[str, Any]:
    """A ``logs-iolens.incident`` document exactly in the documented shape."""
    event = {
        "kind": "alert",
        "module": "iolens",
        "dataset": "iolens.incident",
        "created": iso(updated),
        "start": iso(start),
        **({"end": iso(end)} if end else {}),
    }
    return {
        "@timestamp": iso(start),
        "data_stream": {"type": "logs", "dataset": "iolens.incident", "namespace": "default"},
        "event": event,
        "ecs": {"version": "8.11.0"},
        "agent": {"type": "iolens", "name": "labhost", "version": "0.1.0"},
        "host": {"name": lun.split("/")[0]},
        "message": summary,
        "iolens": {
            "incident": {
                "id": ident,
                "status": "closed" if end else "open",
                "start": iso(start),
                "end": iso(end) if end else None,
                "duration_s": (end - start).total_seconds() if end else None,
                "updated": iso(updated),
                "lun": lun,
                "device": lun.split("/")[1],
                "peer_group": "labhost",
                "metric": "await",
                "mount_point": "/var/lib/iolens-lab/mnt/lun3",
                "windows": 12,
                "max_score": 100.0,
                "persistence_rank": 1,
                "persistence_value": 9.0,
                "jobs": ["4243", "4247"],
                "critical_files": ["/var/lib/iolens-lab/mnt/lun3/mpiio.2.dat"],
                "fio_breaches": 57,
                "fio_jobs": ["labhost/3"],
                "sla": {"percentile": 95.0, "under_ms": 10.0},
                "summary": summary,
            }
        },
    }


def every(step_s: int, minutes: int = 20) -> list[datetime]:
    return [T0 + timedelta(seconds=s) for s in range(0, minutes * 60, step_s)]


def slow(t: datetime) -> bool:
    return START <= t <= END


def latency(t: datetime, scope: str, ddir: str, job: str | None, p95_ms: float) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "@timestamp": iso(t),
        "fio": {
            "ddir": ddir,
            "interval": {"start_ms": int(t.timestamp() * 1000) - 10_000, "ms": 10_000},
            "clat_ns": {"p95": p95_ms * 1e6, "samples": 100},
            "records": 4,
        },
        "iolens": {"scope": scope, "method": "window"},
    }
    if job is not None:
        doc["host"] = {"name": "labhost"}
        doc["fio"]["job"] = job
    return doc


def stream_docs() -> dict[str, list[dict[str, Any]]]:
    fio = [
        latency(t, "job", "mixed", job, 25.0 if job == "3" and slow(t) else 2.0 + int(job))
        for t in every(10)
        for job in ("1", "2", "3")
    ]
    fio += [latency(t, "job", "read", "3", 99.0) for t in every(10)]  # another direction
    fio += [latency(t, "cluster", "mixed", None, 50.0) for t in every(10)]  # another scope
    superseded = latency(START, "job", "mixed", "3", 1.0)  # an earlier revision: fewer records
    superseded["fio"]["records"] = 2
    fio.append(superseded)
    disk = [
        {
            "@timestamp": iso(t),
            "host": {"name": host},
            "system": {"diskio": {"name": dev}},
            "sysstat": {"disk": {"await": 30.0 if dev == "loop3" and slow(t) else 1.0}},
        }
        for t in every(60)
        for host, dev in [("labhost", f"loop{k}") for k in range(1, 5)] + [("other", "sda")]
    ]
    peer = [  # drawn at the window's end, when its verdict is known
        {
            "@timestamp": iso(t - timedelta(seconds=29)),
            "host": {"name": "labhost"},
            "iolens": {
                "record_score": 100.0 if lun == "labhost/loop3" and slow(t) else 0.0,
                "faulty": lun == "labhost/loop3" and slow(t),
                "peer": {
                    "group": "labhost",
                    "metric": metric,
                    "lun": lun,
                    "window": {"start_s": t.timestamp() - 29, "end_s": t.timestamp()},
                },
            },
        }
        for t in every(30)
        for lun in [f"labhost/loop{k}" for k in range(1, 5)]
        for metric in ("await", "util")
    ]
    jobs = [
        {
            "@timestamp": iso(T0 + timedelta(minutes=start)),
            "darshan": {
                "job": {
                    "id": job,
                    "exe": "mpiio",
                    "start": iso(T0 + timedelta(minutes=start)),
                    "end": iso(T0 + timedelta(minutes=end)),
                },
                "log": {"id": f"log-{job}"},
            },
        }
        for job, start, end in (("4243", 9, 12), ("4247", 11, 13), ("4250", 12, 14), ("4000", 0, 2))
    ]
    return {
        "metrics-fio.latency": fio,
        "metrics-sysstat.diskio": disk,
        "metrics-iolens.peer_anomaly": peer,
        "logs-darshan.job": jobs,
        "logs-iolens.incident": [
            incident_doc("inc-main-000000000000000", START, None, START + timedelta(minutes=1)),
            incident_doc("inc-main-000000000000000", START, END, END + timedelta(minutes=2)),
            incident_doc(
                "inc-old-0000000000000000",
                T0,
                T0 + timedelta(minutes=1),
                T0 + timedelta(minutes=2),
                "an earlier incident",
                "labhost/loop1",
            ),
        ],
    }


def project(doc: Mapping[str, Any], fields: Sequence[str], prefix: str = "") -> dict[str, Any]:
    """``doc`` with only the requested fields (and what lies under them), like ``_source``."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        path = prefix + key
        if any(path == f or path.startswith(f + ".") for f in fields):
            out[key] = value
        elif isinstance(value, Mapping) and any(f.startswith(path + ".") for f in fields):
            out[key] = project(value, fields, path + ".")
    return out


def fake_fetch(docs: Mapping[str, list[dict[str, Any]]]) -> Fetch:
    def fetch(stream: str, fields: Sequence[str], sort: Sequence[str]) -> list[Mapping[str, Any]]:
        return [project(d, fields) for d in docs.get(stream, [])]

    return fetch


def by_row(fig: go.Figure, row: int) -> dict[str, Any]:
    """Trace name -> trace of one subplot row (1-4)."""
    axis = "y" if row == 1 else f"y{row}"
    return {t.name: t for t in fig.data if t.yaxis == axis}


def highlighted(traces: Mapping[str, Any]) -> set[str]:
    colours = {name: t.line.color for name, t in traces.items()}
    assert set(colours.values()) <= {HIGHLIGHT, MUTED}
    return {name for name, c in colours.items() if c == HIGHLIGHT}


def check_figure(fig: go.Figure) -> None:
    """What every test here expects of the main incident's figure."""
    # four rows, one shared time axis (plotly matches rows 1-3 to the bottom one)
    assert [fig.layout[f"xaxis{k}"].matches for k in ("", 2, 3)] == ["x4"] * 3
    axes = sorted(k for k in fig.layout.to_plotly_json() if k.startswith(("xaxis", "yaxis")))
    assert axes == [f"{a}axis{k}" for a in "xy" for k in ("", 2, 3, 4)]
    pad = timedelta(minutes=2)
    assert list(fig.layout.xaxis4.range) == [plain(START - pad), plain(END + pad)]
    fio = by_row(fig, 1)
    assert set(fio) == {"labhost/1", "labhost/2", "labhost/3"}
    assert highlighted(fio) == {"labhost/3"}
    times = pd.to_datetime(fio["labhost/3"].x, utc=True)
    p95 = dict(zip(times, fio["labhost/3"].y, strict=True))
    assert p95[START] == 25.0  # the revision with the most records, not the superseded one
    assert p95[START - timedelta(seconds=10)] == 5.0
    disk = by_row(fig, 2)
    assert set(disk) == {f"labhost/loop{k}" for k in range(1, 5)}  # the peers, not other/sda
    assert highlighted(disk) == {"labhost/loop3"}
    score = by_row(fig, 3)
    assert set(score) == {f"labhost/loop{k}" for k in range(1, 5)}
    assert highlighted(score) == {"labhost/loop3"}
    assert max(score["labhost/loop3"].y) == 100.0 and max(score["labhost/loop1"].y) == 0.0
    jobs = by_row(fig, 4)
    assert set(jobs) == {"job 4243", "job 4247", "job 4250"}  # not 4000, long before
    assert highlighted(jobs) == {"job 4243", "job 4247"}
    assert list(jobs["job 4243"].x) == [
        plain(T0 + timedelta(minutes=9)),
        plain(T0 + timedelta(minutes=12)),
    ]
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert [(s.yref, s.x0, s.x1) for s in rects] == [
        (f"{axis} domain", plain(START), plain(END)) for axis in ("y", "y2", "y3", "y4")
    ]
    # plotly.js reads no zone offsets in dates: one would make the shared axis numeric
    assert "+00:00" not in fig.to_json()
    [sla] = [s for s in fig.layout.shapes if s.type == "line"]
    assert (sla.yref, sla.y0, sla.y1) == ("y", 10.0, 10.0)


def test_the_section_comes_first_with_summary_fields_and_figure() -> None:
    page, shown, empty = build(fake_fetch(stream_docs()), T0, T0 + timedelta(hours=1))
    assert [s.title for s in shown] == ["Incidents", "fio latency", "LUN health"]
    assert empty == ["hpc", "requests", "pipeline"]  # no job bandwidth in these documents
    section = shown[0]
    assert len(section.figures) == len(section.headers) == 2  # latest first
    escaped = SUMMARY.replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in section.headers[0] and "an earlier incident" in section.headers[1]
    assert page.index(escaped) < page.index('<div id="plot-0-0"')
    assert page.index("an earlier incident") < page.index('<div id="plot-0-1"')
    for label, value in [
        ("status", "closed"),
        ("end", "2026-11-25 15:43:14 UTC"),
        ("mount point", "/var/lib/iolens-lab/mnt/lun3"),
        ("Darshan jobs", "4243, 4247"),
        ("fio jobs over the SLA", "labhost/3"),
        ("fio SLA breaches", "57"),
    ]:
        assert f">{label}</th><td>{value}</td>" in section.headers[0]
    check_figure(section.figures[0])


def test_latest_revision_and_the_five_latest_incidents() -> None:
    docs = [
        incident_doc(f"inc-{k}", START + timedelta(hours=k), None, START + timedelta(hours=k))
        for k in range(7)
    ]
    end = START + timedelta(hours=2, minutes=3)
    docs.append(incident_doc("inc-2", START + timedelta(hours=2), end, end))  # its next revision
    incidents = latest_incidents(docs)
    assert [i.id for i in incidents] == ["inc-6", "inc-5", "inc-4", "inc-3", "inc-2"]
    assert (incidents[-1].status, incidents[-1].end) == ("closed", end)
    assert incidents[0].until == incidents[0].updated  # open: shaded up to its last update


def test_an_open_incident_is_shaded_to_its_last_update() -> None:
    inc = parse_incident(incident_doc("x", START, None, START + timedelta(minutes=3)))
    assert (inc.status, inc.end, inc.duration_s) == ("open", None, None)
    assert inc.percentile_field == "p95"
    docs = stream_docs() | {"logs-iolens.incident": [incident_doc("x", START, None, END)]}
    [panel] = incident_panels(fake_fetch(docs))
    assert ">end</th><td>open</td>" in panel.header_html
    rects = [s for s in panel.figure.layout.shapes if s.type == "rect"]
    assert {(s.x0, s.x1) for s in rects} == {(plain(START), plain(END))}


def test_fio_runs_with_log_prefixes_are_separate_lines() -> None:
    """Two runs on one host with job number 3 and different ``write_hist_log`` prefixes: two
    jobs ``labhost/xa.3`` and ``labhost/xb.3`` (neither taken for a revision of the other);
    only the one the incident names is highlighted."""
    docs = stream_docs()
    fio = []
    for prefix, p95_ms in (("xa", 30.0), ("xb", 40.0)):
        for t in every(10):
            doc = latency(t, "job", "mixed", "3", p95_ms)
            doc["fio"]["prefix"] = prefix
            fio.append(doc)
    docs["metrics-fio.latency"] = fio
    for inc in docs["logs-iolens.incident"]:
        inc["iolens"]["incident"]["fio_jobs"] = ["labhost/xa.3"]
    [panel, _earlier] = incident_panels(fake_fetch(docs))
    lines = by_row(panel.figure, 1)
    assert set(lines) == {"labhost/xa.3", "labhost/xb.3"}
    assert highlighted(lines) == {"labhost/xa.3"}
    assert {n: set(t.y) for n, t in lines.items()} == {
        "labhost/xa.3": {30.0},
        "labhost/xb.3": {40.0},
    }


def test_no_incident_is_no_section_and_no_missing_data() -> None:
    searched: list[str] = []

    def fetch(stream: str, fields: Sequence[str], sort: Sequence[str]) -> list[Mapping[str, Any]]:
        searched.append(stream)
        return []

    assert incident_panels(fetch) == []
    assert searched == ["logs-iolens.incident"]  # the other streams are not searched
    _page, shown, empty = build(lambda *_a: [], T0, T0 + timedelta(hours=1))
    assert shown == [] and "incident" not in empty


def test_the_documented_incident_shape_is_mapped(
    unmapped_fields: Callable[[Mapping[str, Any], str], list[str]],
) -> None:
    for doc in stream_docs()["logs-iolens.incident"]:
        assert unmapped_fields(doc, "logs-iolens.incident") == []


@pytest.fixture
def indexed(es_client: Elasticsearch) -> Iterator[str]:
    """The documents indexed through ``mappings/`` into a namespace of their own."""
    caps = Capabilities("8.15.3", ilm=False, data_stream_admin=False, percentiles_agg=False)
    install(es_client, load_templates(), caps)
    ns = f"inc{uuid.uuid4().hex[:8]}"
    for stream, docs in stream_docs().items():
        ops: list[Mapping[str, Any]] = []
        for doc in docs:
            if "data_stream" in doc:
                doc = doc | {"data_stream": doc["data_stream"] | {"namespace": ns}}
            ops += [{"create": {"_index": f"{stream}-{ns}"}}, doc]
        resp = es_client.bulk(operations=ops)
        assert not resp["errors"], [i for i in resp["items"] if i["create"].get("error")][:1]
        refresh(es_client, f"{stream}-{ns}")
    yield ns


@pytest.mark.integration
def test_the_section_from_the_embedded_server(es_client: Elasticsearch, indexed: str) -> None:
    fetch = searcher(es_client, indexed, T0, T0 + timedelta(hours=1))
    panels = incident_panels(fetch)
    assert [p.incident.summary for p in panels] == [SUMMARY, "an earlier incident"]
    check_figure(panels[0].figure)
