"""The latency job's bookkeeping: due intervals, postponement, clearing after acknowledgement."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from elasticsearch import ConflictError

from pipeline.jobs.fio_hits import layout_of, sparse_bins
from pipeline.jobs.fio_latency import JOB_KEY, FioLatencyJob
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.records.core import Document, LineRef
from pipeline.records.fio_bins import BinLayout
from pipeline.settings import FioSettings
from pipeline.sink.documents import DocContext
from pipeline.sink.search import ClusterUnavailable

NS = BinLayout(29, 0, "ns")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def hit(host: str, job: str, ddir: str, counts: dict[int, int]) -> dict[str, Any]:
    idx = sorted(counts)
    return {
        "_source": {
            "host": {"name": host},
            "fio": {
                "job": job,
                "ddir": ddir,
                "bins": {"count": 1856, "unit": "ns", "coarseness": 0},
                "window": {"end_ms": 5500},
                "interval": {"ms": 1000, "start_ms": 5000},
                "clat_ns": {
                    "histogram": {
                        "values": NS.midpoints_ns[idx].tolist(),
                        "counts": [counts[i] for i in idx],
                    }
                },
            },
        }
    }


def make_job(
    tmp_path: Path, search: Any, emitted: list[Document], clock: Clock, settle_s: float = 5.0
) -> FioLatencyJob:
    dirty = DirtyIntervals(tmp_path / "jobs.sqlite", clock=clock, monotonic=clock)
    return FioLatencyJob(
        search=search,
        emit=emitted.append,
        dirty=dirty,
        fio=FioSettings(settle_s=settle_s),
        ctx=DocContext("default", "a"),
        clock=clock,
    )


def test_settle_then_compute_then_clear_on_ack(tmp_path: Path) -> None:
    clock, emitted = Clock(), []
    hits = [hit("n1", "1", "read", {700: 5}), hit("n2", "1", "write", {800: 2})]
    job = make_job(tmp_path, lambda index, q, s: hits, emitted, clock)
    job.dirty.touch([(1000, 5000)])
    assert job.run() == 0  # not settled yet
    clock.now += 5
    assert job.run() == 1
    # cluster: read, write, mixed; each of 2 hosts and 2 jobs: its ddir and mixed
    assert len(emitted) == 3 + 4 + 4
    cluster_mixed = [
        d
        for d in emitted
        if d.source["iolens"]["scope"] == "cluster" and d.source["fio"]["ddir"] == "mixed"
    ]
    assert cluster_mixed[0].source["fio"]["clat_ns"]["samples"] == 7
    assert job.run() == 0  # in flight: not computed twice
    job.acknowledged([r for d in emitted for r in d.refs])
    assert job.dirty.count() == 1  # cleared by the next run, with the other acknowledged ones
    assert job.run() == 0
    assert job.dirty.count() == 0


def test_unavailable_cluster_postpones(tmp_path: Path) -> None:
    def down(index: str, q: Any, s: Any) -> list[Any]:
        raise ClusterUnavailable("search of x failed: connection refused")

    clock, emitted = Clock(), []
    job = make_job(tmp_path, down, emitted, clock, settle_s=0)
    job.dirty.touch([(1000, 5000)])
    assert job.run(force=True) == 0
    assert job.dirty.due(0, force=True) == [(1000, 5000)]
    assert emitted == []


def test_sparse_bins_round_trip() -> None:
    fio = hit("n", "1", "read", {3: 1, 900: 4})["_source"]["fio"]
    layout = layout_of(fio)
    assert layout == NS
    idx, cnt = sparse_bins(fio, layout)
    assert idx.tolist() == [3, 900] and cnt.tolist() == [1, 4]
    fio["clat_ns"]["histogram"]["values"][1] += 1.0
    with pytest.raises(ValueError, match="not bucket midpoints"):
        sparse_bins(fio, layout)


@pytest.mark.integration
def test_only_less_complete_revisions_are_superseded(es_client: Any, tmp_path: Path) -> None:
    """Two instances may merge one interval from different numbers of records: whichever
    acknowledges last, the revision with the most records survives."""
    import uuid

    from pipeline.formats.fio.window import histogram_stats
    from pipeline.jobs.fio_latency_queries import superseded_query
    from pipeline.reducers.histogram import LatencyHistogram
    from pipeline.sink.documents import LatencyKey, latency_document
    from pipeline.sink.search import delete_by_query, refresh

    ns = f"sup{uuid.uuid4().hex[:8]}"
    ctx = DocContext(ns, "a")
    h = LatencyHistogram.from_sparse(NS, np.array([700]), np.array([5]))

    def doc(scope: str, host: str | None, records: int) -> Document:
        key = LatencyKey(scope, host, None, "read", 5000, 1000, "window")
        return latency_document(ctx, key, histogram_stats(h, [50]), records, 0.0)

    docs = {
        n: doc(*n)
        for n in [("cluster", None, 3), ("cluster", None, 5), ("host", "n1", 2), ("host", "n2", 1)]
    }
    index = f"metrics-fio.latency-{ns}"
    for d in docs.values():
        es_client.index(index=index, id=d.doc_id, document=dict(d.source), op_type="create")
    refresh(es_client, index)
    mine = [doc("cluster", None, 4), doc("host", "n1", 3)]
    deleted = delete_by_query(es_client, index, superseded_query(1000, 5000, "window", mine))
    assert deleted == 2  # cluster/3 and host n1/2; cluster/5 and host n2 stay
    left = {h["_id"] for h in es_client.search(index=index, size=10)["hits"]["hits"]}
    assert left == {docs[("cluster", None, 5)].doc_id, docs[("host", "n2", 1)].doc_id}


def test_due_intervals_are_read_with_one_search_per_batch(tmp_path: Path) -> None:
    def at(start: int, h: dict[str, Any]) -> dict[str, Any]:
        h["_source"]["fio"]["interval"] = {"ms": 1000, "start_ms": start}
        return h

    stored = [
        at(start, hit(f"n{k}", "1", ddir, {700 + start // 1000: k + 1}))
        for start in range(0, 120_000, 1000)
        for k, ddir in enumerate(("read", "write"))
    ]
    queries: list[Any] = []

    def search(index: str, q: Any, s: Any) -> list[dict[str, Any]]:
        queries.append(q)
        starts = set(q["bool"]["filter"][0]["terms"]["fio.interval.start_ms"])
        return [h for h in stored if h["_source"]["fio"]["interval"]["start_ms"] in starts]

    clock, emitted = Clock(), []
    job = make_job(tmp_path, search, emitted, clock, settle_s=0)
    job.dirty.touch([(1000, start) for start in range(0, 120_000, 1000)])
    assert job.run(force=True) == 120
    assert len(queries) == 3  # 50 + 50 + 20 intervals
    # each interval merged from its own histograms only: 3 cluster documents per interval
    one = make_job(tmp_path / "one", search, [], clock, settle_s=0)
    for start in (0, 49_000, 50_000, 119_000):
        alone = [d.source for d in one.compute(1000, start)]
        batched = [d.source for d in emitted if d.source["fio"]["interval"]["start_ms"] == start]
        assert batched == alone and len(alone) == 3 + 4 + 4


@pytest.mark.integration
def test_a_first_merge_deletes_nothing_and_a_fuller_one_supersedes(
    es_client: Any, tmp_path: Path
) -> None:
    import uuid

    from pipeline.sink.search import count, delete_by_query, refresh

    ns = f"sup{uuid.uuid4().hex[:8]}"
    index = f"metrics-fio.latency-{ns}"
    hits = [hit("n1", "1", "read", {700: 5})]
    deletes: list[Any] = []

    def emit(d: Document) -> None:  # as the sink does: a document already there is a 409
        with contextlib.suppress(ConflictError):
            es_client.index(index=d.index, id=d.doc_id, document=dict(d.source), op_type="create")

    def delete(idx: str, q: Any) -> int:
        deletes.append(q)
        return delete_by_query(es_client, idx, q)

    job = FioLatencyJob(
        search=lambda index, q, s: list(hits),
        emit=emit,
        dirty=DirtyIntervals(tmp_path / "jobs.sqlite", clock=Clock()),
        fio=FioSettings(settle_s=0),
        ctx=DocContext(ns, "a"),
        clock=Clock(),
        refresh=lambda idx: refresh(es_client, idx),
        delete=delete,
        count=lambda idx, q: count(es_client, idx, q),
    )
    job.dirty.touch([(1000, 5000)])
    assert job.run(force=True) == 1
    first = {d.doc_id for (_n, _b, docs) in job._pending.values() for d in docs}
    job.acknowledged([LineRef(JOB_KEY, "", 1000, 5000)] * len(first))
    assert job.supersede() == 1
    assert deletes == []  # the interval holds only this merge's documents
    hits.append(hit("n2", "1", "read", {800: 2}))  # a record arrived late: merge again
    job.dirty.touch([(1000, 5000)])
    assert job.run(force=True) == 1
    second = {d.doc_id for (_n, _b, docs) in job._pending.values() for d in docs}
    job.acknowledged([LineRef(JOB_KEY, "", 1000, 5000)] * len(second))
    assert job.supersede() == 1
    assert len(deletes) == 1
    refresh(es_client, index)
    left = {h["_id"] for h in es_client.search(index=index, size=100)["hits"]["hits"]}
    assert left == second and first - second  # the fuller merge replaced the first one


@pytest.mark.integration
def test_a_less_complete_merge_delivered_late_is_withdrawn(es_client: Any, tmp_path: Path) -> None:
    """Instance a merged an interval from the records it saw, then was cut off before its
    documents were delivered; b merged the interval with a record more meanwhile. When a's
    merge arrives, a's supersede withdraws it: only b's fuller revision stays."""
    import uuid

    from pipeline.sink.search import count, delete_by_query, iter_hits, refresh

    ns = f"sup{uuid.uuid4().hex[:8]}"
    index = f"metrics-fio.latency-{ns}"
    seen = {"a": [hit("n1", "1", "read", {700: 5})]}
    seen["b"] = [*seen["a"], hit("n2", "1", "read", {800: 2})]

    def emit(d: Document) -> None:
        with contextlib.suppress(ConflictError):
            es_client.index(index=d.index, id=d.doc_id, document=dict(d.source), op_type="create")

    def job(name: str, emitted: list[Document]) -> FioLatencyJob:
        def search(idx: str, q: Any, s: Any) -> Any:
            return iter_hits(es_client, idx, q, s) if idx == index else list(seen[name])

        return FioLatencyJob(
            search=search,
            emit=emitted.append,
            dirty=DirtyIntervals(tmp_path / f"{name}.sqlite", clock=Clock()),
            fio=FioSettings(settle_s=0),
            ctx=DocContext(ns, name),
            clock=Clock(),
            refresh=lambda idx: refresh(es_client, idx),
            delete=lambda idx, q: delete_by_query(es_client, idx, q),
            count=lambda idx, q: count(es_client, idx, q),
        )

    merged: dict[str, list[Document]] = {"a": [], "b": []}
    a, b = job("a", merged["a"]), job("b", merged["b"])
    for j in (a, b):
        j.dirty.touch([(1000, 5000)])
        assert j.run(force=True) == 1
    for name, j in (("b", b), ("a", a)):  # b's merge is delivered first, a's late
        for d in merged[name]:
            emit(d)
        j.acknowledged([LineRef(JOB_KEY, "", 1000, 5000)] * len(merged[name]))
        assert j.supersede() == 1
    refresh(es_client, index)
    left = {h["_id"] for h in es_client.search(index=index, size=100)["hits"]["hits"]}
    only_a = {d.doc_id for d in merged["a"]} - {d.doc_id for d in merged["b"]}
    assert only_a  # a's cluster, job and n1-host merges differ from b's; n1's own ones not
    assert left == {d.doc_id for d in merged["b"]}
