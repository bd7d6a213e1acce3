"""Notices about a cluster: INFO the first time per cluster and state directory, DEBUG after."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from pipeline.sink.notices import NOTICES_FILE, announce, said


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    got = [
        (r.levelname, r.getMessage()) for r in caplog.records if r.name == "pipeline.sink.notices"
    ]
    caplog.clear()
    return got


def test_first_time_info_then_debug_per_cluster(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = tmp_path / "state"
    caplog.set_level(logging.DEBUG, logger="pipeline.sink.notices")
    assert announce(["no ILM", "no percentiles"], "A", state, clock=lambda: 0.0) == [
        "no ILM",
        "no percentiles",
    ]
    assert _records(caplog) == [("INFO", "no ILM"), ("INFO", "no percentiles")]
    assert announce(["no ILM", "no rollover"], "A", state, clock=lambda: 60.0) == ["no rollover"]
    assert _records(caplog) == [("DEBUG", "no ILM"), ("INFO", "no rollover")]
    assert announce(["no ILM"], "B", state, clock=lambda: 120.0) == ["no ILM"]
    assert _records(caplog) == [("INFO", "no ILM")]
    assert announce(["no ILM"], None, state, clock=lambda: 180.0) == ["no ILM"]
    assert said(state, "A") == {
        "no ILM": "1970-01-01T00:00:00Z",
        "no percentiles": "1970-01-01T00:00:00Z",
        "no rollover": "1970-01-01T00:01:00Z",
    }
    assert said(state, "B") == {"no ILM": "1970-01-01T00:02:00Z"}
    assert said(state, None) == {"no ILM": "1970-01-01T00:03:00Z"}
    assert said(state, "C") == {}
    assert said(tmp_path / "elsewhere", "A") == {}
    assert [p.name for p in state.iterdir()] == [NOTICES_FILE]  # no temporary file left


def test_an_unreadable_file_says_them_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / NOTICES_FILE
    path.write_text("{not json", encoding="utf-8")
    caplog.set_level(logging.DEBUG, logger="pipeline.sink.notices")
    assert announce(["no ILM"], "A", tmp_path, clock=lambda: 0.0) == ["no ILM"]
    assert _records(caplog)[-1] == ("INFO", "no ILM")
    assert json.loads(path.read_text(encoding="utf-8")) == {"A": {"no ILM": "1970-01-01T00:00:00Z"}}
    path.write_text('["a list"]', encoding="utf-8")
    assert said(tmp_path, "A") == {}
    assert _records(caplog) == [
        ("WARNING", f"{path} is not a notices file: the cluster's notices are said again")
    ]
