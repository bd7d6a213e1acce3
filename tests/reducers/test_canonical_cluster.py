"""Canonical forms and behavioural clustering of the six request types of seed 002's Table 1."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.event_schema import EventSchema, event_schema
from pipeline.records.events import Event
from pipeline.reducers.canonical import Canonical, Token, canonical
from pipeline.reducers.edit_distance import distance, items, mass, profile, profile_of
from pipeline.reducers.request_cluster import (
    Assignment,
    Clusterer,
    cluster_all,
    purity,
    total_resources,
)
from pipeline.reducers.request_join import extract

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
MS = 1_000_000
KIB = 1024


@pytest.fixture(scope="module")
def schema() -> EventSchema:
    return event_schema(yaml.safe_load(SCHEMA_PATH.read_text()), str(SCHEMA_PATH))


def ev(ts_ms: float, name: str, **attrs: Any) -> Event:
    return Event(round(ts_ms * MS), name, attrs)


def request(kind: str, t: float, n: int, rng: random.Random) -> list[Event]:
    """One request of type ``kind`` (A-F) as the test server posts it; thread 10+n serves it,
    its helper thread is 100+n."""
    conn, tid, helper = f"c{n}", 10 + n, 100 + n

    def cpu(ms: float) -> int:
        return round(ms * MS * rng.uniform(0.99, 1.01))

    head = [
        ev(t, "Accept", conn=conn),
        ev(t + 0.1, "Dequeue", conn=conn, tid=tid),
        ev(t + 0.2, "ReqStart", conn=conn, tid=tid),
    ]
    t += 0.3
    if kind in "AB":
        ms = 30 if kind == "A" else 15
        body = [
            ev(t + ms, "Spin", tid=tid, cpu_ns=cpu(ms)),
            ev(t + ms, "Send", tid=tid, conn=conn, bytes=43),
        ]
        t += ms
    elif kind in "CD":
        size = 12 * KIB if kind == "C" else 5 * KIB
        body = [
            ev(t + 0.1, "FileRead", tid=tid, bytes=size),
            ev(t + 0.2, "Send", tid=tid, conn=conn, bytes=size),
        ]
        t += 0.2
    elif kind == "E":
        task = f"t{n}"
        body = [
            ev(t, "Fork", tid=tid, task=task),
            ev(t + 0.1, "TaskStart", task=task, tid=helper),
            ev(t + 15.1, "Spin", tid=helper, cpu_ns=cpu(15)),
            ev(t + 15.2, "TaskEnd", task=task, tid=helper),
            ev(t + 15.0, "Spin", tid=tid, cpu_ns=cpu(15)),
            ev(t + 15.3, "Join", tid=tid, task=task),
            ev(t + 15.4, "Send", tid=tid, conn=conn, bytes=43),
        ]
        t += 15.4
    else:
        rpc = f"r{n}"
        body = [
            ev(t, "RpcCall", tid=tid, rpc=rpc),
            ev(t + 0.1, "RpcServe", rpc=rpc, tid=helper),
            ev(t + 15.1, "Spin", tid=helper, cpu_ns=cpu(15)),
            ev(t + 15.2, "RpcReply", rpc=rpc, tid=helper),
            ev(t + 15.3, "RpcReturn", tid=tid, rpc=rpc),
            ev(t + 15.4, "Send", tid=tid, conn=conn, bytes=43),
        ]
        t += 15.4
    return [*head, *body, ev(t + 0.1, "ReqEnd", conn=conn, tid=tid)]


def workload(kinds: str, rng: random.Random) -> tuple[list[Event], list[str]]:
    events: list[Event] = []
    truth: list[str] = []
    for n, kind in enumerate(kinds):
        events += request(kind, n * 50.0, n, rng)
        truth.append(kind)
    return sorted(events, key=lambda e: e.ts_ns), truth


def test_canonical_forms_of_the_six_types(schema: EventSchema) -> None:
    rng = random.Random(1)
    events, _ = workload("ABCDEF", rng)
    forms = [canonical(r, schema) for r in extract(events, schema)]
    texts = [f.text() for f in forms]
    assert texts[2:4] == [
        "ReqStart Seg[disk_bytes=12.0KiB,net_bytes=12.0KiB] ReqEnd",
        "ReqStart Seg[disk_bytes=5.0KiB,net_bytes=5.0KiB] ReqEnd",
    ]
    assert [t.split() for t in texts[:2]] == [
        ["ReqStart", texts[0].split()[1], "ReqEnd"],
        ["ReqStart", texts[1].split()[1], "ReqEnd"],
    ]
    assert [t.kind for t in forms[4].tokens] == [
        "ReqStart",
        "Fork",
        "TaskStart",
        "Seg",
        "TaskEnd",
        "Seg",
        "Join",
        "Seg",
        "ReqEnd",
    ]
    assert [t.kind for t in forms[5].tokens] == [
        "ReqStart",
        "RpcCall",
        "RpcServe",
        "Seg",
        "RpcReply",
        "RpcReturn",
        "Seg",
        "ReqEnd",
    ]
    # on unlimited CPUs the parallel spins overlap: E's critical path is one spin, not two
    cpu = [f.resources.get("cpu_ns", 0.0) for f in forms]
    paths = [f.critical_path_ns for f in forms]
    assert paths[0] == cpu[0] and paths[1] == cpu[1]
    assert paths[4] == max(t.resources.get("cpu_ns", 0.0) for t in forms[4].tokens)
    assert 14.8 * MS <= paths[4] <= 15.2 * MS and 29.6 * MS <= cpu[4] <= 30.4 * MS
    assert paths[5] == cpu[5]
    assert [f.threads for f in forms] == [1, 1, 1, 1, 2, 2]


def test_the_distance_separates_structure_and_resources(schema: EventSchema) -> None:
    rng = random.Random(2)
    events, _ = workload("ABCDEFB", rng)
    its = [items(canonical(r, schema)) for r in extract(events, schema)]
    a, b, c, d, e, f, b2 = its
    assert distance(b, b) == 0.0
    assert distance(b, f) == distance(f, b)
    assert distance(b, b2) < 0.5  # the same type: 1 % of CPU apart
    assert distance(c, d) == pytest.approx(14.0)  # 7 KiB read + 7 KiB sent
    assert 14 < distance(a, b) < 16  # 15 ms of CPU
    assert distance(b, f) > 2.0  # same CPU, another structure: four sync tokens
    assert distance(a, e) > 2.0


def test_six_types_make_six_pure_clusters_and_a_slow_one_is_an_outlier(schema: EventSchema) -> None:
    rng = random.Random(3)
    kinds = "".join(rng.choice("ABCDEF") for _ in range(300))
    events, truth = workload(kinds, rng)
    # a slow B (45 ms instead of 15)
    slow = [
        e if e.ev != "Spin" else Event(e.ts_ns, e.ev, {**e.attrs, "cpu_ns": 45 * MS})
        for e in request("B", 300 * 50.0, 300, rng)
    ]
    events += slow
    truth.append("slow")
    forms = [canonical(r, schema) for r in extract(events, schema)]
    assert len(forms) == 301
    model, final, outliers = cluster_all(forms)
    assert len(model.clusters) == 7
    assert purity(final, truth) == 1.0
    assert [i for i, o in enumerate(outliers) if o] == [300]
    measured = total_resources(forms)
    assert all(err is not None and err < 0.02 for err in model.model_error(measured).values())


def test_thresholds_and_bad_parameters() -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Clusterer(threshold=0)


def test_purity_counts_each_clusters_majority_label() -> None:
    got = [Assignment(0, 0.0), Assignment(0, 1.0), Assignment(1, 0.0), Assignment(1, 0.5)]
    assert purity(got, ["x", "y", "z", "z"]) == 0.75
    with pytest.raises(ValueError, match="one label per assignment"):
        purity(got, ["x"])


TOKENS = st.lists(
    st.tuples(
        st.sampled_from(["Seg", "Fork", "Join", "ReqEnd"]),
        st.lists(
            st.tuples(st.sampled_from(["cpu_ns", "disk_bytes"]), st.floats(0, 50)),
            max_size=2,
            unique_by=lambda kv: kv[0],
        ).map(lambda kvs: tuple(sorted(kvs))),
    ),
    max_size=6,
)


@given(TOKENS, TOKENS, TOKENS)
@settings(max_examples=300, deadline=None)
def test_the_distance_is_a_metric_bounded_below_by_the_mass(a: Any, b: Any, c: Any) -> None:
    d = distance(a, b)
    assert d == pytest.approx(distance(b, a))
    assert d >= abs(mass(a) - mass(b)) - 1e-9
    assert d <= mass(a) + mass(b) + 1e-9
    assert distance(a, a) == 0.0
    assert distance(a, c) <= d + distance(b, c) + 1e-9


FORM_TOKENS = st.lists(
    st.tuples(
        st.sampled_from(["Seg", "Fork", "ReqEnd"]),
        st.dictionaries(
            st.sampled_from(["cpu_ns", "disk_bytes", "net_bytes", "ops", "a_ns"]),
            st.floats(-1e12, 1e12, allow_nan=False) | st.integers(0, 2**40),
            max_size=4,
        ),
    ),
    max_size=8,
)


@given(FORM_TOKENS, st.sampled_from([1.0, 0.5, 3]))
@settings(max_examples=300, deadline=None)
def test_a_profile_of_a_form_is_the_profile_of_its_items(tokens: Any, c0: float) -> None:
    """Resources in any order (a form read back from JSON), amounts of every size: the same
    shape, amounts and mass, bit for bit, and the same derived costs and bins."""
    form = Canonical(tuple(Token(k, 0, r, 0) for k, r in tokens), 0, 1, {})
    got, want = profile_of(form, c0), profile(items(form), c0)
    assert (got.shape, got.values, got.mass) == (want.shape, want.values, want.mass)
    assert (got.kinds, got.vectors, got.costs) == (want.kinds, want.vectors, want.costs)
    assert got.bins == want.bins
    assert got.mass == mass(items(form), c0)
    assert type(got.mass) is type(mass(items(form), c0))
    assert list(got.vectors) == [r for _k, r in items(form)]


def test_a_saved_model_goes_on_where_it_stopped(schema: EventSchema) -> None:
    rng = random.Random(5)
    events, _truth = workload("".join(rng.choice("ABCDEF") for _ in range(120)), rng)
    forms = [canonical(r, schema) for r in extract(events, schema)]
    first = Clusterer()
    for f in forms[:60]:
        first.add(f)
    resumed = Clusterer.from_state(json.loads(json.dumps(first.state())))
    assert resumed.state() == first.state() and len(first.clusters) == 6
    # the saved model places the rest exactly as the one that never stopped
    assert [resumed.add(f) for f in forms[60:]] == [first.add(f) for f in forms[60:]]
    assert resumed.summary() == first.summary()
    with pytest.raises(ValueError, match="cluster 0 is numbered 3"):
        Clusterer.from_state({**first.state(), "clusters": [{"id": 3}]})
