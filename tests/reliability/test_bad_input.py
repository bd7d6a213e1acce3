"""Hand-made bad input through the main job, per drop type: the corpus half of the bad-input
promise (docs/operations/guarantees.md; the fuzzing half is ``test_fuzz_parsers.py``).

Every case is made here, from a real good input of the repository, by damaging it the way
files get damaged: a line cut (a file still being written, or cut by a full disk), a wrong
column count, a value of the wrong type or out of range, a run of garbage, NUL or binary bytes,
a 2 MiB line, an empty file, a binary file cut at several offsets or with bytes flipped in its
header and body, timestamps that jump backwards and forwards (clock steps) and records out of
order. Each damaged file goes through ``MainJob.run_once`` on a drop directory against the
embedded server, and the test asserts, with values derived from the input:

* the run returns (no exception) with the summary's ``bad_lines`` / ``bad_files``;
* each rejected line is in the dead-letter area with its file, its line (0: the whole file or
  no line of it) and a reason that says what is wrong, and its bytes as read;
* a file the documentation says is quarantined whole (binary formats, a file that is not the
  format at all, such as LMT's SQLite database where its CSV export is read) is copied to
  ``deadletter/files`` unchanged;
* the good records around the bad ones are indexed: the documents in Elasticsearch are
  exactly those the reference computation (the parser and reducer run offline on the good
  lines) gives.

Then: files growing while read (a partial last line completed later is neither dead-lettered
nor indexed twice), bad configuration and event schemas (a ``ConfigError`` naming the file and
the key, never a traceback, never code run), and ``iolens dlq list|show|replay`` over the dead
letters of a run.

Inputs (provenance in each directory's README): ``tests/data/fio/samples/node01`` (fio 3.33
histogram log, 79 records), ``../shared/data/sysstat`` (``exp_ds2_1s_sadf_d.csv``: sadf -d of
240 s x 6 devices; ``sa_test``: a sadc 12.6.1 binary file), ``tests/data/slurm`` (sacct of job
4478544), ``tests/data/lmt`` (LMT export of snx11025, 24 OSTs every 5 s) and
``../shared/data/pytokio/lmtdb-reset.sqlite3`` (an LMT database extract), the darshan wheel's
logs and ``../shared/data/darshan-logs``, and an event log recorded from the real HTTP test
workload (``tests/workloads``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.cli.main import main
from pipeline.errors import ConfigError
from pipeline.formats.darshan.pool import analyze_path
from pipeline.formats.events.decode import parse_events
from pipeline.formats.lmt.decode import LmtSample, parse_lmt_csv
from pipeline.formats.lmt.reduce import OstDeltaReducer
from pipeline.formats.slurm.decode import SlurmJob, parse_sacct
from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.formats.sysstat.sadc import convert_sadc
from pipeline.formats.sysstat.sadf_json import parse_sadf_json
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DiskSample
from pipeline.records.event_schema import load_event_schema
from pipeline.reducers.downsample import Downsampler
from pipeline.reducers.event_order import merge_streams
from pipeline.reducers.request_join import extract
from pipeline.settings import Settings, load_settings, settings_from_mapping
from pipeline.sink.deadletter import DeadInput, DeadLetters
from pipeline.sink.search import refresh

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
SHARED = ROOT.parent / "shared" / "data"
SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"

FIO = (DATA / "fio" / "samples" / "node01" / "randrw_clat_hist.1.log").read_bytes().splitlines()
"""79 records of 1,859 fields, time_ms 101 to 4001 in steps of 100 (two directions each)."""
SADF = (SHARED / "sysstat" / "exp_ds2_1s_sadf_d.csv").read_bytes().splitlines()
"""A header and 1,440 rows: 240 one-second samples of 6 loop devices, from 04:23:24 UTC."""
SADC = (SHARED / "sysstat" / "sa_test").read_bytes()
"""sadc 12.6.1 binary: 29 one-second samples of vda (54,652 bytes)."""
SACCT = (DATA / "slurm" / "sacct_4478544.txt").read_bytes().splitlines()
"""A header and 11 rows (job 4478544 and its steps)."""
LMT = (DATA / "lmt" / "snx11025_2018-01-28.csv").read_bytes().splitlines()[: 1 + 24 * 20]
"""A header and 20 timesteps (5 s apart) of 24 OSTs."""
LMT_DB = (SHARED / "pytokio" / "lmtdb-reset.sqlite3").read_bytes()
"""The LMT database extract the export above was made from (SQLite, 155,648 bytes)."""


def darshan_input(name: str) -> Path:
    """A log bundled with the darshan wheel."""
    import darshan

    return Path(darshan.__file__).resolve().parent / "tests" / "input" / name


GOOD_DARSHAN = darshan_input("noposixopens.darshan")
"""A good Darshan log put beside each damaged one: job 2568372269, 3 file records."""
DAMAGED_DARSHAN = darshan_input("sample.darshan").read_bytes()
"""The log the Darshan cases damage (format 3.10, 11,472 bytes)."""


def text(lines: Sequence[bytes]) -> bytes:
    """Lines joined as a file, each with its newline."""
    return b"".join(line + b"\n" for line in lines)


def flipped(data: bytes, at: int, n: int = 1) -> bytes:
    """``data`` with ``n`` bytes from ``at`` inverted (xor 0xff)."""
    b = bytearray(data)
    for i in range(at, at + n):
        b[i] ^= 0xFF
    return bytes(b)


def field_set(line: bytes, sep: bytes, i: int, value: bytes) -> bytes:
    """``line`` with its ``i``-th ``sep``-separated field replaced."""
    fields = line.split(sep)
    fields[i] = value
    return sep.join(fields)


@dataclass(frozen=True)
class Bad:
    """A dead letter a case must leave: its line (0: not tied to one), a part of the reason
    that says what is wrong, and the bytes kept (None: not checked)."""

    line: int
    reason: str
    raw: bytes | None = None


@dataclass(frozen=True)
class Case:
    """A damaged input and what must come of it.

    Attributes:
        data: the damaged file's bytes.
        bad: its dead letters, in file order.
        good: the lines (without newline) whose records must be indexed: the reference
            computation (parser and reducer, offline) runs on them.
        quarantined: the file is quarantined whole (``bad_files`` 1, copied unchanged).
    """

    data: bytes
    bad: tuple[Bad, ...] = ()
    good: tuple[bytes, ...] = ()
    quarantined: bool = False


@dataclass
class Outcome:
    """What one ``run_once`` left: summary, dead letters, quarantined files, documents."""

    summary: RunSummary
    letters: list[DeadInput]
    quarantined: dict[str, bytes]
    client: Elasticsearch
    settings: Settings

    @property
    def ns(self) -> str:
        """The run's namespace."""
        return self.settings.elasticsearch.namespace

    def count(self, stream: str) -> int:
        """Documents of data stream ``stream`` (e.g. ``logs-slurm.job``) now in the cluster."""
        index = f"{stream}-{self.ns}"
        refresh(self.client, index)
        try:
            return int(self.client.count(index=index)["count"])
        except NotFoundError:
            return 0

    def duplicates(self) -> int:
        """Documents the cluster already had (409s) in this run, over every stream."""
        return sum(s["duplicate"] for s in self.summary.docs.values())


