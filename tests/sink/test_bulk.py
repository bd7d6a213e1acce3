"""BulkSink: outcomes against the embedded server; retry and spooling with scripted clients."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from elastic_transport import ApiResponseMeta, HttpHeaders, NodeConfig
from elasticsearch import ApiError, ConnectionError, Elasticsearch

from pipeline.records.core import Document, LineRef
from pipeline.settings import SinkSettings
from pipeline.sink.actions import expand, ndjson
from pipeline.sink.bulk import BulkSink
from pipeline.sink.bulk_request import FILTER_PATH
from pipeline.sink.capabilities import Capabilities
from pipeline.sink.spool import compact_json, document_to_dict
from pipeline.sink.stats import StreamStats
from pipeline.sink.templates import install, load_templates

HIST = "metrics-fio.histogram-{ns}"


def make_doc(i: int, ns: str = "default", **fio: Any) -> Document:
    source = {
        "@timestamp": f"2025-01-01T00:00:{i:02d}.000Z",
        "data_stream": {"type": "metrics", "dataset": "fio.histogram", "namespace": ns},
        "host.name": "node1",
        "fio": {
            "job": "randread",
            "ddir": "read",
            "clat_ns": {
                "histogram": {"values": [1000.0, 2000.0], "counts": [1, i + 1]},
                "samples": i + 2,
            },
            **fio,
        },
    }
    ref = LineRef("2049:7:ff", "/drop/a_clat_hist.1.log", i + 1, 100 * (i + 1))
    return Document(HIST.format(ns=ns), f"doc-{i}", source, (ref,))


class Acks:
    """Records on_ack calls."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, docs: Sequence[Document]) -> None:
        self.calls.append([d.doc_id for d in docs])

    @property
    def ids(self) -> list[str]:
        return [i for call in self.calls for i in call]


def item(status: int, error_type: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"status": status}
    if error_type:
        body["error"] = {"type": error_type, "reason": f"{error_type} reason"}
    return {"create": body}


def api_error(status: int) -> ApiError:
    meta = ApiResponseMeta(
        status=status,
        http_version="1.1",
        headers=HttpHeaders(),
        duration=0.0,
        node=NodeConfig("http", "localhost", 9200),
    )
    return ApiError("rejected", meta=meta, body={"error": {"type": "x"}, "status": status})


Script = Callable[[list[str]], Mapping[str, Any]]


class FakeClient:
    """A stand-in for Elasticsearch.bulk: each call runs the next scripted step.

    A step gets the ``_id``s of the request and returns a response body or raises.
    """

    def __init__(self, *steps: Script) -> None:
        self.steps = list(steps)
        self.requests: list[list[str]] = []

    def bulk(self, *, operations: bytes, filter_path: str) -> Any:
        assert filter_path == FILTER_PATH
        assert operations.endswith(b"\n")
        lines = [json.loads(line) for line in operations.splitlines()]
        actions = lines[0::2]
        assert all(list(a) == ["create"] for a in actions)
        ids = [a["create"]["_id"] for a in actions]
        self.requests.append(ids)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        return step(ids)


def all_ok(ids: list[str]) -> Mapping[str, Any]:
    return {"errors": False, "items": [item(201) for _ in ids]}


def all_429(ids: list[str]) -> Mapping[str, Any]:
    return {"errors": True, "items": [item(429, "es_rejected_execution_exception") for _ in ids]}


def refused(ids: list[str]) -> Mapping[str, Any]:
    raise ConnectionError("Connection refused")


SETTINGS = SinkSettings(
    chunk_max_docs=100,
    chunk_max_bytes=1 << 20,
    flush_interval_s=1.0,
    max_retries=3,
    backoff_initial_s=0.5,
    backoff_max_s=30.0,
)


def sink_for(client: Any, tmp_path: Path, acks: Acks, **kw: Any) -> tuple[BulkSink, list[float]]:
    sleeps: list[float] = []
    kw.setdefault("rng", lambda: 0.0)
    kw.setdefault("settings", SETTINGS)
    sink = BulkSink(client, state_dir=tmp_path, on_ack=acks, sleep=sleeps.append, **kw)
    return sink, sleeps


