"""The templates against the documents iolens writes: every field of every document is mapped
with a compatible type, and every field a stream's ``@package`` template maps is filled by some
document.

For every data stream of ``mappings/`` (one per ``index_template.*.json``) documents are built
by the pipeline's own encoders from real inputs:

* ``metrics-fio.histogram``: the two hosts' fio logs of ``tests/data/fio/samples`` through the
  tail (``fio_tail``); ``metrics-fio.latency``: those documents merged by ``FioLatencyJob`` (its
  search answered from them instead of the cluster);
* ``metrics-sysstat.diskio``: ``tests/data/sysstat/peer_fault_sadf_d.csv`` parsed and
  downsampled to 15 s as the tail does;
* ``logs-slurm.job``: both sacct files of ``tests/data/slurm``; ``metrics-lmt.ost``: the LMT
  extract of ``tests/data/lmt`` (``tests/sink/test_hpc_documents.py``);
* ``logs-darshan.job``/``file``, ``logs-iolens.io_diagnosis``: the darshan wheel's
  ``sample-badost.darshan`` and ``sample.darshan``, diagnosed with the server-side evidence of
  ``tests/jobs/test_darshan_ingest.py`` (Slurm node count, LMT load, an anomalous OST/LUN);
* ``logs-iolens.request``, ``metrics-iolens.workload_model``: the real event log
  ``tests/data/events/http_server_4x25.jsonl`` (schema ``config/schemas/http_server.yaml``);
* ``metrics-iolens.pipeline``: ``Health.report`` over a stand-in sink; ``service_rate``:
  ``outcome_values`` of a converged and of a failed estimate (``tests/jobs/test_service_monitor``)
  and the busy-time parts the monitor reports;
* ``logs-iolens.alert``: the documents the rules' ``index`` connector and the watch write
  (``tests/kibana/test_alert_documents.py``).

The peer comparison's streams and incidents are made only by scheduled jobs against the cluster:
their encoders are called with the values of ``tests/sink/test_peer_documents.py``,
``tests/sink/test_agent_fields.py`` and ``tests/reducers/test_incident.py``, stamped with a lease
as the fenced writer does; incidents go through ``write_incidents`` to a stand-in client.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from pipeline.formats.darshan.encode import diagnosis_document, file_documents, job_document
from pipeline.formats.darshan.read import read_darshan
from pipeline.formats.events.decode import parse_events
from pipeline.formats.events.encode import model_documents, request_document, wall_offset
from pipeline.formats.fio.chain import fio_path_parts, fio_tail
from pipeline.formats.fio.encode import FioSource
from pipeline.formats.slurm.encode import slurm_job_document
from pipeline.formats.sysstat.encode import diskio_document
from pipeline.jobs.fio_latency import FioLatencyJob
from pipeline.jobs.health import Health, outcome_values
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.records.core import Document, LineRef
from pipeline.records.event_schema import event_schema
from pipeline.reducers.canonical import canonical
from pipeline.reducers.darshan_job import analyze
from pipeline.reducers.incident import Incident, Span
from pipeline.reducers.io_diagnosis import Evidence, LmtWindow, diagnose
from pipeline.reducers.request_cluster import cluster_all
from pipeline.reducers.request_join import extract
from pipeline.settings import FioSettings, ServiceRateSettings
from pipeline.settings.analysis import FIO_PERCENTILES
from pipeline.sink.clock_offset import ClockOffset
from pipeline.sink.documents import DocContext, peer_anomaly_document
from pipeline.sink.fenced import stamped
from pipeline.sink.incident_documents import incident_source, write_incidents
from pipeline.sink.rate_documents import service_rate_document
from tests.conftest import DARSHAN_SHARED, darshan_wheel_logs
from tests.jobs.test_service_monitor import estimate, monitor
from tests.jobs.test_sysstat_ingest import finished_intervals
from tests.kibana.alert_mappings import (
    COMPONENTS,
    INDEX_TEMPLATES,
    flatten,
    leaves,
    mapped_fields,
    template_for,
)
from tests.kibana.test_alert_documents import written
from tests.sink.test_agent_fields import persistence_doc
from tests.sink.test_hpc_documents import lmt_docs, slurm_jobs
from tests.sink.test_peer_documents import verdict
from tests.sink.test_request_documents import SCHEMA

DATA = Path(__file__).resolve().parents[1] / "data"
NAMESPACE = "tmpldocs"
CTX = DocContext(NAMESPACE, "shipper1", "0b6f5c1e-2f7d-4a8e-9d3c-7e1a2b3c4d5e", "0.1.0")
CREATED_MS = 1795662400000.0  # 2026-11-26T02:26:40Z
LEASE = {"generation": 3, "holder": "shipper1"}
"""What :meth:`pipeline.sink.lease.Lease.stamp` gives the holder of a scheduled job."""
FIO_RUN_START_MS = 1795325100203  # tests/data/fio/samples/README.md: node01's start
FIO_HOST_OFFSETS_MS = {"node01": 0, "node02": 1503}
FIO = FioSettings(host_offsets_ms=FIO_HOST_OFFSETS_MS, percentiles=FIO_PERCENTILES)
"""Every percentile the fio templates map, so that each is filled."""

STREAMS = sorted(o.name for o in INDEX_TEMPLATES)

Built = list[tuple[str, Mapping[str, Any]]]
"""``(_index, source)`` of every document built for a stream."""


class Runtime:
    """A value only known when the document is written: a mustache template the Kibana
    connector renders, a Painless expression of the watch, or its execution time."""

    def __repr__(self) -> str:
        return "<runtime value>"


RUNTIME = Runtime()


# -- builders --------------------------------------------------------------------------------


def _indexed(docs: list[Document]) -> Built:
    return [(d.index, d.source) for d in docs]


def fio_histogram_documents() -> list[Document]:
    """The histogram documents of the sample drop: both hosts, both jobs, every record."""
    fio = FIO
    docs: list[Document] = []
    for host, offset_ms in FIO_HOST_OFFSETS_MS.items():
        for path in sorted((DATA / "fio" / "samples" / host).glob("*_clat_hist.*.log")):
            prefix, job = fio_path_parts(path)
            key = (
                f"{host}:{job}:{path.stem}"  # the registry's key: its last part is the fingerprint
            )
            source = FioSource(host, job, prefix, str(path), key.rsplit(":", 1)[-1])
            tail = fio_tail(key, str(path), source, fio, FIO_RUN_START_MS + offset_ms)
            for result in tail.process(tail.read(1 << 26), CTX, CREATED_MS):
                assert result.bad is None, result.bad
                docs += result.docs
    return docs


def fio_histogram(_: Path) -> Built:
    return _indexed(fio_histogram_documents())


def fio_latency(tmp: Path) -> Built:
    """The latency documents ``FioLatencyJob`` merges from the sample drop's histograms (the
    search answered from them, in the order the job asks for: interval, then window end)."""
    stored = [{"_source": d.source} for d in fio_histogram_documents()]

    def search(index: str, query: Mapping[str, Any], sort: Any) -> list[Mapping[str, Any]]:
        assert index == f"metrics-fio.histogram-{NAMESPACE}"
        starts = set(query["bool"]["filter"][0]["terms"]["fio.interval.start_ms"])
        hits = [h for h in stored if h["_source"]["fio"]["interval"]["start_ms"] in starts]
        return sorted(hits, key=lambda h: (h["_source"]["fio"]["interval"]["start_ms"], when(h)))

    def when(hit: Mapping[str, Any]) -> int:
        end_ms: int = hit["_source"]["fio"]["window"]["end_ms"]
        return end_ms

    job = FioLatencyJob(
        search=search,
        emit=lambda d: None,
        dirty=DirtyIntervals(tmp / "jobs.sqlite"),
        fio=FIO,
        ctx=CTX,
        clock=lambda: CREATED_MS / 1000,
    )
    starts = sorted({h["_source"]["fio"]["interval"]["start_ms"] for h in stored})
    merged = job.compute_many(1000, starts)
    return _indexed([d for start in starts for d in merged.get(start, [])])


def sysstat_diskio(_: Path) -> Built:
    lines = (DATA / "sysstat" / "peer_fault_sadf_d.csv").read_bytes().splitlines()
    return _indexed([diskio_document(CTX, s, (), CREATED_MS) for s in finished_intervals(lines)])


def slurm_job(_: Path) -> Built:
    docs = []
    for name in ("sacct_4478544.txt", "sacct_edge_cases.txt"):
        for job, ref in slurm_jobs(DATA / "slurm" / name):
            docs.append(slurm_job_document(CTX, job, (ref,), CREATED_MS))
    return _indexed(docs)


def lmt_ost(_: Path) -> Built:
    return _indexed(lmt_docs(CTX))


DARSHAN_LOGS = (
    darshan_wheel_logs() / "sample-badost.darshan",
    darshan_wheel_logs() / "sample.darshan",
    # a user in the log's name (<user>_<exe>_id<jobid>_...), and a log with partial modules
    DARSHAN_SHARED
    / "mpi_io_test_with_dxt"
    / "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan",
    DARSHAN_SHARED / "partial_data_stdio" / "partial_data_stdio.darshan",
)
REF = (LineRef("k", "x.darshan", 1, 10),)


def darshan_documents() -> Iterator[Document]:
    """Job, file and diagnosis documents of the darshan logs; the diagnosis with the evidence
    ``test_darshan_ingest`` reads from the cluster (OST 14 slow on LMT and on ``oss4/sdc``)."""
    for path in DARSHAN_LOGS:
        a = analyze(read_darshan(path))
        yield job_document(CTX, a, REF, CREATED_MS)
        yield from file_documents(CTX, a, REF, CREATED_MS)
        placement = {cf.name: ("/scratch", "oss4/sdc") for cf in a.critical[:3]}
        d = diagnose(
            a,
            evidence=Evidence(
                node_count=86,
                lmt=LmtWindow({14: 0.5 * 2**20}),
                anomalous_osts={14: "oss4/sdc"},
                placement=placement,
                anomalous_luns={"oss4/sdc": 91.7},
            ),
        )
        yield diagnosis_document(CTX, d, REF, CREATED_MS)


def darshan(stream: str) -> Callable[[Path], Built]:
    def build(_: Path) -> Built:
        return [(d.index, d.source) for d in darshan_documents() if d.index.startswith(stream)]

    return build


EVENTS = DATA / "events" / "http_server_4x25.jsonl"
MODEL = "http_server"


def event_documents() -> list[Document]:
    """Request documents of the recorded HTTP server's events, clustered, and the model's
    documents (``model_documents``) against the requests' measured totals."""
    schema = event_schema(yaml.safe_load(SCHEMA.read_text()), str(SCHEMA))
    evs = list(parse_events(EVENTS.read_text().splitlines(), str(EVENTS)))
    offset = wall_offset(evs)
    assert offset is not None
    reqs = list(extract(evs, schema))
    forms = [canonical(r, schema) for r in reqs]
    model, final, outliers = cluster_all(forms)
    docs = [
        request_document(CTX, "web1", r, c, offset, (), CREATED_MS, a, o, MODEL)
        for r, c, a, o in zip(reqs, forms, final, outliers, strict=True)
    ]
    measured: dict[str, float] = {}
    for r in reqs:
        for k, v in r.resources.items():
            measured[k] = measured.get(k, 0.0) + v
    when_ms = (reqs[-1].end_ns + offset) / 1e6
    return docs + list(model_documents(CTX, "web1", model, measured, when_ms, CREATED_MS, MODEL))


