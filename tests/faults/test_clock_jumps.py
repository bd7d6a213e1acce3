"""The shipper's wall clock stepped back and forward by hours while iolens runs.

The steps are injected through the clocks the code takes (``MainJob(clock=...)``,
``Lease(clock=...)``, ...): a wall clock that is the real time plus a step the test sets, and,
where a test must show that a wait ends, a monotonic clock the test advances. What must hold:
no interval merged twice, no lease held for hours by a clock ahead nor lost at once by a clock
behind, no wait that stalls for the hours the clock went back nor ends at once when it went
forward, and documents stamped with the time of their data, not of the clock."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.formats.darshan.chain import DarshanChain, darshan_tail
from pipeline.formats.darshan.pool import DarshanPool
from pipeline.formats.events.chain import EventsChain
from pipeline.formats.events.workload_model import WorkloadModel
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.peer_job import PeerJob
from pipeline.jobs.summary import RunSummary
from pipeline.records.event_schema import load_event_schema
from pipeline.reducers.peer_params import PeerParams
from pipeline.reducers.peer_thresholds import ThresholdEntry, Thresholds
from pipeline.settings import PeerSettings, RequestsSettings, Settings, settings_from_mapping
from pipeline.shippers.chunk_tail import ChunkTail
from pipeline.shippers.tailer import split_complete_lines
from pipeline.sink.documents import DocContext, iso_ms
from pipeline.sink.lease import Lease
from pipeline.sink.search import iter_hits, refresh

pytestmark = [pytest.mark.faults]

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "tests" / "data" / "fio" / "samples"
SAMPLE_LINES = 315  # 4 logs: 79 + 80 + 78 + 78 records
HOURS_3 = 3 * 3600.0
WAIT_S = 30.0
"""Deadline for what a running ``iolens run`` must do after a step."""


class SteppedClock:
    """The real wall clock plus ``step_s``, which the test sets to step it."""

    def __init__(self) -> None:
        self.step_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.step_s


class FakeClock:
    """A clock that moves only when the test moves it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def drop(tmp_path: Path) -> Path:
    """A drop directory holding a copy of the bundled two-host fio samples."""
    d = tmp_path / "drop"
    shutil.copytree(SAMPLES, d, ignore=shutil.ignore_patterns("*.fio", "*.md"))
    return d


def settings_for(es_url: str, drop: Path, state: Path, ns: str, **more: Any) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(state),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "fio": {
                "run_start": "2026-11-22T05:25:00.203Z",
                "host_offsets_ms": {"node02": 1503},
                "settle_s": more.pop("settle_s", 0),
            },
            "sink": {"max_retries": 0},
            **more,
        }
    )


def stamps(client: Elasticsearch, stream: str, ns: str) -> dict[str, str]:
    """``@timestamp`` of every document of ``metrics-<stream>-<ns>``, by id (each id once)."""
    index = f"metrics-{stream}-{ns}"
    refresh(client, index)
    hits = list(iter_hits(client, index, {"match_all": {}}, [{"_doc": "asc"}]))
    found = {h["_id"]: h["_source"]["@timestamp"] for h in hits}
    assert len(found) == len(hits)  # no id twice
    return found


@pytest.fixture
def clean(es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path) -> Iterator[Any]:
    """The fio samples indexed with a clock left alone: (namespace, intervals merged)."""
    ns = f"c{uuid.uuid4().hex[:10]}"
    with MainJob(settings_for(es_url, drop, tmp_path / "clean", ns), client) as job:
        summary = job.run_once()
    assert summary.docs[f"metrics-fio.histogram-{ns}"]["indexed"] == SAMPLE_LINES
    yield ns, summary.intervals


