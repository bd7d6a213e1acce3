"""Parsing sacct --parsable2/--parsable: the records of job 4478544, edge cases, bad input.

Inputs in ``tests/data/slurm`` (provenance in its README): ``sacct_4478544.txt`` holds the real
start/end times and node lists of NERSC job 4478544 (pytokio's cached sacct records) in
``sacct --parsable2`` layout; ``sacct_edge_cases.txt`` is written by hand in ``--parsable``
layout. NERSC's sacct printed Pacific time, which the Darshan log of step 6 confirms.
"""

from __future__ import annotations

from datetime import UTC
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from pipeline.formats.slurm.decode import (
    SACCT_FORMAT,
    SacctParser,
    SlurmJob,
    parse_sacct,
    sacct_command,
)
from pipeline.formats.slurm.values import expand_hostlist, parse_elapsed, parse_time
from pipeline.parsers.errors import ParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
PACIFIC = ZoneInfo("America/Los_Angeles")
NODES = tuple(f"nid0{n}" for n in range(5301, 5429))
DARSHAN_START_S, DARSHAN_END_S = 1490000867, 1490000983
"""start_time_sec/end_time_sec of the job's Darshan log (sample.darshan, jobid 4478544)."""


def parse_file(name: str, tz: ZoneInfo | None = None) -> list[SlurmJob | ParseError]:
    path = DATA / name
    return list(parse_sacct(path.read_bytes().splitlines(), str(path), 1, None, tz or UTC))


def jobs(records: list[SlurmJob | ParseError]) -> list[SlurmJob]:
    errors = [r for r in records if isinstance(r, ParseError)]
    assert not errors, errors
    return [r for r in records if isinstance(r, SlurmJob)]


def test_job_4478544_every_field_of_the_job_line() -> None:
    records = jobs(parse_file("sacct_4478544.txt", PACIFIC))
    assert [r.id for r in records] == [
        "4478544",
        "4478544.batch",
        "4478544.extern",
        *(f"4478544.{i}" for i in range(8)),
    ]
    assert records[0] == SlurmJob(
        id="4478544",
        job_id="4478544",
        display_id="4478544",
        step=None,
        user="glock",
        name="vpicio_uni",
        start_s=1490000342.0,  # 2017-03-20T01:59:02 PDT
        end_s=1490001098.0,  # 2017-03-20T02:11:38 PDT
        elapsed_s=756.0,
        state="COMPLETED",
        node_count=128,
        tasks=None,
        nodes=NODES,
    )


def test_job_4478544_steps() -> None:
    records = jobs(parse_file("sacct_4478544.txt", PACIFIC))
    assert {r.job_id for r in records} == {"4478544"}
    assert [r.step for r in records] == [None, "batch", "extern", *map(str, range(8))]
    assert [r.user for r in records] == ["glock", *[None] * 10]
    batch, extern = records[1], records[2]
    assert (batch.name, batch.node_count, batch.tasks, batch.nodes) == (
        "batch",
        1,
        1,
        ("nid05301",),
    )
    assert (extern.tasks, extern.nodes) == (128, NODES)
    assert extern.end_s == records[0].end_s + 1  # the extern step ends a second after the job
    for r in records:
        assert r.start_s is not None and r.end_s is not None
        assert r.elapsed_s == r.end_s - r.start_s
        assert r.node_count == len(r.nodes)
    assert [r.tasks for r in records[3:]] == [2048] * 8


def test_the_darshan_log_falls_in_step_6_only_in_pacific_time() -> None:
    def containing(records: list[SlurmJob]) -> list[str]:
        return [
            r.id
            for r in records
            if r.step not in (None, "batch", "extern")
            and r.start_s is not None
            and r.end_s is not None
            and r.start_s <= DARSHAN_START_S
            and r.end_s >= DARSHAN_END_S
        ]

    assert containing(jobs(parse_file("sacct_4478544.txt", PACIFIC))) == ["4478544.6"]
    assert containing(jobs(parse_file("sacct_4478544.txt"))) == []  # read as UTC: 7 h off


def test_edge_cases_parsable_with_trailing_pipe() -> None:
    records = jobs(parse_file("sacct_edge_cases.txt"))
    by_display = {r.display_id: r for r in records}
    assert len(records) == 9
    task = by_display["7001_1"]
    assert (task.id, task.job_id, task.step, task.cpus, task.nodes) == (
        "7002",
        "7002",
        None,
        32,
        ("nid00042",),
    )
    assert (task.partition, task.account, task.exit_code) == ("regular", "m888", "0:0")
    assert (task.start_s, task.end_s, task.elapsed_s) == (1710205200.0, 1710205530.0, 330.0)
    assert by_display["7001_1.batch"].id == "7002.batch"
    pending = by_display["7001_[2-4]"]
    assert (pending.id, pending.start_s, pending.end_s, pending.state, pending.nodes) == (
        "7001",
        None,
        None,
        "PENDING",
        (),
    )
    het0, het0_step, het1 = by_display["7100+0"], by_display["7100+0.0"], by_display["7100+1"]
    assert (het0.id, het0.state, het0.exit_code) == ("7100", "CANCELLED", "0:15")
    assert (het0_step.id, het0_step.job_id, het0_step.step, het0_step.name) == (
        "7100.0",
        "7100",
        "0",
        "ocean",
    )
    assert (het1.id, het1.nodes) == ("7101", ("nid00200", "nid00201", "nid00202", "nid00203"))
    running = by_display["7200"]
    assert (running.end_s, running.elapsed_s, running.state) == (None, 93784.0, "RUNNING")
    assert running.nodes == ("nid00010", "nid00011", "login1")
    oom = by_display["7300"]
    assert (oom.state, oom.exit_code, oom.nodes) == (
        "OUT_OF_MEMORY",
        "0:125",
        ("nid00008", "nid00012", "nid00013"),
    )


