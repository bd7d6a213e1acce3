"""Parsing LMT OST exports: the real NERSC extracts, other layouts, bad input.

Inputs in ``tests/data/lmt`` (provenance and the export command in its README): CSV exports of
pytokio's LMT database extracts ``lmtdb-reset.sqlite3`` (one OST across a server reboot) and
``snx11025_2018-01-28.sqlite3`` (24 OSTs, 5 minutes).
"""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pipeline.formats.lmt.decode import (
    EXPORT_QUERY,
    LmtCsvParser,
    LmtSample,
    parse_lmt_csv,
    parse_timestamp,
    split_ost_name,
)
from pipeline.parsers.errors import ParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "lmt"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "pytokio"
HEADER = "TIMESTAMP,OST_NAME,READ_BYTES,WRITE_BYTES,PCT_CPU,KBYTES_FREE,KBYTES_USED"


def parse_file(name: str) -> list[LmtSample | ParseError]:
    path = DATA / name
    return list(parse_lmt_csv(path.read_bytes().splitlines(), str(path)))


def samples(records: list[LmtSample | ParseError]) -> list[LmtSample]:
    errors = [r for r in records if isinstance(r, ParseError)]
    assert not errors, errors
    return [r for r in records if isinstance(r, LmtSample)]


def test_reset_extract_first_and_reboot_rows() -> None:
    rows = samples(parse_file("lmtdb-reset.csv"))
    assert len(rows) == 26
    assert rows[0] == LmtSample(
        ts_s=1524036915.0,  # 2018-04-18 07:35:15 read as UTC
        ost_name="snx11168-OST00ad",
        fs="snx11168",
        ost_index=173,
        read_bytes=438210627739648,
        write_bytes=274819451570722,
        pct_cpu=0.0,
        kbytes_free=25461478364,
        kbytes_used=94553071704,
    )
    # line 9: "2018-04-18 07:39:05",snx11168-OST00ad,0,0,0.0,25459619160,94554930908
    assert (rows[7].ts_s, rows[7].read_bytes, rows[7].write_bytes) == (1524037145.0, 0, 0)
    assert rows[7].ts_s - rows[6].ts_s == 200.0  # 39 timesteps missing around the reboot
    assert rows[-1] == LmtSample(
        1524037235.0, "snx11168-OST00ad", "snx11168", 173, 62595072, 796777736, 0.0,
        25459632760, 94554917308,
    )  # fmt: skip


def test_snx11025_extract_has_24_osts_by_lustre_index() -> None:
    rows = samples(parse_file("snx11025_2018-01-28.csv"))
    assert len(rows) == 1464
    assert sorted({(r.ost_index, r.ost_name) for r in rows}) == [
        (i, f"snx11025-OST{i:04x}") for i in range(24)
    ]
    assert {r.fs for r in rows} == {"snx11025"}
    times = sorted({r.ts_s for r in rows})
    assert (len(times), times[0], times[-1]) == (61, 1517097600.0, 1517097900.0)
    assert {b - a for a, b in itertools.pairwise(times)} == {5.0}


def test_pacific_time_zone() -> None:
    path = DATA / "lmtdb-reset.csv"
    lines = path.read_text().splitlines()
    [first] = LmtCsvParser(str(path), tz=ZoneInfo("America/Los_Angeles")).feed(lines[:2], 1)
    assert isinstance(first, LmtSample)
    assert first.ts_s == 1524062115.0  # 2018-04-18 07:35:15 PDT = 14:35:15 UTC


def test_the_committed_export_is_what_sqlite3_prints() -> None:
    db = SHARED / "lmtdb-reset.sqlite3"
    if not db.exists():
        pytest.fail(f"{db} is missing: the shared pytokio data is required")
    out = subprocess.run(
        ["sqlite3", "-header", "-csv", str(db), EXPORT_QUERY],
        check=True,
        capture_output=True,
        timeout=60,
    ).stdout
    assert out == (DATA / "lmtdb-reset.csv").read_bytes()


