"""Conservation of input lines (property-based): every line of a damaged table export is either
indexed (it contributes to a document) or dead-lettered with a reason naming its file and line,
never neither and never both (the delivery promise, DESIGN.md).

A line that carries no data of its own is accounted for by its format's rule, stated here apart
from the pipeline (:func:`silent_lines`) and checked both ways (a line the rule names yields
nothing, every other line a document or a dead letter):

* ``blank``: a line of white space only (neither sacct nor LMT exports have comment lines: a
  ``#`` line is a data row, and a bad one);
* ``header``: a header line that names the required columns (it is kept in the cursor);
* ``priming`` (LMT): an OST's first accepted sample: its counters only start the OST's first
  interval, whose document the OST's next sample closes (``pipeline.formats.lmt.reduce``);
* ``repeat`` (LMT): an exact repeat (time and both counters) of the OST's last sample.

A row under a header that cannot be read (a required column missing, or one twice) is a dead
letter of its own, naming that header's line
(:func:`test_rows_under_a_rejected_header_are_dead_lettered`).

The tail tests read the damaged file through :class:`~pipeline.shippers.line_tail.LineTail`
in chunks of a drawn size, optionally restarting the tail from its stored cursor after each
chunk (a restart between commits). The end-to-end test runs the main job once (``iolens run
--once``) on a drop directory against the session's embedded server.

``sadf -d`` CSV (:func:`test_sadf_tail`) is read line by line too, but its samples become
documents of 15 s intervals: each line is a dead letter, a line that carries no sample, or a
sample that ends in exactly one document, or is held in a last interval still open.

A fio histogram log (:func:`test_fio_tail`) gives one document a line, like the tables, except
that a first line that matches no bin layout refuses the whole file. An event log
(:func:`test_events_tail`) gives requests, each derived from many lines: each event line is held
until nothing pending derives from it, then given back exactly once, whether it went into a
request's document or into none.

Inputs: ``tests/data/slurm/sacct_4478544.txt`` (a header and 11 rows), the first 40 lines of
``tests/data/lmt/snx11025_2018-01-28.csv`` (a header, 24 OSTs at 00:00:00 and 15 at 00:00:05),
the first 20 lines of ``tests/data/fio/samples/node01/randrw_clat_hist.1.log`` and the first 40
of ``tests/data/events/http_server_4x25.jsonl``, damaged by
:func:`tests.reliability.test_fuzz_parsers.damaged`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Literal

import pytest
from elasticsearch import Elasticsearch, NotFoundError
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from pipeline.formats.fio.chain import fio_tail
from pipeline.formats.fio.encode import FioSource
from pipeline.formats.lmt import decode as lmt
from pipeline.formats.lmt.decode import LmtCsvParser, LmtSample
from pipeline.formats.lmt.shipper import LmtChain
from pipeline.formats.slurm import decode as slurm
from pipeline.formats.slurm.shipper import SlurmChain
from pipeline.formats.sysstat.chain import SadfChain
from pipeline.jobs.main_job import MainJob
from pipeline.parsers.errors import ParseError
from pipeline.records.event_schema import EventSchema, load_event_schema
from pipeline.settings import FioSettings
from pipeline.shippers.interface import Tail
from pipeline.shippers.line_tail import LineTail, TableChain
from pipeline.shippers.registry import Registry
from pipeline.shippers.results import LineResult
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.documents import DocContext
from pipeline.sink.search import refresh
from tests.reliability.test_bad_input import make_settings, text
from tests.reliability.test_fuzz_parsers import FIO, FUZZ, LMT, SACCT, SADF, damaged
from tests.shippers.test_events_tail import LOG_PATH, SCHEMA_PATH, Shipper, new_tail

pytestmark = pytest.mark.reliability

BLANK, HEADER, PRIMING, REPEAT = "blank", "header", "priming", "repeat"

CTX = DocContext(namespace="conservation", agent_name="test")
PIPE = settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TableKind = Literal["slurm", "lmt"]
CHAINS: dict[str, type[TableChain]] = {"slurm": SlurmChain, "lmt": LmtChain}
"""The chain each table format's tail runs."""


