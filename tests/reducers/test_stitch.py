"""Cross-machine stitching (seed 002, section 4.2): fragments of requests logged on machines with
separate clocks, joined through the schema's sync events; clock offsets bounded by the messages.

Synthetic requests check exact values; a real run of the test server with its RPC back end on a
clock SKEW_NS ahead, in a file of its own, checks the whole path."""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.records.event_schema import EventSchema, event_schema
from pipeline.records.events import Event
from pipeline.reducers.canonical import Canonical, canonical
from pipeline.reducers.clock_offset import ClockOffset, estimate_offset, offsets_from
from pipeline.reducers.event_order import merge_streams
from pipeline.reducers.fragment_join import MACHINE_ATTR, TID_STRIDE
from pipeline.reducers.request_cluster import cluster_all, purity
from pipeline.reducers.request_join import extract
from pipeline.reducers.request_record import Request
from pipeline.reducers.stitch import Detached, Stitched, stitch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "workloads"))
from http_client import Run, serve  # noqa: E402

SCHEMA_PATH = ROOT / "config" / "schemas" / "http_server.yaml"
MS = 1_000_000
SKEW_NS = 3_141_592_653  # the back end's clock minus the front end's, in the real runs
CPU_MS = {"A": 30.0, "B": 15.0, "C": 0.0, "D": 0.0, "E": 30.0, "F": 29.75}


@pytest.fixture(scope="module")
def schema() -> EventSchema:
    return event_schema(yaml.safe_load(SCHEMA_PATH.read_text()), str(SCHEMA_PATH))


def ev(ts_ms: float, name: str, **attrs: Any) -> Event:
    return Event(round(ts_ms * MS), name, attrs)


def rpc_request(
    t: float, conn: str, tid: int, rpc: str, back_tid: int, skew_ns: int
) -> tuple[list[Event], list[Event]]:
    """A type F request as the test server posts it: the front end's events, and the back
    end's on a clock ``skew_ns`` ahead. The call takes 0.1 ms to arrive, the reply 0.2 ms."""
    front = [
        ev(t, "Accept", conn=conn, tid=1),
        ev(t + 0.1, "Dequeue", conn=conn, tid=tid),
        ev(t + 0.2, "ReqStart", conn=conn, tid=tid, _type="F"),
        ev(t + 7.7, "Spin", tid=tid, cpu_ns=round(7.5 * MS)),
        ev(t + 7.8, "RpcCall", tid=tid, rpc=rpc),
        ev(t + 23.2, "RpcReturn", tid=tid, rpc=rpc),
        ev(t + 30.45, "Spin", tid=tid, cpu_ns=round(7.25 * MS)),
        ev(t + 30.5, "Send", conn=conn, tid=tid, bytes=41),
        ev(t + 30.6, "ReqEnd", conn=conn, tid=tid),
    ]
    back = [
        ev(t + 7.9, "RpcServe", rpc=rpc, tid=back_tid),
        ev(t + 22.9, "Spin", tid=back_tid, cpu_ns=15 * MS),
        ev(t + 23.0, "RpcReply", rpc=rpc, tid=back_tid),
    ]
    return front, [Event(e.ts_ns + skew_ns, e.ev, e.attrs) for e in back]


def run_stitch(machines: dict[str, list[Event]], schema: EventSchema) -> Stitched:
    return stitch({m: merge_streams([evs], schema) for m, evs in machines.items()}, schema)


def one_machine(events: list[Event], schema: EventSchema) -> list[Request]:
    return list(extract(merge_streams([events], schema), schema))


def shape(c: Canonical) -> list[tuple[str, dict[str, float], int]]:
    """A canonical form without its thread ids (they differ once machines are told apart)."""
    return [(t.kind, dict(t.resources), t.start_ns) for t in c.tokens]


# -- clock offsets -------------------------------------------------------------------------


