"""The Darshan analysis' typed rows (pipeline/records/darshan_rows.py) against the templates of
the streams they are written to, and against the rows real logs give."""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any

import pytest

from pipeline.formats.darshan.read import read_darshan
from pipeline.records.darshan_rows import DarshanFileRow, DarshanJobRow, counter, direction_totals
from pipeline.reducers.darshan_job import analyze
from pipeline.sink.templates import mappings_dir

LOGS = ("sample-badost.darshan", "sample.darshan", "sample-dxt-simple.darshan")


def mapped(stream: str, table: str) -> set[str]:
    """The fields ``darshan.<table>.*`` of the stream's package template."""
    path = mappings_dir() / f"component_template.{stream}@package.json"
    props = json.loads(path.read_text(encoding="utf-8"))["template"]["mappings"]["properties"]
    return set(props["darshan"]["properties"][table]["properties"])


def test_the_job_row_has_the_fields_of_the_job_stream() -> None:
    keys = set(DarshanJobRow.__annotations__)
    # the encoder writes start_s/end_s as the dates start/end
    assert keys - {"start_s", "end_s"} | {"start", "end"} == mapped("logs-darshan.job", "job")


def test_the_file_row_has_the_fields_of_the_file_stream() -> None:
    assert set(DarshanFileRow.__annotations__) == mapped("logs-darshan.file", "file")


def fits(value: Any, hint: Any) -> bool:
    """``value`` is of the annotated type (int is not a float's stand-in for bool)."""
    if isinstance(hint, types.UnionType):
        return any(fits(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(fits(v, item) for v in value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@pytest.mark.parametrize("name", LOGS)
def test_rows_of_real_logs_hold_the_typed_fields_with_their_types(
    darshan_inputs: Path, name: str
) -> None:
    a = analyze(read_darshan(darshan_inputs / name))
    job_hints = typing.get_type_hints(DarshanJobRow)
    assert set(a.job) == set(job_hints)
    for key, value in a.job.items():
        assert fits(value, job_hints[key]), (key, value)
    file_hints = typing.get_type_hints(DarshanFileRow)
    assert a.files
    for row in a.files:
        assert set(row) <= set(file_hints)
        for key, value in row.items():
            assert fits(value, file_hints[key]), (row["name"], key, value)


def test_counter_and_direction_totals(darshan_inputs: Path) -> None:
    a = analyze(read_darshan(darshan_inputs / "sample-badost.darshan"))
    posix = next(r for r in a.files if r["module"] == "POSIX")
    assert counter(posix, "bytes_written") == float(posix["bytes_written"])
    stdio = next(r for r in a.files if r["module"] == "STDIO")
    assert "seq_writes" not in stdio and counter(stdio, "seq_writes") == 0.0
    with pytest.raises(TypeError, match=r"darshan\.file\.name is not a number"):
        counter(posix, "name")
    assert direction_totals(a.job, "write") == (549755813888, a.job["write_bytes_per_s"])
    assert direction_totals(a.job, "read") == (1654784, a.job["read_bytes_per_s"])
