"""Partial bulk failures through a real proxy in front of the embedded server: some items of a
bulk answer fail with 429, 503 or a mapping error while the others succeed.

What iolens must do: send again exactly the failed retryable items (a retry of an item the
server had indexed gets a 409, which counts as delivered), dead-letter the rejected one with
its reason, index everything else once, and commit every line in the registry."""

from __future__ import annotations

import logging
import shutil
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.settings import Settings, settings_from_mapping
from pipeline.shippers.registry import Registry
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.search import iter_hits, refresh

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy import Fail, FaultProxy, Item, Reject

pytestmark = [pytest.mark.faults, pytest.mark.integration]

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples"
SAMPLE_LINES = 315  # 4 logs: 79 + 80 + 78 + 78 records
HIST = "metrics-fio.histogram-{ns}"
LAT = "metrics-fio.latency-{ns}"

TOO_MANY = Fail(
    429, "es_rejected_execution_exception", "rejected execution of coordinating operation"
)
UNAVAILABLE = Fail(503, "unavailable_shards_exception", "primary shard is not active")
MAPPING = (
    "[1:262] failed to parse field [fio.clat_ns.max] of type [double] in document with id "
    "'{id}'. Preview of field's value: 'NaN-ish'"
)


class Faults:
    """The rule: every 7th item of a bulk answers 429 once; the second item of the first
    histogram bulk answers 503 twice; the third item of it is rejected as unmappable."""

    def __init__(self, ns: str) -> None:
        self.hist = HIST.format(ns=ns)
        self.twice: str | None = None
        self.rejected: str | None = None

    def __call__(self, item: Item) -> Fail | Reject | None:
        if self.twice is None and item.index == self.hist and item.position == 1:
            self.twice = item.doc_id
        if self.rejected is None and item.index == self.hist and item.position == 2:
            self.rejected = item.doc_id
        if item.doc_id == self.twice:
            return UNAVAILABLE if item.attempt <= 2 else None
        if item.doc_id == self.rejected:
            reason = MAPPING.format(id=item.doc_id)
            return Reject(400, "document_parsing_exception", reason)
        return TOO_MANY if item.position % 7 == 6 and item.attempt == 1 else None


@pytest.fixture
def drop(tmp_path: Path) -> Path:
    """A drop directory holding a copy of the bundled two-host samples."""
    d = tmp_path / "drop"
    shutil.copytree(SAMPLES, d, ignore=shutil.ignore_patterns("*.fio", "*.md"))
    return d


def settings_for(url: str, drop: Path, state: Path, ns: str) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"url": url, "namespace": ns},
            "state_dir": str(state),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "fio": {
                "run_start": "2026-11-22T05:25:00.203Z",
                "host_offsets_ms": {"node02": 1503},
                "settle_s": 0,
            },
            "sink": {"max_retries": 3, "backoff_initial_s": 0.01, "backoff_max_s": 0.02},
        }
    )


def hits(client: Elasticsearch, index: str) -> list[tuple[str, int]]:
    """Each document of ``index``: its id and the start of its fio interval (ms)."""
    refresh(client, index)
    found = iter_hits(client, index, {"match_all": {}}, [{"_doc": "asc"}])
    return [(h["_id"], int(h["_source"]["fio"]["interval"]["start_ms"])) for h in found]


def ids(client: Elasticsearch, index: str) -> Counter[str]:
    """Document ids in ``index``, with how many documents carry each."""
    return Counter(ident for ident, _start in hits(client, index))


def starts(client: Elasticsearch, index: str) -> dict[str, int]:
    """Document ids in ``index`` and their interval's start (ms)."""
    return dict(hits(client, index))


@pytest.fixture
def proxied(es_url: str) -> Iterator[tuple[FaultProxy, Faults, Elasticsearch, str]]:
    ns = f"t{uuid.uuid4().hex[:10]}"
    faults = Faults(ns)
    proxy = FaultProxy(es_url, faults)
    client = Elasticsearch(proxy.url, request_timeout=60)
    try:
        yield proxy, faults, client, ns
    finally:
        client.close()
        proxy.close()