def events(stream: str) -> Callable[[Path], Built]:
    def build(_: Path) -> Built:
        return [(d.index, d.source) for d in event_documents() if d.index.startswith(stream)]

    return build


def peer_anomaly(_: Path) -> Built:
    compared = verdict(score=66.7, distance=1.5, anomalous=True, faulty=True)
    skipped = verdict(distance=None, samples=0, skipped="too_few_samples", bins=5)
    docs = [peer_anomaly_document(CTX, v, CREATED_MS) for v in (compared, skipped)]
    return _indexed([stamped(d, LEASE) for d in docs])


def persistence(_: Path) -> Built:
    return _indexed([stamped(persistence_doc(CTX, CREATED_MS), LEASE)])


class IncidentClient:
    """Stands in for the cluster in :func:`write_incidents`: no incident is stored yet, and
    what is created is kept."""

    def __init__(self) -> None:
        self.created: Built = []

    def search(self, **_: Any) -> dict[str, Any]:
        return {"hits": {"hits": []}}

    def create(self, *, index: str, id: str, document: dict[str, Any], refresh: bool) -> None:
        self.created.append((index, document))


def incident(_: Path) -> Built:
    closed = Span("fs001/dm-3", "lun", "await", 1795661778.0, 1795662378.0, True, 11, 91.7)
    open_ = Span("vm/loop3", "lab", "await", 1795661000.0, 1795661200.0, False, 12, 100.0)
    incidents = [
        Incident(closed, "/scratch", ("4478544",), ("/scratch/a",), 2, ("c1/1",), (1, 4.0), "x"),
        Incident(open_, None, (), (), 0, (), None, "vm/loop3 is slower than its peers"),
    ]
    docs = [(i.span.id, incident_source(CTX, i, (99.0, 5.0), CREATED_MS)) for i in incidents]
    client = IncidentClient()
    assert write_incidents(client, NAMESPACE, docs, LEASE) == 2  # type: ignore[arg-type]
    return client.created