@dataclass(frozen=True)
class Format:
    """A table format: its tail kind, what a header is and whether one names what it must."""

    kind: TableKind
    is_header: Callable[[str], bool]
    parse_header: Callable[[str, str, int], object]
    """Raises ParseError for a header lacking a required column."""


SLURM = Format("slurm", slurm.is_header, slurm.SacctHeader.parse)
LMT_CSV = Format("lmt", lmt.is_header, lmt.LmtHeader.parse)


def valid_header(fmt: Format, line: str) -> bool:
    """Whether a header line names every required column (once)."""
    try:
        fmt.parse_header(line, "h", 1)
    except ParseError:
        return False
    return True


def lmt_rule(
    header: str, raw: bytes, n: int, last: dict[str, tuple[float, int, int]]
) -> str | None:
    """``priming`` or ``repeat`` for an LMT row (line ``n``, after the header) that carries
    nothing new, None for one that closes an interval or is bad (``last``: each OST's last
    accepted time and counters, updated)."""
    recs = list(LmtCsvParser("x", header, UTC).feed([raw], n))
    if len(recs) != 1 or not isinstance(recs[0], LmtSample):
        return None  # a bad row
    s = recs[0]
    now = (s.ts_s, s.read_bytes, s.write_bytes)
    prev = last.get(s.ost_name)
    if prev is None or s.ts_s > prev[0]:
        last[s.ost_name] = now
        return PRIMING if prev is None else None
    return REPEAT if now == prev else None  # earlier, or the same time with other counters


def decoded(raw: bytes) -> str | None:
    """A line as the table parsers read it (UTF-8, a final CR dropped); None: not text."""
    try:
        return raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError:
        return None


def silent_lines(fmt: Format, lines: Sequence[bytes]) -> dict[int, str]:
    """1-based line number -> the rule by which the line yields neither a document nor a dead
    letter (see the module docstring); lines not named must yield one or the other."""
    out: dict[int, str] = {}
    header: str | None = None
    last: dict[str, tuple[float, int, int]] = {}
    for n, raw in enumerate(lines, start=1):
        line = decoded(raw)
        if line is None:
            continue  # not text: a bad line
        if not line.strip():
            out[n] = BLANK
        elif fmt.is_header(line):
            if valid_header(fmt, line):
                header, out[n] = line, HEADER
            else:
                header = None  # the rows under it are dead letters
        elif header is not None and fmt.kind == "lmt":
            rule = lmt_rule(header, raw, n, last)
            if rule is not None:
                out[n] = rule
    return out


def tail_results(new_tail: Callable[[], Tail], chunk_bytes: int, restart: bool) -> list[LineResult]:
    """Every result of tailing a file to its end in reads of ``chunk_bytes`` (``new_tail``
    makes a tail of it); with ``restart``, a new tail resumes from the stored cursor after
    each read."""
    tail = new_tail()
    tail.resume(0, 0, None)
    out: list[LineResult] = []
    while (chunk := tail.read(chunk_bytes)).lines:
        out += tail.process(chunk, CTX, 0.0)
        if restart:
            offset, line_no = tail.offset, tail.line_no
            cursor = tail.take_snapshot(offset)
            tail = new_tail()
            tail.resume(offset, line_no, cursor)
    return out


def table_tail(path: Path, kind: TableKind) -> Callable[[], Tail]:
    """A maker of tails of the table export ``path``."""
    return lambda: LineTail("key", str(path), CHAINS[kind](str(path), UTC))


