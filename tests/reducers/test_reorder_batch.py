"""The reorder queue over a batch (:meth:`ReorderQueue.push_many`) passes on exactly what
pushing the same events one by one does, in the same order and holding the same lines, wherever
the batches end and however late events come (seed 002, section 3: the reorder queue)."""

from __future__ import annotations

import itertools
from pathlib import Path

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.event_schema import EventSchema, event_schema
from pipeline.records.events import Event
from pipeline.reducers.event_order import ReorderQueue
from pipeline.reducers.line_holds import LineHolds

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
WINDOW = 100


def _schema() -> EventSchema:
    """The server's schema plus an event type posted at the end of an operation."""
    data = yaml.safe_load(SCHEMA_PATH.read_text())
    data["events"]["DiskRead"] = {
        "start_attr": "start_ns",
        "attrs": {"irp": {"domain": "Irp", "bind": "BIND_STOP"}},
    }
    data["events"]["DiskReadStart"] = {"attrs": {"irp": {"domain": "Irp", "bind": "BIND_START"}}}
    return event_schema(data, str(SCHEMA_PATH))


SCHEMA = _schema()

step = st.tuples(
    st.integers(-2 * WINDOW, 3 * WINDOW),  # ts step from the previous event: some come late
    st.booleans(),  # a DiskRead (with a synthetic start) rather than a Spin
    st.integers(0, 3 * WINDOW),  # how long before its ts the DiskRead started
)


def stream(steps: list[tuple[int, bool, int]]) -> list[Event]:
    events: list[Event] = []
    ts = 1000
    for n, (dt, disk, took) in enumerate(steps, start=1):
        ts = max(ts + dt, 0)
        if disk:
            events.append(Event(ts, "DiskRead", {"irp": n, "start_ns": max(ts - took, 0)}, n))
        else:
            events.append(Event(ts, "Spin", {"tid": n % 3, "cpu_ns": n}, n))
    return events


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(step, max_size=40),
    cuts=st.lists(st.integers(0, 40), max_size=6).map(sorted),
    in_order=st.booleans(),
)
def test_a_batch_passes_on_what_pushing_one_by_one_does(
    steps: list[tuple[int, bool, int]], cuts: list[int], in_order: bool
) -> None:
    if in_order:  # the common case: a log in order, starts within the window
        steps = [(abs(dt), disk, min(took, WINDOW - 1)) for dt, disk, took in steps]
    events = stream(steps)
    one_holds, batch_holds = LineHolds(), LineHolds()
    one = ReorderQueue(WINDOW, SCHEMA, one_holds)
    batch = ReorderQueue(WINDOW, SCHEMA, batch_holds)
    bounds = [0, *[c for c in cuts if c <= len(events)], len(events)]
    for a, b in itertools.pairwise(bounds):
        expected = [e for x in events[a:b] for e in one.push(x)]
        got = batch.push_many(events[a:b])
        assert [(e.ts_ns, e.ev, e.line_no, e.attrs) for e in got] == [
            (e.ts_ns, e.ev, e.line_no, e.attrs) for e in expected
        ]
        assert batch.newest == one.newest and len(batch) == len(one)
        assert {n: batch_holds.held(n) for n in range(len(events) + 1)} == {
            n: one_holds.held(n) for n in range(len(events) + 1)
        }
    assert [(e.ts_ns, e.ev, e.line_no) for e in batch.drain()] == [
        (e.ts_ns, e.ev, e.line_no) for e in one.drain()
    ]