def make_settings(es_url: str, tmp: Path, drop_type: str, **drop: Any) -> Settings:
    """Settings with one drop directory ``tmp/drop`` of ``drop_type`` and a fresh namespace."""
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": f"bad{uuid.uuid4().hex[:10]}"},
            "embedded": {"enabled": False},
            "state_dir": str(tmp / "state"),
            "drops": [{"type": drop_type, "path": str(tmp / "drop"), **drop}],
            "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
            "peer": {"downsample_s": 15},
            "darshan": {"workers": 1, "stable_s": 0},
        }
    )


def ingest(
    es_url: str,
    client: Elasticsearch,
    tmp: Path,
    drop_type: str,
    files: Mapping[str, bytes],
    **drop: Any,
) -> Outcome:
    """Write ``files`` into a drop directory (modified a minute ago: event logs are quiet,
    whole files stable), run the main job once on it and collect what it left."""
    d = tmp / "drop"
    d.mkdir()
    for name, data in files.items():
        (d / name).write_bytes(data)
        old = os.stat(d / name).st_mtime - 60
        os.utime(d / name, (old, old))
    settings = make_settings(es_url, tmp, drop_type, **drop)
    with MainJob(settings, client) as job:
        summary = job.run_once()
    state = Path(settings.state_dir)
    qdir = state / "deadletter" / "files"
    quarantined = {p.name: p.read_bytes() for p in qdir.iterdir()} if qdir.is_dir() else {}
    letters = list(DeadLetters(state / "deadletter").iter_inputs())
    return Outcome(summary, letters, quarantined, client, settings)


def check_letters(out: Outcome, path: Path, case: Case) -> None:
    """The dead letters are the case's, in order: file, line, reason, stage and bytes."""
    got = [(x.path, x.line_no) for x in out.letters]
    assert got == [(str(path), b.line) for b in case.bad]
    for letter, bad in zip(out.letters, case.bad, strict=True):
        assert bad.reason in letter.reason, (letter.reason, bad.reason)
        assert letter.stage == "parse"
        if bad.raw is not None:
            assert letter.raw_bytes == bad.raw
    if case.quarantined:
        assert out.summary.bad_files == 1
        assert out.quarantined == {path.name: case.data}
    else:
        assert out.summary.bad_files == 0 and out.quarantined == {}
        assert out.summary.bad_lines == len(case.bad)


# -- fio histogram logs ------------------------------------------------------------------------


def fio_time(line: bytes) -> int:
    return int(line.split(b",", 1)[0])


def fio_shift(line: bytes, ms: int) -> bytes:
    t, rest = line.split(b",", 1)
    return str(int(t) + ms).encode() + b"," + rest


def fio_cases() -> Iterator[Any]:
    lf = FIO
    garbage = b"\x00\xff\xfe garbage \x01\x02 [/x]"
    cut = lf[5][:200]
    yield pytest.param(Case(text(lf[:-1]) + lf[-1][:100], good=tuple(lf[:-1])), id="last-line-cut")
    yield pytest.param(
        Case(
            text([*lf[:5], cut, *lf[6:]]),
            (Bad(6, f"{cut.count(b',') - 2} bins, but this log's layout has 1856", cut),),
            tuple(lf[:5] + lf[6:]),
        ),
        id="line-cut",
    )
    yield pytest.param(
        Case(
            text([*lf[:5], lf[5] + b", 7", *lf[6:]]),
            (Bad(6, "1857 bins, but this log's layout has 1856", lf[5] + b", 7"),),
            tuple(lf[:5] + lf[6:]),
        ),
        id="extra-column",
    )
    typed = field_set(lf[5], b",", 1, b" read")
    yield pytest.param(
        Case(
            text([*lf[:5], typed, *lf[6:]]),
            (Bad(6, "not a histogram record: expected integers", typed),),
            tuple(lf[:5] + lf[6:]),
        ),
        id="wrong-type",
    )
    negative = field_set(lf[5], b",", 2, b" -4096")
    yield pytest.param(
        Case(
            text([*lf[:5], negative, *lf[6:]]),
            (Bad(6, "negative block size -4096"),),
            tuple(lf[:5] + lf[6:]),
        ),
        id="negative-block-size",
    )
    future = field_set(lf[5], b",", 0, b"300000000000000")
    yield pytest.param(
        Case(
            text([*lf[:5], future, *lf[6:]]),
            (Bad(6, "timestamp 300000000000000 ms is beyond the year 9999"),),
            tuple(lf[:5] + lf[6:]),
        ),
        id="time-beyond-9999",
    )
    for name, junk in (("garbage", garbage), ("nul-run", bytes(4096)), ("2mib", b"7" * (2 << 20))):
        yield pytest.param(
            Case(
                text([*lf[:5], junk, *lf[5:]]),
                (Bad(6, "not a histogram record", junk),),
                tuple(lf),
            ),
            id=f"{name}-line",
        )
    yield pytest.param(Case(b""), id="empty-file")
    yield pytest.param(
        Case(
            text([b"\x7fELF\x02\x01\x01 not a log", *lf]),
            (Bad(1, "not a histogram record: expected integers"),),
            quarantined=True,
        ),
        id="binary-head",
    )
    # the clock steps back 2.1 s after 40 records: job-relative times 1, 1, 101... again
    back = [*lf[:40], *(fio_shift(x, -2100) for x in lf[40:])]
    yield pytest.param(Case(text(back), good=tuple(back)), id="clock-back")
    # ... or 2.5 s, so that the first records after the step would lie before the job started
    under = [*lf[:40], *(fio_shift(x, -2500) for x in lf[40:])]
    negative = [(n, x) for n, x in enumerate(under, start=1) if fio_time(x) < 0]
    assert [n for n, _x in negative] == list(range(41, 49))  # times 2101-2401 become < 0
    yield pytest.param(
        Case(
            text(under),
            tuple(Bad(n, f"negative timestamp {fio_time(x)}", x) for n, x in negative),
            tuple(x for x in under if fio_time(x) >= 0),
        ),
        id="clock-back-before-start",
    )
    ahead = [*lf[:40], *(fio_shift(x, 3_600_000) for x in lf[40:])]
    yield pytest.param(Case(text(ahead), good=tuple(ahead)), id="clock-forward")
    shuffled = [*lf[:10], *lf[30:40], *lf[10:30], *lf[40:]]
    yield pytest.param(Case(text(shuffled), good=tuple(shuffled)), id="out-of-order")


@pytest.mark.parametrize("case", list(fio_cases()))
def test_fio_histogram_log(es_url: str, client: Elasticsearch, tmp_path: Path, case: Case) -> None:
    name = "randrw_clat_hist.1.log"
    out = ingest(es_url, client, tmp_path, "fio-hist", {name: case.data}, host="node01")
    check_letters(out, tmp_path / "drop" / name, case)
    # one histogram document per good record
    assert out.count("metrics-fio.histogram") == len(case.good)
    assert out.duplicates() == 0


# -- sysstat: sadf -d CSV, sadf -j JSON, sadc binary ---------------------------------------------


def once_intervals(lines: Sequence[bytes]) -> int:
    """Intervals ``iolens run --once`` indexes of these ``sadf -d`` lines: the downsampler's
    finished ones, then each device's last one where no later line can add to it."""
    ds = Downsampler(15)
    n = 0
    for rec in parse_sadf_csv(lines, "reference"):
        assert not isinstance(rec, ParseError)
        n += len(ds.add(rec))
    return n + len(ds.flush_complete())


