"""Fencing of the scheduled writes: two instances, one cluster, a hand-over in the middle.

Instance A holds the peer comparison's lease and is paused (cut off from the cluster, say) in the
middle of a run, for longer than the lease's time to live; instance B takes the lease over and
runs. When A comes back it must write nothing of its run: its lease generation is stale, its state
save finds B's state, its windows find B's documents. Whatever a stale holder's write that got
past its fence stored is overwritten by the current holder's document of the same id, never kept
beside it, and never the other way round.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.peer_diagnosis import train
from pipeline.jobs.peer_job import PeerJob
from pipeline.jobs.peer_recording import load
from pipeline.reducers.incident import Incident, Span
from pipeline.reducers.peer_params import PeerParams
from pipeline.settings import PeerSettings
from pipeline.sink.capabilities import detect
from pipeline.sink.documents import DocContext, PeerVerdict, peer_anomaly_document
from pipeline.sink.fenced import FencedWriter, stamped
from pipeline.sink.incident_documents import incident_source, write_incidents
from pipeline.sink.lease import Lease, LeaseLost
from pipeline.sink.search import iter_hits, refresh
from pipeline.sink.state_store import JobState
from pipeline.sink.templates import install, load_templates
from tests.jobs.test_peer_job_gaps import CLEAN, GROUPS, METRICS, diskio_hits

pytestmark = pytest.mark.integration

TTL_S = 30.0


class Clock:
    """Wall and monotonic seconds that move only when the test moves them."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def templates(es_url: str) -> None:
    client = Elasticsearch(es_url, request_timeout=30)
    try:
        install(client, load_templates(), detect(client))
    finally:
        client.close()


def _stored(client: Elasticsearch, index: str) -> list[dict[str, Any]]:
    refresh(client, index)
    return [
        dict(h["_source"]) for h in iter_hits(client, index, {"match_all": {}}, [{"_doc": "asc"}])
    ]


def test_the_generation_grows_when_the_lease_changes_hands(es_client: Elasticsearch) -> None:
    name, clock = f"job-{uuid.uuid4().hex[:8]}", Clock(1_000_000.0)
    a = Lease(es_client, name, ttl_s=TTL_S, holder="a", clock=clock, monotonic=clock)
    b = Lease(es_client, name, ttl_s=TTL_S, holder="b", clock=clock, monotonic=clock)
    assert a.acquire() and a.generation == 1
    assert a.fence() == {"generation": 1, "holder": "a"}
    clock.now += 10
    assert a.acquire() and a.generation == 1  # renewed: the same generation
    assert not b.acquire()
    clock.now += TTL_S + 1  # a is cut off and stops renewing
    assert b.acquire() and b.generation == 2
    with pytest.raises(LeaseLost, match="taken over by b"):
        a.fence()
    assert not a.held and not a.acquire()
    assert b.fence() == {"generation": 2, "holder": "b"}
    b.release()
    assert a.acquire() and a.generation == 3  # a released lease taken again is a new holder


def test_a_state_save_replaces_only_the_version_loaded(es_client: Elasticsearch) -> None:
    name = f"peer.{uuid.uuid4().hex[:8]}"
    a, b = JobState(es_client, name), JobState(es_client, name)
    assert a.load() is None and b.load() is None
    b.save({"watermark_s": 2.0})
    with pytest.raises(LeaseLost, match="saved by another instance"):
        a.save({"watermark_s": 1.0})
    assert a.load() == {"watermark_s": 2.0}
    a.save({"watermark_s": 3.0})
    b.load()
    a.load()
    b.save({"watermark_s": 4.0})
    with pytest.raises(LeaseLost):
        a.save({"watermark_s": 3.5})  # a late save cannot roll the state back
    assert JobState(es_client, name).load() == {"watermark_s": 4.0}


def _window(ns: str, score: float) -> Any:
    verdict = PeerVerdict(
        group="lun",
        metric="await",
        host="srvA",
        device="loop0",
        window_index=7,
        start_s=1_700_000_000.0,
        end_s=1_700_000_029.0,
        span_s=30.0,
        score=score,
        distance=0.5,
        threshold=1.0,
        bins=10,
        anomalous=False,
        faulty=False,
    )
    return peer_anomaly_document(DocContext(ns, "t"), verdict, 1_700_000_100_000.0)