def check_line(res: LineResult, n: int, raw: bytes, path: str, rule: str | None) -> None:
    """Line ``n`` is the rule's (nothing), a dead letter naming it, or one document's."""
    assert (res.ref.path, res.ref.line_no) == (path, n)
    assert res.holds == () and res.releases == ()
    waits = len(res.docs) if res.pending is None else res.pending
    if rule is not None:
        assert res.bad is None and res.docs == () and waits == 0, (n, rule, res)
    elif res.bad is not None:
        assert res.docs == () and waits == 0, (n, res)  # never both
        err = res.bad.error
        assert (err.path, err.line_no) == (path, n) and err.reason, err
        assert str(err).startswith(f"{path}:{n}: ")
        assert res.bad.raw == raw and res.bad.ref == res.ref
    else:
        assert len(res.docs) == 1 and waits == 1, (n, raw, res)  # never neither
        assert res.ref in res.docs[0].refs


def file_lines(drawn: list[bytes]) -> list[bytes]:
    """The lines of the file ``drawn`` is written as (a flipped byte may be a newline)."""
    return [part for line in drawn for part in line.split(b"\n")]


def check_results(
    lines: list[bytes], results: list[LineResult], path: Path, silent: dict[int, str]
) -> None:
    """One result per line, each accounted for by :func:`check_line` (``silent``: the lines a
    format's rule names); end offsets frame the lines exactly."""
    assert len(results) == len(lines)
    end = 0
    for n, (raw, res) in enumerate(zip(lines, results, strict=True), start=1):
        end += len(raw) + 1
        assert res.ref.end_offset == end
        check_line(res, n, raw, str(path), silent.get(n))


def check_tail(
    fmt: Format, drawn: list[bytes], path: Path, chunk: int, restart: bool
) -> dict[int, str]:
    """:func:`check_results` on a table export's tail. Returns :func:`silent_lines`; an LMT
    file whose first line is SQLite's magic is refused whole (LMT's database, not its CSV
    export: the pump quarantines the file), and nothing else is."""
    lines = file_lines(drawn)
    path.write_bytes(text(lines))
    if fmt.kind == "lmt" and lines[0].startswith(lmt.SQLITE_MAGIC):
        with pytest.raises(ParseError) as refused:
            tail_results(table_tail(path, fmt.kind), chunk, restart)
        err = refused.value
        assert (err.path, err.line_no) == (str(path), 0) and "an SQLite database" in err.reason
        return {0: "refused whole"}
    silent = silent_lines(fmt, lines)
    check_results(lines, tail_results(table_tail(path, fmt.kind), chunk, restart), path, silent)
    return silent


def events(silent: dict[int, str]) -> None:
    """Tell Hypothesis's statistics which rules an example met."""
    for rule in sorted(set(silent.values())):
        event(rule)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for the tail tests' input files (overwritten by each example)."""
    return tmp_path_factory.mktemp("conservation")


CHUNKS = st.sampled_from([1, 64, 300, 1 << 16])
"""Read budgets: 1 byte reads one line at a time; 64 KiB reads the whole file at once."""


@FUZZ
@given(lines=damaged(SACCT), chunk=CHUNKS, restart=st.booleans())
def test_sacct_tail(scratch: Path, lines: list[bytes], chunk: int, restart: bool) -> None:
    events(check_tail(SLURM, lines, scratch / "sacct.txt", chunk, restart))


@FUZZ
@given(lines=damaged(LMT), chunk=CHUNKS, restart=st.booleans())
def test_lmt_tail(scratch: Path, lines: list[bytes], chunk: int, restart: bool) -> None:
    events(check_tail(LMT_CSV, lines, scratch / "lmt.csv", chunk, restart))