def sadf_shift(line: bytes, seconds: int) -> bytes:
    """A ``sadf -d`` row with its timestamp moved."""
    stamp = line.split(b";")[2].decode()
    when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S UTC") + timedelta(seconds=seconds)
    return field_set(line, b";", 2, when.strftime("%Y-%m-%d %H:%M:%S UTC").encode())


def sadf_cases() -> Iterator[Any]:
    ls = SADF
    row = ls[50]  # line 51: vm;1;2026-11-22 04:23:32 UTC;loop1;...

    def one_bad(new: bytes, reason: str, insert: bool = False) -> Case:
        rest = ls[50:] if insert else ls[51:]
        return Case(
            text([*ls[:50], new, *rest]),
            (Bad(51, reason, new),),
            tuple(ls[:50] + rest),
        )

    yield pytest.param(Case(text(ls[:-1]) + ls[-1][:20], good=tuple(ls[:-1])), id="last-line-cut")
    short = b";".join(row.split(b";")[:-2])
    yield pytest.param(one_bad(short, "10 column(s), the header has 12"), id="missing-columns")
    yield pytest.param(
        one_bad(field_set(row, b";", 4, b"abc"), "tps is not a number: 'abc'"), id="wrong-type"
    )
    yield pytest.param(
        one_bad(b"\x00\xff\xfe\x01 garbage", "not UTF-8 text", insert=True), id="garbage-line"
    )
    yield pytest.param(
        one_bad(b"x" * (2 << 20), "1 column(s), the header has 12", insert=True), id="2mib-line"
    )
    yield pytest.param(
        one_bad(field_set(row, b";", 2, b"9" * 400), "is beyond the year 9999"),
        id="timestamp-of-400-digits",
    )
    yield pytest.param(
        one_bad(field_set(row, b";", 4, b"1e308"), "tps is out of range (>= 2^53)"),
        id="value-out-of-range",
    )
    yield pytest.param(
        one_bad(field_set(row, b";", 1, b"9" * 30), "s is out of range (> 2^31 - 1)"),
        id="interval-of-30-digits",
    )
    yield pytest.param(Case(b""), id="empty-file")
    # the clock steps back 30 s after line 601 (100 s of data): the 30 s read again (30 rows
    # of each of the 6 devices, lines 602-781) overlap what was read, the rest is new time
    back = [*ls[:601], *(sadf_shift(x, -30) for x in ls[601:])]
    yield pytest.param(
        Case(
            text(back),
            tuple(Bad(n, "overlaps the time from") for n in range(602, 782)),
            tuple(back[:601] + back[781:]),
        ),
        id="clock-back",
    )
    # ... forward an hour: nothing overlaps, every row is indexed
    ahead = [*ls[:601], *(sadf_shift(x, 3600) for x in ls[601:])]
    yield pytest.param(Case(text(ahead), good=tuple(ahead)), id="clock-forward")
    # rows of seconds 20-29 come after those of 30-49: they fill time not read yet
    moved = [*ls[:121], *ls[181:301], *ls[121:181], *ls[301:]]
    yield pytest.param(Case(text(moved), good=tuple(moved)), id="out-of-order")
    # rows of seconds 20-29 repeated after second 49 (a second export appended): read before
    again = [*ls[:301], *ls[121:181], *ls[301:]]
    yield pytest.param(
        Case(
            text(again),
            tuple(Bad(n, "overlaps the time from") for n in range(302, 362)),
            tuple(ls),
        ),
        id="repeated-rows",
    )


@pytest.mark.parametrize("case", list(sadf_cases()))
def test_sadf_csv(es_url: str, client: Elasticsearch, tmp_path: Path, case: Case) -> None:
    out = ingest(es_url, client, tmp_path, "sadf", {"vm_sadf_d.csv": case.data})
    check_letters(out, tmp_path / "drop" / "vm_sadf_d.csv", case)
    assert out.count("metrics-sysstat.diskio") == once_intervals(case.good)
    assert out.duplicates() == 0


def whole_file_intervals(records: Sequence[object]) -> int:
    """Intervals of a whole sysstat file: every one, the last flushed."""
    ds = Downsampler(15)
    n = sum(len(ds.add(r)) for r in records if isinstance(r, DiskSample))
    return n + len(ds.flush())


@pytest.fixture(scope="module")
def sadf_json() -> bytes:
    """``sadf -j sa_test -- -d``, run now by Debian's sadf 12.6.1 (LC_ALL=C, TZ=UTC)."""
    sadf = shutil.which("sadf")
    assert sadf is not None, "sysstat's sadf is missing: `make test` installs it"
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    argv = [sadf, "-j", str(SHARED / "sysstat" / "sa_test"), "--", "-d"]
    return subprocess.run(argv, capture_output=True, check=True, env=env, timeout=60).stdout


def test_sadf_json_bad_parts_are_dead_lettered_the_rest_indexed(
    es_url: str, client: Elasticsearch, tmp_path: Path, sadf_json: bytes
) -> None:
    # the 8th statistics entry's disk gets a tps of the wrong type
    at = sadf_json.index(b'"tps": ', sadf_json.index(b'"time": "04:14:29"'))
    end = sadf_json.index(b",", at)
    data = sadf_json[:at] + b'"tps": "x"' + sadf_json[end:]
    out = ingest(es_url, client, tmp_path, "sadf", {"vm.json": data})
    good = [r for r in parse_sadf_json(data, "x") if not isinstance(r, ParseError)]
    assert len(good) == 28  # 29 samples, one rejected
    [letter] = out.letters
    assert (letter.path, letter.line_no) == (str(tmp_path / "drop" / "vm.json"), 1)
    assert letter.reason == "hosts[0].statistics[7].disk[0]: tps is not a number: 'x'"
    assert (out.summary.bad_lines, out.summary.bad_files) == (1, 0)
    assert out.count("metrics-sysstat.diskio") == whole_file_intervals(good) == 3


@pytest.mark.parametrize(
    ("data", "line", "reason"),
    [
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n", 0, "nested too deeply"),
        (b'{"sysstat": {"hosts": "vm"}}\n', 0, "not sadf -j output: no sysstat.hosts array"),
        (b"{" + bytes(range(256)) + b"}\n", 1, "invalid JSON at line 1, column 2: Expecting"),
    ],
    ids=["nested-100000-deep", "other-json", "binary"],
)
def test_sadf_json_that_cannot_be_read_is_quarantined_whole(
    es_url: str, client: Elasticsearch, tmp_path: Path, data: bytes, line: int, reason: str
) -> None:
    # complete documents (they end with their closing brace) that are not sadf -j output
    case = Case(data, (Bad(line, reason),), quarantined=True)
    out = ingest(es_url, client, tmp_path, "sadf", {"vm.json": data})
    check_letters(out, tmp_path / "drop" / "vm.json", case)
    assert out.count("metrics-sysstat.diskio") == 0