@pytest.mark.usefixtures("templates")
def test_a_stale_holders_write_is_superseded_and_cannot_supersede(
    es_client: Elasticsearch,
) -> None:
    ns, clock = f"f{uuid.uuid4().hex[:8]}", Clock(1_000_000.0)
    a = Lease(es_client, f"peer.{ns}", ttl_s=TTL_S, holder="a", clock=clock, monotonic=clock)
    b = Lease(es_client, f"peer.{ns}", ttl_s=TTL_S, holder="b", clock=clock, monotonic=clock)
    assert a.acquire()
    stale = stamped(_window(ns, 50.0), a.stamp())
    assert not b.acquire()  # b sees a's lease, then a is cut off for longer than its TTL
    clock.now += TTL_S + 1
    assert b.acquire()

    writer_a = FencedWriter(es_client, a)
    writer_a.add(_window(ns, 50.0))
    with pytest.raises(LeaseLost):
        writer_a.flush()  # the fence stops a before it writes anything
    assert writer_a.written == 0

    # a write of a's that got past its fence (sent just before the hand-over) lands first
    es_client.create(index=stale.index, id=stale.doc_id, document=dict(stale.source))
    writer_b = FencedWriter(es_client, b)
    writer_b.add(_window(ns, 25.0))
    assert writer_b.flush()
    [doc] = _stored(es_client, stale.index)
    assert doc["iolens"]["record_score"] == 25.0
    assert doc["iolens"]["lease"] == {"generation": 2, "holder": "b"}

    # and one that arrives after b's is refused by b's generation
    with pytest.raises(LeaseLost, match="generation 2"):
        writer_a._bulk([stale])
    [doc] = _stored(es_client, stale.index)
    assert doc["iolens"]["lease"]["generation"] == 2


def _hits_until(hits: list[dict[str, Any]]) -> Any:
    """A search of the diskio documents honouring the job's time range (ms)."""

    def search(index: str, query: Mapping[str, Any], sort: Any) -> list[dict[str, Any]]:
        rng: dict[str, Any] = next(
            (f["range"]["@timestamp"] for f in query["bool"]["filter"] if "range" in f), {}
        )
        lo, hi = rng.get("gt", -1), rng.get("lte", float("inf"))
        return [h for h in hits if lo < h["_source"]["@ms"] <= hi]

    return search


def _peer_job(
    client: Elasticsearch, ns: str, holder: str, clock: Clock, hits: Any, thresholds: Any
) -> tuple[PeerJob, Lease]:
    lease = Lease(client, f"peer.{ns}", ttl_s=TTL_S, holder=holder, clock=clock, monotonic=clock)
    store = JobState(client, f"peer.{ns}")
    writer = FencedWriter(client, lease)
    job = PeerJob(
        hits=hits,
        emit=writer.add,
        settle=writer.flush,
        peer=PeerSettings(metrics=METRICS, downsample_s=1.0, groups=GROUPS, settle_s=0),
        thresholds=thresholds,
        ctx=DocContext(ns, holder),
        lease=lease.acquire,
        load_state=store.load,
        save_state=store.save,
        clock=clock,
        monotonic=clock,
    )
    return job, lease


