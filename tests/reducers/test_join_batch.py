"""The temporal join over a batch (:meth:`RequestParser.feed_many`, the intervals as arrays)
gives exactly what feeding the same events one by one does: the same requests in the same
order, the same counters and garbage, the same lines held and released, wherever the batches
end, whatever stays open between them and whenever the timeout flushes (seed 002, section 3)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.event_schema import EventSchema, event_schema
from pipeline.records.events import Event
from pipeline.reducers import batch_join, interval_join
from pipeline.reducers.line_holds import LineHolds
from pipeline.reducers.request_join import RequestParser
from pipeline.reducers.request_record import Request

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
TIMEOUT_NS = 1_000


def _schema() -> EventSchema:
    """The test server's schema (every binding, fork/join and RPC hand-offs, context
    switches) with a short timeout, plus a type that binds one key twice and one with a
    resource that may be a float."""
    data = yaml.safe_load(SCHEMA_PATH.read_text())
    data["events"]["Rebind"] = {
        "attrs": {
            "conn": {"domain": "Conn", "bind": "BIND_START"},
            "peer": {"domain": "Conn", "bind": "BIND_BASIC"},
        }
    }
    data["events"]["Wait"] = {
        "resources": ["wait_ns"],
        "attrs": {"tid": {"domain": "Thread", "bind": "BIND_BASIC"}},
    }
    data["parser"] = {"reorder_window_ms": 0, "timeout_s": TIMEOUT_NS / 1e9}
    return event_schema(data, str(SCHEMA_PATH))


SCHEMA = _schema()
TYPES = [*sorted(set(SCHEMA.events) - {"Rebind", "CSwitch"}), "Unknown"]


VALUES = st.sampled_from([1, 2]) | st.sampled_from([3, "1", [1], True])
"""Few values per domain: intervals are reused, restarted and stopped twice; now and then one
that is a string, a list (joined by its repr) or True (the same key as 1)."""


@st.composite
def logs(draw: st.DrawFn) -> list[Event]:
    """Events of the schema's types carrying most of their join attributes (now and then one
    more, or an unknown type), with steps in time that now and then pass the timeout; rarely
    what the arrays refuse (a step back, an event binding one key twice, a float amount, an
    amount too large to be summed in any order, a context switch)."""
    events: list[Event] = []
    ts = 0
    rare = st.integers(0, 40).map(lambda n: n == 0)
    for line_no in range(1, draw(st.integers(0, 80)) + 1):
        ts += draw(st.sampled_from([0, 1, 10, 100, 400, 1500]))
        if draw(rare):
            ts -= 5
        ev = "Rebind" if draw(rare) else "CSwitch" if draw(rare) else draw(st.sampled_from(TYPES))
        own = SCHEMA.events[ev].attrs if ev in SCHEMA.events else {}
        attrs: dict[str, Any] = {}
        for name in ("conn", "tid", "task", "rpc", "peer"):
            if (name in own and draw(st.integers(0, 5))) or draw(rare):
                attrs[name] = draw(VALUES)
        if ev == "Wait":
            huge = st.sampled_from([2.5, 2**52 + 1, 2**60, True])
            attrs["wait_ns"] = draw(huge if draw(rare) else VALUES)
        if ev == "CSwitch":
            tids = st.sampled_from([1, 2, 3])
            attrs = {"cpu": draw(st.integers(0, 1)), "prev_tid": draw(tids), "next_tid": draw(tids)}
        if draw(st.integers(0, 3)) == 0:
            attrs["cpu_ns"] = draw(st.integers(0, 50))
        events.append(Event(ts, ev, attrs, line_no))
    return events


class Run:
    """A parser with line holds, fed batch by batch; what it gives per batch. ``queued``: the
    caller holds each line while the batch is fed, as the events chain's reorder queue does.
    """

    def __init__(self, queued: bool = True) -> None:
        self.garbage: list[list[Event]] = []
        self.holds = LineHolds()
        self.parser = RequestParser(SCHEMA, on_garbage=self.garbage.append, holds=self.holds)
        self.queued = queued

    def batch(self, events: list[Event], one_by_one: bool) -> tuple[Any, ...]:
        for e in events if self.queued else ():
            self.holds.take(e.line_no)
        if one_by_one:
            found = [r for e in events for r in self.parser.feed(e)]
        else:
            found = self.parser.feed_many(events)
        for e in events if self.queued else ():
            self.holds.drop(e.line_no)
        held = {e.line_no: self.holds.held(e.line_no) for e in events}
        return found, _exactly(found), sorted(self.holds.pop_released()), held

    def close(self) -> tuple[list[Request], Any, Any, list[list[Event]]]:
        found = self.parser.close()
        return found, _exactly(found), self.parser.stats, self.garbage


def _exactly(requests: list[Request]) -> list[str]:
    """What equality of requests leaves out: the order of their attributes and resources,
    and the type of each value (1 == True == 1.0)."""
    return [repr((list(r.attributes.items()), list(r.resources.items()))) for r in requests]


def run(events: list[Event], cuts: list[int], one_by_one: bool, queued: bool) -> list[Any]:
    r = Run(queued)
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    out: list[Any] = [r.batch(events[a:b], one_by_one) for a, b in itertools.pairwise(bounds)]
    return [*out, r.close(), len(r.holds)]


@pytest.fixture(autouse=True)
def every_batch_in_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of any length go through the arrays (not only long ones)."""
    monkeypatch.setattr(batch_join, "BATCH_MIN", 1)