# -- against the embedded server ----------------------------------------------------------------


@pytest.fixture
def installed(es_client: Elasticsearch) -> Elasticsearch:
    caps = Capabilities("8.15.3", ilm=False, data_stream_admin=False, percentiles_agg=False)
    install(es_client, load_templates(), caps)
    return es_client


@pytest.mark.integration
def test_created_duplicate_and_strict_mapping_rejection(
    installed: Elasticsearch, tmp_path: Path
) -> None:
    acks = Acks()
    sink, sleeps = sink_for(installed, tmp_path, acks)
    sink.add(make_doc(1, "bulk1"))
    sink.flush()
    sink.add(make_doc(1, "bulk1"))  # same _id again -> 409
    sink.add(make_doc(2, "bulk1", unknown_field=1))  # strict fio -> 400
    sink.add(make_doc(3, "bulk1"))
    sink.close()

    assert acks.calls == [["doc-1"], ["doc-1", "doc-2", "doc-3"]]
    assert sleeps == []
    assert sink.stats() == {
        "metrics-fio.histogram-bulk1": StreamStats(indexed=2, duplicate=1, dead_lettered=1)
    }
    [dead] = list(sink.deadletters.iter_documents())
    assert dead.doc == make_doc(2, "bulk1", unknown_field=1)
    assert (dead.status, dead.error_type, dead.stage) == (
        400,
        "strict_dynamic_mapping_exception",
        "sink",
    )
    assert dead.reason is not None and "unknown_field" in dead.reason
    installed.indices.refresh(index="metrics-fio.histogram-bulk1")
    hits = installed.search(index="metrics-fio.histogram-bulk1", sort=["@timestamp"])
    assert [h["_id"] for h in hits["hits"]["hits"]] == ["doc-1", "doc-3"]


@pytest.mark.integration
def test_dead_letters_replay_after_the_cause_is_fixed(
    installed: Elasticsearch, tmp_path: Path
) -> None:
    acks = Acks()
    sink, _ = sink_for(installed, tmp_path, acks)
    sink.add(make_doc(5, "bulk2", unknown_field=1))
    sink.flush()
    assert sink.deadletters.count()["documents"] == 1
    installed.indices.put_mapping(  # the fix: map the new field in this stream
        index="metrics-fio.histogram-bulk2",
        properties={"fio": {"properties": {"unknown_field": {"type": "long"}}}},
    )
    assert sink.deadletters.replay(sink) == 1
    assert sink.deadletters.count()["documents"] == 0
    assert acks.ids == ["doc-5"]  # acknowledged once, when it was dead-lettered
    assert sink.stats()["metrics-fio.histogram-bulk2"] == StreamStats(indexed=1, dead_lettered=1)


@pytest.mark.integration
def test_unreachable_server_spools_then_delivers(
    installed: Elasticsearch, es_url: str, tmp_path: Path
) -> None:
    dead = Elasticsearch("http://127.0.0.1:1", max_retries=0)
    acks = Acks()
    sink, _ = sink_for(dead, tmp_path, acks)
    sink.add(make_doc(1, "bulk3"))
    sink.add(make_doc(2, "bulk3"))
    sink.close()
    dead.close()
    assert acks.calls == []
    assert sink.spool.pending() == 2
    later, _ = sink_for(installed, tmp_path, acks)
    later.flush()
    assert acks.calls == [["doc-1", "doc-2"]]
    assert later.spool.pending() == 0
    assert later.stats() == {"metrics-fio.histogram-bulk3": StreamStats(indexed=2)}


# -- scripted clients ---------------------------------------------------------------------------