def service_rate(_: Path) -> Built:
    """A converged estimate of the sink (the bottleneck), a failure of the seed method, and
    the busy-time rates of the produce stage's parts, as ``Health`` makes them."""
    from dataclasses import replace

    st = monitor().stages["sink"]
    st.samples.extend([(1.0, 10, True)] * 4)
    failure = replace(estimate(20.0), converged=False, method_failed=True, estimator="seed")
    docs = [service_rate_document(CTX, "shipper1", "sink", outcome_values(st, failure, None), 1, 1)]
    st.estimate = estimate(20.0)  # the monitor keeps the converged estimate (utilisation)
    values = outcome_values(st, st.estimate, "sink")
    docs.append(service_rate_document(CTX, "shipper1", "sink", values, CREATED_MS, CREATED_MS))
    part = {"method": "busy_time", "rate_per_s": 400.0, "confidence": "exact", "busy_s": 1.0}
    docs.append(
        service_rate_document(CTX, "shipper1", "read", part | {"bottleneck": True}, 1.0, 1.0)
    )
    return _indexed(docs)


class StandInSink:
    """What :class:`~pipeline.jobs.health.Health` reads of the sink: lag, queue, spool, dead
    letters; the documents it adds are kept."""

    def __init__(self) -> None:
        self.added: list[Document] = []
        self.queue = [object()] * 3
        self.deadletters = SimpleNamespace(count=lambda: {"documents": 2, "inputs": 1})
        self.spool = SimpleNamespace(pending=lambda: 40, size=lambda: 81920)
        self.sink = SimpleNamespace(full=lambda: False)

    def take_lag(self) -> tuple[int, float | None, float | None]:
        return 120, 0.8, 2.5

    def add(self, doc: Document) -> None:
        self.added.append(doc)