def test_sadf_json_cut_is_dead_lettered_and_read_whole_once_complete(
    es_url: str, client: Elasticsearch, tmp_path: Path, sadf_json: bytes
) -> None:
    # cut in the middle: still being written, or cut for good; either way it is kept with
    # its reason, and read again (whole) when it changes
    cut = sadf_json[: len(sadf_json) // 2]
    with pytest.raises(json.JSONDecodeError) as err:  # the reference for the place
        json.loads(cut)
    where = f"line {err.value.lineno}, column {err.value.colno}"
    out = ingest(es_url, client, tmp_path, "sadf", {"vm.json": cut})
    path = tmp_path / "drop" / "vm.json"
    check_letters(out, path, Case(cut, (Bad(err.value.lineno, f"invalid JSON at {where}"),)))
    assert out.count("metrics-sysstat.diskio") == 0
    path.write_bytes(sadf_json)  # the writer finishes it
    with MainJob(out.settings, client) as job:
        again = job.run_once()
    assert (again.bad_lines, again.bad_files) == (0, 0)
    assert len(list(DeadLetters(tmp_path / "state" / "deadletter").iter_inputs())) == 1
    good = list(parse_sadf_json(sadf_json, "x"))
    assert out.count("metrics-sysstat.diskio") == whole_file_intervals(good) == 3
    assert sum(s["duplicate"] for s in again.docs.values()) == 0


def sadc_intervals(path: Path) -> int:
    """What a sadc drop indexes of a file sadf reads: every interval, the last flushed."""
    return whole_file_intervals(list(parse_sadf_csv(convert_sadc(path).splitlines(), "x")))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (SADC[:1], "Invalid system activity file"),
        (SADC[:100], "End of system activity file unexpected"),
        (SADC[:2000], "End of system activity file unexpected"),
        (SADC[:30000], "End of system activity file unexpected"),
        (SADC[:-1], "End of system activity file unexpected"),
        (flipped(SADC, 0, 4), "Invalid system activity file"),
        (flipped(SADC, 4, 8), "cannot read the format of this file"),
        (bytes(range(256)) * 64, "Invalid system activity file"),
    ],
    ids=["cut-1", "cut-100", "cut-2000", "cut-30000", "cut-last-byte", "magic", "format", "junk"],
)
def test_sadc_file_sadf_refuses_is_quarantined_whole(
    es_url: str, client: Elasticsearch, tmp_path: Path, data: bytes, reason: str
) -> None:
    out = ingest(es_url, client, tmp_path, "sadc", {"sa_bad": data, "sa_good": SADC})
    case = Case(data, (Bad(0, "sadf exited with status"),), quarantined=True)
    check_letters(out, tmp_path / "drop" / "sa_bad", case)
    assert reason in out.letters[0].reason
    # the good file beside it: its 29 samples downsampled to 15 s, the last interval flushed
    assert out.count("metrics-sysstat.diskio") == sadc_intervals(SHARED / "sysstat" / "sa_test")
    assert out.count("metrics-sysstat.diskio") == 3


@pytest.mark.parametrize("at", [20_000, 40_000], ids=["body-20000", "body-40000"])
def test_sadc_file_with_bytes_flipped_in_its_body_is_read_as_sadf_reads_it(
    es_url: str, client: Elasticsearch, tmp_path: Path, at: int
) -> None:
    data = flipped(SADC, at, 8)
    out = ingest(es_url, client, tmp_path, "sadc", {"sa_test": data})
    assert (out.summary.bad_lines, out.summary.bad_files, out.letters) == (0, 0, [])
    assert out.count("metrics-sysstat.diskio") == sadc_intervals(tmp_path / "drop" / "sa_test")


