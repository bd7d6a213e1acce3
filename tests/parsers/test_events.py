"""Event JSON lines, perf sched output and event schemas."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from pipeline.errors import ConfigError
from pipeline.formats.events.decode import event_json, parse_events, perf_sched_events
from pipeline.parsers.errors import ParseError
from pipeline.records.event_schema import Bind, event_schema
from pipeline.records.events import Event, new_event

DATA = Path(__file__).resolve().parents[1] / "data" / "events"
SCHEMAS = Path(__file__).resolve().parents[2] / "config" / "schemas"


def test_an_event_line_keeps_every_attribute() -> None:
    line = (
        b'{"ts":1783505753848,"ev":"ReqStart","pid":9104,"tid":9148,"cpu_ns":87480,'
        b'"conn":"10.0.0.1:50282>10.0.0.2:80"}'
    )
    [e] = parse_events([line, b"\n"], "app.jsonl")
    assert e == Event(
        1783505753848,
        "ReqStart",
        {"pid": 9104, "tid": 9148, "cpu_ns": 87480, "conn": "10.0.0.1:50282>10.0.0.2:80"},
        1,
    )
    assert next(parse_events([event_json(e)], "again")) == Event(e.ts_ns, e.ev, e.attrs, 1)


def test_a_decoded_event_is_the_frozen_dataclass_init_would_make() -> None:
    e = new_event(7, "Spin", {"tid": 1}, 3)
    assert type(e) is Event
    assert e == Event(7, "Spin", {"tid": 1}, 3)
    assert (e.ts_ns, e.ev, e.attrs, e.line_no) == (7, "Spin", {"tid": 1}, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.ts_ns = 8  # type: ignore[misc]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"ts":1,"ev":"A"', "not a JSON event"),
        (b'[1, "A"]', "an event is a JSON object, not list"),
        (b'{"ts":1.5,"ev":"A"}', "'ts' must be a non-negative integer of ns, not 1.5"),
        (b'{"ts":true,"ev":"A"}', "'ts' must be a non-negative integer of ns, not True"),
        (b'{"ts":-3,"ev":"A"}', "'ts' must be a non-negative integer of ns, not -3"),
        (b'{"ts":3}', "'ev' must be the event type (a string), not None"),
        (b'{"ts":3,"ev":""}', "'ev' must be the event type (a string), not ''"),
    ],
)
def test_a_bad_event_line_is_named(line: bytes, reason: str) -> None:
    with pytest.raises(ParseError) as err:
        list(parse_events([b'{"ts":0,"ev":"Ok"}', line], "app.jsonl"))
    assert (err.value.path, err.value.line_no) == ("app.jsonl", 2)
    assert err.value.reason.startswith(reason)


def test_perf_sched_switches_and_wakeups_of_a_real_recording() -> None:
    with open(DATA / "perf_sched_2threads.txt", "rb") as fh:
        events = list(perf_sched_events(fh, "perf.txt"))
    assert [e.ev for e in events].count("CSwitch") == 264
    assert [e.ev for e in events].count("Wakeup") == 92
    assert events[1] == Event(
        19047572743857,
        "CSwitch",
        {"cpu": 0, "prev_tid": 22507, "prev_state": "D", "next_tid": 18},
        2,
    )
    assert events[0].attrs == {"cpu": 0, "tid": 18, "target_cpu": 0}
    for cpu in (0, 1):  # each CPU's switches are in time order
        ts = [e.ts_ns for e in events if e.ev == "CSwitch" and e.attrs["cpu"] == cpu]
        assert ts == sorted(ts)
    # running time of the thread that spun 20 ms of CPU, from its switches in and out
    running: dict[int, tuple[int, int]] = {}
    total = 0
    for e in events:
        if e.ev != "CSwitch":
            continue
        prev = running.get(e.attrs["cpu"])
        if prev is not None and prev[0] == e.attrs["prev_tid"] == 22552:
            total += e.ts_ns - prev[1]
        running[e.attrs["cpu"]] = (e.attrs["next_tid"], e.ts_ns)
    assert 20_000_000 <= total <= 20_500_000


def test_perf_times_without_nanoseconds_are_refused() -> None:
    line = "  18/18  [000] 19047.572761: sched:sched_switch: prev_pid=18 ==> next_pid=0"
    with pytest.raises(ParseError, match="--ns"):
        list(perf_sched_events([line], "perf.txt"))


def test_the_http_server_schema() -> None:
    path = SCHEMAS / "http_server.yaml"
    schema = event_schema(yaml.safe_load(path.read_text()), str(path))
    assert schema.resource_names == ("cpu_ns", "disk_bytes", "net_bytes", "sched_cpu_ns")
    assert schema.cpu_event == "CSwitch"
    assert [n for n, t in schema.events.items() if t.seed] == ["ReqStart"]
    assert schema.events["Dequeue"].attrs["tid"].bind is Bind.START
    assert (schema.parser.reorder_window_ms, schema.parser.timeout_s) == (1000.0, 10.0)
    assert ("RpcCall", "rpc", "RpcServe") in schema.sync


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"events": {"A": {"seed": True, "attrs": {"t": {"domain": "T", "bind": "BIND_X"}}}}},
            "events.A.attrs.t.bind",
        ),
        ({"events": {"A": {"attrs": {}}}}, "no event type is the seed"),
        (
            {"events": {"A": {"seed": True}}, "sync": [["A", "x", "B"]]},
            "names undeclared events ['B']",
        ),
        (
            {
                "events": {
                    "A": {"seed": True, "attrs": {"_truth": {"domain": "T", "bind": "BIND_BASIC"}}}
                }
            },
            "never joined on",
        ),
        ({"events": {"A": {"seed": True, "start_attr": "start_ns"}}}, "declare AStart"),
        ({"events": {"A": {"seed": True, "resources": ["bytes:"]}}}, "'attr' or 'attr:kind'"),
        ({"events": {"A": {"seed": True}}, "parser": {"window": 3}}, "parser.window"),
    ],
)
def test_a_bad_schema_names_the_problem(data: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        event_schema(data, "mine.yaml")
    assert str(err.value).startswith("event schema mine.yaml: ")
    assert message in str(err.value)


def test_the_documented_schema_example_is_valid() -> None:
    page = (SCHEMAS.parents[1] / "docs" / "integrations" / "events.md").read_text()
    block = page.split("**The schema**")[1].split("```yaml")[1].split("```")[0]
    schema = event_schema(yaml.safe_load(block), "docs/integrations/events.md")
    assert schema.resource_names == ("cpu_ns", "sched_cpu_ns")
    assert schema.sync == (("Fork", "task", "TaskStart"),)
