"""A run says who wrote each document it indexes (``agent.*``), against the embedded server;
another instance, on another host and of another version, reading the same files indexes
nothing twice: ``agent.*`` is in no ``_id``.

Input: the bundled two-host fio samples (tests/data/fio/samples/README.md).
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

import pipeline
from pipeline.sink.agent_id import AGENT_ID_FILE
from pipeline.sink.documents import DocContext
from pipeline.sink.search import refresh
from tests.jobs.test_main_job import SAMPLE_LINES, SAMPLES, make_settings, run_once

pytestmark = pytest.mark.integration

RECORD_STREAMS = ("metrics-fio.histogram", "metrics-fio.latency")
"""The streams whose documents derive from the input's records (ids from the records alone)."""


def indexed(client: Elasticsearch, ns: str) -> list[dict[str, Any]]:
    """Every document in the data streams of namespace ``ns``."""
    index = f"logs-*-{ns},metrics-*-{ns}"
    refresh(client, index)
    resp = client.search(index=index, query={"match_all": {}}, size=10_000)
    assert resp["hits"]["total"]["value"] < 10_000
    return [h["_source"] for h in resp["hits"]["hits"]]


def another_writer(*args: Any, **kwargs: Any) -> DocContext:
    """The documents' context of an instance on another host, of another iolens version."""
    ctx = DocContext(*args, **kwargs)
    return dataclasses.replace(ctx, agent_name="another-host", agent_version="99.0.0")


def test_every_document_names_its_writer_and_no_id_depends_on_it(
    es_url: str, client: Elasticsearch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drop = tmp_path / "drop"
    shutil.copytree(SAMPLES, drop, ignore=shutil.ignore_patterns("*.fio", "*.md"))
    ns = f"a{uuid.uuid4().hex[:10]}"
    first = run_once(make_settings(es_url, drop, tmp_path / "state", ns), client)
    assert first.docs["metrics-fio.histogram-" + ns]["indexed"] == SAMPLE_LINES
    agent_id = (tmp_path / "state" / AGENT_ID_FILE).read_text().strip()
    writer = {
        "type": "iolens",
        "name": socket.gethostname(),
        "version": pipeline.__version__,
        "id": agent_id,
    }
    docs = indexed(client, ns)
    assert len(docs) == sum(d["indexed"] for d in first.docs.values())
    assert {d["data_stream"]["dataset"] for d in docs} >= {"fio.histogram", "fio.latency"}
    assert [d for d in docs if d["agent"] != writer] == []
    for stream in {f"{d['data_stream']['type']}-{d['data_stream']['dataset']}-{ns}" for d in docs}:
        [mapping] = client.indices.get_mapping(index=stream).body.values()
        agent = mapping["mappings"]["properties"]["agent"]["properties"]
        assert {k: v["type"] for k, v in agent.items()} == dict.fromkeys(writer, "keyword")

    # Another instance (its own state directory) on another host, of another version.
    monkeypatch.setattr("pipeline.jobs.main_job.DocContext", another_writer)
    second = run_once(make_settings(es_url, drop, tmp_path / "state2", ns), client)
    assert (tmp_path / "state2" / AGENT_ID_FILE).read_text().strip() != agent_id
    assert second.lines == SAMPLE_LINES
    for stream in (f"{s}-{ns}" for s in RECORD_STREAMS):
        n = first.docs[stream]["indexed"]
        assert second.docs[stream] == {"indexed": 0, "duplicate": n, "dead_lettered": 0}
    records = [d for d in indexed(client, ns) if d["data_stream"]["dataset"].startswith("fio.")]
    assert [d for d in records if d["agent"] != writer] == []  # create never overwrites