def test_sadc_files_of_other_sysstat_versions_are_quarantined_with_both_versions(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    """Files of sysstat's own test suite (../shared/data/sysstat-corpus/README.md): a format
    Debian's sadf 12.6.1 cannot convert, one whose conversion crashes it, and one written by a
    newer sadc, which sadf reads as nothing (exit 0); the good file beside them is indexed."""
    corpus = SHARED / "sysstat-corpus"
    names = ["data-9.1.5", "data-10.3.1", "sim-data-new"]
    files = {n: (corpus / n).read_bytes() for n in names} | {"sa_good": SADC}
    out = ingest(es_url, client, tmp_path, "sadc", files)
    reasons = {Path(x.path).name: x.reason for x in out.letters}
    assert sorted(reasons) == sorted(names) and out.summary.bad_files == 3
    assert out.quarantined == {n: files[n] for n in names}
    assert reasons["data-9.1.5"].startswith(
        "written by sysstat 9.1.5 (file format 0x2170), a format this host's sadf (12.6.1) does "
        "not read, and sadf -c could not convert it (exit status 2: Cannot convert the format "
        "of this file)"
    )
    assert "sadf -c crashed converting it (SIGSEGV)" in reasons["data-10.3.1"]
    assert reasons["data-10.3.1"].startswith("written by sysstat 10.3.1 (file format 0x2173)")
    assert reasons["sim-data-new"] == (
        "written by sysstat 99.9.9 (file format 0x2175), newer than this host's sadf (12.6.1), "
        "which cannot read it; install that sysstat version or later here, or convert the file "
        "where it was recorded"
    )
    assert out.count("metrics-sysstat.diskio") == 3
    assert not list((tmp_path / "state" / "sadc-convert").iterdir())  # conversions deleted


def test_empty_sadc_file_is_waited_for(es_url: str, client: Elasticsearch, tmp_path: Path) -> None:
    # an empty file has nothing to identify it by: it is neither read nor rejected
    out = ingest(es_url, client, tmp_path, "sadc", {"sa_test": b""})
    assert (out.summary.files, out.summary.bad_files, out.letters) == (0, 0, [])


# -- Slurm sacct and LMT exports ---------------------------------------------------------------


def slurm_cases() -> Iterator[Any]:
    ls = SACCT
    row = ls[3]  # line 4: 4478544.extern

    def one_bad(new: bytes, reason: str, insert: bool = False) -> Case:
        rest = ls[3:] if insert else ls[4:]
        return Case(text([*ls[:3], new, *rest]), (Bad(4, reason, new),), tuple(ls[:3] + rest))

    yield pytest.param(Case(text(ls[:-1]) + ls[-1][:10], good=tuple(ls[:-1])), id="last-line-cut")
    short = b"|".join(row.split(b"|")[:-2])
    yield pytest.param(one_bad(short, "9 value(s), the header has 11"), id="missing-columns")
    yield pytest.param(
        one_bad(field_set(row, b"|", 8, b"many"), "NNodes is not a whole number >= 0: 'many'"),
        id="wrong-type",
    )
    yield pytest.param(one_bad(b"\x00\xff\xfe", "not UTF-8 text", insert=True), id="garbage-line")
    yield pytest.param(
        one_bad(b"x" * (2 << 20), "1 value(s), the header has 11", insert=True), id="2mib-line"
    )
    yield pytest.param(
        one_bad(field_set(row, b"|", 4, b"9" * 400), "is beyond the year 9999"),
        id="start-of-400-digits",
    )
    yield pytest.param(
        one_bad(field_set(row, b"|", 4, b"0001-01-01T00:00:00"), "is before 1970"),
        id="start-year-1",
    )
    yield pytest.param(
        one_bad(field_set(row, b"|", 6, b"9" * 400 + b":00:00"), "duration out of range"),
        id="elapsed-of-400-digits",
    )
    yield pytest.param(
        one_bad(field_set(row, b"|", 8, b"9" * 30), "NNodes is out of range (>= 2^53)"),
        id="count-out-of-range",
    )
    yield pytest.param(Case(b""), id="empty-file")
    # End before Start (a clock stepping back between them) is what sacct printed: kept
    reversed_ = field_set(row, b"|", 5, b"2017-03-19T01:00:00")
    yield pytest.param(
        Case(text([*ls[:3], reversed_, *ls[4:]]), good=tuple([*ls[:3], reversed_, *ls[4:]])),
        id="end-before-start",
    )
    yield pytest.param(
        Case(text([ls[0], *ls[1:][::-1]]), good=tuple([ls[0], *ls[1:][::-1]])), id="out-of-order"
    )


@pytest.mark.parametrize("case", list(slurm_cases()))
def test_sacct(es_url: str, client: Elasticsearch, tmp_path: Path, case: Case) -> None:
    out = ingest(es_url, client, tmp_path, "slurm", {"sacct.txt": case.data})
    check_letters(out, tmp_path / "drop" / "sacct.txt", case)
    rows = [r for r in parse_sacct(case.good, "x") if isinstance(r, SlurmJob)]
    assert len(rows) == max(0, len(case.good) - 1)  # every good row but the header
    assert out.count("logs-slurm.job") == len(rows)


def lmt_intervals(lines: Sequence[bytes]) -> int:
    """Intervals the per-OST reducer closes over these export lines."""
    samples = [r for r in parse_lmt_csv(lines, "x") if isinstance(r, LmtSample)]
    return len(list(OstDeltaReducer().feed(samples)))


def lmt_cases() -> Iterator[Any]:
    ls = LMT
    row = ls[100]  # line 101: timestep 5 (00:00:20), OST 0003

    def one_bad(new: bytes, reason: str, insert: bool = False) -> Case:
        rest = ls[100:] if insert else ls[101:]
        return Case(text([*ls[:100], new, *rest]), (Bad(101, reason, new),), tuple(ls[:100] + rest))

    yield pytest.param(Case(text(ls[:-1]) + ls[-1][:10], good=tuple(ls[:-1])), id="last-line-cut")
    short = b",".join(row.split(b",")[:-2])
    yield pytest.param(one_bad(short, "5 value(s), the header has 7"), id="missing-columns")
    yield pytest.param(
        one_bad(field_set(row, b",", 2, b"lots"), "READ_BYTES is not a number: 'lots'"),
        id="wrong-type",
    )
    yield pytest.param(one_bad(b"\x00\xff\xfe", "not UTF-8 text", insert=True), id="garbage-line")
    yield pytest.param(
        one_bad(b'"unterminated,' + row, "bad CSV", insert=True), id="unterminated-quote"
    )
    yield pytest.param(
        one_bad(b"x" * (2 << 20), "field larger than field limit", insert=True), id="2mib-line"
    )
    yield pytest.param(
        one_bad(
            field_set(row, b",", 0, b"1e15"), "not a timestamp: '1e15' is beyond the year 9999"
        ),
        id="time-beyond-9999",
    )
    yield pytest.param(
        one_bad(field_set(row, b",", 2, b"9" * 30), "READ_BYTES is out of range (>= 2^63)"),
        id="counter-out-of-range",
    )
    yield pytest.param(Case(b""), id="empty-file")
    # LMT's database itself, named as an export: refused whole, once, with the export command
    yield pytest.param(
        Case(LMT_DB, (Bad(0, "an SQLite database (LMT's own tables", b""),), quarantined=True),
        id="sqlite-database",
    )
    # timesteps 6-9 (lines 122-217) stamped a day early: each row is out of order for its OST
    early = [x.replace(b'"2018-01-28 ', b'"2018-01-27 ') for x in ls[121:217]]
    yield pytest.param(
        Case(
            text([*ls[:121], *early, *ls[217:]]),
            tuple(Bad(n, "is out of order: the OST's last sample is at") for n in range(122, 218)),
            tuple(ls[:121] + ls[217:]),
        ),
        id="clock-back",
    )
    # timestep 10 (lines 218-241) comes before timesteps 6-9: those then are out of order
    moved = [*ls[:121], *ls[217:241], *ls[121:217], *ls[241:]]
    yield pytest.param(
        Case(
            text(moved),
            tuple(Bad(n, "is out of order") for n in range(146, 242)),
            tuple(moved[:145] + moved[241:]),
        ),
        id="out-of-order",
    )
    # an exact repeat (overlapping exports) carries nothing new: skipped, not rejected
    yield pytest.param(
        Case(text([*ls[:101], ls[100], *ls[101:]]), good=tuple(ls)), id="repeated-row"
    )
    # the same OST and time with other counters is a conflict: the first is kept
    other = field_set(row, b",", 2, b"1")
    yield pytest.param(
        Case(
            text([*ls[:101], other, *ls[101:]]),
            (Bad(102, "sampled twice at 2018-01-28 00:00:20 UTC with other counters", other),),
            tuple(ls),
        ),
        id="conflicting-repeat",
    )


@pytest.mark.parametrize("case", list(lmt_cases()))
def test_lmt_csv(es_url: str, client: Elasticsearch, tmp_path: Path, case: Case) -> None:
    out = ingest(es_url, client, tmp_path, "lmt", {"lmt.csv": case.data})
    check_letters(out, tmp_path / "drop" / "lmt.csv", case)
    assert out.count("metrics-lmt.ost") == lmt_intervals(case.good)
    assert out.duplicates() == 0


# -- event logs ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def event_log(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """The events of a real run of the HTTP test workload: 2 clients x 10 requests."""
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    from http_client import serve

    tmp = tmp_path_factory.mktemp("workload")
    run = serve(tmp, 2, 10, 5)
    assert sum(run.sent.values()) == 20
    return (tmp / "events.jsonl").read_bytes().splitlines()


def requests_of(lines: Sequence[bytes]) -> int:
    """Requests the schema extracts from these event lines, offline."""
    schema = load_event_schema(SCHEMA)
    events = list(parse_events(lines, "x"))
    return len(list(extract(merge_streams([events], schema), schema)))


def ev_shift(line: bytes, ns: int) -> bytes:
    obj = json.loads(line)
    obj["ts"] += ns
    return json.dumps(obj, separators=(",", ":")).encode()


EVENT_DAMAGE: dict[str, Callable[[list[bytes]], Case]] = {
    "last-line-cut": lambda ls: Case(text(ls[:-1]) + ls[-1][:20], good=tuple(ls[:-1])),
    "line-cut": lambda ls: Case(
        text([*ls[:50], ls[50][:30], *ls[50:]]),
        (Bad(51, "not a JSON event: unexpected end of data", ls[50][:30]),),
        tuple(ls),
    ),
    "wrong-type": lambda ls: Case(
        text([*ls[:50], b'{"ts":"soon","ev":"Spin"}', *ls[50:]]),
        (Bad(51, "'ts' must be a non-negative integer of ns, not 'soon'"),),
        tuple(ls),
    ),
    "garbage-line": lambda ls: Case(
        text([*ls[:50], b"\x00\xff\xfe\x01", *ls[50:]]),
        (Bad(51, "not a JSON event", b"\x00\xff\xfe\x01"),),
        tuple(ls),
    ),
    "2mib-line": lambda ls: Case(
        text([*ls[:50], b'{"ts":' + b"7" * (2 << 20), *ls[50:]]),
        (Bad(51, "not a JSON event"),),
        tuple(ls),
    ),
    "nested-100000-deep": lambda ls: Case(
        text([*ls[:50], b"[" * 100_000 + b"]" * 100_000, *ls[50:]]),
        (Bad(51, "not a JSON event: depth limit exceeded"),),
        tuple(ls),
    ),
    # without a ClockSync event the clock comes from the file's time and its last event: the
    # deeply nested last line must not break that either
    "no-clock-sync-nested-last": lambda ls: Case(
        text([*ls[1:], b"[" * 100_000 + b"]" * 100_000]),
        (Bad(len(ls), "not a JSON event: depth limit exceeded"),),
        tuple(ls[1:]),
    ),
    "empty-file": lambda ls: Case(b""),
    "clock-back": lambda ls: Case(
        text([*ls[:80], *(ev_shift(x, -5 * 10**9) for x in ls[80:])]),
        good=tuple([*ls[:80], *(ev_shift(x, -5 * 10**9) for x in ls[80:])]),
    ),
    "clock-forward": lambda ls: Case(
        text([*ls[:80], *(ev_shift(x, 3600 * 10**9) for x in ls[80:])]),
        good=tuple([*ls[:80], *(ev_shift(x, 3600 * 10**9) for x in ls[80:])]),
    ),
    "out-of-order": lambda ls: Case(
        text([*ls[:40], *ls[100:120], *ls[40:100], *ls[120:]]),
        good=tuple([*ls[:40], *ls[100:120], *ls[40:100], *ls[120:]]),
    ),
}


@pytest.mark.parametrize("damage", EVENT_DAMAGE)
def test_event_log(
    es_url: str, client: Elasticsearch, tmp_path: Path, event_log: list[bytes], damage: str
) -> None:
    case = EVENT_DAMAGE[damage](event_log)
    out = ingest(es_url, client, tmp_path, "events", {"app.jsonl": case.data}, schema=str(SCHEMA))
    check_letters(out, tmp_path / "drop" / "app.jsonl", case)
    expected = requests_of(case.good) if case.good else 0
    assert expected == (20 if case.good else 0)
    assert out.count("logs-iolens.request") == expected


# -- Darshan logs: binary (whole file) and darshan-parser text -------------------------------------


@pytest.fixture(scope="module")
def good_darshan_files() -> int:
    """File records of the good log put beside each damaged one."""
    return len(analyze_path(str(GOOD_DARSHAN)).files)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (DAMAGED_DARSHAN[:200], "not a readable Darshan log (darshan-util cannot open it)"),
        (DAMAGED_DARSHAN[:708], "the Darshan log's POSIX records are damaged or cut"),
        (DAMAGED_DARSHAN[:5000], "the Darshan log's POSIX records are damaged or cut"),
        (DAMAGED_DARSHAN[:-1], "the Darshan log's STDIO records are damaged or cut"),
        (flipped(DAMAGED_DARSHAN, 0), "not a readable Darshan log (darshan-util cannot open it)"),
        (flipped(DAMAGED_DARSHAN, 8), "not a readable Darshan log (darshan-util cannot open it)"),
        (flipped(DAMAGED_DARSHAN, 500), "the Darshan log's job record is damaged"),
        (flipped(DAMAGED_DARSHAN, 3708), "the Darshan log's file names are damaged or cut"),
        (flipped(DAMAGED_DARSHAN, 10972), "the Darshan log's STDIO records are damaged or cut"),
        (b"\x00" * 4096, "not a readable Darshan log (darshan-util cannot open it)"),
    ],
    ids=[
        "cut-200",
        "cut-708",
        "cut-5000",
        "cut-last-byte",
        "version",
        "magic",
        "job-region",
        "name-region",
        "stdio-region",
        "nul-bytes",
    ],
)
def test_damaged_darshan_log_is_quarantined_whole(
    es_url: str,
    client: Elasticsearch,
    tmp_path: Path,
    good_darshan_files: int,
    data: bytes,
    reason: str,
) -> None:
    # darshan-util crashed the process on most of these (it frees its handle when it cannot
    # read the name records, then was called again; a cut log hit an assertion)
    files = {"bad.darshan": data, "good.darshan": GOOD_DARSHAN.read_bytes()}
    out = ingest(es_url, client, tmp_path, "darshan", files)
    case = Case(data, (Bad(0, reason),), quarantined=True)
    check_letters(out, tmp_path / "drop" / "bad.darshan", case)
    assert out.count("logs-darshan.job") == 1
    assert out.count("logs-darshan.file") == good_darshan_files == 3