FIO_LINES = FIO[:20]
"""The first 20 lines of a real fio histogram log (10 intervals of reads and writes)."""
HISTOGRAMS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""Fewer examples: each line of a histogram log costs a few ms (its percentiles)."""


@HISTOGRAMS
@given(lines=damaged(FIO_LINES), chunk=CHUNKS, restart=st.booleans())
def test_fio_tail(scratch: Path, lines: list[bytes], chunk: int, restart: bool) -> None:
    """Each line of a damaged histogram log is one document, a dead letter, or blank (a
    ``blank`` line: white space only, which fio never writes); unless its first line with
    data matches no bin layout, when the whole file is refused (the pump quarantines it)."""
    lines = file_lines(lines)
    path = scratch / "randrw_clat_hist.1.log"
    path.write_bytes(text(lines))
    source = FioSource("node01", "1", "randrw", str(path), "fp")
    new_tail = lambda: fio_tail("key", str(path), source, FioSettings(), 0)  # noqa: E731
    silent = {n: BLANK for n, raw in enumerate(lines, start=1) if not raw.strip()}
    try:
        results = tail_results(new_tail, chunk, restart)
    except ParseError as err:
        assert err.path == str(path) and err.reason
        event("refused whole")
        return
    check_results(lines, results, path, silent)
    events(silent)


@pytest.mark.parametrize(
    ("fmt", "lines", "rules", "docs"),
    [
        (SLURM, SACCT, {HEADER: 1}, 11),
        (LMT_CSV, LMT, {HEADER: 1, PRIMING: 24}, 15),
        (
            LMT_CSV,
            [*LMT[:3], b" \r", LMT[2], LMT[0], LMT[26]],
            {BLANK: 1, HEADER: 2, PRIMING: 2, REPEAT: 1},
            1,
        ),
    ],
    ids=["sacct", "lmt", "lmt-blank-repeat-header"],
)
def test_rules_on_known_input(
    scratch: Path, fmt: Format, lines: list[bytes], rules: dict[str, int], docs: int
) -> None:
    # The rules are not vacuous: on undamaged (or hand-made) input they name the lines they
    # should. Hand-made: a blank line, an exact repeat of line 3, the header again, and
    # OST0001 at 00:00:05, which closes its first interval.
    path = scratch / f"known.{fmt.kind}"
    assert Counter(check_tail(fmt, lines, path, 1 << 16, False).values()) == rules
    results = tail_results(table_tail(path, fmt.kind), 1 << 16, False)
    assert sum(len(r.docs) for r in results) == docs


# -- JSON-lines events: lines become requests, held until what derives from them is settled ----


EVENT_LINES = LOG_PATH.read_bytes().splitlines()[:40]
"""The first 40 lines of a recorded run of the instrumented HTTP server (a clock event, then
accepts, dequeues and the first requests of 4 connections)."""


@pytest.fixture(scope="module")
def http_schema() -> EventSchema:
    """The instrumented server's event schema."""
    return load_event_schema(SCHEMA_PATH)


@FUZZ
@given(lines=damaged(EVENT_LINES), chunk=CHUNKS)
def test_events_tail(
    scratch: Path, http_schema: EventSchema, lines: list[bytes], chunk: int
) -> None:
    """The file is read in chunks (one result per read, standing for its lines). Each line of
    a damaged event log is a dead letter of its chunk (and nothing else), blank, or an event;
    a chunk with events is held once and given back once, when nothing pending derives from
    any of its lines, having gone into requests' documents or into none (fragments of no
    request); once the file is quiet, everything is given back and the whole file committed."""
    lines = file_lines(lines)
    path = scratch / "events.jsonl"
    path.write_bytes(text(lines))
    (scratch / "model.json").unlink(missing_ok=True)  # each example starts a new model
    ship = Shipper(new_tail(path, http_schema, scratch))
    while (got := ship.tail.read(chunk)).lines:
        for res in ship.tail.process(got, CTX, 0.0):
            ship.take(res)
    ship.idle(os.stat(path).st_mtime + http_schema.parser.timeout_s)  # quiet: all let go
    ends = [r.ref.line_no for r in ship.results]
    assert sum(r.lines for r in ship.results) == len(lines) and ends[-1] == len(lines)
    assert all(r.ref.line_no - r.lines == e for r, e in zip(ship.results, [0, *ends], strict=False))
    in_docs = Counter(ref.line_no for d in ship.docs for ref in d.refs)
    first = 1
    for res in ship.results:
        chunk_lines = lines[first - 1 : res.ref.line_no]
        bad = {b.ref.line_no: b for b in res.bad_lines}
        assert res.bad is None
        has_events = False
        for n, raw in enumerate(chunk_lines, start=first):
            if not raw.strip():
                assert n not in bad, (n, raw)
                event(BLANK)
            elif n in bad:  # never both
                err = bad[n].error
                assert (err.path, err.line_no) == (str(path), n) and err.reason, err
                assert bad[n].raw == raw
            else:  # never neither
                has_events = True
        end = res.ref.end_offset
        assert res.pending == (1 if has_events else 0), (res, chunk_lines)
        assert ship.released[end] == res.pending, (res, chunk_lines)
        if has_events:
            event("a chunk in a request" if in_docs[res.ref.line_no] else "a chunk in none")
        else:
            assert in_docs[res.ref.line_no] == 0
        first = res.ref.line_no + 1
    assert ship.committed == (len(text(lines)), len(lines))
    assert ship.acks.pending_lines(ship.tail.key) == 0