@pytest.mark.integration
def test_set_back_between_reading_and_merging_each_interval_is_merged_once(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, clean: Any
) -> None:
    clean_ns, intervals = clean
    ns = f"t{uuid.uuid4().hex[:10]}"
    settings = settings_for(es_url, drop, tmp_path / "state", ns)
    clock = SteppedClock()
    with MainJob(settings, client, clock=clock) as job:
        job.once, job.sink.wait_when_full = True, False
        job.ingest(job.files.drop_files())
        job.sink.flush()  # every histogram acknowledged: its interval touched at the real time
        clock.step_s = -HOURS_3
        summary = job.finish()
        assert job.dirty.count() == 0  # every merged interval cleared
    assert summary.intervals == intervals
    # a second run, the clock still 3 h back, merges nothing again
    with MainJob(settings, client, clock=clock) as job:
        again = job.run_once()
    assert (again.lines, again.intervals) == (0, 0)
    # the documents are those of the clean run, stamped with the time of their data
    for stream in ("fio.histogram", "fio.latency"):
        assert stamps(client, stream, ns) == stamps(client, stream, clean_ns)


@pytest.mark.integration
def test_set_forward_intervals_still_settle_for_settle_s(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, clean: Any
) -> None:
    clean_ns, intervals = clean
    ns = f"t{uuid.uuid4().hex[:10]}"
    settings = settings_for(es_url, drop, tmp_path / "state", ns, settle_s=60)
    clock, mono = SteppedClock(), FakeClock(1000.0)
    with MainJob(settings, client, clock=clock, monotonic=mono) as job:
        job.once = True
        job.ingest(job.files.drop_files())
        job.sink.flush()
        clock.step_s = HOURS_3  # the wall clock says the intervals are 3 h quiet
        job.jobs.tick(job.summary)
        assert job.summary.intervals == 0  # 0 s quiet in truth: not merged yet
        mono.now += 60
        job.jobs.tick(job.summary)
        assert job.summary.intervals == intervals
        job.sink.flush()
        job.jobs.latency.supersede()
        assert job.dirty.count() == 0
    assert stamps(client, "fio.latency", ns) == stamps(client, "fio.latency", clean_ns)


@pytest.mark.integration
def test_set_back_while_running_the_jobs_keep_their_tick(
    es_url: str, client: Elasticsearch, tmp_path: Path, clean: Any
) -> None:
    clean_ns, intervals = clean
    ns = f"t{uuid.uuid4().hex[:10]}"
    drop = tmp_path / "live"
    drop.mkdir()
    settings = settings_for(es_url, drop, tmp_path / "state", ns, jobs={"tick_s": 0.2})
    clock, stop, ticks = SteppedClock(), threading.Event(), threading.Semaphore(0)
    with MainJob(settings, client, clock=clock) as job:
        tick = job._tick

        def counted() -> None:
            tick()
            ticks.release()

        job._tick = counted  # type: ignore[method-assign]
        ended: list[RunSummary] = []
        runner = threading.Thread(target=lambda: ended.append(job.run_forever(stop)))
        runner.start()
        try:
            assert ticks.acquire(timeout=WAIT_S)  # it ticks
            clock.step_s = -HOURS_3
            shutil.copytree(
                SAMPLES, drop, ignore=shutil.ignore_patterns("*.fio", "*.md"), dirs_exist_ok=True
            )
            deadline = time.monotonic() + WAIT_S
            while job.summary.intervals < intervals and time.monotonic() < deadline:
                ticks.acquire(timeout=1.0)
            assert job.summary.intervals == intervals  # merged by the ticks after the step
        finally:
            stop.set()
            runner.join()
    assert [s.lines for s in ended] == [SAMPLE_LINES]  # it kept running, and ended when told
    assert stamps(client, "fio.latency", ns) == stamps(client, "fio.latency", clean_ns)