def pipeline_health(tmp: Path) -> Built:
    sink = StandInSink()
    health = Health(
        sink,  # type: ignore[arg-type]
        ServiceRateSettings(enabled=False),
        tmp,
        CTX,
        "shipper1",
        clock=lambda: CREATED_MS / 1000,
        files=lambda: 4,
    )
    health.report()  # no lag known, no clock measured, no monitor
    sink.take_lag = lambda: (0, None, None)  # type: ignore[method-assign]
    health.clock_watch = SimpleNamespace(check=lambda: ClockOffset(-0.01234, 0.002))  # type: ignore[assignment]
    health.monitor = SimpleNamespace(bottleneck=lambda: "sink")  # type: ignore[assignment]
    health.report()
    sink.take_lag = lambda: (120, 0.8, 2.5)  # type: ignore[method-assign]
    health.report()
    return _indexed(sink.added)


def _alert_value(value: Any, painless: bool) -> Any:
    """A value of an alert document as written: literals as they are, mustache templates and
    Painless expressions (only known when the alert fires) and the execution time field
    (``now``) as :data:`RUNTIME`."""
    if value == "now":
        return RUNTIME
    if not painless:
        return RUNTIME if "{{" in value else value
    if len(value) > 1 and value[0] == value[-1] == "'" and "'" not in value[1:-1]:
        return value[1:-1]  # a Painless string literal
    return RUNTIME