def test_mysql_tab_layout_any_case_reordered_and_without_optional_columns() -> None:
    lines = [
        "ost_data.write_bytes\tost_info.ost_name\ttimestamp_info.timestamp\tread_bytes",
        "10\tscratch-OST0010\t1524036915\t7",
        "11\tscratch-OST0010\t1524036920.5\t7",
    ]
    rows = samples(list(parse_lmt_csv(lines, "x")))
    assert rows == [
        LmtSample(1524036915.0, "scratch-OST0010", "scratch", 16, 7, 10),
        LmtSample(1524036920.5, "scratch-OST0010", "scratch", 16, 7, 11),
    ]


def test_nulls_in_optional_columns_are_none() -> None:
    lines = [HEADER, '"2018-04-18 07:35:15",fs-OST0001,1,2,,NULL,\\N']
    [row] = samples(list(parse_lmt_csv(lines, "x")))
    assert (row.pct_cpu, row.kbytes_free, row.kbytes_used) == (None, None, None)


def test_bad_lines_name_file_line_and_reason_and_the_rest_is_parsed() -> None:
    lines = [
        HEADER,
        '"2018-04-18 07:35:15",fs-OST0001,1,2,0.0,3,4',
        '"2018-04-18 07:35:15",OST0001,1,2,0.0,3,4',
        '"2018-04-18 07:35:15",fs-OST0001,-1,2,0.0,3,4',
        '"2018-04-18 07:35:15",fs-OST0001,1,2.5,0.0,3,4',
        '"2018-04-18 07:35:15",fs-OST0001,1,,0.0,3,4',
        '"18/04/2018 07:35:15",fs-OST0001,1,2,0.0,3,4',
        '"2018-04-18 07:35:15",fs-OST0001,1,2,busy,3,4',
        '"2018-04-18 07:35:15",fs-OST0001,1,2,nan,3,4',
        '"2018-04-18 07:35:15",fs-OST0001,1,2,0.0,3',
        '"2018-04-18 07:35:15,fs-OST0001,1,2,0.0,3,4',
        b'"2018-04-18 07:35:15",fs-OST0001,1,2,0.0,3,\xff',
        '"2018-04-18 07:35:20",fs-OST0001,5,6,1.5,3,4',
    ]
    records = list(parse_lmt_csv(lines, "/drop/lmt.csv", 1))
    good = [r for r in records if isinstance(r, LmtSample)]
    errors = [r for r in records if isinstance(r, ParseError)]
    assert [(r.ts_s, r.read_bytes, r.pct_cpu) for r in good] == [
        (1524036915.0, 1, 0.0),
        (1524036920.0, 5, 1.5),
    ]
    assert [(e.path, e.line_no) for e in errors] == [("/drop/lmt.csv", n) for n in range(3, 13)]
    assert [e.reason for e in errors] == [
        "OST name 'OST0001' is not <fsname>-OST<hex index>",
        "READ_BYTES must be a whole number >= 0, got '-1'",
        "WRITE_BYTES must be a whole number >= 0, got '2.5'",
        "WRITE_BYTES is not a number: ''",
        "not a timestamp: '18/04/2018 07:35:15' (expected YYYY-MM-DD HH:MM:SS or Unix seconds)",
        "PCT_CPU is not a number: 'busy'",
        "PCT_CPU must be a finite number >= 0, got 'nan'",
        "6 value(s), the header has 7",
        "bad CSV: unexpected end of data",
        "not UTF-8 text: invalid start byte",
    ]


