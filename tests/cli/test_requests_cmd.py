"""``iolens requests extract``: requests of event files, as JSON and as text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.cli.requests_cmd import load_schema
from pipeline.errors import ConfigError

SCHEMA = Path(__file__).resolve().parents[2] / "config" / "schemas" / "http_server.yaml"
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


def test_a_bad_schema_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = tmp_path / "s.yaml"
    schema.write_text("events: {A: {attrs: {t: {domain: T, bind: SOMETIMES}}}}\n")
    with pytest.raises(ConfigError, match=r"event schema .*s\.yaml: events\.A\.attrs\.t\.bind"):
        load_schema(schema)
    assert main(["requests", "extract", "--schema", str(schema), str(tmp_path / "x.jsonl")]) == 2
    assert f"event schema {schema}: events.A.attrs.t.bind" in capsys.readouterr().err