@pytest.mark.parametrize("workers", [1, 2])
def test_darshan_log_that_crashes_darshan_util_is_quarantined(
    workers: int, es_url: str, client: Elasticsearch, tmp_path: Path, good_darshan_files: int
) -> None:
    # A byte-swapped (ppc64) log with its name map's offset damaged makes darshan-util fail
    # an assertion (SIGABRT) in the process that reads it. With worker processes that is a
    # worker: the log is read again alone, crashes again, and is quarantined; the process
    # running the pipeline must never read it itself.
    src = SHARED / "darshan-logs" / "release_logs" / "mpi-io-test-ppc64-3.1.8.darshan"
    data = flipped(src.read_bytes(), 24, 4)
    files = {"bad.darshan": data, "good.darshan": GOOD_DARSHAN.read_bytes()}
    d = tmp_path / "drop"
    d.mkdir()
    for name, content in files.items():
        (d / name).write_bytes(content)
    settings = make_settings(es_url, tmp_path, "darshan")
    settings = settings.model_copy(
        update={"darshan": settings.darshan.model_copy(update={"workers": workers})}
    )
    with MainJob(settings, client) as job:
        summary = job.run_once()
    [letter] = DeadLetters(tmp_path / "state" / "deadletter").iter_inputs()
    assert (letter.path, letter.line_no) == (str(d / "bad.darshan"), 0)
    assert letter.reason == "darshan-util crashed twice reading this log: it is damaged"
    assert summary.bad_files == 1
    ns = settings.elasticsearch.namespace
    assert summary.docs[f"logs-darshan.job-{ns}"]["indexed"] == 1
    assert summary.docs[f"logs-darshan.file-{ns}"]["indexed"] == good_darshan_files


def darshan_dump() -> list[bytes]:
    """``sample.darshan`` as ``darshan-parser`` prints it (header lines, then one
    tab-separated line per counter; reference/darshan-iominer.md 4), its POSIX module only."""
    from pipeline.formats.darshan.read import read_darshan

    log = read_darshan(darshan_input("sample.darshan"))
    out = [
        f"# darshan log version: {log.version}",
        f"# exe: {log.exe}",
        f"# uid: {log.uid}",
        f"# jobid: {log.jobid}",
        f"# start_time: {int(log.start_s)}",
        f"# end_time: {int(log.end_s)}",
        f"# nprocs: {log.nprocs}",
        f"# run time: {log.run_time_s:.4f}",
    ]
    t = log.tables["POSIX"]
    for i in range(len(t)):
        rid, rank = int(t.ids[i]), int(t.ranks[i])
        tail = f"{log.names.get(rid, '')}\t/scratch\tlustre"
        out += [
            f"POSIX\t{rank}\t{rid}\t{c}\t{int(t.counters[i, j])}\t{tail}"
            for j, c in enumerate(t.counter_names)
        ]
        out += [
            f"POSIX\t{rank}\t{rid}\t{c}\t{t.fcounters[i, j]:.6f}\t{tail}"
            for j, c in enumerate(t.fcounter_names)
        ]
    return [x.encode() for x in out]


DUMP = darshan_dump()
"""8 header lines, then 81 counter lines (lines 9-89) of the one POSIX record."""


def dump_value(i: int, value: bytes) -> list[bytes]:
    """The dump with the value of line ``i + 1`` replaced."""
    return [*DUMP[:i], field_set(DUMP[i], b"\t", 4, value), *DUMP[i + 1 :]]


