"""The temporal join: events of an HTTP server's requests -> requests (seed 002, section 3)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import yaml

from pipeline.records.event_schema import EventSchema, event_schema
from pipeline.records.events import Event
from pipeline.reducers.event_order import ReorderQueue, merge_streams, reorder
from pipeline.reducers.line_holds import LineHolds
from pipeline.reducers.request_join import RequestParser, extract
from pipeline.reducers.request_record import Request

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
MS = 1_000_000


def schema(**parser: Any) -> EventSchema:
    data = yaml.safe_load(SCHEMA_PATH.read_text())
    data["parser"] = {**data["parser"], **parser}
    return event_schema(data, str(SCHEMA_PATH))


def ev(ts_ms: float, name: str, **attrs: Any) -> Event:
    return Event(round(ts_ms * MS), name, attrs)


def spin_request(t: float, conn: str, tid: int, cpu_ms: float) -> list[Event]:
    """A type A/B request as the test server posts it (the listener accepts on thread 1)."""
    return [
        ev(t, "Accept", conn=conn, tid=1),
        ev(t + 0.1, "Dequeue", conn=conn, tid=tid),
        ev(t + 0.2, "ReqStart", conn=conn, tid=tid, _type="spin"),
        ev(t + 0.3 + cpu_ms, "Spin", tid=tid, cpu_ns=round(cpu_ms * MS)),
        ev(t + 0.4 + cpu_ms, "Send", conn=conn, tid=tid, bytes=43),
        ev(t + 0.5 + cpu_ms, "ReqEnd", conn=conn, tid=tid),
    ]


def conns(r: Request) -> tuple[Any, ...]:
    return r.attributes["conn"]


def test_one_request_with_its_events_attributes_and_resources() -> None:
    [r] = list(extract(spin_request(0, "c1", 10, 30), schema()))
    assert [e.ev for e in r.events] == ["Accept", "Dequeue", "ReqStart", "Spin", "Send", "ReqEnd"]
    assert r.attributes == {"conn": ("c1",), "tid": (10,)}  # Accept's tid is not a join attribute
    assert r.resources == {
        "cpu_ns": 30 * MS,
        "disk_bytes": 0.0,
        "net_bytes": 43.0,
        "sched_cpu_ns": 0.0,
    }
    assert (r.start_ns, r.end_ns, r.complete, r.seeds) == (0, round(30.5 * MS), True, 1)


def test_interleaved_requests_on_reused_threads_and_connections_stay_apart() -> None:
    events: list[Event] = []
    # 40 requests, 8 at a time; each worker thread and each (kept-alive) connection serves
    # one request every 20 ms
    for i in range(40):
        events += spin_request(i * 2.0, f"c{i % 10}", 10 + i % 10, 15 + i % 2)
    events.sort(key=lambda e: e.ts_ns)
    parser = RequestParser(schema())
    got = [r for e in events for r in parser.feed(e)] + parser.close()
    assert len(got) == 40
    assert all(r.complete and r.seeds == 1 and len(r.events) == 6 for r in got)
    assert [(r.start_ns, r.resources["cpu_ns"]) for r in sorted(got, key=lambda r: r.start_ns)] == [
        (round(i * 2.0 * MS), (15 + i % 2) * MS) for i in range(40)
    ]
    assert parser.stats.garbage_events == 0


def test_events_of_no_request_are_garbage_collected() -> None:
    events = [ev(0, "Spin", tid=99, cpu_ns=5), *spin_request(1, "c1", 10, 1), ev(9, "Noise", x=1)]
    parser = RequestParser(schema())
    got = [r for e in events for r in parser.feed(e)] + parser.close()
    assert len(got) == 1
    assert (parser.stats.garbage_graphs, parser.stats.garbage_events, parser.stats.unknown) == (
        1,
        1,
        1,
    )


def test_a_request_whose_end_was_lost_is_flushed_after_the_timeout() -> None:
    lost = spin_request(0, "c1", 10, 5)[:-1]  # no ReqEnd
    later = spin_request(20_000, "c2", 11, 5)  # 20 s later: past the 10 s timeout
    parser = RequestParser(schema())
    got = [r for e in lost + later for r in parser.feed(e)] + parser.close()
    assert [(conns(r), r.complete, len(r.events)) for r in got] == [
        (("c1",), False, 5),
        (("c2",), True, 6),
    ]
    assert parser.stats.incomplete == 1


def test_context_switch_cpu_is_split_at_the_threads_events() -> None:
    # thread 10 runs on CPU 0 from 0.05 ms to 40 ms; its ReqEnd at 30.5 ms closes the request:
    # the CPU before ReqEnd is the request's, the CPU after it nobody's
    events = sorted(
        [
            ev(0.05, "CSwitch", cpu=0, prev_tid=0, prev_state="R", next_tid=10),
            *spin_request(0, "c1", 10, 30),
            ev(40, "CSwitch", cpu=0, prev_tid=10, prev_state="S", next_tid=0),
        ],
        key=lambda e: e.ts_ns,
    )
    [r] = list(extract(events, schema()))
    # the thread's interval opened at Dequeue (0.1 ms): charged from there to ReqEnd
    assert r.resources["sched_cpu_ns"] == round(30.5 * MS) - round(0.1 * MS)
    # one slice per stretch between the thread's events
    bounds = [round(t * MS) for t in (0.1, 0.2, 30.3, 30.4, 30.5)]
    assert [(c.tid, c.start_ns, c.end_ns) for c in r.cpu] == [
        (10, a, b) for a, b in itertools.pairwise(bounds)
    ]
    assert sum(c.end_ns - c.start_ns for c in r.cpu) == r.resources["sched_cpu_ns"]


def test_fork_join_and_rpc_hand_offs_stay_in_one_request() -> None:
    parspin = [
        ev(0, "Accept", conn="c1"),
        ev(0.1, "Dequeue", conn="c1", tid=10),
        ev(0.2, "ReqStart", conn="c1", tid=10),
        ev(0.3, "Fork", tid=10, task="t7"),
        ev(0.4, "TaskStart", task="t7", tid=20),
        ev(15.4, "Spin", tid=20, cpu_ns=15 * MS),
        ev(15.5, "TaskEnd", task="t7", tid=20),
        ev(15.3, "Spin", tid=10, cpu_ns=15 * MS),
        ev(15.6, "Join", tid=10, task="t7"),
        ev(15.7, "ReqEnd", conn="c1", tid=10),
    ]
    rpc = [
        ev(20, "Accept", conn="c2"),
        ev(20.1, "Dequeue", conn="c2", tid=11),
        ev(20.2, "ReqStart", conn="c2", tid=11),
        ev(20.3, "RpcCall", tid=11, rpc="r1"),
        ev(20.4, "RpcServe", rpc="r1", tid=30),
        ev(35.4, "Spin", tid=30, cpu_ns=15 * MS),
        ev(35.5, "RpcReply", rpc="r1", tid=30),
        ev(35.6, "RpcReturn", tid=11, rpc="r1"),
        ev(35.7, "ReqEnd", conn="c2", tid=11),
        # the RPC thread serves another (unseeded) call afterwards: not joined
        ev(40, "RpcServe", rpc="r2", tid=30),
        ev(41, "RpcReply", rpc="r2", tid=30),
    ]
    got = list(extract(sorted(parspin + rpc, key=lambda e: e.ts_ns), schema()))
    assert [(conns(r), len(r.events), r.resources["cpu_ns"]) for r in got] == [
        (("c1",), 10, 30 * MS),
        (("c2",), 9, 15 * MS),
    ]
    assert got[0].attributes["tid"] == (10, 20)
    assert got[1].attributes["rpc"] == ("r1",)


def test_events_shuffled_within_the_reorder_window_give_the_same_requests() -> None:
    events: list[Event] = []
    for i in range(50):
        events += spin_request(i * 3.0, f"c{i % 7}", 10 + i % 5, 10 + i % 3)
    events.sort(key=lambda e: e.ts_ns)
    rng = random.Random(7)
    # each event delayed by up to 500 ms in arrival order, under the 1 s window
    delayed = ((e.ts_ns + rng.randrange(500 * MS), i, e) for i, e in enumerate(events))
    shuffled = [e for _d, _i, e in sorted(delayed)]
    assert shuffled != events

    def summary(rs: list[Request]) -> list[tuple[Any, ...]]:
        return sorted((r.start_ns, conns(r), len(r.events), r.resources["cpu_ns"]) for r in rs)

    ordered = list(extract(events, schema()))
    assert len(ordered) == 50
    window = 1000 * MS
    assert list(reorder(shuffled, window)) == events
    assert summary(list(extract(reorder(shuffled, window), schema()))) == summary(ordered)


def test_end_posted_events_get_a_synthetic_start_at_their_start_time() -> None:
    data = yaml.safe_load(SCHEMA_PATH.read_text())
    data["events"]["DiskRead"] = {
        "start_attr": "start_ns",
        "resources": ["bytes:disk"],
        "attrs": {"irp": {"domain": "Irp", "bind": "BIND_STOP"}},
    }
    data["events"]["DiskReadStart"] = {
        "attrs": {
            "tid": {"domain": "Thread", "bind": "BIND_BASIC"},
            "irp": {"domain": "Irp", "bind": "BIND_START"},
        }
    }
    s = event_schema(data, "disk.yaml")
    app = spin_request(0, "c1", 10, 5)
    # the disk read was issued at 1 ms by thread 10 and completed at 3 ms on an interrupt
    disk = [ev(3, "DiskRead", irp="0xff01", tid=10, bytes=4096, start_ns=1 * MS)]
    [r] = list(extract(merge_streams([app, disk], s), s))
    assert [e.ev for e in r.events][3:6] == ["DiskReadStart", "DiskRead", "Spin"]
    assert r.events[3].ts_ns == 1 * MS
    assert r.resources["disk_bytes"] == 4096


def with_lines(events: list[Event]) -> list[Event]:
    return [Event(e.ts_ns, e.ev, e.attrs, n) for n, e in enumerate(events, start=1)]


def test_lines_are_held_until_their_request_and_slices_are_finished() -> None:
    # line 1 switches thread 10 in before its request starts; the request's CPU comes from that
    # slice, so line 1 is held until the request is emitted, and the request derives from it
    events = with_lines(
        [
            ev(0.05, "CSwitch", cpu=0, prev_tid=0, prev_state="R", next_tid=10),
            *spin_request(0, "c1", 10, 30),
            ev(31, "Accept", conn="c2", tid=1),  # opens a connection that never ends
            ev(40, "CSwitch", cpu=0, prev_tid=10, prev_state="S", next_tid=0),
        ]
    )
    holds = LineHolds()
    parser = RequestParser(schema(), holds=holds)
    released: list[int] = []
    done: list[Request] = []
    for e in events:
        done += parser.feed(e)
        released += holds.pop_released()
        if e.line_no == 6:  # Send: the request is open, and so is the slice of line 1
            assert released == [] and holds.held(1) == 2
    [r] = done
    assert r.kernel_lines == (1,) and r.lines == (1, 2, 3, 4, 5, 6, 7)
    # released when the request ended (1, 3..7); the listener thread 1, which no switch put on
    # a CPU, is taken to run since its Accept (2); the Accept of c2 (8) stays in its open
    # group, and line 1's slice ended at line 9, which now runs the idle thread
    assert sorted(released) == [1, 3, 4, 5, 6, 7]
    assert [holds.held(n) for n in (2, 8, 9)] == [1, 1, 1]
    parser.close()
    assert sorted(holds.pop_released()) == [2, 8, 9] and len(holds) == 0


def test_the_reorder_queue_holds_what_it_keeps() -> None:
    holds = LineHolds()
    queue = ReorderQueue(5 * MS, None, holds)
    events = with_lines([ev(10, "A"), ev(8, "B"), ev(16, "C")])
    assert queue.push(events[0]) == [] and queue.push(events[1]) == []
    assert [e.ev for e in queue.push(events[2])] == ["B", "A"]  # 8, 10 <= 16 - 5
    assert [holds.held(n) for n in (1, 2, 3)] == [1, 1, 1]  # until the caller drops them
    assert [e.ev for e in queue.drain()] == ["C"] and len(queue) == 0


def test_a_thread_whose_switch_in_was_not_recorded_runs_from_its_first_event() -> None:
    # perf recorded thread 10 going off CPU 0 but not coming back on (a lost sched_switch):
    # its events show it running, so it is charged from its first event to its switch-out
    events = with_lines(
        sorted(
            [
                ev(0.0, "CSwitch", cpu=0, prev_tid=10, prev_state="S", next_tid=0),
                *spin_request(1, "c1", 10, 30),
                ev(40, "CSwitch", cpu=0, prev_tid=10, prev_state="S", next_tid=0),
            ],
            key=lambda e: e.ts_ns,
        )
    )
    holds = LineHolds()
    parser = RequestParser(schema(), holds=holds)
    [r] = [r for e in events for r in parser.feed(e)]
    # from Dequeue (1.1 ms), its first event, to ReqEnd (31.5 ms)
    assert r.resources["sched_cpu_ns"] == round(31.5 * MS) - round(1.1 * MS)
    assert r.kernel_lines == (3,)  # the line of the event it was first seen running at
    assert holds.held(3) == 0  # the switch-out at 40 ms ended the inferred slice
    # without any context switch in the stream nothing is inferred
    [plain] = list(extract(spin_request(1, "c1", 10, 30), schema()))
    assert plain.resources["sched_cpu_ns"] == 0 and plain.cpu == ()
