"""Request and workload-model documents: fields, ids, dates, mappings, indexing."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from elasticsearch import Elasticsearch

from pipeline.formats.events.decode import parse_events
from pipeline.formats.events.encode import model_documents, request_document, wall_offset
from pipeline.records.event_schema import event_schema
from pipeline.records.events import Event
from pipeline.reducers.canonical import canonical
from pipeline.reducers.request_cluster import cluster_all
from pipeline.reducers.request_join import extract
from pipeline.sink.capabilities import detect
from pipeline.sink.documents import DocContext
from pipeline.sink.templates import install, load_templates

SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
CTX = DocContext("reqtest", "shipper1")
MS = 1_000_000
WALL = 1_795_000_000_000_000_000  # 2026-11-18T11:06:40Z: the wall clock at monotonic 0

Unmapped = Callable[[Mapping[str, Any], str], list[str]]


def events() -> list[Event]:
    rows: list[dict[str, Any]] = [{"ts": 5, "ev": "ClockSync", "wall_ns": WALL + 5}]
    for n, (cpu_ms, kb) in enumerate([(15, 0), (15, 0), (30, 0), (0, 12)]):
        t, conn, tid = n * 100 * MS, f"c{n}", 10 + n
        rows += [
            {"ts": t, "ev": "Accept", "conn": conn, "tid": 1},
            {"ts": t + 1000, "ev": "Dequeue", "conn": conn, "tid": tid},
            {"ts": t + 2000, "ev": "ReqStart", "conn": conn, "tid": tid, "_type": "x"},
        ]
        if cpu_ms:
            rows.append({"ts": t + cpu_ms * MS, "ev": "Spin", "tid": tid, "cpu_ns": cpu_ms * MS})
        else:
            rows.append({"ts": t + 3000, "ev": "FileRead", "tid": tid, "bytes": kb * 1024})
        rows += [
            {"ts": t + cpu_ms * MS + 4000, "ev": "Send", "conn": conn, "tid": tid, "bytes": 41},
            {"ts": t + cpu_ms * MS + 5000, "ev": "ReqEnd", "conn": conn, "tid": tid},
        ]
    rows.sort(key=lambda r: r["ts"])
    return list(parse_events([json.dumps(r) for r in rows], "app.jsonl"))


def documents() -> tuple[list[Any], list[Any]]:
    schema = event_schema(yaml.safe_load(SCHEMA.read_text()), str(SCHEMA))
    evs = events()
    offset = wall_offset(evs)
    assert offset == WALL
    reqs = list(extract(evs, schema))
    forms = [canonical(r, schema) for r in reqs]
    model, final, outliers = cluster_all(forms)
    reqdocs = [
        request_document(CTX, "web1", r, c, offset, (), 0.0, a, o)
        for r, c, a, o in zip(reqs, forms, final, outliers, strict=True)
    ]
    measured = {"cpu_ns": 60.0 * MS, "disk_bytes": 12288.0, "net_bytes": 164.0}
    modeldocs = list(model_documents(CTX, "web1", model, measured, WALL / 1e6 + 1000, 0.0))
    return reqdocs, modeldocs


def test_request_documents(unmapped_fields: Unmapped) -> None:
    reqdocs, modeldocs = documents()
    assert [d.index for d in reqdocs] == ["logs-iolens.request-reqtest"] * 4
    first = reqdocs[0].source
    assert first["@timestamp"] == "2026-11-18T11:06:40.000Z"
    r = first["iolens"]["request"]
    assert r["attributes"] == ["conn=c0", "tid=10"]
    assert r["resources"] == {
        "cpu_ns": 15 * MS,
        "disk_bytes": 0.0,
        "net_bytes": 41.0,
        "sched_cpu_ns": 0.0,
    }
    assert (r["event_count"], r["threads"], r["complete"], r["cluster"], r["outlier"]) == (
        6,
        1,
        True,
        0,
        False,
    )
    assert r["canonical"] == "ReqStart Seg[cpu_ns=15.0ms,net_bytes=0.0KiB] ReqEnd"
    assert first["event"]["duration"] == 15 * MS + 5000
    assert len({d.doc_id for d in reqdocs}) == 4
    assert reqdocs[0].doc_id == documents()[0][0].doc_id  # read again: the same ids
    assert [d.source["iolens"]["workload_model"]["size"] for d in modeldocs] == [2, 1, 1]
    assert modeldocs[0].source["iolens"]["workload_model"]["model_error"]["cpu_ns"] == 0.0
    for d in reqdocs:
        assert unmapped_fields(d.source, "logs-iolens.request") == []
    for d in modeldocs:
        assert unmapped_fields(d.source, "metrics-iolens.workload_model") == []


@pytest.mark.integration
def test_they_index_into_their_templates(es_client: Elasticsearch) -> None:
    install(es_client, load_templates(), detect(es_client))
    reqdocs, modeldocs = documents()
    ops: list[dict[str, Any]] = []
    for d in reqdocs + modeldocs:
        ops += [{"create": {"_index": d.index, "_id": d.doc_id}}, dict(d.source)]
    resp = es_client.bulk(operations=ops, refresh=True)
    assert [item["create"]["status"] for item in resp["items"]] == [201] * 7
    hits = es_client.search(
        index="logs-iolens.request-reqtest",
        query={"term": {"iolens.request.attributes": "conn=c2"}},
    )["hits"]["hits"]
    assert [h["_source"]["iolens"]["request"]["resources"]["cpu_ns"] for h in hits] == [30 * MS]