@pytest.mark.integration
def test_a_lease_written_with_a_clock_ahead_blocks_others_for_ttl_s_only(
    es_client: Elasticsearch,
) -> None:
    name = f"job-{uuid.uuid4().hex[:8]}"
    wall, mono_a, mono_b = FakeClock(1_800_000_000.0), FakeClock(0.0), FakeClock(0.0)
    ahead = Lease(es_client, name, 30, "a", clock=lambda: wall() + HOURS_3, monotonic=mono_a)
    right = Lease(es_client, name, 30, "b", clock=wall, monotonic=mono_b)
    assert ahead.acquire()
    assert not right.acquire()
    wall.now += 29
    mono_b.now += 29
    assert not right.acquire()  # "a" stopped renewing 29 s ago
    wall.now += 2
    mono_b.now += 2
    assert right.acquire()  # 31 s: taken, not 3 h later
    mono_a.now += 31
    assert not ahead.acquire()  # for "a" the lease of "b" looks hours old: not taken at once


@pytest.mark.integration
def test_a_lease_written_with_a_clock_behind_does_not_expire_at_once(
    es_client: Elasticsearch,
) -> None:
    name = f"job-{uuid.uuid4().hex[:8]}"
    wall, mono_a, mono_b = FakeClock(1_800_000_000.0), FakeClock(0.0), FakeClock(0.0)
    behind = Lease(es_client, name, 30, "a", clock=lambda: wall() - HOURS_3, monotonic=mono_a)
    right = Lease(es_client, name, 30, "b", clock=wall, monotonic=mono_b)
    assert behind.acquire()
    assert not right.acquire()  # expired 3 h ago by its own time, but just written
    for _ in range(3):  # "a" renews every 20 s: "b" never gets it
        wall.now += 20
        mono_a.now += 20
        mono_b.now += 20
        assert behind.acquire()
        assert not right.acquire()
    wall.now += 31
    mono_b.now += 31
    assert right.acquire()  # "a" stopped renewing 31 s ago
    behind.release()  # not held any more: nothing happens
    assert not behind.acquire()


