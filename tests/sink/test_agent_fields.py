"""Who wrote a document: ``agent.*`` on the documents of every stream, and never in an ``_id``.

One document (or the documents of one input) of each data stream is built twice, by two
writers that differ in every ``agent`` field (another host, another instance, another iolens
version). Each carries its writer's ``agent.*``, mapped by the ECS template; both get the same
``_id``, so a record read again by another instance or version is a 409, not a second copy.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
import yaml
from elasticsearch import Elasticsearch

import pipeline
from pipeline.formats.darshan.encode import diagnosis_document, file_documents, job_document
from pipeline.formats.darshan.read import read_darshan
from pipeline.formats.events.encode import model_documents, request_document, wall_offset
from pipeline.formats.fio.encode import FioSource, RecordFields, histogram_document
from pipeline.formats.fio.window import histogram_stats
from pipeline.formats.sysstat.encode import diskio_document
from pipeline.records.core import DiskSample, Document, LineRef
from pipeline.records.event_schema import event_schema
from pipeline.records.fio_bins import BinLayout
from pipeline.reducers.canonical import canonical
from pipeline.reducers.darshan_job import analyze
from pipeline.reducers.histogram import LatencyHistogram
from pipeline.reducers.incident import Incident, Span
from pipeline.reducers.io_diagnosis import diagnose
from pipeline.reducers.request_cluster import cluster_all
from pipeline.reducers.request_join import extract
from pipeline.sink.capabilities import detect
from pipeline.sink.documents import (
    DocContext,
    LatencyKey,
    PeerVerdict,
    latency_document,
    peer_anomaly_document,
    persistence_document,
)
from pipeline.sink.incident_documents import incident_source, write_incidents
from pipeline.sink.rate_documents import pipeline_document, service_rate_document
from pipeline.sink.templates import install, load_templates
from tests.conftest import darshan_wheel_logs
from tests.sink.test_hpc_documents import lmt_docs, slurm_docs
from tests.sink.test_request_documents import SCHEMA, events

WRITER_A = DocContext("agenttest", "shipper-a", "0b6f5c1e-2f7d-4a8e-9d3c-7e1a2b3c4d5e", "0.1.0")
WRITER_B = DocContext("agenttest", "shipper-b", "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a", "0.2.0")
NS = BinLayout(29, 0, "ns")
PCTS = (50.0, 90.0, 95.0, 99.0, 99.9)

Built = list[tuple[str, str, Mapping[str, Any]]]
"""``(stream, _id, source)`` of each document one builder made."""


def _docs(docs: Any) -> Built:
    return [(d.index.rsplit("-", 1)[0], d.doc_id, d.source) for d in docs]


def fio_histogram(ctx: DocContext) -> Built:
    hist = LatencyHistogram.from_sparse(NS, np.array([5, 700]), np.array([1, 30]))
    values, counts = hist.nonempty()
    rec = RecordFields(
        time_ms=1101,
        ddir="read",
        bs=4096,
        window_ms=(1767225600000, 1767225601101),
        interval_ms=(1767225600000, 1767225601000, 1000),
        bins=(NS.nbins, NS.unit, NS.coarseness),
        clat_ns={**histogram_stats(hist, PCTS), "histogram": {"values": values, "counts": counts}},
    )
    src = FioSource("fioclient7", "1", "randrw", "/d/randrw_clat_hist.1.log", "abc")
    ref = LineRef("1:2:abc", src.path, 12, 67000)
    return _docs([histogram_document(ctx, src, rec, ref, 61000, 1767225700000.0)])


def fio_latency(ctx: DocContext) -> Built:
    h = LatencyHistogram.from_sparse(NS, np.array([700, 800]), np.array([10, 1]))
    key = LatencyKey("host", "fioclient7", None, "read", 1767225600000, 1000, "window")
    return _docs([latency_document(ctx, key, histogram_stats(h, PCTS), 4, 1767225700000.0)])


def sysstat(ctx: DocContext) -> Built:
    s = DiskSample(
        "fs001", "dm-3", 1795661778.0, 15.0, 120.0, 512.0, 256.0, 0.0, 6.4, 0.7, 5.8, 41.0
    )
    return _docs([diskio_document(ctx, s, (), 1795661800000.0)])


def peer(ctx: DocContext) -> Built:
    v = PeerVerdict(
        group="lun",
        metric="await",
        host="fs001",
        device="dm-3",
        window_index=5,
        start_s=1795661719.0,
        end_s=1795661778.0,
        span_s=60.0,
        score=66.7,
        distance=1.5,
        threshold=1.117,
        bins=7,
        anomalous=True,
        faulty=False,
        samples=60,
    )
    persistence = persistence_doc(ctx, 1795662000000.0)
    return _docs([peer_anomaly_document(ctx, v, 1795661800000.0), persistence])


def persistence_doc(ctx: DocContext, created_ms: float) -> Document:
    """The persistence document of LUN fs001/dm-3 ranked first for await in one hour."""
    return persistence_document(
        ctx,
        metric="await",
        group="lun",
        host="fs001",
        device="dm-3",
        hour_end_s=1795662000.0,
        value=4,
        rank=1,
        created_ms=created_ms,
    )


def hpc(ctx: DocContext) -> Built:
    return _docs(slurm_docs(ctx) + lmt_docs(ctx))


def darshan(ctx: DocContext) -> Built:
    a = analyze(read_darshan(darshan_wheel_logs() / "sample-badost.darshan"))
    ref = (LineRef("k", "sample-badost.darshan", 1, 10),)
    docs = [job_document(ctx, a, ref, 0.0), *file_documents(ctx, a, ref, 0.0)]
    return _docs([*docs, diagnosis_document(ctx, diagnose(a), ref, 0.0)])


def incident(ctx: DocContext) -> Built:
    span = Span("fs001/dm-3", "lun", "await", 1795661778.0, 1795662378.0, True, 11, 91.7)
    inc = Incident(span, "/scratch", ("4478544",), ("/scratch/a",), 2, ("c1/1",), (1, 4.0), "x")
    source = incident_source(ctx, inc, (99.0, 5.0), 1795662400000.0)
    return [("logs-iolens.incident", span.id, source)]


def service_rates(ctx: DocContext) -> Built:
    values = {"queue": "parse", "rate_per_s": 812.5, "converged": True, "samples": 40}
    rate = service_rate_document(ctx, "shipper-host", "parse", values, 1795661800000.0, 0.0)
    health = {"acknowledged": 120, "queued": 3, "spool_full": False}
    return _docs([rate, pipeline_document(ctx, "shipper-host", health, 1795661800000.0)])


def requests(ctx: DocContext) -> Built:
    schema = event_schema(yaml.safe_load(SCHEMA.read_text()), str(SCHEMA))
    evs = events()
    offset = wall_offset(evs)
    assert offset is not None
    reqs = list(extract(evs, schema))
    forms = [canonical(r, schema) for r in reqs]
    model, final, outliers = cluster_all(forms)
    docs = [
        request_document(ctx, "web1", r, c, offset, (), 0.0, a, o)
        for r, c, a, o in zip(reqs, forms, final, outliers, strict=True)
    ]
    measured = {"cpu_ns": 6e7, "disk_bytes": 12288.0, "net_bytes": 164.0}
    docs += model_documents(ctx, "web1", model, measured, offset / 1e6 + 1000, 0.0)
    return _docs(docs)


BUILDERS: dict[str, Callable[[DocContext], Built]] = {
    "fio": fio_histogram,
    "fio.latency": fio_latency,
    "sysstat": sysstat,
    "peer": peer,
    "slurm+lmt": hpc,
    "darshan": darshan,
    "incident": incident,
    "service_rate": service_rates,
    "requests": requests,
}


def agent_of(ctx: DocContext) -> dict[str, str | None]:
    return {
        "type": "iolens",
        "name": ctx.agent_name,
        "version": ctx.agent_version,
        "id": ctx.agent_id,
    }


def test_the_builders_cover_every_data_stream() -> None:
    """Every index template's stream that iolens writes is built above (a new stream must be
    added here). Alert documents are written by Kibana's index connector, not by iolens."""
    streams = {o.name for o in load_templates() if o.kind == "index"} - {"logs-iolens.alert"}
    assert len(streams) == 15
    assert {stream for make in BUILDERS.values() for stream, _, _ in make(WRITER_A)} == streams