def test_429_then_201_is_retried_after_the_backoff_delay(tmp_path: Path) -> None:
    client = FakeClient(all_429, all_ok)
    acks = Acks()
    sink, sleeps = sink_for(client, tmp_path, acks)
    sink.add(make_doc(1))
    sink.add(make_doc(2))
    sink.flush()
    assert client.requests == [["doc-1", "doc-2"], ["doc-1", "doc-2"]]
    assert sleeps == [0.25]  # equal jitter with rng = 0: half of backoff_initial_s
    assert acks.calls == [["doc-1", "doc-2"]]
    assert sink.stats() == {"metrics-fio.histogram-default": StreamStats(indexed=2, retried=2)}


def test_only_the_failed_items_are_retried(tmp_path: Path) -> None:
    def mixed(ids: list[str]) -> Mapping[str, Any]:
        statuses = [item(201), item(503, "unavailable"), item(409, "version_conflict")]
        return {"errors": True, "items": statuses}

    client = FakeClient(mixed, all_ok)
    acks = Acks()
    sink, sleeps = sink_for(client, tmp_path, acks, rng=lambda: 1.0)
    for i in (1, 2, 3):
        sink.add(make_doc(i))
    sink.flush()
    assert client.requests == [["doc-1", "doc-2", "doc-3"], ["doc-2"]]
    assert sleeps == [0.5]
    assert acks.calls == [["doc-1", "doc-3"], ["doc-2"]]
    assert sink.stats()["metrics-fio.histogram-default"] == StreamStats(
        indexed=2, duplicate=1, retried=1
    )


def test_persistent_429_is_spooled_after_max_retries_and_not_acked(tmp_path: Path) -> None:
    client = FakeClient(all_429)
    acks = Acks()
    sink, sleeps = sink_for(client, tmp_path, acks)
    sink.add(make_doc(1))
    sink._send_buffer()
    assert len(client.requests) == 1 + SETTINGS.max_retries
    assert sleeps == [0.25, 0.5, 1.0]
    assert acks.calls == []
    assert sink.spool.pending() == 1
    assert sink.stats()["metrics-fio.histogram-default"] == StreamStats(retried=3, spooled=1)


def test_whole_request_503_is_retried_and_400_dead_letters(tmp_path: Path) -> None:
    def unavailable(ids: list[str]) -> Mapping[str, Any]:
        raise api_error(503)

    def bad_request(ids: list[str]) -> Mapping[str, Any]:
        raise api_error(400)

    client = FakeClient(unavailable, all_ok, bad_request)
    acks = Acks()
    sink, sleeps = sink_for(client, tmp_path, acks)
    sink.add(make_doc(1))
    sink.flush()
    sink.add(make_doc(2))
    sink.flush()
    assert sleeps == [0.25]
    assert acks.calls == [["doc-1"], ["doc-2"]]
    [dead] = list(sink.deadletters.iter_documents())
    assert (dead.doc.doc_id, dead.status, dead.error_type) == ("doc-2", 400, "request_error")


def test_401_spools_instead_of_dead_lettering(tmp_path: Path) -> None:
    def unauthorized(ids: list[str]) -> Mapping[str, Any]:
        raise api_error(401)

    sink, sleeps = sink_for(FakeClient(unauthorized), tmp_path, Acks())
    sink.add(make_doc(1))
    sink.flush()
    assert (sink.spool.pending(), sink.deadletters.count()["documents"], sleeps) == (1, 0, [])


def test_connection_error_spools_the_chunk_and_a_later_flush_delivers(tmp_path: Path) -> None:
    client = FakeClient(refused, refused, all_ok)
    acks = Acks()
    sink, sleeps = sink_for(client, tmp_path, acks)
    sink.add(make_doc(1))
    sink.add(make_doc(2))
    sink.flush()  # refused: spooled, no sleeping
    assert (sink.spool.pending(), acks.calls, sleeps) == (2, [], [])
    sink.add(make_doc(3))
    sink.flush()  # the spool drain is refused (2nd step), the buffer goes out (3rd step)
    assert client.requests == [["doc-1", "doc-2"], ["doc-1", "doc-2"], ["doc-3"]]
    assert acks.calls == [["doc-3"]]
    sink.flush()
    assert acks.calls == [["doc-3"], ["doc-1", "doc-2"]]
    assert sink.spool.pending() == 0
    assert sink.stats()["metrics-fio.histogram-default"] == StreamStats(indexed=3, spooled=2)


