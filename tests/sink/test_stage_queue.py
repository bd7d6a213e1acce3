"""The instrumented stage queue and the sink's sender thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline.records.core import Document
from pipeline.settings import SinkSettings
from pipeline.sink.sender import MIN_BULK_DOCS, AsyncSink
from pipeline.sink.stage_queue import EndCounts, StageQueue


def test_counts_and_blocked_flags_per_end() -> None:
    q: StageQueue[int] = StageQueue(3)
    assert q.get_batch(5, timeout_s=0.01) == []  # found empty: the consumer was starved
    for i in range(3):
        q.put(i)
    assert q.take("tail") == EndCounts(3, False)
    assert q.take("head") == EndCounts(0, True)
    assert q.get_batch(2) == [0, 1]
    assert q.take("head") == EndCounts(2, False)  # zeroed by the previous take
    assert q.take("head") == EndCounts(0, False)
    assert q.take("tail") == EndCounts(0, False)


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    """Whether ``condition`` came true within ``timeout_s`` (checked every millisecond)."""
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.001)
    return True


def test_a_full_queue_blocks_the_producer_and_bounds_what_waits() -> None:
    q: StageQueue[int] = StageQueue(2)
    seen: list[int] = []
    done = threading.Event()

    def produce() -> None:
        for i in range(10):
            q.put(i)
            seen.append(len(q))
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    assert wait_until(lambda: q.take("tail").blocked)  # the producer waits on the full queue
    assert not done.is_set() and len(q) == 2
    assert q.take("tail").blocked  # still waiting: the next period starts blocked
    got: list[int] = []
    while len(got) < 10:
        got += q.get_batch(1, timeout_s=1)
        q.done(1)
    t.join()
    assert got == list(range(10)) and max(seen) <= 2
    assert q.join(timeout_s=1)


def test_an_idle_or_joining_producer_counts_as_blocked() -> None:
    q: StageQueue[int] = StageQueue(4)
    q.take("tail")
    q.producer_idle(True)
    assert q.take("tail").blocked
    assert q.take("tail").blocked  # still idle in the next period
    q.producer_idle(False)
    q.take("tail")
    assert not q.take("tail").blocked
    q.put(1)
    waiter = threading.Thread(target=q.join)
    waiter.start()
    assert wait_until(lambda: q.take("tail").blocked)  # waiting for the consumer to finish
    assert q.take("tail").blocked
    assert q.get_batch(1) == [1]
    q.done(1)
    waiter.join(timeout=1)
    assert not waiter.is_alive()


def test_no_count_is_lost_under_concurrent_sampling() -> None:
    q: StageQueue[int] = StageQueue(64)
    n = 20_000
    taken = [0]
    stop = threading.Event()

    def consume() -> None:
        got = 0
        while got < n:
            got += len(q.get_batch(8, timeout_s=1))
        stop.set()

    def sample() -> None:
        while not stop.is_set():
            taken[0] += q.take("head").count
        taken[0] += q.take("head").count

    threads = [threading.Thread(target=consume), threading.Thread(target=sample)]
    for t in threads:
        t.start()
    for i in range(n):
        q.put(i)
    for t in threads:
        t.join()
    assert taken[0] == n


def test_bad_capacity() -> None:
    with pytest.raises(ValueError, match="capacity must be > 0"):
        StageQueue(0)


class SlowClient:
    """Answers bulk requests like Elasticsearch (every item created), ``delay_s`` each."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.sizes: list[int] = []

    def bulk(self, *, operations: Any, **_kw: Any) -> dict[str, Any]:
        n = bytes(operations).count(b"\n") // 2
        self.sizes.append(n)
        time.sleep(self.delay_s)
        return {"errors": False, "items": [{"create": {"status": 201}} for _ in range(n)]}


def doc(i: int) -> Document:
    return Document("metrics-x-default", f"id{i}", {"n": i}, ())


def test_acknowledgements_reach_the_polling_thread_once_each(tmp_path: Path) -> None:
    acked: list[tuple[str, str]] = []
    threads: set[str] = set()

    def on_ack(docs: Sequence[Document]) -> None:
        threads.add(threading.current_thread().name)
        acked.extend((d.doc_id, threading.current_thread().name) for d in docs)

    client = SlowClient(0.001)
    sink = AsyncSink(client, SinkSettings(chunk_max_docs=7, queue_docs=5), tmp_path, on_ack=on_ack)  # type: ignore[arg-type]
    for i in range(40):
        sink.add(doc(i))
        assert len(sink.queue) <= 5  # the back-pressure bounds what waits
    sink.flush()
    assert sorted(d for d, _t in acked) == sorted(f"id{i}" for i in range(40))
    assert threads == {threading.current_thread().name}
    assert sink.pending() == 0 and max(client.sizes) <= 7
    sink.close()
    assert sink.stats()["metrics-x-default"].indexed == 40


def test_bulk_requests_follow_the_measured_rate(tmp_path: Path) -> None:
    sink = AsyncSink(SlowClient(), SinkSettings(chunk_max_docs=500), tmp_path, target_bulk_s=0.5)  # type: ignore[arg-type]
    sink.set_rate(200.0)
    assert sink.bulk_docs == 100
    sink.set_rate(1e6)
    assert sink.bulk_docs == 500
    sink.set_rate(1.0)
    assert sink.bulk_docs == MIN_BULK_DOCS
    sink.close()


class BrokenClient:
    """A client with a bug: every bulk request raises something no transport raises."""

    def bulk(self, **_kw: Any) -> Any:
        raise LookupError("a bug in the client")


def test_a_failing_sender_is_reported_to_the_main_thread(tmp_path: Path) -> None:
    settings = SinkSettings(chunk_max_docs=1)
    sink = AsyncSink(BrokenClient(), settings, tmp_path)  # type: ignore[arg-type]
    sink.add(Document("metrics-x-default", "one", {"v": 1}, ()))
    with pytest.raises(RuntimeError, match="sender thread failed") as info:
        sink.flush()
    assert isinstance(info.value.__cause__, LookupError)
    with pytest.raises(RuntimeError):
        sink.close()


def test_each_end_reports_how_long_it_waited() -> None:
    now = [10.0]
    q: StageQueue[int] = StageQueue(1, clock=lambda: now[0])
    q.producer_idle(True)  # waits from 10 s
    now[0] = 12.0
    assert q.take("tail").waited_s == 2.0  # a wait in progress is split at the take
    now[0] = 13.0
    q.producer_idle(False)
    q.put(1)
    now[0] = 15.0
    tail = q.take("tail")
    assert (tail.count, tail.blocked, tail.waited_s) == (1, True, 1.0)
    assert q.take("tail").waited_s == 0.0
    assert q.take("head").waited_s == 0.0  # the consumer never waited