def test_a_header_without_required_columns_dead_letters_rows_until_the_next_header() -> None:
    lines = [
        "TIMESTAMP,OST_NAME,READ_BYTES",
        "1524036915,fs-OST0001,1",
        "TIMESTAMP,OST_NAME,READ_BYTES,WRITE_BYTES",
        "1524036915,fs-OST0001,1,2",
    ]
    records = list(parse_lmt_csv(lines, "x"))
    assert len(records) == 3
    err, under, row = records
    assert isinstance(err, ParseError) and err.line_no == 1
    assert err.reason.startswith("LMT export header without WRITE_BYTES (export with: SELECT ")
    assert isinstance(under, ParseError) and under.line_no == 2
    assert under.reason == "row under a header that could not be read (line 1)"
    assert row == LmtSample(1524036915.0, "fs-OST0001", "fs", 1, 1, 2)


def test_a_row_before_any_header_is_an_error() -> None:
    [err] = list(parse_lmt_csv(["1524036915,fs-OST0001,1,2"], "x"))
    assert isinstance(err, ParseError)
    assert err.reason == "row before the header line (export with sqlite3 -header)"


def test_an_sqlite_database_is_refused_whole_with_the_export_command(tmp_path: Path) -> None:
    """LMT's own form (pytokio's extract) where the export is expected: one error for the file,
    at line 0, whose command writes exactly the committed export."""
    db = tmp_path / "lmt db.sqlite3"  # a name the shell must quote
    db.write_bytes((SHARED / "lmtdb-reset.sqlite3").read_bytes())
    with pytest.raises(ParseError) as err:
        list(parse_lmt_csv(db.read_bytes().splitlines(), str(db)))
    csv = tmp_path / "lmt db.csv"
    command = f"sqlite3 -header -csv '{db}' \"{EXPORT_QUERY}\" > '{csv}'"
    assert (err.value.path, err.value.line_no) == (str(db), 0)
    assert err.value.reason == (
        "an SQLite database (LMT's own tables, as pytokio keeps them), not the CSV export of it "
        f"that iolens reads for LMT; write the CSV with: {command} and give iolens that file "
        "(an lmt drop reads *.csv)"
    )
    assert str(err.value) == f"{db}: {err.value.reason}"
    subprocess.run(command, shell=True, check=True, timeout=60)
    assert csv.read_bytes() == (DATA / "lmtdb-reset.csv").read_bytes()
    # only a file's first line can show it: fed from line 2 on, such bytes are bad lines
    [bad] = list(parse_lmt_csv([db.read_bytes()[:16]], str(db), first_line_no=2))
    assert isinstance(bad, ParseError) and bad.line_no == 2


def test_resuming_with_the_header_as_cursor_gives_the_same_records() -> None:
    lines = (DATA / "snx11025_2018-01-28.csv").read_text().splitlines()
    whole = list(parse_lmt_csv(lines, "f"))
    first = LmtCsvParser("f")
    head = list(first.feed(lines[:100], 1))
    assert first.header_line == HEADER
    tail = list(LmtCsvParser("f", first.header_line).feed(lines[100:], 101))
    assert head + tail == whole


@pytest.mark.parametrize(
    ("name", "fs", "index"),
    [
        ("snx11168-OST00ad", "snx11168", 173),
        ("snx11025-OST000a", "snx11025", 10),
        ("my-fs-OSTFFFF", "my-fs", 65535),
    ],
)
def test_split_ost_name(name: str, fs: str, index: int) -> None:
    assert split_ost_name(name) == (fs, index)


@pytest.mark.parametrize("name", ["OST0001", "fs-MDT0000", "fs-OSTxyz", "fs-OST"])
def test_split_ost_name_refuses(name: str) -> None:
    with pytest.raises(ValueError, match="is not <fsname>-OST<hex index>"):
        split_ost_name(name)


def test_parse_timestamp_refuses_negative_and_infinite_seconds() -> None:
    assert parse_timestamp("2018-01-28 00:00:00") == 1517097600.0
    for text in ("-5", "inf"):
        with pytest.raises(ValueError, match="not a timestamp"):
            parse_timestamp(text)
