"""The event-log path gives the same requests, canonical forms and cluster assignments as the
code it replaced, on the test server's log (``tests/data/events/http_server_6x50.jsonl``,
repeated 20 times with jittered CPU), the same distances as the reference dynamic programme
on arbitrary token sequences, and the same order out of the reorder queue as one heap."""

from __future__ import annotations

import heapq
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.events import Event
from pipeline.reducers.edit_distance import Item, distance
from pipeline.reducers.event_order import ReorderQueue

sys.path.insert(0, str(Path(__file__).resolve().parent))
from events_golden import GOLDEN, outcome


def reference_distance(a: Sequence[Item], b: Sequence[Item], c0: float = 1.0) -> float:
    """The resource-weighted edit distance as first written: a full dynamic programme over
    every cell (seed 002, section 5; the cost model in ``request_cluster``'s docstring)."""

    def norm(r: Any) -> float:
        return sum(abs(v) for _k, v in r)

    def diff(x: Any, y: Any) -> float:
        dx, dy = dict(x), dict(y)
        return sum(abs(dx.get(k, 0.0) - dy.get(k, 0.0)) for k in dx.keys() | dy.keys())

    na = [c0 + norm(r) for _k, r in a]
    nb = [c0 + norm(r) for _k, r in b]
    prev = [0.0]
    for w in nb:
        prev.append(prev[-1] + w)
    for i, (ka, ra) in enumerate(a):
        cur = [prev[0] + na[i]]
        for j, (kb, rb) in enumerate(b):
            sub = diff(ra, rb) if ka == kb else na[i] + nb[j]
            cur.append(min(prev[j] + sub, prev[j + 1] + na[i], cur[j] + nb[j]))
        prev = cur
    return prev[-1]


@pytest.mark.parametrize("batched", [False, True], ids=["event by event", "in batches"])
def test_the_test_servers_log_gives_what_it_gave_before(batched: bool) -> None:
    assert outcome(batched=batched) == json.loads(GOLDEN.read_text())


TOKENS = st.lists(
    st.tuples(
        st.sampled_from(["Seg", "Fork", "Join", "RpcCall", "ReqEnd"]),
        st.lists(
            st.tuples(
                st.sampled_from(["cpu_ns", "disk_bytes", "net_bytes"]),
                st.floats(0, 50) | st.sampled_from([0.0, 7.5, 15.0, 30.0]),
            ),
            max_size=3,
            unique_by=lambda kv: kv[0],
        ).map(lambda kvs: tuple(sorted(kvs))),
    ),
    max_size=10,
)


@given(TOKENS, TOKENS, st.sampled_from([1.0, 0.25, 3.0]))
@settings(max_examples=500, deadline=None)
def test_the_distance_is_the_reference_programmes(a: Any, b: Any, c0: float) -> None:
    assert distance(a, b, c0) == pytest.approx(reference_distance(a, b, c0), rel=1e-12, abs=1e-9)


def reference_reorder(ts: list[int], window_ns: int) -> list[list[int]]:
    """What each push released, then the drain, with one heap (the queue as first written)."""
    heap: list[tuple[int, int]] = []
    newest, out = -1, []
    for n, t in enumerate(ts):
        heapq.heappush(heap, (t, n))
        newest = max(newest, t)
        due = []
        while heap and heap[0][0] <= newest - window_ns:
            due.append(heapq.heappop(heap)[1])
        out.append(due)
    out.append([heapq.heappop(heap)[1] for _ in range(len(heap))])
    return out


@given(st.lists(st.integers(0, 60), max_size=80), st.integers(0, 20))
@settings(max_examples=400, deadline=None)
def test_the_reorder_queue_releases_what_one_heap_did(ts: list[int], window_ns: int) -> None:
    queue = ReorderQueue(window_ns)
    got = [[e.line_no for e in queue.push(Event(t, "X", {}, n))] for n, t in enumerate(ts)]
    got.append([e.line_no for e in queue.drain()])
    assert got == reference_reorder(ts, window_ns)
    assert len(queue) == 0
