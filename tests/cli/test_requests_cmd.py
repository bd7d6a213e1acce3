"""``iolens requests extract``: requests of event files, as JSON and as text."""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.cli.main import main
from pipeline.cli.requests_cmd import Source, source
from pipeline.errors import ConfigError
from pipeline.formats.events.decode import parse_event_line
from pipeline.records.event_schema import load_event_schema
from pipeline.records.events import Event
from pipeline.sink.search import refresh

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
MS = 1_000_000


def lines(conn: str, tid: int, t0: int, cpu_ms: int) -> list[str]:
    """A spin request as the test server writes it (ns timestamps from ``t0``)."""
    ev = [
        ("Accept", {"conn": conn, "tid": 1}),
        ("Dequeue", {"conn": conn, "tid": tid}),
        ("ReqStart", {"conn": conn, "tid": tid, "_type": "B"}),
        ("Spin", {"tid": tid, "cpu_ns": cpu_ms * MS}),
        ("Send", {"conn": conn, "tid": tid, "bytes": 41}),
        ("ReqEnd", {"conn": conn, "tid": tid}),
    ]
    out = []
    for i, (name, attrs) in enumerate(ev):
        ts = t0 + i * 1000 + (cpu_ms * MS if i >= 3 else 0)
        out.append(json.dumps({"ts": ts, "ev": name, **attrs}))
    return out


def test_extract_prints_each_request_and_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "app.jsonl"
    rows = lines("c1", 10, 0, 15) + lines("c2", 11, 100 * MS, 15) + lines("c3", 12, 200 * MS, 30)
    events.write_text("\n".join([*rows[:3], "{broken", *rows[3:]]) + "\n")
    status = main(
        ["requests", "extract", "--schema", str(SCHEMA), "--cluster", "--json", str(events)]
    )
    out, err = capsys.readouterr()
    assert status == 2
    assert f"{events}:4: not a JSON event" in err
    *reqs, model = [json.loads(x) for x in out.splitlines()]
    assert [r["attributes"] for r in reqs] == [
        {"conn": ["c1"], "tid": [10]},
        {"conn": ["c2"], "tid": [11]},
        {"conn": ["c3"], "tid": [12]},
    ]
    assert [r["resources"]["cpu_ns"] for r in reqs] == [15 * MS, 15 * MS, 30 * MS]
    assert [r["canonical"] for r in reqs] == [
        "ReqStart Seg[cpu_ns=15.0ms,net_bytes=0.0KiB] ReqEnd",
        "ReqStart Seg[cpu_ns=15.0ms,net_bytes=0.0KiB] ReqEnd",
        "ReqStart Seg[cpu_ns=30.0ms,net_bytes=0.0KiB] ReqEnd",
    ]
    assert [(r["cluster"], r["outlier"]) for r in reqs] == [(0, False), (0, False), (1, True)]
    assert [r["events"][2]["ev"] for r in reqs] == ["ReqStart"] * 3
    assert [(c["cluster"], c["size"]) for c in model["model"]["clusters"]] == [(0, 2), (1, 1)]
    assert model["model"]["model_error"]["cpu_ns"] == 0.0

    assert main(["requests", "extract", "--schema", str(SCHEMA), str(events)]) == 2
    text = capsys.readouterr().out
    assert "request 2: " in text
    assert text.endswith(
        "3 requests (0 incomplete) from 18 events; 0 unseeded groups (0 events) dropped, "
        "0 events of types the schema does not declare\n"
    )


def test_requests_are_printed_by_start_and_clustered_as_they_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """c1 starts first and ends last: it is request 0, but c2, done first, made cluster 0;
    each row has the cluster it was placed in, so the rows add up to the model's sizes."""
    events = tmp_path / "app.jsonl"
    rows = lines("c1", 10, 0, 30) + lines("c2", 11, 10_000, 1) + lines("c3", 12, 100 * MS, 1)
    events.write_text("\n".join(sorted(rows, key=lambda r: json.loads(r)["ts"])) + "\n")
    argv = ["requests", "extract", "--schema", str(SCHEMA), "--cluster", "--json", str(events)]
    assert main(argv) == 0
    *reqs, model = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(r["request"], r["attributes"]["conn"], r["cluster"]) for r in reqs] == [
        (0, ["c1"], 1),
        (1, ["c2"], 0),
        (2, ["c3"], 0),
    ]
    assert [r["outlier"] for r in reqs] == [True, False, False]
    assert [(c["cluster"], c["size"]) for c in model["model"]["clusters"]] == [(0, 2), (1, 1)]