# -- end to end: the main job, the embedded server and the dead-letter area -------------------


@pytest.fixture(scope="module")
def es(session_client: Elasticsearch) -> Elasticsearch:
    """One client of the session's embedded server for every example of the module."""
    return session_client


@dataclass(frozen=True)
class Run:
    """What one main-job pass over a drop left: indexed documents, dead letters (input lines
    and documents the cluster refused), duplicates and the committed offset."""

    indexed: int
    dead_lines: list[int]
    dead_docs: int
    duplicates: int
    committed: int


def indexed(es: Elasticsearch, index: str) -> int:
    """Documents in ``index`` (0 when it was never created)."""
    refresh(es, index)
    try:
        return int(es.count(index=index)["count"])
    except NotFoundError:
        return 0


def run_main_job(es_url: str, es: Elasticsearch, tmp: Path, data: bytes) -> Run:
    """Run the main job once (``iolens run --once``) on a fresh drop directory holding one
    sacct export, and a fresh state directory and namespace."""
    path = tmp / "drop" / "sacct.txt"
    path.parent.mkdir()
    path.write_bytes(data)
    old = os.stat(path).st_mtime - 60  # the file is stable: written a minute ago
    os.utime(path, (old, old))
    cfg = make_settings(es_url, tmp, "slurm")
    with MainJob(cfg, es) as job:
        summary = job.run_once()
    state = Path(cfg.state_dir)
    letters = DeadLetters(state / "deadletter")
    inputs = list(letters.iter_inputs())
    assert all(x.path == str(path) and x.stage == "parse" and x.reason for x in inputs), inputs
    with Registry(state / "registry.sqlite") as reg:
        committed = max((f.offset for f in reg.all()), default=0)
    return Run(
        indexed(es, f"logs-slurm.job-{cfg.elasticsearch.namespace}"),
        [x.line_no for x in inputs],
        len(list(letters.iter_documents())),
        sum(s["duplicate"] for s in summary.docs.values()),
        committed,
    )