@pytest.mark.parametrize(
    ("lines", "line", "reason"),
    [
        (dump_value(20, b"inf"), 21, "value 'inf' is not a finite number below 2^63"),
        (dump_value(20, b"nan"), 21, "value 'nan' is not a finite number below 2^63"),
        (dump_value(20, b"1e300"), 21, "value '1e300' is not a finite number below 2^63"),
        (dump_value(20, b"many"), 21, "value 'many' is not a number"),
        (
            [*DUMP[:20], field_set(DUMP[20], b"\t", 2, b"-5"), *DUMP[21:]],
            21,
            "record id '-5' is not a 64-bit integer",
        ),
        ([*DUMP[:6], b"# nprocs: 1e300", *DUMP[7:]], 7, "nprocs '1e300' is not a whole number"),
        ([*DUMP[:4], b"# start_time: 1e300", *DUMP[5:]], 5, "start_time '1e300' is beyond"),
        ([*DUMP[:40], DUMP[40][:12], *DUMP[41:]], 41, "expected 8 tab-separated fields, found 3"),
        ([*DUMP[:40], b"\x00\xff\xfe\x01", *DUMP[40:]], 41, "expected 8 tab-separated fields"),
        ([b"# a comment", *DUMP[8:]], 2, "not darshan-parser output: no '# darshan log"),
    ],
    ids=[
        "inf",
        "nan",
        "1e300",
        "word",
        "negative-record-id",
        "nprocs-1e300",
        "start-1e300",
        "line-cut",
        "garbage-line",
        "no-header",
    ],
)
def test_damaged_darshan_text_dump_is_quarantined_whole(
    es_url: str,
    client: Elasticsearch,
    tmp_path: Path,
    good_darshan_files: int,
    lines: list[bytes],
    line: int,
    reason: str,
) -> None:
    # a text dump is read whole, like the binary log: a line it cannot take rejects the file
    # (the first 4 cases crashed the analysis before: numbers no int64 holds)
    data = text(lines)
    files = {"dump.darshan": data, "good.darshan": GOOD_DARSHAN.read_bytes()}
    out = ingest(es_url, client, tmp_path, "darshan", files)
    check_letters(
        out, tmp_path / "drop" / "dump.darshan", Case(data, (Bad(line, reason),), quarantined=True)
    )
    assert out.count("logs-darshan.job") == 1
    assert out.count("logs-darshan.file") == good_darshan_files


def test_darshan_text_dump_and_empty_log(
    es_url: str, client: Elasticsearch, tmp_path: Path, good_darshan_files: int
) -> None:
    # the undamaged dump is read (its job and its one POSIX file); an empty file is waited for
    files = {
        "dump.darshan": text(DUMP),
        "empty.darshan": b"",
        "good.darshan": GOOD_DARSHAN.read_bytes(),
    }
    out = ingest(es_url, client, tmp_path, "darshan", files)
    assert (out.summary.bad_files, out.letters) == (0, [])
    assert out.count("logs-darshan.job") == 2
    assert out.count("logs-darshan.file") == good_darshan_files + 1


# -- files growing while read ------------------------------------------------------------------


GROWING: dict[str, tuple[str, str, str]] = {
    "fio-hist": ("randrw_clat_hist.1.log", "metrics-fio.histogram", "fio"),
    "sadf": ("vm_sadf_d.csv", "metrics-sysstat.diskio", "sadf"),
    "slurm": ("sacct.txt", "logs-slurm.job", "slurm"),
    "lmt": ("lmt.csv", "metrics-lmt.ost", "lmt"),
    "events": ("app.jsonl", "logs-iolens.request", "events"),
}
"""Drop type -> file name, data stream, input (the line formats, which are tailed)."""


@pytest.mark.parametrize("drop_type", GROWING)
def test_file_growing_while_read_is_indexed_once(
    es_url: str,
    client: Elasticsearch,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    drop_type: str,
) -> None:
    name, stream, what = GROWING[drop_type]
    lines: list[bytes]
    if what == "events":
        lines, expected = request.getfixturevalue("event_log"), 20
    else:
        lines = {"fio": FIO, "sadf": SADF, "slurm": SACCT, "lmt": LMT}[what]
        expected = {
            "fio": len(FIO),
            "sadf": once_intervals(SADF),
            "slurm": len(SACCT) - 1,
            "lmt": lmt_intervals(LMT),
        }[what]
    k = len(lines) // 2
    partial = lines[k][: len(lines[k]) // 2]
    d = tmp_path / "drop"
    d.mkdir()
    path = d / name
    path.write_bytes(text(lines[:k]) + partial)  # the writer is in the middle of line k + 1
    extra = {"schema": str(SCHEMA)} if drop_type == "events" else {}
    settings = make_settings(es_url, tmp_path, drop_type, **extra)
    with MainJob(settings, client) as job:
        job.once = True
        job.ingest([(path, settings.drops[0])])
        [tail] = job.tails.values()
        assert (job.summary.lines, job.summary.bad_lines) == (k, 0)
        with path.open("ab") as fh:  # ... and finishes it, and writes the rest
            fh.write(lines[k][len(partial) :] + b"\n" + text(lines[k + 1 :]))
        old = path.stat().st_mtime - 60  # an event log then goes quiet
        os.utime(path, (old, old))
        assert job.pump(tail) == len(lines) - k
        summary = job.finish()
    assert (summary.lines, summary.bad_lines, summary.bad_files) == (len(lines), 0, 0)
    assert list(DeadLetters(tmp_path / "state" / "deadletter").iter_inputs()) == []
    out = Outcome(summary, [], {}, client, settings)
    assert out.count(stream) == expected
    assert out.duplicates() == 0


# -- configuration and event schemas -----------------------------------------------------------


CONFIGS: list[Any] = [
    pytest.param(
        b"\xff\xfe\x00 binary", "not UTF-8 text (invalid start byte at byte 0)", id="binary"
    ),
    pytest.param(b"[" * 2000, "not valid YAML: nested too deeply", id="nested-2000-deep"),
    pytest.param(b"drops: [1, 2\n", "not valid YAML: while parsing a flow sequence", id="cut"),
    pytest.param(b"- a list\n", "the top level must be a mapping of keys", id="not-a-mapping"),
    pytest.param(
        b"elasticsearch: http://localhost:9200\n",
        "elasticsearch: Input should be a valid dictionary",
        id="section-of-wrong-type",
    ),
    pytest.param(
        b"fio: {interval_ms: fast}\n",
        "fio.interval_ms: Input should be a valid integer",
        id="value-of-wrong-type",
    ),
    pytest.param(
        b"shipper: {obsrever: polling}\n",
        "shipper.obsrever: Extra inputs are not permitted",
        id="misspelt-key",
    ),
    pytest.param(
        b"drops: [{type: events, path: /tmp}]\n",
        "drops.0: Value error, an events drop needs schema",
        id="events-drop-without-schema",
    ),
    pytest.param(
        b"!!python/object/apply:os.system ['touch PWNED']\n",
        "not valid YAML: could not determine a constructor for the tag",
        id="python-tag",
    ),
]


@pytest.mark.parametrize(("content", "reason"), CONFIGS)
def test_bad_configuration_is_a_config_error_naming_file_and_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: bytes,
    reason: str,
) -> None:
    monkeypatch.chdir(tmp_path)  # where a `touch PWNED` would leave its file
    path = tmp_path / "pipeline.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    assert str(err.value).startswith(f"{path}: ")
    assert reason in str(err.value)
    # the command line says the same in one message, with status 2 and no traceback
    assert main(["--config", str(path), "dlq", "list"]) == 2
    stderr = capsys.readouterr().err
    assert reason in stderr and "Traceback" not in stderr
    assert not (tmp_path / "PWNED").exists()