def test_an_integer_beyond_64_bits_is_printed_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "app.jsonl"
    rows = lines("c1", 10, 0, 1)
    rows[2] = rows[2][:-1] + f', "big": {2**70}}}'
    events.write_text("\n".join(rows) + "\n")
    assert main(["requests", "extract", "--schema", str(SCHEMA), "--json", str(events)]) == 0
    [req] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert req["events"][2]["big"] == 2**70


def test_a_bad_schema_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "s.yaml"
    schema.write_text("events: {A: {attrs: {t: {domain: T, bind: SOMETIMES}}}}\n")
    with pytest.raises(ConfigError, match=r"event schema .*s\.yaml: events\.A\.attrs\.t\.bind"):
        load_event_schema(schema)
    assert main(["requests", "extract", "--schema", str(schema), str(tmp_path / "x.jsonl")]) == 2
    assert f"event schema {schema}: events.A.attrs.t.bind" in capsys.readouterr().err


SKEW = 3_000 * MS  # the back end's clock minus the front end's


def rpc_lines(conn: str, tid: int, rpc: str, t0: int) -> tuple[list[str], list[str]]:
    """A type F request: the front end's lines, and its back end's on a clock SKEW ahead (the
    call takes 0.1 ms to arrive, the reply 0.2 ms)."""
    us = 1000
    front = [
        (0, "Accept", {"conn": conn, "tid": 1}),
        (100 * us, "Dequeue", {"conn": conn, "tid": tid}),
        (200 * us, "ReqStart", {"conn": conn, "tid": tid, "_type": "F"}),
        (7700 * us, "Spin", {"tid": tid, "cpu_ns": 7500 * us}),
        (7800 * us, "RpcCall", {"tid": tid, "rpc": rpc}),
        (23200 * us, "RpcReturn", {"tid": tid, "rpc": rpc}),
        (30450 * us, "Spin", {"tid": tid, "cpu_ns": 7250 * us}),
        (30500 * us, "Send", {"conn": conn, "tid": tid, "bytes": 41}),
        (30600 * us, "ReqEnd", {"conn": conn, "tid": tid}),
    ]
    back = [
        (7900 * us + SKEW, "RpcServe", {"rpc": rpc, "tid": 20}),
        (22900 * us + SKEW, "Spin", {"tid": 20, "cpu_ns": 15 * MS}),
        (23000 * us + SKEW, "RpcReply", {"rpc": rpc, "tid": 20}),
    ]

    def dump(evs: list[tuple[int, str, dict[str, object]]]) -> list[str]:
        return [json.dumps({"ts": t0 + ts, "ev": name, **attrs}) for ts, name, attrs in evs]

    return dump(front), dump(back)


@pytest.fixture
def two_machines(tmp_path: Path) -> tuple[Path, Path]:
    """A spin request and an RPC request on the front end; on the back end, the RPC's part and
    the part of an RPC whose call was never logged."""
    f_front, f_back = rpc_lines("c2", 11, "rpc1", 100 * MS)
    _lost, orphan = rpc_lines("c3", 12, "rpc9", 200 * MS)
    front, back = tmp_path / "front.jsonl", tmp_path / "back.jsonl"
    front.write_text("\n".join(lines("c1", 10, 0, 15) + f_front) + "\n")
    back.write_text("\n".join(f_back + orphan) + "\n")
    return front, back


