"""DarshanPool: what worker processes send back is the analysis made in the calling process."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest

from pipeline.formats.darshan import pool as darshan_pool
from pipeline.formats.darshan.pool import DarshanPool, analyze_path
from pipeline.parsers.errors import ParseError
from pipeline.reducers.darshan_job import JobAnalysis


def same(a: JobAnalysis, b: JobAnalysis) -> bool:
    fields = ("log_id", "job", "files", "critical", "direction", "factors", "osts")
    return all(getattr(a, f) == getattr(b, f) for f in fields) and (
        a.log.path,
        a.log.records,
        a.log.modules,
    ) == (b.log.path, b.log.records, b.log.modules)


def test_two_workers_give_the_inline_analysis(darshan_inputs: Path, tmp_path: Path) -> None:
    names = ("sample-badost.darshan", "sample.darshan", "noposix.darshan")
    bad = tmp_path / "bad.darshan"
    bad.write_bytes(b"not a log\n" * 40)
    pool = DarshanPool(2)
    try:
        for name in names:
            pool.submit(str(darshan_inputs / name))
        pool.submit(str(bad))
        got = {name: pool.result(str(darshan_inputs / name)) for name in names}
        for name in names:
            assert same(got[name], analyze_path(str(darshan_inputs / name)))
        # 2048 POSIX files and one STDIO file (the standard streams left out)
        assert len(got["sample-badost.darshan"].files) == 2049
        with pytest.raises(ParseError, match=r"bad\.darshan"):
            pool.result(str(bad))
    finally:
        pool.close()


def test_rows_travel_as_json_and_a_nan_row_as_it_is(
    darshan_inputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(darshan_inputs / "sample.darshan")
    status, (bare, rows) = darshan_pool._work_packed(path)
    assert (status, bare.files) == ("packed", [])
    assert rows.startswith(b'[{"record_id":')

    a = analyze_path(path)
    nan = dataclasses.replace(a, files=[{**a.files[0], "read_time_s": math.nan}])
    monkeypatch.setattr(darshan_pool, "_work", lambda p: ("ok", nan))
    status, value = darshan_pool._work_packed(path)
    assert status == "ok"
    assert math.isnan(value.files[0]["read_time_s"])
