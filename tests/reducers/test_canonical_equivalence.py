"""The canonical form laid out in one pass (:func:`pipeline.reducers.canonical.canonical`) is
exactly the reference's, item by item (``canonical_reference``): the same tokens with the same
threads, resources (in the same order) and starts, critical path, thread count and totals, on
requests of any shape the join can emit and on some it cannot (seed 002, section 4)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.event_schema import load_event_schema
from pipeline.records.events import Event
from pipeline.reducers.canonical import Canonical, canonical
from pipeline.reducers.request_record import CpuSlice, Request
from tests.reducers import canonical_reference

SCHEMA = load_event_schema(
    Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
)
TYPES = st.sampled_from(
    sorted({t for triple in SCHEMA.sync for t in triple[::2]})
) | st.sampled_from(sorted(set(SCHEMA.events) - {"CSwitch"}))
"""Half of the events Signals or Resumes, so that keys meet, repeat and cross threads."""
TIDS = st.sampled_from([1, 2, 3, -1, True, "2"])
"""Threads: bound ones, one the request did not bind, -1 (the no-thread marker), True (the
same key as 1) and a string."""
VALUES = st.sampled_from([1, 2]) | st.sampled_from(["1", [1], None])
AMOUNTS = st.sampled_from([0, 1, 2.5, -3, True, "7"]) | st.integers(0, 10**7)


@st.composite
def requests(draw: st.DrawFn) -> Request:
    """A request of 1 to 14 events of the schema's types on a few threads, with sync values
    that match, clash or are missing, resources of every type, and now and then CPU slices."""
    n = draw(st.integers(1, 14))
    ts = sorted(draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n)))
    events = []
    for i, t in enumerate(ts):
        attrs: dict[str, Any] = {}
        if draw(st.integers(0, 5)):
            attrs["tid"] = draw(TIDS)
        for name in ("task", "rpc"):
            if draw(st.booleans()):
                attrs[name] = draw(VALUES)
        for name in ("cpu_ns", "bytes"):
            if draw(st.integers(0, 2)) == 0:
                attrs[name] = draw(AMOUNTS)
        events.append(Event(t, draw(TYPES), attrs, i + 1))
    bound = tuple(draw(st.lists(st.sampled_from([1, 2, 3, -1, True]), max_size=3, unique=True)))
    cpu = []
    if draw(st.integers(0, 3)) == 0:
        for _ in range(draw(st.integers(1, 4))):
            start = draw(st.integers(0, 1000))
            tid = draw(st.sampled_from([1, 2, 5]))
            cpu.append(CpuSlice(tid, start, start + draw(st.integers(0, 50))))
    seed = events[draw(st.integers(0, n - 1))]
    return Request(
        tuple(events),
        ts[0],
        ts[-1],
        {"tid": bound} if bound else {},
        {},
        tuple(sorted(cpu, key=lambda c: c.end_ns)),
        True,
        1,
        seed,
    )


def exactly(c: Canonical) -> list[Any]:
    """Every field, with resource order and value types."""
    return [
        [(t.kind, repr(t.tid), list(t.resources.items()), t.start_ns) for t in c.tokens],
        c.critical_path_ns,
        c.threads,
        list(c.resources.items()),
        c.text(),
    ]


@given(requests())
@settings(max_examples=400, deadline=None)
def test_the_one_pass_layout_is_the_reference(request: Request) -> None:
    assert exactly(canonical(request, SCHEMA)) == exactly(
        canonical_reference.canonical(request, SCHEMA)
    )


def test_a_fork_join_request_is_laid_out_on_its_threads() -> None:
    """The seed's thread forks a task onto thread 2, which spins and ends it; the join waits
    for the end: tokens on their threads, the join timed at the task's end."""
    e = [
        Event(0, "ReqStart", {"tid": 1}, 1),
        Event(10, "Fork", {"tid": 1, "task": 7}, 2),
        Event(20, "TaskStart", {"tid": 2, "task": 7}, 3),
        Event(2_000_020, "Spin", {"tid": 2, "cpu_ns": 2_000_000}, 4),
        Event(2_000_030, "TaskEnd", {"tid": 2, "task": 7}, 5),
        Event(2_000_040, "Join", {"tid": 1, "task": 7}, 6),
        Event(2_000_050, "ReqEnd", {"tid": 1}, 7),
    ]
    r = Request(tuple(e), 0, 2_000_050, {"tid": (1, 2)}, {}, (), True, 1, e[0])
    form = canonical(r, SCHEMA)
    assert [(t.kind, t.tid, t.start_ns) for t in form.tokens] == [
        ("ReqStart", 1, 0),
        ("Fork", 1, 0),
        ("TaskStart", 2, 0),
        ("Seg", 2, 0),
        ("TaskEnd", 2, 2_000_000),
        ("Join", 1, 2_000_000),
        ("ReqEnd", 1, 2_000_000),
    ]
    assert form.critical_path_ns == 2_000_000
    assert form.text() == "ReqStart Fork TaskStart Seg[cpu_ns=2.0ms] TaskEnd Join ReqEnd"
    assert exactly(form) == exactly(canonical_reference.canonical(r, SCHEMA))


def test_a_key_two_threads_resume_on_goes_to_the_thread_seen_first() -> None:
    """Threads 2 and 3 both resume on task 7, thread 3 earlier in time but thread 2 first seen
    (its Spin): the Fork descends into thread 2, and thread 3 is walked last from its first
    event."""
    e = [
        Event(0, "ReqStart", {"tid": 1}, 1),
        Event(10, "Spin", {"tid": 2, "cpu_ns": 1000}, 2),
        Event(20, "TaskStart", {"tid": 3, "task": 7}, 3),
        Event(30, "TaskStart", {"tid": 2, "task": 7}, 4),
        Event(40, "Fork", {"tid": 1, "task": 7}, 5),
        Event(50, "ReqEnd", {"tid": 1}, 6),
    ]
    r = Request(tuple(e), 0, 50, {"tid": (1, 2, 3)}, {}, (), True, 1, e[0])
    form = canonical(r, SCHEMA)
    assert [(t.kind, t.tid, t.start_ns) for t in form.tokens] == [
        ("ReqStart", 1, 0),
        ("Fork", 1, 0),
        ("Seg", 2, 0),
        ("TaskStart", 2, 1000),
        ("ReqEnd", 1, 0),
        ("TaskStart", 3, 20),
    ]
    assert form.critical_path_ns == 1000