@pytest.mark.parametrize("make", BUILDERS.values(), ids=BUILDERS.keys())
def test_every_document_carries_its_writer(
    make: Callable[[DocContext], Built], unmapped_fields: Callable[..., list[str]]
) -> None:
    built = make(WRITER_A)
    assert built
    for stream, _, source in built:
        assert dict(source["agent"]) == agent_of(WRITER_A), stream
        # every other field is checked by the stream's own mapping test
        assert unmapped_fields({"agent": source["agent"]}, stream) == [], stream


@pytest.mark.parametrize("make", BUILDERS.values(), ids=BUILDERS.keys())
def test_another_writer_or_version_gives_the_same_ids(make: Callable[[DocContext], Built]) -> None:
    a, b = make(WRITER_A), make(WRITER_B)
    assert [(stream, ident) for stream, ident, _ in a] == [(s, i) for s, i, _ in b]
    assert all(dict(src["agent"]) == agent_of(WRITER_B) for _, _, src in b)
    # and nothing else differs: host.name is still the observed host, not the writer
    assert [without_agent(src) for _, _, src in a] == [without_agent(src) for _, _, src in b]


def without_agent(source: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in source.items() if k != "agent"}


def test_by_default_the_writer_is_this_host_and_this_version_without_an_id() -> None:
    [(_, _, source)] = fio_latency(DocContext("agenttest"))
    assert source["agent"] == {
        "type": "iolens",
        "name": socket.gethostname(),
        "version": pipeline.__version__,
    }


@pytest.mark.integration
def test_another_instance_taking_over_the_incidents_makes_no_revision(
    es_client: Elasticsearch,
) -> None:
    """An incident is updated in place when it changes; who wrote it is no change."""
    install(es_client, load_templates(), detect(es_client))
    ns = f"agent{uuid.uuid4().hex[:8]}"
    a, b = (dataclasses.replace(w, namespace=ns) for w in (WRITER_A, WRITER_B))
    [(_, ident, source)] = incident(a)
    assert write_incidents(es_client, ns, [(ident, dict(source))]) == 1
    [(_, same, again)] = incident(b)
    assert write_incidents(es_client, ns, [(same, dict(again))]) == 0
    stored = es_client.get(index=f"logs-iolens.incident-{ns}", id=ident)["_source"]
    assert stored["agent"] == agent_of(a)