def alert(_: Path) -> Built:
    """The documents every rule's ``index`` connector action and the watch write, as nested
    sources (namespace ``prod``). The rules' values are JSON strings, possibly mustache
    templates; the watch's are Painless source, where literals are quoted."""
    out: Built = []
    for _who, index, _op, fields in written():
        painless = fields["event.kind"].startswith("'")
        source: dict[str, Any] = {}
        for path, value in fields.items():
            *parents, last = [path] if path == "@timestamp" else path.split(".")
            node = source
            for p in parents:
                node = node.setdefault(p, {})
            node[last] = _alert_value(value, painless)
        out.append((index, source))
    return out


BUILDERS: dict[str, Callable[[Path], Built]] = {
    "logs-darshan.file": darshan("logs-darshan.file-"),
    "logs-darshan.job": darshan("logs-darshan.job-"),
    "logs-iolens.alert": alert,
    "logs-iolens.incident": incident,
    "logs-iolens.io_diagnosis": darshan("logs-iolens.io_diagnosis-"),
    "logs-iolens.request": events("logs-iolens.request-"),
    "logs-slurm.job": slurm_job,
    "metrics-fio.histogram": fio_histogram,
    "metrics-fio.latency": fio_latency,
    "metrics-iolens.peer_anomaly": peer_anomaly,
    "metrics-iolens.persistence": persistence,
    "metrics-iolens.pipeline": pipeline_health,
    "metrics-iolens.service_rate": service_rate,
    "metrics-iolens.workload_model": events("metrics-iolens.workload_model-"),
    "metrics-lmt.ost": lmt_ost,
    "metrics-sysstat.diskio": sysstat_diskio,
}

NAMESPACES = {"logs-iolens.alert": "prod"}
"""The namespace of a stream's documents when not :data:`NAMESPACE` (the alert tests')."""

NOT_FILLED: dict[str, dict[str, str]] = {
    "metrics-iolens.workload_model": {
        "iolens.workload_model.resources.sched_cpu_ns": "measured only from perf sched events "
        "merged into the event log; the recorded HTTP server log has none (0 is left out)",
        "iolens.workload_model.model_error.sched_cpu_ns": "the same: no scheduler CPU measured, "
        "so no error of it",
    },
}
"""Per stream, fields its ``@package`` template maps that no document built here fills, each
with why."""


# -- the checks ------------------------------------------------------------------------------

WHOLE = {"histogram", "flattened"}
"""Field types whose value is one JSON object, not walked into."""


def _owner(path: str, mapped: Mapping[str, str]) -> str | None:
    """The field mapped as a histogram or flattened object ``path`` is inside, if any."""
    parts = path.split(".")
    for n in range(1, len(parts)):
        prefix = ".".join(parts[:n])
        if mapped.get(prefix) in WHOLE:
            return prefix
    return None


def fields_of(
    source: Mapping[str, Any], mapped: Mapping[str, str], prefix: str = ""
) -> list[tuple[str, Any]]:
    """``(path, value)`` of every leaf of a document: arrays of objects walked element by
    element, the object of a histogram or flattened field kept whole."""
    out: list[tuple[str, Any]] = []
    whole: dict[str, dict[str, Any]] = {}
    for path, value in leaves(source, prefix).items():
        owner = _owner(path, mapped)
        if owner is not None:
            whole.setdefault(owner, {})[path[len(owner) + 1 :]] = value
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for item in value:
                out += fields_of(item, mapped, f"{path}.")
        else:
            out.append((path, value))
    return out + list(whole.items())


def dynamic_type(stream: str, path: str) -> str | None:
    """The type a dynamic template of the stream's components gives ``path`` (None: none)."""
    _, body = template_for(f"{stream}-x")
    for part in body["composed_of"]:
        mappings = COMPONENTS.get(part, {}).get("template", {}).get("mappings", {})
        for entry in mappings.get("dynamic_templates", []):
            [(_, spec)] = entry.items()
            if fnmatch.fnmatchcase(path, spec["path_match"]):
                found: str = spec["mapping"]["type"]
                return found
    return None


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _date(v: Any) -> bool:
    if _number(v):
        return True
    if not isinstance(v, str):
        return False
    try:
        datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _histogram(v: Any) -> bool:
    if not isinstance(v, Mapping) or set(v) != {"values", "counts"}:
        return False
    values, counts = v["values"], v["counts"]
    return (
        len(values) == len(counts)
        and all(_number(x) for x in values)
        and all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
        and list(values) == sorted(values)  # Elasticsearch takes ascending values only
    )