def test_extract_stitches_the_files_of_two_machines(
    two_machines: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    front, back = two_machines
    argv = ["requests", "extract", "--schema", str(SCHEMA), f"front={front}", f"back={back}"]
    assert main([*argv, "--json"]) == 0
    spin, rpc, unattached, summary = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (spin["machines"], spin["clock_offsets"], spin["fragments"]) == (["front"], {}, 1)
    assert (rpc["machine"], rpc["machines"], rpc["fragments"], rpc["unmatched"]) == (
        "front",
        ["front", "back"],
        2,
        [],
    )
    # θ in [SKEW - 0.2 ms, SKEW + 0.1 ms]: the reply's and the call's delays
    assert rpc["clock_offsets"] == {
        "back": {
            "offset_ns": SKEW - MS // 20,
            "lower_ns": SKEW - MS // 5,
            "upper_ns": SKEW + MS // 10,
            "messages": 2,
            "consistent": True,
        }
    }
    assert rpc["canonical"] == (
        "ReqStart Seg[cpu_ns=7.5ms] RpcCall RpcServe Seg[cpu_ns=15.0ms] RpcReply RpcReturn "
        "Seg[cpu_ns=7.2ms,net_bytes=0.0KiB] ReqEnd"
    )
    assert rpc["critical_path_ms"] == 29.75
    assert rpc["resources"]["cpu_ns"] == 29.75 * MS
    assert [(e["ev"], e["tid"], e["_machine"], e["ts"]) for e in rpc["events"][5:8]] == [
        ("RpcServe", 20 + 2**32, "back", 100 * MS + 7_950_000),
        ("Spin", 20 + 2**32, "back", 100 * MS + 22_950_000),
        ("RpcReply", 20 + 2**32, "back", 100 * MS + 23_050_000),
    ]
    u = unattached["unattached"]
    assert (u["machine"], u["reason"], [e["ev"] for e in u["events"]]) == (
        "back",
        "unmatched",
        ["RpcServe", "Spin", "RpcReply"],
    )
    assert [(e["event"], e["value"], e["sends"]) for e in u["endpoints"]] == [
        ("RpcServe", "rpc9", False),
        ("RpcReply", "rpc9", True),
    ]
    assert summary["stitch"]["machines"] == {
        "front": {
            "events": 15,
            "unknown": 0,
            "requests": 2,
            "fragments": 0,
            "dropped_groups": 0,
            "dropped_events": 0,
        },
        "back": {
            "events": 6,
            "unknown": 0,
            "requests": 0,
            "fragments": 2,
            "dropped_groups": 0,
            "dropped_events": 0,
        },
    }
    assert summary["stitch"]["clocks"] == [
        {"machines": ["front", "back"], **rpc["clock_offsets"]["back"]}
    ]

    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "request 1: 30.60 ms, critical path 29.75 ms, 12 events on front+back\n" in text
    assert text.endswith(
        "  clock of back minus clock of front: +2999.950 ms (bounds +2999.800 .. +3000.100 ms, "
        "2 messages)\n"
        "clock of back minus clock of front: +2999.950 ms (bounds +2999.800 .. +3000.100 ms, "
        "2 messages)\n"
        f"unattached fragment of back (unmatched): 3 events from ts {200 * MS + 7_900_000 + SKEW}; "
        "RpcServe rpc=rpc9 on back, RpcReply rpc=rpc9 on back\n"
        "front: 15 events, 2 requests, 0 unseeded fragments kept, 0 unseeded groups (0 events) "
        "dropped, 0 events of types the schema does not declare\n"
        "back: 6 events, 0 requests, 2 unseeded fragments kept, 0 unseeded groups (0 events) "
        "dropped, 0 events of types the schema does not declare\n"
        "2 requests (0 incomplete) on 2 machines, 1 of them stitched across machines; "
        "1 fragments unattached\n"
    )


def test_unlabelled_files_are_the_default_machine(
    two_machines: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    front, back = two_machines
    base = ["requests", "extract", "--schema", str(SCHEMA), "--json"]
    assert main([*base, str(front), f"back={back}"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["machines"] for r in rows[:2]] == [["default"], ["default", "back"]]
    # one label for every file: one machine, read as before (the back end's part not joined)
    assert main([*base, f"web={front}", f"web={back}"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert "machines" not in rows[0]
    assert [r["resources"]["cpu_ns"] for r in rows] == [15 * MS, 14.75 * MS]


def test_a_kernel_file_needs_its_machines_events(
    two_machines: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    front, back = two_machines
    kernel = tmp_path / "perf.txt"
    kernel.write_text("")
    argv = ["requests", "extract", "--schema", str(SCHEMA), f"front={front}", f"back={back}"]
    assert main([*argv, "--kernel", f"db={kernel}"]) == 2
    assert f"--kernel {kernel}: machine 'db' has no event log" in capsys.readouterr().err
    assert main([*argv, "--kernel", f"back={kernel}"]) == 0


@pytest.mark.parametrize(
    ("text", "machine", "path"),
    [
        ("web=/var/log/web.jsonl", "web", "/var/log/web.jsonl"),
        ("db.example.org=db.jsonl", "db.example.org", "db.jsonl"),
        ("app.jsonl", "default", "app.jsonl"),
        ("./a=b.jsonl", "default", "a=b.jsonl"),
        ("/data/k=v/app.jsonl", "default", "/data/k=v/app.jsonl"),
    ],
)
def test_machine_labels(text: str, machine: str, path: str) -> None:
    assert source(text) == Source(machine, Path(path))


PERF = Path(__file__).resolve().parents[1] / "data" / "events" / "perf_sched_2threads.txt"


def test_convert_perf_writes_event_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["requests", "convert-perf", str(PERF)]) == 0
    out = capsys.readouterr().out.splitlines()
    events = [parse_event_line(line.encode(), "out", n) for n, line in enumerate(out, 1)]
    # every sched_switch and sched_wakeup sample of the perf output, in its order
    assert [e.ev for e in events].count("CSwitch") == 264
    assert [e.ev for e in events].count("Wakeup") == 92 and len(events) == 356
    assert events[1] == Event(
        19047572743857,
        "CSwitch",
        {"cpu": 0, "prev_tid": 22507, "prev_state": "D", "next_tid": 18},
        2,
    )
    assert events[0].attrs == {"cpu": 0, "tid": 18, "target_cpu": 0}


@pytest.mark.integration
def test_ingest_events_then_the_model_as_indexed(
    es_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    from http_client import serve

    run = serve(tmp_path, 2, 12, 5)
    log = tmp_path / "events.jsonl"
    old = log.stat().st_mtime - 60  # finished: its open requests would be flushed
    os.utime(log, (old, old))
    ns = f"rq{uuid.uuid4().hex[:8]}"
    config = tmp_path / "iolens.yaml"
    config.write_text(f"elasticsearch: {{namespace: {ns}}}\nstate_dir: {tmp_path / 'state'}\n")
    base = ["--config", str(config), "--es-url", es_url]
    assert main([*base, "requests", "model"]) == 0
    assert "no workload model indexed yet" in capsys.readouterr().out
    assert main([*base, "ingest", "--type", "events", str(log)]) == 2
    assert "--schema FILE goes with --type events" in capsys.readouterr().err
    assert main([*base, "ingest", "--type", "events", "--schema", str(SCHEMA), str(log)]) == 0
    capsys.readouterr()
    es = Elasticsearch(es_url)
    for stream in ("logs-iolens.request", "metrics-iolens.workload_model"):
        refresh(es, f"{stream}-{ns}")
    es.close()
    assert main([*base, "requests", "model", "--json"]) == 0
    [model] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert model["model"] == "http_server" and model["requests"] == sum(run.sent.values()) == 24
    assert sum(c["requests"] for c in model["clusters"]) == 24
    assert len(model["clusters"]) == len(run.sent)  # one cluster per type the clients sent
    assert main([*base, "requests", "model"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"model http_server: 24 requests, {model['outliers']} outliers, ")
    for c in model["clusters"]:
        assert f"  cluster {c['cluster']}: {c['requests']} requests" in text
        assert f"    {c['representative']}\n" in text
