"""Slurm job and LMT OST documents: fields, ids, mappings, and a round trip through the server.

Documents are built from the real test inputs (tests/data/slurm, tests/data/lmt): job 4478544
and its steps, and the LMT intervals of the ``lmtdb-reset`` extract (one counter reset).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from elasticsearch import Elasticsearch

from pipeline.formats.lmt.decode import LmtSample, parse_lmt_csv
from pipeline.formats.lmt.encode import lmt_ost_document
from pipeline.formats.lmt.reduce import OstDeltaReducer, OstInterval
from pipeline.formats.slurm.decode import SlurmJob, parse_sacct
from pipeline.formats.slurm.encode import slurm_job_document
from pipeline.records.core import Document, LineRef
from pipeline.sink.capabilities import Capabilities
from pipeline.sink.documents import DocContext
from pipeline.sink.templates import install, load_templates, mappings_dir

DATA = Path(__file__).resolve().parents[1] / "data"
CREATED_MS = 1767225600000.0  # 2026-01-01T00:00:00Z
CTX = DocContext("default", "shipper1")
NO_ILM = Capabilities("8.15.3", ilm=False, data_stream_admin=False, percentiles_agg=False)
COMPATIBLE: dict[str, tuple[type, ...]] = {
    "keyword": (str,),
    "constant_keyword": (str,),
    "date": (str,),
    "long": (int,),
    "double": (float, int),
    "boolean": (bool,),
}


def slurm_jobs(path: Path | None = None) -> list[tuple[SlurmJob, LineRef]]:
    path = path or DATA / "slurm" / "sacct_4478544.txt"
    lines = path.read_bytes().splitlines()
    out = []
    for rec in parse_sacct(lines, str(path), tz=ZoneInfo("America/Los_Angeles")):
        assert isinstance(rec, SlurmJob), rec
        out.append(rec)
    offsets = [len(b"".join(line + b"\n" for line in lines[: i + 1])) for i in range(len(lines))]
    return [(job, LineRef("k", str(path), i + 2, offsets[i + 1])) for i, job in enumerate(out)]


def lmt_intervals() -> list[OstInterval]:
    path = DATA / "lmt" / "lmtdb-reset.csv"
    samples = [
        r
        for r in parse_lmt_csv(path.read_bytes().splitlines(), str(path))
        if isinstance(r, LmtSample)
    ]
    return list(OstDeltaReducer().feed(samples))


def slurm_docs(ctx: DocContext = CTX) -> list[Document]:
    return [slurm_job_document(ctx, job, (ref,), CREATED_MS) for job, ref in slurm_jobs()]


def lmt_docs(ctx: DocContext = CTX) -> list[Document]:
    ref = LineRef("k", "lmtdb-reset.csv", 1, 0)
    return [lmt_ost_document(ctx, iv, (ref,), CREATED_MS) for iv in lmt_intervals()]


def package(stream: str) -> dict[str, Any]:
    path = mappings_dir() / f"component_template.{stream}@package.json"
    body: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return body


def mapped_types(stream: str) -> dict[str, str]:
    """Leaf field -> mapped type in ``iolens-ecs@mappings`` and the stream's ``@package``."""
    out: dict[str, str] = {}

    def walk(props: dict[str, Any], prefix: str) -> None:
        for key, value in props.items():
            if "properties" in value:
                walk(value["properties"], f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value["type"]

    ecs = json.loads(
        (mappings_dir() / "component_template.iolens-ecs@mappings.json").read_text("utf-8")
    )
    walk(ecs["template"]["mappings"]["properties"], "")
    walk(package(stream)["template"]["mappings"]["properties"], "")
    return out


def leaves(doc: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def compatible(value: Any, mapped: str) -> bool:
    values = value if isinstance(value, list) else [value]
    kinds = COMPATIBLE[mapped]
    return bool(values) and all(
        isinstance(v, kinds) and (mapped == "boolean" or not isinstance(v, bool)) for v in values
    )


@pytest.mark.parametrize(
    ("stream", "make"),
    [("logs-slurm.job", slurm_docs), ("metrics-lmt.ost", lmt_docs)],
)
def test_every_emitted_field_is_mapped_compatibly(stream: str, make: Any) -> None:
    mapped = mapped_types(stream)
    emitted: set[str] = set()
    for doc in make():
        for field, value in leaves(doc.source).items():
            assert field in mapped, f"{field} is not mapped in {stream}"
            assert compatible(value, mapped[field]), (field, mapped[field], value)
            emitted.add(field)
    own = {f for f in mapped if f.startswith(("slurm.", "lmt.", "user.", "metricset."))}
    unused = own - emitted
    # mapped but not in these inputs: sacct columns job 4478544's file does not have
    assert unused == (
        {
            "slurm.job.partition",
            "slurm.job.account",
            "slurm.job.exit_code",
            "slurm.job.cpus",
        }
        if stream == "logs-slurm.job"
        else set()
    )


@pytest.mark.parametrize("stream", ["logs-slurm.job", "metrics-lmt.ost"])
def test_templates_follow_the_conventions(stream: str) -> None:
    [tpl] = [o for o in load_templates() if o.kind == "index" and o.name == stream]
    assert tpl.body["index_patterns"] == [f"{stream}-*"]
    assert tpl.body["data_stream"] == {}
    assert tpl.body["priority"] == 200
    assert tpl.body["composed_of"] == [
        "iolens-ecs@mappings",
        "iolens@settings",
        f"{stream}@package",
        f"{stream}@custom",
    ]
    assert tpl.body["ignore_missing_component_templates"] == [f"{stream}@custom"]
    own = "slurm" if stream.startswith("logs-") else "lmt"
    assert package(stream)["template"]["mappings"]["properties"][own]["dynamic"] == "strict"


def test_slurm_job_document_fields() -> None:
    docs = slurm_docs()
    job = docs[0]
    assert job.index == "logs-slurm.job-default"
    s = job.source
    assert s["@timestamp"] == "2017-03-20T08:59:02.000Z"  # 01:59:02 PDT
    assert s["data_stream"] == {"type": "logs", "dataset": "slurm.job", "namespace": "default"}
    assert s["event"]["kind"] == "event"
    assert (s["event"]["dataset"], s["event"]["module"]) == ("slurm.job", "slurm")
    assert s["user"] == {"name": "glock"}
    nodes = [f"nid0{n}" for n in range(5301, 5429)]
    assert s["slurm"]["job"] == {
        "id": "4478544",
        "job_id": "4478544",
        "display_id": "4478544",
        "user": "glock",
        "name": "vpicio_uni",
        "start": "2017-03-20T08:59:02.000Z",
        "end": "2017-03-20T09:11:38.000Z",
        "elapsed_s": 756.0,
        "state": "COMPLETED",
        "node_count": 128,
        "nodes": nodes,
    }
    step6 = docs[9].source
    assert "user" not in step6
    assert (step6["slurm"]["job"]["id"], step6["slurm"]["job"]["step"]) == ("4478544.6", "6")
    assert step6["slurm"]["job"]["tasks"] == 2048
    assert docs[1].source["slurm"]["job"]["nodes"] == ["nid05301"]
    # line 2, which ends at byte 188 (head -2 sacct_4478544.txt | wc -c)
    assert job.refs == (LineRef("k", str(DATA / "slurm" / "sacct_4478544.txt"), 2, 188),)


def test_slurm_timestamp_falls_back_to_end_then_created() -> None:
    base = SlurmJob(id="1", job_id="1", display_id="1", step=None)
    running = SlurmJob(id="2", job_id="2", display_id="2", step=None, end_s=1700000000.0)
    assert slurm_job_document(CTX, base, (), CREATED_MS).source["@timestamp"] == (
        "2026-01-01T00:00:00.000Z"
    )
    assert slurm_job_document(CTX, running, (), CREATED_MS).source["@timestamp"] == (
        "2023-11-14T22:13:20.000Z"
    )
    assert slurm_job_document(CTX, base, (), CREATED_MS).source["slurm"]["job"] == {
        "id": "1",
        "job_id": "1",
        "display_id": "1",
    }


def test_slurm_ids_are_deterministic_and_distinct() -> None:
    first, again = slurm_docs(), slurm_docs(DocContext("default", "another-shipper"))
    assert [d.doc_id for d in first] == [d.doc_id for d in again]
    assert len({d.doc_id for d in first}) == 11
    job, _ = slurm_jobs()[0]
    later = dataclasses.replace(job, state="RUNNING", end_s=None)
    # same job and start: the same id, whatever else changed
    assert slurm_job_document(CTX, later, (), 0.0).doc_id == first[0].doc_id


def test_lmt_ost_document_fields() -> None:
    docs = lmt_docs()
    assert len(docs) == 25
    reboot = docs[6]
    assert reboot.index == "metrics-lmt.ost-default"
    s = reboot.source
    assert s["@timestamp"] == "2018-04-18T07:35:45.000Z"
    assert s["event"]["kind"] == "metric"
    assert s["metricset"] == {"period": 200000}
    assert s["lmt"]["ost"] == {
        "name": "snx11168-OST00ad",
        "fs": "snx11168",
        "index": 173,
        "read_bytes": 0,
        "write_bytes": 0,
        "read_bytes_per_s": 0.0,
        "write_bytes_per_s": 0.0,
        "interval_s": 200.0,
        "reset": True,
        "gap": True,
        "pct_cpu": 0.0,
    }
    busy = docs[4].source
    assert (busy["@timestamp"], busy["metricset"]["period"]) == ("2018-04-18T07:35:35.000Z", 5000)
    assert busy["lmt"]["ost"]["write_bytes"] == 563617704
    assert busy["lmt"]["ost"]["write_bytes_per_s"] == 563617704 / 5
    assert len({d.doc_id for d in docs}) == 25
    assert [d.doc_id for d in lmt_docs()] == [d.doc_id for d in docs]


def test_lmt_pct_cpu_is_left_out_when_not_exported() -> None:
    iv = lmt_intervals()[0]
    no_cpu = dataclasses.replace(iv, pct_cpu=None)
    assert "pct_cpu" not in lmt_ost_document(CTX, no_cpu, (), 0.0).source["lmt"]["ost"]


def bulk_create(client: Elasticsearch, docs: list[Document]) -> list[int]:
    ops: list[Any] = []
    for d in docs:
        ops += [{"create": {"_index": d.index, "_id": d.doc_id}}, dict(d.source)]
    resp = client.bulk(operations=ops, refresh=True)
    return [item["create"]["status"] for item in resp["items"]]


@pytest.mark.integration
def test_documents_index_into_the_templates_and_search_back(es_client: Elasticsearch) -> None:
    install(es_client, load_templates(), NO_ILM)
    ctx = DocContext("hpctest", "shipper1")
    slurm, lmt = slurm_docs(ctx), lmt_docs(ctx)
    assert bulk_create(es_client, slurm + lmt) == [201] * 36
    assert bulk_create(es_client, slurm[:2] + lmt[:2]) == [409] * 4  # a replay

    jobs = "logs-slurm.job-hpctest"
    hits = es_client.search(index=jobs, query={"term": {"slurm.job.job_id": "4478544"}}, size=20)[
        "hits"
    ]
    assert hits["total"]["value"] == 11
    on_last_node = es_client.search(index=jobs, query={"term": {"slurm.job.nodes": "nid05428"}})
    assert on_last_node["hits"]["total"]["value"] == 10  # all but .batch
    covering = es_client.search(
        index=jobs,
        query={
            "bool": {
                "filter": [
                    {"range": {"slurm.job.start": {"lte": "2017-03-20T09:07:47Z"}}},
                    {"range": {"slurm.job.end": {"gte": "2017-03-20T09:09:43Z"}}},
                    {"exists": {"field": "slurm.job.step"}},
                ]
            }
        },
        size=20,
    )
    # the Darshan log's run: step 6, and the batch and extern steps that span the whole job
    assert sorted(h["_source"]["slurm"]["job"]["id"] for h in covering["hits"]["hits"]) == [
        "4478544.6",
        "4478544.batch",
        "4478544.extern",
    ]
    mapping = es_client.indices.get_mapping(index=jobs)
    [props] = [m["mappings"]["properties"] for m in mapping.values()]
    assert props["slurm"]["properties"]["job"]["properties"]["start"]["type"] == "date"

    resets = es_client.search(
        index="metrics-lmt.ost-hpctest", query={"term": {"lmt.ost.reset": True}}
    )["hits"]
    assert resets["total"]["value"] == 1
    assert resets["hits"][0]["_source"]["@timestamp"] == "2018-04-18T07:35:45.000Z"
    busy = es_client.search(
        index="metrics-lmt.ost-hpctest",
        query={"range": {"lmt.ost.write_bytes": {"gt": 500_000_000}}},
    )["hits"]
    assert sorted(h["_source"]["lmt"]["ost"]["write_bytes"] for h in busy["hits"]) == [
        563617704,
        774221064,
    ]


@pytest.mark.integration
def test_strict_mapping_rejects_unknown_fields(es_client: Elasticsearch) -> None:
    install(es_client, load_templates(), NO_ILM)
    bad = [
        {"create": {"_index": "logs-slurm.job-hpcstrict", "_id": "a"}},
        {"@timestamp": "2024-01-01T00:00:00Z", "slurm": {"job": {"jobid": "1"}}},
        {"create": {"_index": "metrics-lmt.ost-hpcstrict", "_id": "b"}},
        {"@timestamp": "2024-01-01T00:00:00Z", "lmt": {"ost": {"ost_id": 174}}},
    ]
    items = [i["create"] for i in es_client.bulk(operations=bad)["items"]]
    assert [(i["status"], i["error"]["type"]) for i in items] == [
        (400, "strict_dynamic_mapping_exception"),
        (400, "strict_dynamic_mapping_exception"),
    ]