ACCEPTS: dict[str, Callable[[Any], bool]] = {
    **dict.fromkeys(
        ("keyword", "constant_keyword", "wildcard", "text", "match_only_text", "ip"),
        lambda v: isinstance(v, str),
    ),
    **dict.fromkeys(("long", "integer"), lambda v: isinstance(v, int) and not isinstance(v, bool)),
    **dict.fromkeys(("double", "float", "scaled_float"), _number),
    "boolean": lambda v: isinstance(v, bool),
    "date": _date,
    "histogram": _histogram,
    "flattened": lambda v: isinstance(v, Mapping),
}
"""Mapped type -> whether a JSON value (one element of an array) fits it."""


def fits(mapped: str, value: Any) -> bool:
    """Whether ``value`` (None, a value or an array of values) fits a field of type
    ``mapped``; a value only known when written (:data:`RUNTIME`) is not judged."""
    if value is None or value is RUNTIME:
        return True
    if isinstance(value, list) and mapped not in WHOLE:
        return all(fits(mapped, v) for v in value)
    return mapped in ACCEPTS and ACCEPTS[mapped](value)


def filled(value: Any) -> bool:
    """Whether a value puts something in its field (null and [] do not)."""
    return value is not None and value != []


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Built]:
    """Every stream's documents, built once for the module."""
    return {stream: make(tmp_path_factory.mktemp(stream)) for stream, make in BUILDERS.items()}


def test_every_data_stream_has_documents() -> None:
    assert sorted(BUILDERS) == STREAMS
    assert len(STREAMS) == 16


@pytest.mark.parametrize("stream", STREAMS)
def test_documents_go_to_their_stream(stream: str, built: dict[str, Built]) -> None:
    docs = built[stream]
    assert docs, f"{stream}: no documents built"
    kind, dataset = stream.split("-", 1)
    namespace = NAMESPACES.get(stream, NAMESPACE)
    for index, source in docs:
        assert index == f"{stream}-{namespace}", f"{stream}: _index {index}"
        assert source["data_stream"] == {
            "type": kind,
            "dataset": dataset,
            "namespace": namespace,
        }, f"{stream}: data_stream {source['data_stream']}"
        assert source["event"]["dataset"] == dataset, f"{stream}: event.dataset"
        assert template_for(index)[0] == stream, f"{stream}: {index} gets another template"


@pytest.mark.parametrize("stream", STREAMS)
def test_every_document_field_is_mapped_with_a_compatible_type(
    stream: str, built: dict[str, Built]
) -> None:
    mapped = mapped_fields(f"{stream}-{NAMESPACE}")
    unmapped: set[str] = set()
    misfits: dict[str, tuple[str, Any]] = {}
    for _, source in built[stream]:
        for path, value in fields_of(source, mapped):
            kind = mapped.get(path) or dynamic_type(stream, path)
            if kind is None:
                unmapped.add(path)
            elif not fits(kind, value) and path not in misfits:
                misfits[path] = (kind, value)
    assert not unmapped, f"{stream}: fields the templates do not map: {sorted(unmapped)}"
    wrong = [f"{p} ({k}) <- {v!r:.80}" for p, (k, v) in sorted(misfits.items())]
    assert not wrong, f"{stream}: values that do not fit the mapped type: {wrong}"


@pytest.mark.parametrize("stream", STREAMS)
def test_every_field_of_the_package_template_is_filled(
    stream: str, built: dict[str, Built]
) -> None:
    package = COMPONENTS[f"{stream}@package"]["template"]["mappings"]["properties"]
    own = set(flatten(package))
    mapped = mapped_fields(f"{stream}-{NAMESPACE}")
    seen = {
        path
        for _, source in built[stream]
        for path, value in fields_of(source, mapped)
        if filled(value)
    }
    allowed = NOT_FILLED.get(stream, {})
    missing = sorted(own - seen - set(allowed))
    assert not missing, (
        f"{stream}: fields the @package template maps that no document fills: {missing}"
    )
    stale = sorted(set(allowed) & seen)
    assert not stale, f"{stream}: listed in NOT_FILLED but filled: {stale}"
    assert set(allowed) <= own, f"{stream}: NOT_FILLED lists fields @package does not map"