@pytest.mark.usefixtures("templates")
def test_a_holder_paused_mid_run_writes_nothing_and_leaves_no_gap(
    es_client: Elasticsearch, tmp_path: Path
) -> None:
    ns = f"f{uuid.uuid4().hex[:8]}"
    thresholds = train(load([CLEAN], 1.0), METRICS, {"vm:loop[0-5]": "lun"}, PeerParams())
    hits = diskio_hits()
    for h in hits:
        ts = datetime.fromisoformat(h["_source"]["@timestamp"].replace("Z", "+00:00"))
        h["_source"]["@ms"] = int(ts.timestamp() * 1000)
    first_s = hits[0]["_source"]["@ms"] / 1000
    clock = Clock(first_s + 80)
    search = _hits_until(hits)
    b_job, b_lease = _peer_job(es_client, ns, "b", clock, search, thresholds)
    paused: list[bool] = []

    def a_search(index: str, query: Mapping[str, Any], sort: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = search(index, query, sort)
        if not paused:  # a is paused here, after its fence and state load, past the TTL
            paused.append(True)
            assert not b_lease.acquire()  # b, polling, sees a's lease renewed
            clock.now += TTL_S + 1
            assert b_job.run() > 0  # b takes over and runs from the state a left
        return found

    a_job, a_lease = _peer_job(es_client, ns, "a", clock, search, thresholds)
    assert a_job.run() > 0  # a leads: windows up to +80 s
    a_job.hits = a_search
    clock.now += 40
    assert a_job.run() == 0  # a's second run: b took over while a was paused
    assert paused and not a_lease.held and b_lease.generation == 2
    clock.now += 120
    assert b_job.run(force=True) > 0
    assert a_job.run() == 0  # b holds the lease

    index = f"metrics-iolens.peer_anomaly-{ns}"
    docs = [d["iolens"] for d in _stored(es_client, index)]
    seen: dict[tuple[str, str], list[int]] = {}
    for d in docs:
        seen.setdefault((d["peer"]["metric"], d["peer"]["lun"]), []).append(
            d["peer"]["window_index"]
        )
    assert len(seen) == len(METRICS) * 6
    for key, indexes in seen.items():
        assert sorted(indexes) == list(range(len(indexes))), key  # no gap, no duplicate
    assert len({len(v) for v in seen.values()}) == 1
    assert {d["lease"]["generation"] for d in docs} == {1, 2}
    assert all(
        d["lease"]["holder"] == ("a" if d["lease"]["generation"] == 1 else "b") for d in docs
    )


@pytest.mark.usefixtures("templates")
def test_a_stale_incident_writer_leaves_the_later_generations_incident(
    es_client: Elasticsearch,
) -> None:
    ns = f"f{uuid.uuid4().hex[:8]}"
    ctx = DocContext(ns, "t")
    span = Span("fs001/dm-3", "lun", "await", 1795661778.0, 1795662378.0, True, 11, 91.7)
    closed = Incident(span, "/scratch", ("4478544",), ("/scratch/a",), 2, ("c1/1",), (1, 4.0), "x")
    open_span = Span("fs001/dm-3", "lun", "await", 1795661778.0, 1795662078.0, False, 6, 91.7)
    still_open = Incident(open_span, "/scratch", (), (), 1, ("c1/1",), None, "y")
    new = {"generation": 2, "holder": "b"}
    assert write_incidents(
        es_client, ns, [(span.id, incident_source(ctx, closed, (95.0, 10.0), 1e12))], new
    )
    old = {"generation": 1, "holder": "a"}
    with pytest.raises(LeaseLost, match="generation 2"):
        write_incidents(
            es_client, ns, [(span.id, incident_source(ctx, still_open, (95.0, 10.0), 1e12))], old
        )
    [doc] = _stored(es_client, f"logs-iolens.incident-{ns}")
    assert doc["iolens"]["incident"]["status"] == "closed"
    assert doc["iolens"]["lease"] == new


@pytest.mark.usefixtures("templates")
def test_the_latest_sample_of_each_server_is_known(es_client: Elasticsearch) -> None:
    """What the peer comparison waits on: each server's latest diskio sample after a time."""
    from pipeline.formats.sysstat.encode import diskio_document
    from pipeline.records.core import DiskSample
    from pipeline.sink.search import latest_per

    ns = f"f{uuid.uuid4().hex[:8]}"
    ctx = DocContext(ns, "t")
    ends = {"srvA": [100.0, 101.0, 102.0], "srvB": [100.0], "srvC": [50.0]}
    for host, times in ends.items():
        for t in times:
            s = DiskSample(host, "sdc", 1_800_000_000.0 + t, 1.0, 1, 4, 0, 0, 4, 0.1, 2.0, 5.0)
            d = diskio_document(ctx, s, (), 1.0)
            es_client.create(index=d.index, id=d.doc_id, document=dict(d.source))
    index = f"metrics-sysstat.diskio-{ns}"
    refresh(es_client, index)
    found = latest_per(es_client, index, "host.name", 1_800_000_060.0)
    assert found == {"srvA": 1_800_000_102.0, "srvB": 1_800_000_100.0}  # srvC: nothing since
    assert latest_per(es_client, f"metrics-sysstat.diskio-{ns}x", "host.name", 0.0) == {}
