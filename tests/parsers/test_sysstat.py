"""Parsing sadf 12.6.1 disk output: exact rows of the real recordings, and bad input.

Inputs: ``../shared/data/sysstat/`` beside the repository (recorded with sysstat 12.6.1 on a
2-vCPU Debian 12 VM, disk ``vda`` plus loop devices; provenance in reference/sysstat.md 1.5, 2
and 5.2). No real device-mapper recording exists (that kernel has no device-mapper), so the
device-mapper rows below are written in the exact layout of the real rows, and say so.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pipeline.formats.sysstat.columns import Reader, Rows
from pipeline.formats.sysstat.decode import SadfCsvParser, parse_sadf_csv, sadf_command
from pipeline.formats.sysstat.sadf_json import parse_sadf_json
from pipeline.formats.sysstat.values import parse_timestamp
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DiskSample, RestartMark

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "sysstat"
HEADER = "# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util"
T_042223 = 1795320863.0  # 2026-11-22 04:14:23 UTC (sadf -U prints 1795320863 for it)


def csv(name: str) -> list[DiskSample | RestartMark | ParseError]:
    path = DATA / name
    return list(parse_sadf_csv(path.read_bytes().splitlines(), str(path), 1))


def samples(records: list[DiskSample | RestartMark | ParseError]) -> list[DiskSample]:
    assert not [r for r in records if isinstance(r, ParseError)]
    return [r for r in records if isinstance(r, DiskSample)]


def test_row_of_sadf_d_every_field() -> None:
    # line 3: vm;1;2026-11-22 04:14:23 UTC;vda;195.00;1092.00;102352.00;4.00;530.50;0.35;1.78;7.60
    rows = samples(csv("sadf_d_d.csv"))
    assert len(rows) == 29
    assert rows[1] == DiskSample(
        host="vm",
        device="vda",
        end_s=T_042223,
        interval_s=1.0,
        tps=195.0,
        read_kb_per_s=1092.0,
        write_kb_per_s=102352.0,
        discard_kb_per_s=4.0,
        areq_sz_kb=530.5,
        aqu_sz=0.35,
        await_ms=1.78,
        util_pct=7.6,
    )
    # the rm second: huge discards (reference/sysstat.md 1.1)
    assert max(rows, key=lambda r: r.discard_kb_per_s).discard_kb_per_s == 601624.0


def test_rows_of_the_15s_and_fault_recordings() -> None:
    # exp_ds2_15s line 3:
    # vm;15;2026-11-22 04:23:38 UTC;loop1;129.07;214.67;301.60;0.00;4.00;0.05;0.41;4.13
    row = samples(csv("exp_ds2_15s_sadf_d.csv"))[1]
    assert row == DiskSample(
        "vm", "loop1", 1795321418.0, 15.0, 129.07, 214.67, 301.6, 0.0, 4.0, 0.05, 0.41, 4.13
    )
    # blkio line 5: vm;1;2026-11-22 04:16:21 UTC;loop3;70.00;280.00;0.00;0.00;4.00;0.02;0.26;0.00
    row = samples(csv("blkio_throttle_fault_sadf_d.csv"))[3]
    assert row == DiskSample(
        "vm", "loop3", 1795320981.0, 1.0, 70.0, 280.0, 0, 0, 4.0, 0.02, 0.26, 0
    )
    fuse = samples(csv("fuse_delay_fault_sadf_d.csv"))
    assert len(fuse) == 90
    assert {r.device for r in fuse} == {"loop0", "loop1", "loop2", "loop3", "loop4", "vda"}


def test_every_real_csv_parses_without_errors() -> None:
    counts = {p.name: len(samples(csv(p.name))) for p in sorted(DATA.glob("*.csv"))}
    assert counts == {
        "blkio_throttle_fault_sadf_d.csv": 30,
        "exp_ds2_15s_sadf_d.csv": 96,
        "exp_ds2_1s_sadf_d.csv": 1440,
        "fuse_delay_fault_sadf_d.csv": 90,
        "sadf_d_U_d.csv": 29,
        "sadf_d_d.csv": 29,
        "sadf_d_restart_comment.csv": 4,
    }


def test_epoch_timestamps_give_the_same_records() -> None:
    assert csv("sadf_d_U_d.csv") == csv("sadf_d_d.csv")


def test_json_gives_the_same_records_as_csv() -> None:
    path = DATA / "sadf_j_d.json"
    assert list(parse_sadf_json(path.read_bytes(), str(path))) == csv("sadf_d_d.csv")


def test_json_sector_keys_when_the_kb_keys_are_missing() -> None:
    doc = json.loads((DATA / "sadf_j_d.json").read_bytes())
    stat = doc["sysstat"]["hosts"][0]["statistics"][1]
    for key in ("rkB", "wkB", "dkB", "areq-sz", "aqu-sz"):
        del stat["disk"][0][key]
    stat["disk"][0]["avgrq-sz"] = 1061.01  # 2 x 530.505: the sector key is one digit finer
    rec = list(
        parse_sadf_json(
            json.dumps({"sysstat": {"hosts": [doc["sysstat"]["hosts"][0]]}}).encode(), "j"
        )
    )[1]
    assert isinstance(rec, DiskSample)
    assert (rec.read_kb_per_s, rec.write_kb_per_s, rec.discard_kb_per_s) == (1092.0, 102352.0, 4.0)
    assert rec.areq_sz_kb == pytest.approx(530.505, abs=1e-12)
    assert rec.aqu_sz == 0.35


def test_restart_and_comment_rows() -> None:
    recs = csv("sadf_d_restart_comment.csv")
    assert [type(r).__name__ for r in recs] == ["DiskSample"] * 2 + ["RestartMark"] + [
        "DiskSample"
    ] * 2
    assert recs[2] == RestartMark("vm", 1795321729.0)  # 2026-11-22 04:28:49 UTC
    assert isinstance(recs[1], DiskSample) and recs[1].end_s == 1795321729.0
    # a COM row (sadf -- -C) yields nothing; the restart row keeps its TAB
    lines = [HEADER, "vm;-1;2026-11-22 04:28:49 UTC;COM maintenance window start"]
    assert list(parse_sadf_csv(lines, "c", 1)) == []


def test_json_restart_is_placed_after_the_record_of_its_second() -> None:
    doc = json.loads((DATA / "sadf_j_d.json").read_bytes())
    host = doc["sysstat"]["hosts"][0]
    host["restarts"] = [
        {"boot": {"date": "2026-11-22", "time": "04:14:23", "utc": 1, "cpu_count": 2}}
    ]
    recs = list(parse_sadf_json(json.dumps(doc).encode(), "j"))
    assert recs[2] == RestartMark("vm", T_042223)
    assert isinstance(recs[1], DiskSample) and recs[1].end_s == T_042223
    assert isinstance(recs[3], DiskSample) and recs[3].end_s == T_042223 + 1


def test_columns_are_mapped_by_name() -> None:
    lines = [
        "# timestamp;DEV;hostname;interval;%util;await;aqu-sz;areq-sz;dkB/s;wkB/s;rkB/s;tps",
        "2026-11-22 04:14:23 UTC;vda;vm;1;7.60;1.78;0.35;530.50;4.00;102352.00;1092.00;195.00",
    ]
    assert list(parse_sadf_csv(lines, "p", 1)) == csv("sadf_d_d.csv")[1:2]


def test_pre_11_5_7_vocabulary_in_sectors() -> None:
    lines = [
        "# hostname;interval;timestamp;DEV;tps;rd_sec/s;wr_sec/s;avgrq-sz;avgqu-sz;await;svctm;"
        "%util",
        "vm;1;2026-11-22 04:14:23 UTC;vda;195.00;2184.00;204704.00;1061.01;0.35;1.78;0.39;7.60",
    ]
    (rec,) = parse_sadf_csv(lines, "old", 1)
    assert isinstance(rec, DiskSample)
    assert (rec.read_kb_per_s, rec.write_kb_per_s, rec.discard_kb_per_s) == (1092.0, 102352.0, 0.0)
    assert rec.areq_sz_kb == pytest.approx(530.505, abs=1e-12)
    assert (rec.aqu_sz, rec.await_ms, rec.util_pct) == (0.35, 1.78, 7.6)


def test_device_mapper_names() -> None:
    # Layout of the real rows; device names as sadf prints dm devices (dm-N, /dev/mapper names
    # with -p, devM-m when the major:minor is unknown on the reading host; sysstat.md 1.2, 1.5).
    lines = [HEADER] + [
        f"fs002;15;2026-11-22 04:14:30 UTC;{dev};12.40;396.80;0.00;0.00;32.00;0.05;4.03;4.80"
        for dev in ("dm-3", "mpathc", "vg0-lv_data", "dev253-0")
    ]
    recs = samples(list(parse_sadf_csv(lines, "dm", 1)))
    assert [r.device for r in recs] == ["dm-3", "mpathc", "vg0-lv_data", "dev253-0"]
    assert {(r.host, r.interval_s, r.end_s, r.await_ms) for r in recs} == {
        ("fs002", 15.0, 1795320870.0, 4.03)
    }


def test_header_carried_across_chunks() -> None:
    lines = (DATA / "sadf_d_d.csv").read_bytes().splitlines()
    parser = SadfCsvParser("chunks")
    first = list(parser.feed(lines[:10], 1))
    assert parser.header_line == HEADER
    resumed = SadfCsvParser("chunks", header_line=parser.header_line)
    assert first + list(resumed.feed(lines[10:], 11)) == csv("sadf_d_d.csv")


def test_block_of_another_activity_is_dead_lettered_row_by_row() -> None:
    # verbatim from `sadf -d sa_test -- -d -u` (CPU block first, then the disk block)
    lines = [
        "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle",
        "vm;1;2026-11-22 04:14:22 UTC;-1;4.55;0.00;2.53;0.00;0.00;92.93",
        "vm;1;2026-11-22 04:14:23 UTC;-1;0.00;0.00;3.02;1.01;0.00;95.98",
        HEADER,
        "vm;1;2026-11-22 04:14:23 UTC;vda;195.00;1092.00;102352.00;4.00;530.50;0.35;1.78;7.60",
    ]
    recs = list(parse_sadf_csv(lines, "u", 1))
    assert len(recs) == 4
    assert isinstance(recs[0], ParseError) and recs[0].line_no == 1
    assert "DEV, tps, rkB/s" in recs[0].reason
    assert [(e.line_no, e.reason) for e in recs[1:3] if isinstance(e, ParseError)] == [
        (2, "row under a header that could not be read (line 1)"),
        (3, "row under a header that could not be read (line 1)"),
    ]
    assert recs[3] == csv("sadf_d_d.csv")[1]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("vm;1;2026-11-22 04:14:23 UTC;vda;195.00;1092.00", "6 column(s), the header has 12"),
        ("vm;1;2026-11-22 04:14:23 UTC;vda;x;1;1;1;1;1;1;1", "tps is not a number: 'x'"),
        ("vm;1;2026-11-22 04:14:23 UTC;vda;-1;1;1;1;1;1;1;1", "tps must be a finite number >= 0"),
        ("vm;1;2026-11-22 04:14:23 UTC;vda;nan;1;1;1;1;1;1;1", "tps must be a finite number >= 0"),
        ("vm;0;2026-11-22 04:14:23 UTC;vda;1;1;1;1;1;1;1;1", "interval must be >= 1 s, got 0"),
        ("vm;one;2026-11-22 04:14:23 UTC;vda;1;1;1;1;1;1;1;1", "interval is not an integer"),
        ("vm;-1;2026-11-22 04:14:23 UTC;REBOOT", "neither LINUX-RESTART nor COM"),
        ("vm;1;2026-11-22 04:14:23;vda;1;1;1;1;1;1;1;1", "is not UTC (sadf -T or -t"),
        ("vm;1;2026-13-22 04:14:23 UTC;vda;1;1;1;1;1;1;1;1", "not a sadf timestamp"),
    ],
)
def test_bad_rows_are_errors_and_parsing_goes_on(line: str, reason: str) -> None:
    good = "vm;1;2026-11-22 04:14:24 UTC;vda;0.00;0.00;0.00;0.00;0.00;0.00;0.00;0.00"
    recs = list(parse_sadf_csv([HEADER, line, good], "bad.csv", 7))
    assert len(recs) == 2
    err = recs[0]
    assert isinstance(err, ParseError)
    assert (err.path, err.line_no) == ("bad.csv", 8)
    assert reason in err.reason
    assert isinstance(recs[1], DiskSample) and recs[1].end_s == T_042223 + 1


def test_row_before_header_and_invalid_utf8() -> None:
    row = b"vm;1;2026-11-22 04:14:23 UTC;vda;195.00;1092.00;102352.00;4.00;530.50;0.35;1.78;7.60"
    recs = list(parse_sadf_csv([row, b"\xff\xfe", b""], "h", 1))
    assert [(e.line_no, e.reason[:20]) for e in recs if isinstance(e, ParseError)] == [
        (1, "row before any '# ho"),
        (2, "not UTF-8 text: inva"),
    ]
    assert len(recs) == 2


def test_local_time_rejected_with_the_fix() -> None:
    # `TZ=America/Chicago sadf -d -T sa_test -- -d` prints "2026-11-21 22:14:22" (no UTC)
    with pytest.raises(ParseError, match="convert with sadf -d -U"):
        parse_timestamp("2026-11-21 22:14:22", "t", 3)
    assert parse_timestamp("1795320863", "t", 3) == T_042223
    assert parse_timestamp("2026-11-22 04:14:23 UTC", "t", 3) == T_042223


@pytest.mark.parametrize(
    ("data", "line_no", "reason"),
    [
        (b'{"sysstat": {"hosts": [', 1, "invalid JSON"),
        (b'{"sysstat": {}}', 0, "no sysstat.hosts array"),
        (b'{"sysstat": {"hosts": [{"statistics": []}]}}', 0, "hosts[0]: not a host object"),
    ],
)
def test_bad_json_documents(data: bytes, line_no: int, reason: str) -> None:
    (err,) = parse_sadf_json(data, "bad.json")
    assert isinstance(err, ParseError)
    assert err.line_no == line_no
    assert reason in err.reason


def test_bad_json_parts_are_errors_and_parsing_goes_on() -> None:
    doc = json.loads((DATA / "sadf_j_d.json").read_bytes())
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    stats[0]["timestamp"]["utc"] = 0  # sadf -j -T
    del stats[1]["disk"][0]["await"]
    stats[2]["disk"][0]["tps"] = "14"
    recs = list(parse_sadf_json(json.dumps(doc).encode(), "j.json"))
    errors = [r.reason for r in recs if isinstance(r, ParseError)]
    assert errors == [
        "hosts[0].statistics[0]: timestamp is local time (utc=0, sadf -T/-t); "
        "convert without -T/-t",
        "hosts[0].statistics[1].disk[0]: no 'await' key",
        "hosts[0].statistics[2].disk[0]: tps is not a number: '14'",
    ]
    assert len(recs) == 29


def test_sadf_command() -> None:
    assert sadf_command("/var/log/sysstat/sa22") == [
        "sadf",
        "-d",
        "-U",
        "/var/log/sysstat/sa22",
        "--",
        "-d",
        "-p",
    ]
    assert sadf_command(Path("sa"), sadf="/usr/bin/sadf", pretty=False) == [
        "/usr/bin/sadf",
        "-d",
        "-U",
        "sa",
        "--",
        "-d",
    ]


@pytest.mark.parametrize(
    ("stamp", "reason"),
    [
        ({"tz": "UTC"}, None),  # sysstat 12.7.1 and later
        ({"utc": 1}, None),  # before 12.7.1
        ({"tz": "CET"}, "timestamp is local time (tz='CET', sadf -T/-t); convert without -T/-t"),
        ({"utc": 0}, "timestamp is local time (utc=0, sadf -T/-t); convert without -T/-t"),
        ({}, "timestamp has neither 'tz' (sadf 12.7.1 and later) nor 'utc' (older): not sadf"),
    ],
)
def test_json_timestamps_of_every_sadf_version(stamp: dict[str, object], reason: str) -> None:
    doc = json.loads((DATA / "sadf_j_d.json").read_bytes())
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    for s in stats:
        s["timestamp"].pop("utc")
        s["timestamp"].update(stamp)
    recs = list(parse_sadf_json(json.dumps(doc).encode(), "j.json"))
    errors = {r.reason.split(": ", 1)[1] for r in recs if isinstance(r, ParseError)}
    if reason is None:
        assert errors == set() and len(recs) == 29
        assert recs == list(parse_sadf_json((DATA / "sadf_j_d.json").read_bytes(), "j.json"))
    else:
        assert len(errors) == 1 and next(iter(errors)).startswith(reason)
        assert len(recs) == len(stats)


def test_restart_row_before_the_first_header(tmp_path: Path) -> None:
    """A file sadc started at boot (``sa1 --boot`` runs ``sadc -F -L -S DISK FILE``, which writes
    only a restart record) then sampled: sadf prints the restart before the first header."""
    sadc = Path("/usr/lib/sysstat/sadc")
    if not sadc.exists():
        pytest.fail("sadc is not installed; `make test` installs Debian's sysstat package")
    sa = tmp_path / "boot.sa"
    subprocess.run([str(sadc), "-F", "-L", "-S", "DISK", str(sa)], check=True)
    subprocess.run([str(sadc), "-S", "DISK", "1", "2", str(sa)], check=True)
    env = {"TZ": "UTC", "LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        ["sadf", "-d", "-U", str(sa), "--", "-d"], check=True, capture_output=True, env=env
    ).stdout
    lines = out.splitlines()
    assert b";-1;" in lines[0] and b"LINUX-RESTART\t(" in lines[0]
    assert lines[1].startswith(b"# hostname;interval;timestamp;DEV;")
    recs = list(parse_sadf_csv(lines, "boot.csv"))
    assert isinstance(recs[0], RestartMark)
    assert recs[0].end_s == float(lines[0].split(b";")[2])
    assert all(isinstance(r, DiskSample) for r in recs[1:]) and len(recs) == len(lines) - 1
    # the columnar reader counts it as the host's first restart
    path = tmp_path / "boot.csv"
    path.write_bytes(out)
    reader = Reader()
    rows = Rows.concat(list(reader.read_file(path)))
    assert len(rows.lun) == len(lines) - 2 and set(rows.epoch) == {1}
    assert reader.restarts == [1]
    # only a leading COM or restart row is read without a header
    (err,) = parse_sadf_csv([b"vm;1;1795817808;loop0;0;0;0;0;0;0;0;0"], "x.csv")
    assert isinstance(err, ParseError) and err.reason.startswith("row before any")