def test_without_jobidraw_array_and_het_ids_keep_their_suffix() -> None:
    lines = [
        "JobID|Start|End",
        "7001_1|2024-03-12T01:00:00|2024-03-12T01:05:30",
        "7001_1.batch|2024-03-12T01:00:00|2024-03-12T01:05:30",
        "7100+0.0|2024-03-12T02:00:05|2024-03-12T02:30:00",
    ]
    records = jobs(list(parse_sacct(lines, "x")))
    assert [(r.id, r.job_id, r.step) for r in records] == [
        ("7001_1", "7001_1", None),
        ("7001_1.batch", "7001_1", "batch"),
        ("7100+0.0", "7100+0", "0"),
    ]
    assert records[0].display_id == "7001_1"


def test_columns_in_any_order_any_case_and_alloc_names() -> None:
    lines = [
        "nodelist|END|start|jobidraw|AllocNodes|AllocCPUS|MaxRSS",
        "n[1-2]|1700000100|1700000000|42|2|8|1024K",
    ]
    [job] = jobs(list(parse_sacct(lines, "x")))
    assert job == SlurmJob(
        id="42",
        job_id="42",
        display_id="42",
        step=None,
        start_s=1700000000.0,
        end_s=1700000100.0,
        node_count=2,
        cpus=8,
        nodes=("n1", "n2"),
    )


def test_bad_lines_name_file_line_and_reason_and_the_rest_is_parsed() -> None:
    lines = [
        "JobID|JobIDRaw|Start|End|Elapsed|NNodes|NodeList",
        "1|1|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|1|n1",
        "2|2|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|1",
        "3|3|2024-13-01T00:00:00|2024-01-01T00:01:00|00:01:00|1|n1",
        "4|4|2024-01-01T00:00:00|2024-01-01T00:01:00|soon|1|n1",
        "5|5|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|one|n1",
        "6|6|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|1|n[5-3]",
        "|  |2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|1|n1",
        b"7|7|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|1|n\xff",
        "8|8|2024-01-01T00:00:00|2024-01-01T00:01:00|00:01:00|1|n8",
    ]
    records = list(parse_sacct(lines, "/drop/sacct.txt", 10))
    errors = [r for r in records if isinstance(r, ParseError)]
    assert [r.id for r in records if isinstance(r, SlurmJob)] == ["1", "8"]
    assert [(e.path, e.line_no) for e in errors] == [("/drop/sacct.txt", n) for n in range(12, 19)]
    assert [e.reason for e in errors] == [
        "6 value(s), the header has 7 (a value holding '|'?)",
        "not a sacct time: '2024-13-01T00:00:00'",
        "not a duration: 'soon'",
        "NNodes is not a whole number >= 0: 'one'",
        "range '5-3' runs backwards",
        "empty JobID/JobIDRaw",
        "not UTF-8 text: invalid start byte",
    ]
    assert str(errors[0]) == "/drop/sacct.txt:12: " + errors[0].reason


def test_a_header_without_required_columns_dead_letters_its_rows_until_the_next_header() -> None:
    lines = [
        "JobID|User",
        "1|alice",
        "2|bob",
        "JobIDRaw|Start|End",
        "3|Unknown|Unknown",
    ]
    records = list(parse_sacct(lines, "x"))
    assert len(records) == 4
    assert isinstance(records[0], ParseError)
    assert (records[0].line_no, records[0].reason.split(" (")[0]) == (
        1,
        "sacct header without Start, End",
    )
    assert [(e.line_no, e.reason) for e in records[1:3] if isinstance(e, ParseError)] == [
        (2, "row under a header that could not be read (line 1)"),
        (3, "row under a header that could not be read (line 1)"),
    ]
    assert records[3] == SlurmJob(id="3", job_id="3", display_id="3", step=None)


def test_rows_without_a_header_and_a_missing_trailing_pipe_are_errors() -> None:
    [err] = list(parse_sacct(["1|2024-01-01T00:00:00|2024-01-01T00:01:00"], "x"))
    assert isinstance(err, ParseError)
    assert err.reason == "row before the sacct header line (run sacct without --noheader)"
    lines = ["JobID|Start|End|", "1|Unknown|Unknown|", "2|Unknown|Unknown"]
    records = list(parse_sacct(lines, "x"))
    assert isinstance(records[0], SlurmJob) and records[0].id == "1"
    assert isinstance(records[1], ParseError)
    assert records[1].reason == "row without the trailing '|' of sacct --parsable"


