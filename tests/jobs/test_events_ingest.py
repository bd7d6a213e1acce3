"""Event logs through the main job: request documents exactly once, the workload model's
snapshots, bad lines dead-lettered, a log tailed while it grows."""

from __future__ import annotations

import os
import socket
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.formats.events.decode import parse_events
from pipeline.formats.events.encode import request_id
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.records.event_schema import load_event_schema
from pipeline.reducers.event_order import merge_streams
from pipeline.reducers.request_join import extract
from pipeline.report.workload import indexed_models
from pipeline.settings import Settings, settings_from_mapping
from pipeline.shippers.registry import Registry
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.search import iter_hits, refresh

ROOT = Path(__file__).resolve().parents[2]

SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
LOG = ROOT / "tests" / "data" / "events" / "http_server_4x25.jsonl"

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def log() -> bytes:
    """A recorded run of the instrumented server, 4 clients x 25 requests (provenance in
    tests/data/events/README.md): recorded once, since the clustering of a run recorded while
    the machine is busy depends on the CPU times it measured."""
    return LOG.read_bytes()


def make_settings(es_url: str, drop: Path, state: Path, ns: str) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(state),
            "drops": [{"type": "events", "path": str(drop), "schema": str(SCHEMA)}],
        }
    )


def run_once(settings: Settings, client: Elasticsearch) -> RunSummary:
    with MainJob(settings, client) as job:
        return job.run_once()


def finished(path: Path) -> None:
    """Make the log look untouched for longer than the schema's timeout (10 s)."""
    old = os.stat(path).st_mtime - 60
    os.utime(path, (old, old))


def hits(client: Elasticsearch, stream: str, ns: str) -> list[dict[str, Any]]:
    index = f"{stream}-{ns}"
    refresh(client, index)
    return [
        h["_source"] for h in iter_hits(client, index, {"match_all": {}}, [{"@timestamp": "asc"}])
    ]


def expected(log: bytes, path: Path, host: str) -> dict[str, str]:
    """Request id -> its type (the ground truth the server wrote into ReqStart), offline."""
    schema = load_event_schema(SCHEMA)
    events = list(parse_events(log.splitlines(keepends=True), str(path)))
    return {
        request_id(host, r): r.seed.attrs["_type"]
        for r in extract(merge_streams([events], schema), schema)
    }


def test_requests_and_the_model_are_indexed_once(
    es_url: str, client: Elasticsearch, tmp_path: Path, log: bytes
) -> None:
    ns = f"req{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop" / "web1"
    drop.mkdir(parents=True)
    target = drop / "server.jsonl"
    target.write_bytes(log)
    finished(target)
    settings = make_settings(es_url, tmp_path / "drop", tmp_path / "state", ns)
    first = run_once(settings, client)
    assert first.bad_lines == 0
    assert first.docs[f"logs-iolens.request-{ns}"]["indexed"] == 100
    docs = hits(client, "logs-iolens.request", ns)
    reqs = [d["iolens"]["request"] for d in docs]
    truth = expected(log, target, "web1")
    assert {r["id"] for r in reqs} == truth.keys()
    assert {d["host"]["name"] for d in docs} == {"web1"}  # the sub-directory names the host
    assert all(r["complete"] and r["model"] == "http_server" for r in reqs)
    # six request types, six clusters, each of one type
    types = {(r["cluster"], truth[r["id"]]) for r in reqs}
    assert len(types) == len({c for c, _t in types}) == len({t for _c, t in types}) == 6
    model = hits(client, "metrics-iolens.workload_model", ns)
    assert len(model) == len({r["cluster"] for r in reqs}) == 6
    assert sum(m["iolens"]["workload_model"]["size"] for m in model) == 100
    assert {m["iolens"]["workload_model"]["model"] for m in model} == {"http_server"}
    reg = Registry(tmp_path / "state" / "registry.sqlite")
    [state] = reg.all()
    reg.close()
    assert (state.offset, state.line_no) == (len(log), log.count(b"\n"))
    again = run_once(settings, client)
    assert again.lines == 0 and f"logs-iolens.request-{ns}" not in again.docs

    # what `iolens requests model` shows: frequencies from the requests, the rest from the
    # latest snapshot
    [wm] = indexed_models(client, ns)
    assert (wm["model"], wm["requests"]) == ("http_server", 100)
    assert wm["outliers"] == sum(r["outlier"] for r in reqs)
    by_cluster = Counter(r["cluster"] for r in reqs)
    assert [(c["cluster"], c["requests"]) for c in wm["clusters"]] == sorted(by_cluster.items())
    assert sum(c["share"] for c in wm["clusters"]) == pytest.approx(1.0)
    snap = {m["iolens"]["workload_model"]["cluster"]: m["iolens"]["workload_model"] for m in model}
    for c in wm["clusters"]:
        assert c["representative"] == snap[c["cluster"]]["representative"]
        assert c["incomplete"] == 0
    assert wm["snapshot"]["requests"] == 100 and wm["snapshot"]["threshold"] == 2.0
    assert list(indexed_models(client, ns, model="nginx")) == []


def test_a_growing_log_is_delivered_exactly_once(
    es_url: str, client: Elasticsearch, tmp_path: Path, log: bytes
) -> None:
    ns = f"req{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    target = drop / "server.jsonl"
    lines = log.splitlines(keepends=True)
    settings = make_settings(es_url, drop, tmp_path / "state", ns)
    for part in (lines[: len(lines) // 3], lines[len(lines) // 3 : 2 * len(lines) // 3]):
        with target.open("ab") as fh:
            fh.write(b"".join(part))
        run_once(settings, client)  # the file is fresh: open requests wait for more lines
    with target.open("ab") as fh:
        fh.write(b"".join(lines[2 * len(lines) // 3 :]))
    finished(target)
    run_once(settings, client)
    reqs = [d["iolens"]["request"] for d in hits(client, "logs-iolens.request", ns)]
    ids = [r["id"] for r in reqs]
    assert len(ids) == len(set(ids)) == 100
    assert set(ids) == expected(log, target, socket.gethostname()).keys()
    assert all(r["complete"] for r in reqs)
    # the model went on across the three runs: six clusters, each request counted once
    latest: dict[int, int] = {}
    for m in hits(client, "metrics-iolens.workload_model", ns):
        wm = m["iolens"]["workload_model"]
        latest[wm["cluster"]] = wm["size"]
    assert len(latest) == 6 and sum(latest.values()) == 100


def test_bad_lines_are_dead_lettered_and_the_rest_delivered(
    es_url: str, client: Elasticsearch, tmp_path: Path, log: bytes
) -> None:
    ns = f"req{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    lines = log.splitlines(keepends=True)
    target = drop / "server.jsonl"
    target.write_bytes(
        b"".join(lines[:500]) + b'{"ts": "soon", "ev": "Spin"}\n' + b"".join(lines[500:])
    )
    finished(target)
    summary = run_once(make_settings(es_url, drop, tmp_path / "state", ns), client)
    assert summary.bad_lines == 1
    assert summary.docs[f"logs-iolens.request-{ns}"]["indexed"] == 100
    [letter] = DeadLetters(tmp_path / "state" / "deadletter").iter_inputs()
    assert (letter.path, letter.line_no, letter.stage) == (str(target), 501, "parse")
    assert letter.raw_bytes == b'{"ts": "soon", "ev": "Spin"}'
    assert "ts" in letter.reason