def test_offset_bounds_come_from_the_fastest_message_each_way() -> None:
    # B is 1000 ns ahead: A -> B messages of 30 and 70 ns, B -> A ones of 50 and 20 ns
    forward = [(100, 1130), (500, 1570)]
    backward = [(2000, 1050), (3000, 2020)]
    c = estimate_offset(forward, backward)
    assert c == ClockOffset(offset_ns=1005, lower_ns=980, upper_ns=1030, messages=4)
    assert c.consistent
    assert estimate_offset(forward, []) == ClockOffset(1030, None, 1030, 2)
    assert estimate_offset([], backward) == ClockOffset(980, 980, None, 2)
    with pytest.raises(ValueError, match="no message"):
        estimate_offset([], [])
    assert c.inverse() == ClockOffset(-1005, -1030, -980, 4)
    # bounds that cross: the clocks drifted apart, or a pair was not one message
    assert not estimate_offset([(0, 900)], [(2000, 1000)]).consistent


def test_the_true_offset_always_lies_between_the_bounds() -> None:
    rng = random.Random(7)
    for _ in range(500):
        theta = rng.randrange(-(10**12), 10**12)
        fwd_d = [rng.randrange(0, 10**6) for _ in range(rng.randrange(1, 20))]
        bwd_d = [rng.randrange(0, 10**6) for _ in range(rng.randrange(1, 20))]
        sends = [rng.randrange(10**9) for _ in range(40)]
        forward = [(s, s + d + theta) for s, d in zip(sends, fwd_d, strict=False)]
        backward = [(s + theta, s + d) for s, d in zip(sends, bwd_d, strict=False)]
        c = estimate_offset(forward, backward)
        assert c.lower_ns is not None and c.upper_ns is not None
        assert c.lower_ns <= theta <= c.upper_ns
        assert (c.upper_ns - theta, theta - c.lower_ns) == (min(fwd_d), min(bwd_d))
        assert abs(c.offset_ns - theta) <= (min(fwd_d) + min(bwd_d)) / 2 + 1


def test_offsets_compose_along_a_chain_of_machines() -> None:
    clocks = {
        ("web", "app"): ClockOffset(100, 90, 110, 4),
        ("app", "db"): ClockOffset(-40, -45, None, 1),
    }
    assert offsets_from("web", clocks) == {
        "app": ClockOffset(100, 90, 110, 4),
        "db": ClockOffset(60, 45, None, 5),
    }
    assert offsets_from("db", clocks) == {
        "app": ClockOffset(40, None, 45, 1),
        "web": ClockOffset(-60, None, -45, 5),
    }
    assert offsets_from("lonely", clocks) == {}


# -- synthetic requests --------------------------------------------------------------------