def test_chunks_by_count_and_bytes(tmp_path: Path) -> None:
    client = FakeClient(all_ok)
    size = expand(make_doc(1))[2]
    settings = SinkSettings(chunk_max_docs=2, chunk_max_bytes=10 * size)
    sink, _ = sink_for(client, tmp_path, Acks(), settings=settings)
    for i in range(5):
        sink.add(make_doc(i))
    assert client.requests == [["doc-0", "doc-1"], ["doc-2", "doc-3"]]

    client2 = FakeClient(all_ok)
    by_bytes = SinkSettings(chunk_max_docs=100, chunk_max_bytes=2 * size + size // 2)
    sink2, _ = sink_for(client2, tmp_path / "b", Acks(), settings=by_bytes)
    for i in range(5):
        sink2.add(make_doc(i))
    sink2.flush()
    assert client2.requests == [["doc-0", "doc-1"], ["doc-2", "doc-3"], ["doc-4"]]


def test_maybe_flush_waits_for_the_flush_interval(tmp_path: Path) -> None:
    now = [100.0]
    client = FakeClient(all_ok)
    sink, _ = sink_for(client, tmp_path, Acks(), clock=lambda: now[0])
    sink.add(make_doc(1))
    now[0] = 100.9
    sink.add(make_doc(2))
    assert sink.maybe_flush() is False
    now[0] = 101.0
    assert sink.maybe_flush() is True
    assert client.requests == [["doc-1", "doc-2"]]
    assert sink.maybe_flush() is False


def test_maybe_flush_retries_the_spool_only_after_a_backoff(tmp_path: Path) -> None:
    now = [0.0]
    client = FakeClient(refused, refused, all_ok)
    sink, _ = sink_for(client, tmp_path, Acks(), clock=lambda: now[0])
    sink.add(make_doc(1))
    sink.flush()  # refused -> spooled
    assert sink.maybe_flush() is True  # first drain attempt: refused again
    assert len(client.requests) == 2
    now[0] = 0.4
    assert sink.maybe_flush() is False  # next try at 0.5 s (backoff_initial_s)
    now[0] = 0.5
    assert sink.maybe_flush() is True
    assert sink.spool.pending() == 0


def test_a_source_with_no_json_form_is_dead_lettered_and_use_after_close_refused(
    tmp_path: Path,
) -> None:
    client, acks = FakeClient(all_ok), Acks()
    sink, _ = sink_for(client, tmp_path, acks)
    bad = Document("metrics-x-default", "nan", {"v": float("nan"), "w": [float("inf"), 1]})
    sink.add(bad)  # neither raises nor reaches the cluster
    sink.add(make_doc(1))
    sink.close()
    assert client.requests == [["doc-1"]]
    assert acks.calls == [["nan"], ["doc-1"]]
    [entry] = [json.loads(line) for line in sink.deadletters.documents_path.open()]
    assert (entry["_id"], entry["status"], entry["error"]["type"], entry["stage"]) == (
        "nan",
        0,
        "not_json",
        "sink",
    )
    assert entry["document"] == {"v": "nan", "w": ["inf", 1]}
    assert "metrics-x-default/nan is not JSON" in entry["error"]["reason"]
    with pytest.raises(RuntimeError):
        sink.add(make_doc(1))


def test_every_added_document_is_acked_exactly_once(tmp_path: Path) -> None:
    outcomes = itertools.cycle([item(201), item(409, "v"), item(400, "x"), item(429, "r")])

    def some_fail(ids: list[str]) -> Mapping[str, Any]:
        return {"errors": True, "items": [next(outcomes) for _ in ids]}

    client = FakeClient(some_fail)
    acks = Acks()
    sink, _ = sink_for(client, tmp_path, acks, settings=SinkSettings(chunk_max_docs=7))
    for i in range(50):
        sink.add(make_doc(i))
    sink.flush()
    while sink.spool.pending():
        sink.flush()
    assert sorted(acks.ids) == sorted(f"doc-{i}" for i in range(50))


def test_ndjson_writes_each_action_and_source_on_a_line() -> None:
    docs = [
        Document("logs-x-default", "Zq3_-a", {"a": 1}),
        Document('odd"index', "id\\1", {"b": [1.5, "é"]}),
    ]
    body = ndjson(docs)
    assert body.endswith(b"\n")
    assert [json.loads(line) for line in body.splitlines()] == [
        {"create": {"_index": "logs-x-default", "_id": "Zq3_-a"}},
        {"a": 1},
        {"create": {"_index": 'odd"index', "_id": "id\\1"}},
        {"b": [1.5, "é"]},
    ]


def spooled_size(doc: Document) -> int:
    """Bytes ``doc`` takes in the spool (its NDJSON line)."""
    return len(compact_json(document_to_dict(doc)).encode()) + 1


def test_a_full_spool_holds_documents_until_the_cluster_takes_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [0.0]
    client = FakeClient(refused, refused, refused, all_ok)
    acks = Acks()
    one = spooled_size(make_doc(1))
    settings = SETTINGS.model_copy(update={"spool_max_bytes": 3 * one, "chunk_max_docs": 2})
    sink, _ = sink_for(client, tmp_path, acks, settings=settings, clock=lambda: now[0])
    sink.add(make_doc(1))
    sink.add(make_doc(2))  # a chunk of two: refused, spooled
    assert (sink.spool.pending(), sink.full()) == (2, False)
    with caplog.at_level("ERROR"):
        sink.add(make_doc(3))
        sink.add(make_doc(4))  # refused; the spool has no room for two more: held
    assert (sink.spool.pending(), sink.full(), sink.pending()) == (2, True, 4)
    assert "sink.spool_max_bytes" in caplog.text and "nothing is dropped" in caplog.text
    assert sink.maybe_flush() is True  # the spool drain is refused: the next try backs off
    now[0] = 0.4
    assert sink.maybe_flush() is False
    now[0] = 0.5
    assert sink.maybe_flush() is True  # the cluster is back: spool first, then the held ones
    assert acks.calls == [["doc-1", "doc-2"], ["doc-3", "doc-4"]]
    assert (sink.full(), sink.pending()) == (False, 0)
    assert sink.stats()["metrics-fio.histogram-default"] == StreamStats(indexed=4, spooled=2)


def test_documents_still_held_at_close_are_let_go_unacknowledged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acks = Acks()
    one = spooled_size(make_doc(1))
    settings = SETTINGS.model_copy(update={"spool_max_bytes": one, "chunk_max_docs": 1})
    sink, _ = sink_for(FakeClient(refused), tmp_path, acks, settings=settings)
    for i in range(3):
        sink.add(make_doc(i))
    with caplog.at_level("ERROR"):
        sink.close()
    assert "2 documents were neither delivered nor spooled" in caplog.text
    assert (acks.calls, sink.spool.pending(), sink.full()) == ([], 1, False)
    assert sink.stats()["metrics-fio.histogram-default"] == StreamStats(spooled=1, unsent=2)


def test_a_replay_into_a_full_spool_keeps_the_dead_letters(tmp_path: Path) -> None:
    one = spooled_size(make_doc(1))
    settings = SETTINGS.model_copy(update={"spool_max_bytes": one})
    sink, _ = sink_for(FakeClient(refused), tmp_path, Acks(), settings=settings)
    rejected = sink.resend([make_doc(1), make_doc(2)])
    assert [(r.doc.doc_id, r.error_type) for r in rejected] == [
        ("doc-1", "spool_full"),
        ("doc-2", "spool_full"),
    ]
    assert sink.spool.pending() == 0