def test_dirty_intervals_touched_before_a_step_back_wait_settle_s_not_hours(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.sqlite"
    first = DirtyIntervals(path, clock=FakeClock(1_800_000_000.0), monotonic=FakeClock(5.0))
    first.touch([(1000, 5000)])
    first.close()  # the process ends; the next starts with the clock 3 h back
    wall, mono = FakeClock(1_800_000_000.0 - HOURS_3), FakeClock(0.0)
    second = DirtyIntervals(path, clock=wall, monotonic=mono)
    assert second.due(60) == []
    wall.now += 60
    assert second.due(60) == [(1000, 5000)]
    mark = second.mark()
    second.touch([(1000, 5000)])  # touched again while merged: kept, whatever the clock
    wall.now -= HOURS_3
    second.clear((1000, 5000), mark)
    assert second.count() == 1
    second.clear((1000, 5000), second.mark())
    assert second.count() == 0
    second.close()


@pytest.mark.parametrize("step_s", [HOURS_3, -HOURS_3])
def test_a_darshan_log_is_read_once_still_for_stable_s_whatever_the_clock(
    tmp_path: Path, step_s: float
) -> None:
    log = tmp_path / "x.darshan"
    log.write_bytes(b"being copied")
    mtime = log.stat().st_mtime
    wall, mono = FakeClock(mtime + 1.0), FakeClock(100.0)
    pool = DarshanPool(1, inline=True)
    tail = darshan_tail("k", str(log), DarshanChain(pool), stable_s=5.0, clock=wall, monotonic=mono)
    assert not tail.stable()  # 1 s old
    wall.now += step_s
    assert not tail.stable()  # still 1 s old in truth
    wall.now += 3.5
    mono.now += 3.5
    assert not tail.stable()
    os.utime(log, (wall.now, wall.now))  # written again, stamped with the stepped clock
    assert not tail.stable()  # seen changed now
    mono.now += 4.9
    assert not tail.stable()
    mono.now += 0.2
    assert tail.stable()  # 5.1 s unchanged
    pool.close()


def test_a_clock_set_forward_does_not_flush_a_request_still_being_written(
    tmp_path: Path,
) -> None:
    schema = load_event_schema(ROOT / "config" / "schemas" / "http_server.yaml")
    data = (
        b'{"ts":1000000,"ev":"Accept","conn":"c1"}\n'
        b'{"ts":2000000,"ev":"Dequeue","conn":"c1","tid":7}\n'
        b'{"ts":3000000,"ev":"ReqStart","conn":"c1","tid":7}\n'
        b'{"ts":4000000,"ev":"Spin","tid":7,"cpu_ns":900000}\n'
    )  # the request goes on: its ReqEnd is not written yet
    path = tmp_path / "e.jsonl"
    path.write_bytes(data)
    mtime = path.stat().st_mtime
    mono = FakeClock(50.0)
    model = WorkloadModel("http_server", tmp_path / "model.json", RequestsSettings())
    chain = EventsChain(str(path), "web1", schema, model, monotonic=mono)
    tail = ChunkTail("k", str(path), chain)
    ctx = DocContext(namespace="test")
    read_ms = (mtime + 0.5) * 1000  # lines read then: the file's quiet time starts
    assert not [
        d for r in tail.process(split_complete_lines(data, 0), ctx, read_ms) for d in r.docs
    ]
    assert not chain.idle(mtime + 0.5, ctx, final=False).docs
    assert not chain.idle(mtime + HOURS_3, ctx, final=False).docs  # 3 h on the wall clock
    mono.now += 2.0
    assert not chain.idle(mtime + HOURS_3 + 2.0, ctx, final=False).docs  # queue drained
    mono.now += schema.parser.timeout_s
    [doc] = chain.idle(mtime + HOURS_3 + 2.0 + schema.parser.timeout_s, ctx, final=False).docs
    assert doc.source["iolens"]["request"]["complete"] is False  # quiet for the timeout
    # stamped by its data (its start, 3 ms before the file's newest event, at its mtime)
    assert doc.source["@timestamp"] == iso_ms((path.stat().st_mtime_ns - 3_000_000) / 1e6)
    assert doc.source["event"]["created"] == iso_ms((mtime + HOURS_3 + 12.0) * 1000)


def test_a_dirty_list_written_before_touches_were_numbered_is_taken_as_it_is(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.sqlite"
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE dirty_intervals (interval_ms INTEGER NOT NULL, start_ms INTEGER NOT NULL, "
        "touched_s REAL NOT NULL, PRIMARY KEY (interval_ms, start_ms))"
    )
    db.execute("INSERT INTO dirty_intervals VALUES (1000, 5000, 1800000000.0)")
    db.commit()
    db.close()
    dirty = DirtyIntervals(path, clock=FakeClock(1_800_000_060.0), monotonic=FakeClock(0.0))
    assert dirty.due(60) == [(1000, 5000)]
    dirty.clear((1000, 5000), dirty.mark())
    assert dirty.count() == 0
    dirty.close()


@pytest.mark.parametrize("step_s", [HOURS_3, -HOURS_3])
def test_the_peer_comparison_takes_samples_settled_in_truth_whatever_the_clock(
    step_s: float,
) -> None:
    cutoffs: list[int] = []

    def hits(index: str, query: Any, sort: Any) -> list[Any]:
        [rng] = [f["range"]["@timestamp"] for f in query["bool"]["filter"] if "range" in f]
        cutoffs.append(rng["lte"])
        return []

    wall, mono = SteppedClock(), FakeClock(0.0)
    job = PeerJob(
        hits=hits,
        emit=lambda d: None,
        settle=lambda: True,
        peer=PeerSettings(groups={"*": "g"}, settle_s=120),
        thresholds=Thresholds((ThresholdEntry("g", "await", 5.0, 1),), PeerParams(), 0.0, 1.0),
        ctx=DocContext("t", "a"),
        lease=lambda: True,
        load_state=lambda: None,
        save_state=lambda s: None,
        clock=wall,
        monotonic=mono,
    )
    job.run()
    wall.step_s = step_s
    mono.now += 60
    job.run()
    first, second = cutoffs
    assert first <= (time.time() - 120) * 1000  # samples at least settle_s old, by the clock
    assert second - first == 60_000  # 60 s later in truth, whatever the wall clock says