def test_an_empty_last_value_in_parsable2_is_a_value() -> None:
    [job] = jobs(list(parse_sacct(["JobID|Start|End|Account", "9|Unknown|Unknown|"], "x")))
    assert (job.id, job.account) == ("9", None)


def test_resuming_with_the_header_as_cursor_gives_the_same_records() -> None:
    lines = (DATA / "sacct_4478544.txt").read_text().splitlines()
    whole = list(parse_sacct(lines, "f", tz=PACIFIC))
    first = SacctParser("f", tz=PACIFIC)
    head = list(first.feed(lines[:4], 1))
    cursor = first.header_line
    assert cursor == lines[0]
    tail = list(SacctParser("f", cursor, PACIFIC).feed(lines[4:], 5))
    assert head + tail == whole


def test_a_second_header_mid_file_takes_over() -> None:
    lines = [
        "JobID|Start|End",
        "1|2024-01-01T00:00:00|Unknown",
        "End|JobIDRaw|Start",
        "2024-01-01T00:00:09|2|2024-01-01T00:00:00",
    ]
    records = jobs(list(parse_sacct(lines, "x")))
    assert [(r.id, r.end_s) for r in records] == [("1", None), ("2", 1704067209.0)]


@pytest.mark.parametrize(
    ("text", "hosts"),
    [
        ("nid0[5301-5303,5310],login1", ["nid05301", "nid05302", "nid05303", "nid05310", "login1"]),
        ("n[08-10]", ["n08", "n09", "n10"]),
        ("n[8-10]", ["n8", "n9", "n10"]),
        ("r[1-2]n[1-2]-ib", ["r1n1-ib", "r1n2-ib", "r2n1-ib", "r2n2-ib"]),
        ("a,b[7],c", ["a", "b7", "c"]),
        ("None assigned", []),
        ("(null)", []),
        ("", []),
    ],
)
def test_expand_hostlist(text: str, hosts: list[str]) -> None:
    assert expand_hostlist(text) == hosts


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("n[1-2", "'[' without ']'"),
        ("n1-2]", "']' without '['"),
        ("n[[1]]", "nested '['"),
        ("n[a-b]", "bad range 'a-b' (expected N or N-M)"),
        ("n[3-1]", "range '3-1' runs backwards"),
        ("n[]", "empty brackets in 'n[]'"),
        ("a,,b", "empty host name in 'a,,b'"),
        ("n[0-1000000]", "more than 1000000 hosts"),
    ],
)
def test_expand_hostlist_refuses(text: str, reason: str) -> None:
    with pytest.raises(ValueError) as info:
        expand_hostlist(text)
    assert str(info.value) == reason


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:12:36", 756.0),
        ("1-02:03:04", 93784.0),
        ("12:34.567", 754.567),
        ("2-03", 183600.0),
        ("0-00:01", 60.0),
    ],
)
def test_parse_elapsed(text: str, seconds: float) -> None:
    assert parse_elapsed(text) == pytest.approx(seconds, abs=1e-9)


@pytest.mark.parametrize("text", ["soon", "12", "-1", "1-x", "00:00:-1", "a:b:c", "INVALID"])
def test_parse_elapsed_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_elapsed(text)


def test_parse_time_forms() -> None:
    assert parse_time("2017-03-20T02:07:41", PACIFIC) == 1490000861.0
    assert parse_time("2017-03-20T02:07:41") == 1489975661.0
    assert parse_time("1490000861") == 1490000861.0  # SLURM_TIME_FORMAT=%s
    assert parse_time("2017-03-20T09:07:41+00:00", PACIFIC) == 1490000861.0
    assert [parse_time(t) for t in ("Unknown", "None", "")] == [None, None, None]
    with pytest.raises(ValueError, match="not a sacct time"):
        parse_time("2017-03-20")


def test_sacct_command() -> None:
    assert sacct_command(jobs=["4478544", "7001"]) == [
        "sacct",
        "--parsable2",
        f"--format={SACCT_FORMAT}",
        "--jobs=4478544,7001",
    ]
    assert sacct_command(starttime="2024-03-12T00:00", endtime="now")[3:] == [
        "--allusers",
        "--starttime=2024-03-12T00:00",
        "--endtime=now",
    ]
    with pytest.raises(ValueError, match="needs jobs or a starttime"):
        sacct_command()


def test_the_committed_file_is_what_its_script_makes(tmp_path: Path) -> None:
    import importlib.util

    cache = DATA.parents[3] / "shared" / "data" / "pytokio" / "sample.slurm"
    if not cache.exists():
        pytest.fail(f"{cache} is missing: the shared pytokio data is required")
    spec = importlib.util.spec_from_file_location("make_sacct", DATA / "make_sacct_4478544.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(str(cache), str(tmp_path / "out.txt"))
    assert (tmp_path / "out.txt").read_bytes() == (DATA / "sacct_4478544.txt").read_bytes()