def test_unreadable_configuration_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "conf.yaml").mkdir()
    with pytest.raises(ConfigError, match=r"conf\.yaml: cannot read the configuration file"):
        load_settings(tmp_path / "conf.yaml", env={})


SCHEMAS: list[Any] = [
    pytest.param(b"\x00\xff binary", "not UTF-8 text (invalid start byte at byte 1)", id="binary"),
    pytest.param(b"events: " + b"[" * 2000, "not valid YAML: nested too deeply", id="nested"),
    pytest.param(b"- ReqStart\n", "a mapping with 'events' is expected", id="not-a-mapping"),
    pytest.param(
        b"events: {ReqStart: {attrs: {conn: {domain: Conn, bind: BIND_START}}}}\n",
        "no event type is the seed (seed: true) of a request",
        id="no-seed",
    ),
    pytest.param(
        b"events: {ReqStart: {seed: true, attrs: {conn: {domain: Conn, bind: GLUE}}}}\n",
        "events.ReqStart.attrs.conn.bind: Input should be 'BIND_START', 'BIND_STOP' or "
        "'BIND_BASIC'",
        id="bad-binding",
    ),
    pytest.param(
        b"events: {ReqStart: {seed: yes please}}\n",
        "events.ReqStart.seed: Input should be a valid boolean",
        id="wrong-type",
    ),
    pytest.param(
        b"events: {ReqStart: {seed: true}}\nsync: [[Fork, task, Start]]\n",
        "sync [Fork, task, Start] names undeclared events ['Fork', 'Start']",
        id="sync-of-undeclared-events",
    ),
    pytest.param(
        b"events: !!python/object/apply:os.system ['touch PWNED']\n",
        "could not determine a constructor for the tag",
        id="python-tag",
    ),
]


@pytest.mark.parametrize(("content", "reason"), SCHEMAS)
def test_bad_event_schema_is_a_config_error_naming_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, reason: str
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "app.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as err:
        load_event_schema(path)
    assert str(err.value).startswith(f"event schema {path}: ")
    assert reason in str(err.value)
    assert not (tmp_path / "PWNED").exists()


def test_events_drop_with_a_bad_schema_stops_the_run_with_a_config_error(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    schema = tmp_path / "app.yaml"
    schema.write_bytes(b"events: {ReqStart: {seed: true, attrs: {conn: {bind: GLUE}}}}\n")
    d = tmp_path / "drop"
    d.mkdir()
    (d / "app.jsonl").write_bytes(b'{"ts":1,"ev":"ReqStart"}\n')
    settings = make_settings(es_url, tmp_path, "events", schema=str(schema))
    with MainJob(settings, client) as job, pytest.raises(ConfigError) as err:
        job.run_once()
    assert str(err.value).startswith(f"event schema {schema}: ")
    assert "events.ReqStart.attrs.conn.domain: Field required" in str(err.value)


# -- iolens dlq list | show | replay -----------------------------------------------------------


def test_dlq_list_show_and_replay(
    es_url: str,
    client: Elasticsearch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # rich tables: one line per row
    ns = f"dlq{uuid.uuid4().hex[:8]}"
    drops = {"slurm": tmp_path / "slurm", "fio-hist": tmp_path / "fio"}
    for d in drops.values():
        d.mkdir()
    # a bad line of each: the fio one quotes rich markup, which must show as it is
    junk = b"[/x] garbage [bold]"
    (drops["fio-hist"] / "a_clat_hist.1.log").write_bytes(text([*FIO[:3], junk, *FIO[3:]]))
    (drops["slurm"] / "sacct.txt").write_bytes(text([*SACCT, b"4478544.9|x"]))
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "elasticsearch": {"url": es_url, "namespace": ns},
                "embedded": {"enabled": False},
                "state_dir": str(tmp_path / "state"),
                "drops": [
                    {"type": "slurm", "path": str(drops["slurm"])},
                    {"type": "fio-hist", "path": str(drops["fio-hist"]), "host": "node01"},
                ],
                "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
                "sink": {"max_retries": 0},
            }
        )
    )
    # The cluster refuses the Slurm documents: a template of a higher priority maps
    # slurm.job.name as a number (a mapping mistake an operator makes and then mends).
    stream = f"logs-slurm.job-{ns}"
    client.indices.put_index_template(
        name=f"conflict-{ns}",
        index_patterns=[stream],
        data_stream={},
        priority=900,
        template={
            "mappings": {
                "properties": {
                    "slurm": {"properties": {"job": {"properties": {"name": {"type": "long"}}}}}
                }
            }
        },
    )
    with MainJob(load_settings(config, env={}), client) as job:
        summary = job.run_once()
    assert summary.bad_lines == 2
    assert summary.docs[stream] == {"indexed": 0, "duplicate": 0, "dead_lettered": 11}
    base = ["--config", str(config)]

    dead = DeadLetters(tmp_path / "state" / "deadletter")
    letters, documents = list(dead.iter_inputs()), list(dead.iter_documents())
    sacct = drops["slurm"] / "sacct.txt"
    fio = drops["fio-hist"] / "a_clat_hist.1.log"
    assert sorted((x.path, x.line_no) for x in letters) == [(str(fio), 4), (str(sacct), 13)]
    assert len(documents) == 11

    assert main([*base, "dlq", "list"]) == 0
    rows = capsys.readouterr().out.splitlines()

    def row(ident: str) -> str:
        [line] = [r for r in rows if f" {ident} " in r]
        return line

    for n, x in enumerate(letters, start=1):
        assert f"{x.path}:{x.line_no}" in row(f"i{n}") and x.reason in row(f"i{n}")
    for n, d in enumerate(documents, start=1):
        assert f"{d.doc.index} " in row(f"d{n}") and f" {d.status} " in row(f"d{n}")
        assert f"{d.error_type}: {d.reason}" in row(f"d{n}")
        assert "failed to parse field [slurm.job.name] of type [long]" in row(f"d{n}")
    # the fio line quotes what rich would take for markup: shown as it is
    assert "starting b'[/x] garbage [bold]'" in "\n".join(rows)

    i = next(n for n, x in enumerate(letters, start=1) if x.path == str(fio))
    assert main([*base, "dlq", "show", f"i{i}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{fio}:4\nstage: parse\n")
    assert f"line ({len(junk)} bytes):\n{junk.decode()}\n" in out
    assert main([*base, "dlq", "show", "d1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{stream} {documents[0].doc.doc_id}\nstatus: 400\n")
    assert json.dumps(documents[0].doc.source, indent=2, default=str) in out

    # the mapping mended (template and index gone), the documents are sent again
    client.indices.delete_index_template(name=f"conflict-{ns}")
    for index in client.indices.get(index=stream):
        client.indices.delete(index=index)
    assert main([*base, "dlq", "replay"]) == 0
    assert "replayed 11 documents" in capsys.readouterr().out
    refresh(client, stream)
    assert client.count(index=stream)["count"] == 11
    assert dead.count() == {"documents": 0, "inputs": 2}
    assert main([*base, "dlq", "replay"]) == 0  # nothing left: nothing sent twice
    assert "replayed 0 documents" in capsys.readouterr().out