@PIPE
@given(lines=damaged(SACCT))
def test_main_job_sacct(
    es_url: str, es: Elasticsearch, tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    lines = file_lines(lines)
    data = text(lines)
    run = run_main_job(es_url, es, tmp_path_factory.mktemp("run"), data)
    silent = silent_lines(SLURM, lines)
    assert len(set(run.dead_lines)) == len(run.dead_lines)  # no line dead-lettered twice
    assert not set(run.dead_lines) & set(silent)
    assert set(run.dead_lines) <= set(range(1, len(lines) + 1))
    assert run.duplicates == 0  # no two lines made one document
    assert run.indexed + len(run.dead_lines) + run.dead_docs == len(lines) - len(silent)
    assert run.committed == len(data)


# -- rows under a rejected header, a last row without a line end -------------------------------


@pytest.mark.parametrize(
    "header",
    [SACCT[0][:25], SACCT[0] + b"|JobIDRaw"],
    ids=["cut-no-start-end", "column-twice"],
)
def test_rows_under_a_rejected_header_are_dead_lettered(
    es_url: str, es: Elasticsearch, tmp_path: Path, header: bytes
) -> None:
    # b"JobID|JobIDRaw|User|JobNa" lacks Start and End; the other names JobIDRaw twice
    data = text([header, *SACCT[1:]])
    run = run_main_job(es_url, es, tmp_path, data)
    assert run.committed == len(data)
    assert run.indexed == 0
    assert sorted(run.dead_lines) == list(range(1, len(SACCT) + 1))


def test_last_row_without_final_newline_is_said_not_lost(
    es_url: str, es: Elasticsearch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line without a line end may still be being written: ``run --once`` does not read it
    (nor commit past it) but says so, and reads it once it ends."""
    data = b"\n".join(SACCT)  # 12 lines, the last (step 4478544.7) without "\n"
    with caplog.at_level("WARNING", logger="pipeline.jobs.pump"):
        run = run_main_job(es_url, es, tmp_path, data)
    assert run.dead_lines == [] and run.dead_docs == 0
    assert run.indexed == len(SACCT) - 2  # the header, and the last row, not yet
    assert run.committed == len(data) - len(SACCT[-1])
    said = [r.getMessage() for r in caplog.records if "no line end" in r.getMessage()]
    assert said == [
        f"{tmp_path / 'drop' / 'sacct.txt'}: the last line (line 12, bytes {run.committed} to "
        f"{len(data)}) has no line end and is not read: a line still being written ends like "
        "this; if the file is complete, end it with a newline and run again"
    ]


# -- sadf -d CSV: lines become samples, samples become downsampled documents -------------------


SADF_LINES = [b"vm;-1;2026-11-22 04:23:23 UTC;LINUX-RESTART\t(2 CPU)", *SADF]
"""A restart row (as sadf prints a file sadc started at boot), then the first 40 lines of a real
recording."""


def sadf_rule(line: str | None) -> str | None:
    """Lines of ``sadf -d`` that carry no sample: blank, a header naming the disk columns, a
    restart or COM row (interval -1); None for any other line."""
    if line is None:
        return None
    if not line.strip():
        return BLANK
    fields = line.split(";")
    if line.startswith("#"):
        return HEADER if {"DEV", "tps", "%util"} <= {f.strip() for f in fields} else None
    marker = len(fields) >= 4 and fields[1] == "-1"
    if marker and (fields[3].startswith("LINUX-RESTART") or fields[3].startswith("COM ")):
        return "marker"
    return None


@FUZZ
@given(lines=damaged(SADF_LINES), chunk=CHUNKS)
def test_sadf_tail(scratch: Path, lines: list[bytes], chunk: int) -> None:
    """Each line is a dead letter, a line that carries no sample, or one sample held for a
    document; at the run's end every such sample is in exactly one document, or still held in
    an interval that later lines may add to (read again at the next start)."""
    lines = file_lines(lines)
    path = scratch / "vm_sadf_d.csv"
    path.write_bytes(text(lines))
    chain = SadfChain(str(path), 15.0, once=True)
    tail = LineTail("key", str(path), chain)
    results: list[LineResult] = []
    while (got := tail.read(chunk)).lines:
        results += tail.process(got, CTX, 0.0)
    assert [r.ref.line_no for r in results] == list(range(1, len(lines) + 1))
    docs = [d for r in results for d in r.docs] + list(chain.idle(0.0, CTX, final=True).docs)
    in_docs = Counter(ref.line_no for d in docs for ref in d.refs)
    held = Counter(ref.line_no for ref in chain.held())  # in an interval still open
    for n, (raw, res) in enumerate(zip(lines, results, strict=True), start=1):
        rule = sadf_rule(decoded(raw))
        if res.bad is not None:
            assert (res.bad.error.path, res.bad.error.line_no) == (str(path), n)
            assert res.bad.raw == raw and not res.pending and in_docs[n] == 0
        elif res.pending:  # never neither, never twice
            assert res.pending == 1 and in_docs[n] + held[n] == 1, (n, raw)
        else:
            assert rule is not None and in_docs[n] == 0, (n, raw, res)
            event(rule)