@settings(max_examples=500, deadline=None)
@given(events=logs(), cuts=st.lists(st.integers(0, 80), max_size=10), queued=st.booleans())
def test_a_batch_joins_as_event_by_event(
    events: list[Event], cuts: list[int], queued: bool
) -> None:
    want = run(events, cuts, one_by_one=True, queued=queued)
    assert run(events, cuts, one_by_one=False, queued=queued) == want


def test_the_arrays_do_join_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The equivalence above is not the fallback's: a plain log is joined in arrays, and
    its requests come out whole (each batch cut inside requests)."""
    fed: list[int] = []
    monkeypatch.setattr(RequestParser, "feed", lambda self, e: fed.append(e.line_no) or [])
    conn = {"conn": "c", "tid": 7}
    log = [
        Event(t * 10, ev, {**conn, "cpu_ns": 5} if ev == "Spin" else conn, t + 1)
        for t, ev in enumerate(["Accept", "Dequeue", "ReqStart", "Spin", "Spin", "ReqEnd"] * 3)
    ]
    r = Run()
    got = [r.batch(log[a:b], one_by_one=False)[0] for a, b in [(0, 4), (4, 11), (11, 18)]]
    assert fed == []
    assert [[req.events[0].line_no for req in g] for g in got] == [[], [1], [7, 13]]
    assert [req.resources["cpu_ns"] for g in got for req in g] == [10.0, 10.0, 10.0]
    assert r.holds.held(4) == 0 and len(r.holds) == 0


def _arrays_and_reference(
    monkeypatch: pytest.MonkeyPatch, batches: list[list[Event]]
) -> list[list[list[int]]]:
    """The requests (as their events' line numbers) per batch and at the close, joined in
    arrays only (feed() disabled) and checked against event by event."""
    reference = Run()
    want = [reference.batch(b, one_by_one=True)[:2] for b in batches]
    want.append(reference.close()[:2])
    with monkeypatch.context() as m:
        m.setattr(RequestParser, "feed", lambda self, e: pytest.fail(f"fed {e} one by one"))
        arrays = Run()
        got = [arrays.batch(b, one_by_one=False)[:2] for b in batches]
        got.append(arrays.close()[:2])
    assert got == want
    return [[[e.line_no for e in req.events] for req in found] for found, _exact in got]


def _log(*spec: tuple[str, dict[str, Any]]) -> list[Event]:
    return [Event(10 * i, ev, attrs, i + 1) for i, (ev, attrs) in enumerate(spec)]


def test_a_start_does_not_join_the_interval_it_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second Accept on a connection ends the first one's interval without joining it:
    two requests, the first emitted at the second Accept."""
    log = _log(
        ("Accept", {"conn": "c"}),
        ("ReqStart", {"conn": "c"}),
        ("Accept", {"conn": "c"}),
        ("ReqStart", {"conn": "c"}),
    )
    assert _arrays_and_reference(monkeypatch, [log]) == [[[1, 2]], [[3, 4]]]


def test_two_starts_emit_in_the_order_of_their_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readable opens conn then tid: the request whose conn it takes over is emitted before
    the one whose thread it takes over, though that one began earlier."""
    log = _log(
        ("Dequeue", {"tid": 7}),
        ("ReqStart", {"tid": 7}),
        ("Accept", {"conn": "c"}),
        ("ReqStart", {"conn": "c"}),
        ("Readable", {"conn": "c", "tid": 7}),
    )
    assert _arrays_and_reference(monkeypatch, [log]) == [[[3, 4], [1, 2]], []]


def test_a_carried_request_forgets_what_another_took_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request carried over two batches loses its thread to another in the second; it
    completes in the third when its connection stops (not kept open by the thread)."""
    first = _log(
        ("Accept", {"conn": "c"}),
        ("Dequeue", {"conn": "c", "tid": 7}),
        ("ReqStart", {"conn": "c", "tid": 7}),
    )
    second = [Event(100, "Readable", {"conn": "d", "tid": 7}, 4)]
    third = [Event(110, "ReqEnd", {"conn": "c"}, 5)]
    fourth = [Event(120, "ReqStart", {"tid": 7}, 6)]
    assert _arrays_and_reference(monkeypatch, [first, second, third, fourth]) == [
        [],
        [],
        [[1, 2, 3, 5]],
        [],
        [[4, 6]],
    ]


@given(
    nodes=st.integers(0, 60),
    edges=st.lists(st.tuples(st.integers(0, 59), st.integers(0, 59)), max_size=80),
)
def test_components_are_those_a_search_finds(nodes: int, edges: list[tuple[int, int]]) -> None:
    """Each node labelled with the least node it is connected to (a breadth-first search)."""
    edges = [(a, b) for a, b in edges if a < nodes and b < nodes]
    near: dict[int, set[int]] = {v: set() for v in range(nodes)}
    for a, b in edges:
        near[a].add(b)
        near[b].add(a)
    want = [-1] * nodes
    for v in range(nodes):
        if want[v] < 0:
            want[v], todo = v, [v]
            while todo:
                for w in near[todo.pop()]:
                    if want[w] < 0:
                        want[w] = v
                        todo.append(w)
    src, dst = (np.asarray([e[i] for e in edges], dtype=np.int64) for i in (0, 1))
    assert interval_join.components(nodes, src, dst).tolist() == want


def test_a_long_chain_is_one_component() -> None:
    """Edges of a path given in the worst order for hooking still make one component."""
    n = 10_000
    order = np.arange(n - 1)[::-1]
    label = interval_join.components(n, order, order + 1)
    assert label.tolist() == [0] * n


def test_an_attribute_keeps_each_value_as_first_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread bound as 1, then as True (the same key): the request's attributes name it as
    1, the connection before the thread (Dequeue's order)."""
    log = _log(
        ("Dequeue", {"conn": "c", "tid": 1}),
        ("ReqStart", {"conn": "c", "tid": True}),
        ("ReqEnd", {"conn": "c", "tid": 1}),
    )
    arrays = Run()
    [found] = arrays.batch(log, one_by_one=False)[0]
    assert repr(list(found.attributes.items())) == "[('conn', ('c',)), ('tid', (1,))]"
    assert _arrays_and_reference(monkeypatch, [log]) == [[[1, 2, 3]], []]


def test_a_context_switch_turns_the_rest_of_a_batch_to_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A request after a context switch in the same batch is charged the CPU its thread ran
    (the arrays never see CPU accounting)."""
    log = [
        Event(0, "CSwitch", {"cpu": 0, "prev_tid": 0, "next_tid": 7}, 1),
        *_log(("Dequeue", {"conn": "c", "tid": 7}), ("ReqStart", {"conn": "c", "tid": 7})),
        Event(30, "ReqEnd", {"conn": "c", "tid": 7}, 4),
    ]
    monkeypatch.setattr(batch_join, "BATCH_MIN", 2)
    [got] = Run().batch(log, one_by_one=False)[0]
    [want] = Run().batch(log, one_by_one=True)[0]
    assert got == want
    assert got.resources["sched_cpu_ns"] == 30.0 and got.kernel_lines == (1,)


def test_amounts_too_large_to_sum_in_any_order_are_summed_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thread 7 waits eight times 2**50 - 1 ns and thread 8 three short times, then one
    request joins both: one by one adds the two sums (2**53 + 2), in time order the last
    additions would round (to 2**53). The batch is fed event by event."""
    fed: list[int] = []
    feed = RequestParser.feed
    monkeypatch.setattr(
        RequestParser, "feed", lambda self, e: fed.append(e.line_no) or feed(self, e)
    )
    log = _log(
        ("Accept", {"conn": "c"}),
        ("Dequeue", {"conn": "c", "tid": 7}),
        ("Dequeue", {"conn": "d", "tid": 8}),
        *[("Wait", {"tid": 7, "wait_ns": 2**50 - 1})] * 8,
        *[("Wait", {"tid": 8, "wait_ns": v}) for v in (8, 1, 1)],
        ("ReqStart", {"conn": "c", "tid": 8}),
    )
    got = run(log, [], one_by_one=False, queued=True)
    assert fed == [e.line_no for e in log]
    assert got == run(log, [], one_by_one=True, queued=True)
    [request] = got[-2][0]
    assert request.resources["wait_ns"] == 2**53 + 2


def test_lines_emitted_in_a_batch_are_released_when_no_one_else_holds_them() -> None:
    log = _log(
        ("Dequeue", {"conn": "c", "tid": 7}),
        ("ReqStart", {"conn": "c", "tid": 7}),
        ("ReqEnd", {"conn": "c", "tid": 7}),
        ("Dequeue", {"conn": "d", "tid": 8}),
    )
    got = Run(queued=False).batch(log, one_by_one=False)
    assert got[2:] == ([1, 2, 3], {1: 0, 2: 0, 3: 0, 4: 1})


def test_timestamps_beyond_63_bits_are_joined_one_by_one() -> None:
    big = 2**63 - 100
    log = [
        Event(big + 10 * i, e.ev, e.attrs, e.line_no)
        for i, e in enumerate(
            _log(
                ("Dequeue", {"conn": "c", "tid": 7}),
                ("ReqStart", {"conn": "c", "tid": 7}),
                ("ReqEnd", {"conn": "c", "tid": 7}),
            )
        )
    ]
    log.append(Event(2**63 + 5, "Spin", {"tid": 9}, 4))
    [got] = Run().batch(log, one_by_one=False)[0]
    assert [e.line_no for e in got.events] == [1, 2, 3]
    assert interval_join.sweeps(np.asarray([big, big + 50], dtype=np.int64), 1, big) == [0, 1]