def test_a_request_is_stitched_and_canonical_as_on_one_machine(schema: EventSchema) -> None:
    skew = 5_000 * MS + 123
    front, back = rpc_request(0, "c1", 10, "rpc1", 10, skew)  # same thread id on both machines
    got = run_stitch({"front": front, "back": back}, schema)
    [s] = got.requests
    assert (s.machine, s.machines, s.fragments, s.unmatched, got.unattached) == (
        "front",
        ("front", "back"),
        2,
        (),
        (),
    )
    # the call arrived 0.1 ms after it was sent, the reply 0.2 ms: θ in [skew - 0.2, skew + 0.1]
    assert s.offsets == {"back": ClockOffset(skew - MS // 20, skew - MS // 5, skew + MS // 10, 2)}
    assert got.clocks == {("front", "back"): s.offsets["back"]}
    r = s.request
    assert [(e.ev, e.attrs["tid"], e.attrs[MACHINE_ATTR]) for e in r.events[4:9]] == [
        ("RpcCall", 10, "front"),
        ("RpcServe", 10 + TID_STRIDE, "back"),
        ("Spin", 10 + TID_STRIDE, "back"),
        ("RpcReply", 10 + TID_STRIDE, "back"),
        ("RpcReturn", 10, "front"),
    ]
    # remote events on the front end's clock: off by the estimate's error, 0.05 ms
    assert r.events[5].ts_ns == round(7.9 * MS) + MS // 20
    assert (r.start_ns, r.end_ns, r.seeds, r.complete) == (0, round(30.6 * MS), 1, True)
    assert r.attributes == {"conn": ("c1",), "tid": (10, 10 + TID_STRIDE), "rpc": ("rpc1",)}
    assert r.resources["cpu_ns"] == 29.75 * MS
    # the same request logged on one machine (the back end's thread 20)
    _f, back_same = rpc_request(0, "c1", 10, "rpc1", 20, 0)
    [alone] = one_machine(front + back_same, schema)
    c, c1 = canonical(r, schema), canonical(alone, schema)
    assert (
        c.text()
        == c1.text()
        == (
            "ReqStart Seg[cpu_ns=7.5ms] RpcCall RpcServe Seg[cpu_ns=15.0ms] RpcReply RpcReturn "
            "Seg[cpu_ns=7.2ms,net_bytes=0.0KiB] ReqEnd"
        )
    )
    assert shape(c) == shape(c1)
    assert (
        (c.critical_path_ns, c.threads)
        == (c1.critical_path_ns, c1.threads)
        == (
            round(29.75 * MS),
            2,
        )
    )


def test_kernel_cpu_slices_move_with_their_machine(schema: EventSchema) -> None:
    skew = -2_000 * MS  # the back end's clock behind
    t0 = 5_000.0
    front, back = rpc_request(t0, "c1", 10, "rpc1", 20, skew)

    def switch(ts_ms: float, prev: int, nxt: int, skew_ns: int = 0) -> Event:
        attrs = {"cpu": 0, "prev_tid": prev, "next_tid": nxt}
        return Event(round((t0 + ts_ms) * MS) + skew_ns, "CSwitch", attrs)

    # each thread runs from just before its first event to just after its last
    front += [switch(0.05, 0, 10), switch(7.85, 10, 0), switch(23.15, 0, 10), switch(30.65, 10, 0)]
    back += [switch(7.88, 0, 20, skew), switch(23.05, 20, 0, skew)]
    [s] = run_stitch({"front": front, "back": back}, schema).requests

    def at(ms: float) -> int:
        return round((t0 + ms) * MS)

    # the back end's slices on the front end's clock, 0.05 ms late (the estimate's error);
    # CPU before a thread's first event is not the request's
    remote = 20 + TID_STRIDE
    assert [(c.tid, c.start_ns, c.end_ns) for c in s.request.cpu] == [
        (10, at(0.1), at(0.2)),
        (10, at(0.2), at(7.7)),
        (10, at(7.7), at(7.8)),
        (10, at(7.8), at(7.85)),
        (remote, at(7.9) + MS // 20, at(22.9) + MS // 20),
        (remote, at(22.9) + MS // 20, at(23.0) + MS // 20),
        (10, at(23.15), at(23.2)),
        (10, at(23.2), at(30.45)),
        (10, at(30.45), at(30.5)),
        (10, at(30.5), at(30.6)),
    ]
    assert s.request.resources["sched_cpu_ns"] == at(30.6) - at(0.1) - (at(23.15) - at(7.85)) + (
        at(23.0) - at(7.9)
    )
    # on one machine (the back end's CPU numbered apart): the same canonical form
    one = front + [
        Event(e.ts_ns - skew, e.ev, {**e.attrs, "cpu": 1} if e.ev == "CSwitch" else e.attrs)
        for e in back
    ]
    [alone] = one_machine(one, schema)
    c, c1 = canonical(s.request, schema), canonical(alone, schema)
    assert shape(c) == shape(c1)
    assert c.critical_path_ns == c1.critical_path_ns
    assert c.resources["cpu_ns"] == at(30.6) - at(0.1) - (at(23.15) - at(7.85)) + at(23.0) - at(7.9)


def test_local_hand_offs_of_two_machines_stay_apart(schema: EventSchema) -> None:
    # both machines fork a task named task1: the back end's is qualified with its machine, so
    # the front end's Fork does not resume the back end's TaskStart
    front, back = rpc_request(0, "c1", 10, "rpc1", 20, 7 * MS)
    fork = [
        ev(1.0, "Fork", tid=10, task="task1"),
        ev(1.1, "TaskStart", task="task1", tid=11),
        ev(4.1, "Spin", tid=11, cpu_ns=3 * MS),
        ev(4.2, "TaskEnd", task="task1", tid=11),
        ev(4.3, "Join", tid=10, task="task1"),
    ]
    back_fork = [
        ev(8.0, "Fork", tid=20, task="task1"),
        ev(8.1, "TaskStart", task="task1", tid=21),
        ev(10.1, "Spin", tid=21, cpu_ns=2 * MS),
        ev(10.2, "TaskEnd", task="task1", tid=21),
        ev(10.3, "Join", tid=20, task="task1"),
    ]
    front = sorted(front + fork, key=lambda e: e.ts_ns)
    back = sorted(
        back + [Event(e.ts_ns + 7 * MS, e.ev, e.attrs) for e in back_fork], key=lambda e: e.ts_ns
    )
    [s] = run_stitch({"front": front, "back": back}, schema).requests
    assert s.request.attributes["task"] == ("task1", "back:task1")
    renamed = [Event(e.ts_ns, e.ev, {**e.attrs, "task": "task2"}) for e in back_fork]
    _f, back_same = rpc_request(0, "c1", 10, "rpc1", 20, 0)
    [alone] = one_machine(front + back_same + renamed, schema)
    c, c1 = canonical(s.request, schema), canonical(alone, schema)
    assert c.text() == c1.text()
    assert shape(c) == shape(c1)
    assert c.threads == c1.threads == 4


def test_a_fragment_without_its_partner_stays_unattached(schema: EventSchema) -> None:
    front, back = rpc_request(0, "c1", 10, "rpc1", 20, 9 * MS)
    _front2, back2 = rpc_request(50, "c2", 11, "rpc2", 21, 9 * MS)  # its call was not logged
    got = run_stitch({"front": front, "back": back + back2}, schema)
    [s] = got.requests
    assert (s.fragments, s.request.attributes["rpc"]) == (2, ("rpc1",))
    [u] = got.unattached
    assert (u.reason, u.fragment.machine, u.fragment.seeded) == (Detached.UNMATCHED, "back", False)
    assert [e.ev for e in u.fragment.request.events] == ["RpcServe", "Spin", "RpcReply"]
    assert [(p.sync[0], p.value, p.sends) for p in u.fragment.endpoints] == [
        ("RpcCall", "rpc2", False),
        ("RpcReply", "rpc2", True),
    ]
    assert (got.stats["back"].fragments, got.stats["front"].requests) == (2, 1)
    # and a request whose back end is missing keeps its own part, the ends it lacks reported
    got = run_stitch({"front": front, "back": back2}, schema)
    [s] = got.requests
    assert (s.machines, s.fragments, s.offsets) == (("front",), 1, {})
    assert [(p.machine, p.sync[0], p.value, p.sends) for p in s.unmatched] == [
        ("front", "RpcCall", "rpc1", True),
        ("front", "RpcReply", "rpc1", False),
    ]
    assert s.request.resources["cpu_ns"] == 14.75 * MS
    assert [u.reason for u in got.unattached] == [Detached.UNMATCHED]
    assert got.clocks == {}


def test_an_endpoint_seen_twice_is_paired_with_nothing(schema: EventSchema) -> None:
    front, back = rpc_request(0, "c1", 10, "rpc1", 20, 9 * MS)
    _f, again = rpc_request(40, "c9", 12, "rpc1", 21, 9 * MS)  # the same rpc id served twice
    got = run_stitch({"front": front, "back": back + again}, schema)
    [s] = got.requests
    assert (s.machines, s.fragments, len(s.unmatched)) == (("front",), 1, 2)
    assert [(u.reason, u.fragment.request.start_ns) for u in got.unattached] == [
        (Detached.AMBIGUOUS, back[0].ts_ns),
        (Detached.AMBIGUOUS, again[0].ts_ns),
    ]
    assert got.clocks == {}


def small_schema() -> EventSchema:
    """Requests (``Begin``..``End`` on a thread) that call a service whose worker thread may
    serve several calls in one binding (``Work``..``Done``)."""
    thread = {"domain": "Thread", "bind": "BIND_BASIC"}
    return event_schema(
        {
            "events": {
                "Begin": {"seed": True, "attrs": {"tid": {**thread, "bind": "BIND_START"}}},
                "Call": {"attrs": {"tid": thread, "msg": {"domain": "Msg", "bind": "BIND_START"}}},
                "Return": {"attrs": {"tid": thread, "msg": {"domain": "Msg", "bind": "BIND_STOP"}}},
                "End": {"attrs": {"tid": {**thread, "bind": "BIND_STOP"}}},
                "Work": {"attrs": {"tid": {**thread, "bind": "BIND_START"}}},
                "Serve": {"attrs": {"tid": thread, "msg": {"domain": "Msg", "bind": "BIND_BASIC"}}},
                "Done": {"attrs": {"tid": {**thread, "bind": "BIND_STOP"}}},
            },
            "sync": [["Call", "msg", "Serve"]],
        },
        "small",
    )


def test_fragments_that_join_two_requests_or_none_stay_unattached() -> None:
    schema = small_schema()

    def request(t: float, tid: int, msg: str) -> list[Event]:
        return [
            ev(t, "Begin", tid=tid),
            ev(t + 1, "Call", tid=tid, msg=msg),
            ev(t + 5, "Return", tid=tid, msg=msg),
            ev(t + 6, "End", tid=tid),
        ]

    front = sorted(request(0, 1, "a") + request(0.5, 2, "b"), key=lambda e: e.ts_ns)
    # one binding of the back end's worker serves both calls: it would merge two requests
    back = [
        ev(100.0, "Work", tid=7),
        ev(101.2, "Serve", tid=7, msg="a"),
        ev(101.8, "Serve", tid=7, msg="b"),
        ev(102.0, "Done", tid=7),
    ]
    # a third machine's unseeded fragment calls the back end, whose partner logged no seed
    third = [ev(0.0, "Work", tid=3), ev(1.0, "Call", tid=3, msg="z"), ev(2.0, "Done", tid=3)]
    back += [ev(200.0, "Work", tid=8), ev(201.0, "Serve", tid=8, msg="z"), ev(202, "Done", tid=8)]
    got = run_stitch({"front": front, "back": back, "third": third}, schema)
    assert [(s.machines, s.fragments, len(s.unmatched)) for s in got.requests] == [
        (("front",), 1, 1),
        (("front",), 1, 1),
    ]
    assert sorted((u.fragment.machine, u.reason) for u in got.unattached) == [
        ("back", Detached.CONFLICT),
        ("back", Detached.UNSEEDED),
        ("third", Detached.UNSEEDED),
    ]
    # the conflicting group's messages do not bound the clocks; the others' do
    assert list(got.clocks) == [("back", "third")]


# -- a real server, its RPC back end on another clock --------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    yield {
        "serial": serve(tmp_path_factory.mktemp("serial"), 1, 60, 21, backend_skew_ns=SKEW_NS),
        "concurrent": serve(
            tmp_path_factory.mktemp("concurrent"), 6, 40, 22, backend_skew_ns=SKEW_NS
        ),
        "one_file": serve(tmp_path_factory.mktemp("one_file"), 6, 40, 22),
    }


def truth(r: Request) -> tuple[str, str]:
    [start] = [e for e in r.events if e.ev == "ReqStart"]
    return start.attrs["_type"], start.attrs["_conn"]


def stitched(run: Run, schema: EventSchema) -> Stitched:
    return run_stitch({"front": run.events, "back": run.backend}, schema)


@pytest.mark.parametrize("name", ["serial", "concurrent"])
def test_every_request_is_extracted_once_and_every_rpc_stitched(
    runs: dict[str, Run], schema: EventSchema, name: str
) -> None:
    run = runs[name]
    got = stitched(run, schema)
    assert Counter(truth(s.request)[0] for s in got.requests) == run.sent
    # each ReqStart in exactly one request
    starts = [e.line_no for e in run.events if e.ev == "ReqStart"]
    assert sorted(s.request.seed.line_no for s in got.requests) == starts
    assert got.unattached == ()
    back_events = Counter[tuple[int, str]]()
    cpu_f = []
    for s in got.requests:
        kind, conn = truth(s.request)
        r = s.request
        assert (r.seeds, r.complete, r.attributes["conn"], s.unmatched) == (1, True, (conn,), ())
        cpu = r.resources["cpu_ns"] / MS
        assert CPU_MS[kind] <= cpu <= CPU_MS[kind] * 1.15 + 0.5, (kind, cpu)
        remote = [e for e in r.events if e.attrs[MACHINE_ATTR] == "back"]
        back_events.update((e.line_no, e.ev) for e in remote)
        if kind != "F":
            assert (s.machines, s.fragments, remote) == (("front",), 1, [])
            continue
        cpu_f.append(cpu)
        assert (s.machines, s.fragments) == (("front", "back"), 2)
        assert [e.ev for e in remote] == ["RpcServe", "Spin", "RpcReply"]
        assert remote[1].attrs["cpu_ns"] >= 15 * MS  # the back end's spin
        # on the front end's clock, the back end's part lies within the call
        [call] = [e.ts_ns for e in r.events if e.ev == "RpcCall"]
        [ret] = [e.ts_ns for e in r.events if e.ev == "RpcReturn"]
        assert call <= remote[0].ts_ns and remote[-1].ts_ns <= ret
    assert sum(cpu_f) / len(cpu_f) <= CPU_MS["F"] * 1.03 + 0.2
    # every event of the back end (its ClockSync aside) in exactly one request
    assert sorted(back_events) == [(e.line_no, e.ev) for e in run.backend if e.ev != "ClockSync"]
    assert set(back_events.values()) == {1}
    assert (got.stats["back"].fragments, got.stats["back"].dropped_events) == (run.sent["F"], 0)


@pytest.mark.parametrize("name", ["serial", "concurrent"])
def test_the_true_skew_lies_between_the_bounds(
    runs: dict[str, Run], schema: EventSchema, name: str
) -> None:
    run = runs[name]
    got = stitched(run, schema)
    c = got.clocks[("front", "back")]
    assert c.lower_ns is not None and c.upper_ns is not None
    assert c.lower_ns <= SKEW_NS <= c.upper_ns
    assert abs(c.offset_ns - SKEW_NS) <= 1 * MS
    assert c.messages == 2 * run.sent["F"]
    # the bounds are the fastest call and the fastest reply, measured on one clock
    at = {(e.ev, e.attrs.get("rpc")): e.ts_ns for e in run.events + run.backend}
    rpcs = [rpc for ev_, rpc in at if ev_ == "RpcCall"]
    calls = [at[("RpcServe", x)] - SKEW_NS - at[("RpcCall", x)] for x in rpcs]
    replies = [at[("RpcReturn", x)] - (at[("RpcReply", x)] - SKEW_NS) for x in rpcs]
    assert (c.upper_ns - SKEW_NS, SKEW_NS - c.lower_ns) == (min(calls), min(replies))
    assert all(s.offsets == {"back": c} for s in got.requests if len(s.machines) > 1)


def test_stitched_requests_are_canonical_as_on_one_machine(
    runs: dict[str, Run], schema: EventSchema
) -> None:
    run = runs["concurrent"]
    got = {s.request.seed.line_no: s.request for s in stitched(run, schema).requests}
    # the same run on one clock: the back end's events moved back by the true skew
    moved = [Event(e.ts_ns - SKEW_NS, e.ev, e.attrs, e.line_no) for e in run.backend]
    merged = sorted(run.events + moved, key=lambda e: e.ts_ns)
    alone = {r.seed.line_no: r for r in one_machine(merged, schema)}
    assert got.keys() == alone.keys()
    assert len(got) == sum(run.sent.values())
    for key, r in got.items():
        c, c1 = canonical(r, schema), canonical(alone[key], schema)
        assert [t.kind for t in c.tokens] == [t.kind for t in c1.tokens]
        assert [t.start_ns for t in c.tokens] == [t.start_ns for t in c1.tokens]
        for t, t1 in zip(c.tokens, c1.tokens, strict=True):
            assert t.resources == pytest.approx(t1.resources, rel=1e-12)
        assert (c.critical_path_ns, c.threads) == (c1.critical_path_ns, c1.threads)
        assert r.resources == pytest.approx(alone[key].resources, rel=1e-12)
    # and as the F requests of a run that logged everything in one file
    forms = [canonical(r, schema) for r in got.values() if truth(r)[0] == "F"]
    one_file = one_machine(runs["one_file"].events, schema)
    single = [canonical(r, schema) for r in one_file if truth(r)[0] == "F"]
    f_kinds = ("ReqStart", "Seg", "RpcCall", "RpcServe", "Seg", "RpcReply", "RpcReturn", "Seg")
    assert {tuple(t.kind for t in f.tokens) for f in forms + single} == {(*f_kinds, "ReqEnd")}
    for name in ("cpu_ns", "net_bytes"):
        mean = sum(f.resources[name] for f in forms) / len(forms)
        mean1 = sum(f.resources[name] for f in single) / len(single)
        assert mean == pytest.approx(mean1, rel=0.03), name
    paths = [f.critical_path_ns / MS for f in forms]
    paths1 = [f.critical_path_ns / MS for f in single]
    assert all(29.75 <= p <= 29.75 * 1.15 + 0.5 for p in paths + paths1)
    assert sum(paths) / len(paths) == pytest.approx(sum(paths1) / len(paths1), rel=0.03)


def test_six_pure_clusters_of_stitched_requests(runs: dict[str, Run], schema: EventSchema) -> None:
    got = [
        s.request
        for name in ("serial", "concurrent")
        for s in stitched(runs[name], schema).requests
    ]
    model, final, _outliers = cluster_all([canonical(r, schema) for r in got])
    assert len(model.clusters) == 6
    assert purity(final, [truth(r)[0] for r in got]) >= 0.98


def test_without_the_back_end_the_rpc_requests_lack_its_spin(
    runs: dict[str, Run], schema: EventSchema
) -> None:
    run = runs["concurrent"]
    f = [r for r in one_machine(run.events, schema) if truth(r)[0] == "F"]
    assert len(f) == run.sent["F"]
    for r in f:
        assert "RpcServe" not in {e.ev for e in r.events}
        assert 14.75 <= r.resources["cpu_ns"] / MS <= 14.75 * 1.15 + 0.5
        c = canonical(r, schema)
        kinds = [t.kind for t in c.tokens]
        assert kinds == ["ReqStart", "Seg", "RpcCall", "RpcReturn", "Seg", "ReqEnd"]
        assert 14.75 <= c.critical_path_ns / MS <= 14.75 * 1.15 + 0.5
    # stitched with no back end: the same, each with its two ends reported unmatched
    got = run_stitch({"front": run.events}, schema)
    ends = Counter(tuple((p.sync[0], p.sends) for p in s.unmatched) for s in got.requests)
    others = sum(run.sent.values()) - run.sent["F"]
    assert ends == {(("RpcCall", True), ("RpcReply", False)): run.sent["F"], (): others}
    # the back end alone: every fragment reported, none made a request
    got = run_stitch({"back": run.backend}, schema)
    assert got.requests == ()
    assert Counter(u.reason for u in got.unattached) == {Detached.UNMATCHED: run.sent["F"]}


def test_a_lost_call_leaves_its_back_end_fragment_unattached(
    runs: dict[str, Run], schema: EventSchema
) -> None:
    run = runs["concurrent"]
    rpc = next(e.attrs["rpc"] for e in run.events if e.ev == "RpcCall")
    kept = [e for e in run.events if e.attrs.get("rpc") != rpc]
    got = run_stitch({"front": kept, "back": run.backend}, schema)
    [u] = got.unattached
    assert (u.reason, u.fragment.machine) == (Detached.UNMATCHED, "back")
    assert {e.attrs.get("rpc") for e in u.fragment.request.events} == {rpc, None}
    n_f, total = run.sent["F"], sum(run.sent.values())
    assert Counter(len(s.machines) for s in got.requests) == {2: n_f - 1, 1: total - n_f + 1}
