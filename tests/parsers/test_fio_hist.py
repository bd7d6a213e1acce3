"""Parsing fio histogram log lines: exact values from a real fio 3.33 log, and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.formats.fio.decode import (
    detect_layout,
    is_epoch_ms,
    parse_lines,
    row_from_fields,
    split_fields,
)
from pipeline.parsers.errors import ParseError
from pipeline.records.fio_bins import BinLayout

LOG = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "fio"
    / "samples"
    / "node01"
    / ("randrw_clat_hist.1.log")
)
NS = BinLayout(29, 0, "ns")


def first_line() -> bytes:
    return LOG.read_bytes().split(b"\n", 1)[0]


def test_first_record_of_the_sample() -> None:
    line = first_line()
    assert detect_layout(line, str(LOG)) == NS
    row = row_from_fields(split_fields(line, str(LOG), 1), NS, str(LOG), 1)
    assert (row.time_ms, row.ddir, row.bs) == (101, 0, 4096)
    assert row.bin_idx.size == 109
    assert row.bin_idx[:5].tolist() == [557, 648, 650, 651, 674]
    assert row.bin_idx[-3:].tolist() == [850, 851, 904]
    assert row.counts[:5].tolist() == [1, 1, 1, 1, 1]
    assert row.counts[-3:].tolist() == [2, 1, 3]
    assert row.samples == 2208


def test_whole_sample_parses_in_order() -> None:
    lines = LOG.read_bytes().splitlines()
    rows = list(parse_lines(lines, NS, str(LOG), 1))
    assert len(rows) == 79
    assert not [r for r in rows if isinstance(r, ParseError)]
    assert {r.ddir for r in rows if not isinstance(r, ParseError)} == {0, 1}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"101, 0, 4096, 0, x, 0", "not a histogram record"),
        (b"", "not a histogram record"),
        (b"101, 0, 4096", "not a histogram record"),
        (b"101, 0, 4096, " + b", ".join([b"0"] * 100), "100 bins, but this log's layout has 1856"),
        (b"101, 3, 4096, " + b", ".join([b"0"] * 1856), "ddir 3 is not 0 (read), 1 (write)"),
        (b"-5, 0, 4096, " + b", ".join([b"0"] * 1856), "negative timestamp -5"),
        (b"101, 0, 4096, -1, " + b", ".join([b"0"] * 1855), "negative bin count"),
    ],
)
def test_bad_lines_name_file_line_and_reason(line: bytes, reason: str) -> None:
    [err] = list(parse_lines([line], NS, "x_clat_hist.1.log", 42))
    assert isinstance(err, ParseError)
    assert (err.path, err.line_no) == ("x_clat_hist.1.log", 42)
    assert reason in err.reason
    assert str(err).startswith("x_clat_hist.1.log:42: ")


def test_one_bad_line_does_not_stop_the_rest() -> None:
    good = first_line()
    out = list(parse_lines([good, b"garbage", good], NS, "f", 1))
    assert [type(o).__name__ for o in out] == ["FioHistRow", "ParseError", "FioHistRow"]


def test_epoch_timestamps() -> None:
    assert is_epoch_ms(1795321597152)
    assert not is_epoch_ms(9901)