def test_only_failed_items_are_retried_the_rejected_one_is_dead_lettered(
    es_url: str,
    client: Elasticsearch,
    drop: Path,
    tmp_path: Path,
    proxied: tuple[FaultProxy, Faults, Elasticsearch, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxy, faults, through_proxy, ns = proxied
    # the expected documents: the same drop, straight into the server
    clean_ns = f"c{ns[1:]}"
    with MainJob(settings_for(es_url, drop, tmp_path / "clean", clean_ns), client) as job:
        job.run_once()
    expected = starts(client, HIST.format(ns=clean_ns))
    expected_lat = starts(client, LAT.format(ns=clean_ns))
    assert len(expected) == SAMPLE_LINES and expected_lat

    caplog.set_level(logging.WARNING, logger="pipeline")
    settings = settings_for(proxy.url, drop, tmp_path / "state", ns)
    with MainJob(settings, through_proxy) as job:
        summary = job.run_once()
    hist = HIST.format(ns=ns)
    rejected, twice = faults.rejected, faults.twice
    assert rejected is not None and twice is not None

    # documents: all but the rejected one, each once
    got = ids(client, hist)
    assert set(got) == set(expected) - {rejected}
    assert set(got.values()) == {1}

    # retries: exactly the failed retryable items, once per failure
    fails = Counter(item.doc_id for item, fault in proxy.injected if isinstance(fault, Fail))
    assert fails[twice] == 2 and len(fails) > 10
    assert {d: n - 1 for d, n in proxy.sent.items() if n > 1} == dict(fails)
    assert proxy.sent[rejected] == 1 and proxy.forwarded[rejected] == 0

    # the rejected one is in the dead-letter area with its reason, and said so
    [dead] = list(DeadLetters(tmp_path / "state" / "deadletter").iter_documents())
    reason = MAPPING.format(id=rejected)
    assert (dead.doc.index, dead.doc.doc_id, dead.status) == (hist, rejected, 400)
    assert (dead.error_type, dead.reason, dead.stage) == (
        "document_parsing_exception",
        reason,
        "sink",
    )
    assert len(dead.doc.refs) == 1 and dead.doc.refs[0].path.startswith(str(drop))
    ref = dead.doc.refs[0]
    said = (
        f"dead-lettered {hist}/{rejected} (from {ref.path} line {ref.line_no}) at stage sink: "
        f"400 document_parsing_exception: {reason}. It is kept in "
        f"{tmp_path / 'state' / 'deadletter' / 'documents.ndjson'}: fix the cause (the template "
        "or the input), then run iolens deadletter replay"
    )
    assert [r.getMessage() for r in caplog.records if "dead-lettered" in r.getMessage()] == [said]

    # counted: retried items that the server had indexed came back as 409 (delivered)
    hist_fails = sum(n for d, n in fails.items() if d in expected)
    st = summary.docs[hist]
    assert st["dead_lettered"] == 1
    assert st["indexed"] + st["duplicate"] == SAMPLE_LINES - 1
    assert st["duplicate"] == len([d for d in fails if d in expected])
    assert hist_fails > st["duplicate"]  # the 503 twice: two retries, one 409

    # the merged intervals: as in the clean run, but for the rejected document's interval,
    # merged from one record less (other ids: they count the records)
    lat = starts(client, LAT.format(ns=ns))
    assert len(lat) == len(expected_lat) == len(ids(client, LAT.format(ns=ns)))
    changed = {lat[d] for d in set(lat) ^ set(expected_lat) if d in lat}
    changed |= {expected_lat[d] for d in set(expected_lat) - set(lat)}
    assert changed == {expected[rejected]}

    # the registry committed every line: a second run reads and sends nothing
    reg = Registry(tmp_path / "state" / "registry.sqlite")
    states = reg.all()
    reg.close()
    assert sum(s.line_no for s in states) == SAMPLE_LINES
    assert all(s.offset == Path(s.path).stat().st_size for s in states)
    before = Counter(proxy.sent)
    with MainJob(settings, through_proxy) as job:
        again = job.run_once()
    assert again.lines == 0
    assert again.docs.get(hist, {}).get("indexed", 0) == 0
    assert all(proxy.sent[d] == before[d] for d in expected)  # no histogram sent again
