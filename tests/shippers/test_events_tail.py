"""Tailing an event log of the real instrumented server, a read (chunk) at a time: requests as
offline, chunks settled only when their requests are, and a restart from any committed offset
loses no request, wherever the chunks end."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pipeline.delivery.acks import AckTracker
from pipeline.formats.events.chain import EventsChain
from pipeline.formats.events.decode import parse_events
from pipeline.formats.events.encode import request_id
from pipeline.formats.events.workload_model import WorkloadModel
from pipeline.records.core import Document
from pipeline.records.event_schema import EventSchema, load_event_schema
from pipeline.reducers import batch_join
from pipeline.reducers.canonical import canonical
from pipeline.reducers.event_order import merge_streams
from pipeline.reducers.request_join import RequestParser
from pipeline.reducers.request_record import Request
from pipeline.settings import RequestsSettings
from pipeline.shippers.chunk_tail import ChunkTail
from pipeline.shippers.results import LineResult
from pipeline.shippers.tailer import split_complete_lines
from pipeline.sink.documents import DocContext

ROOT = Path(__file__).resolve().parents[2]

SCHEMA_PATH = ROOT / "config" / "schemas" / "http_server.yaml"
LOG_PATH = ROOT / "tests" / "data" / "events" / "http_server_4x25.jsonl"
HOST = "web1"
CTX = DocContext(namespace="test")


@pytest.fixture(scope="module")
def schema() -> EventSchema:
    """The server's schema with a 20 ms reorder window: the run lasts about a second, and
    commits should show within it (the server's lines are at most a few µs out of order)."""
    s = load_event_schema(SCHEMA_PATH)
    return s.model_copy(update={"parser": s.parser.model_copy(update={"reorder_window_ms": 20})})


@pytest.fixture(scope="module")
def log() -> bytes:
    """A recorded run of the instrumented server, 4 clients x 25 requests (provenance in
    tests/data/events/README.md): recorded once, since the clustering of a run recorded while
    the machine is busy depends on the CPU times it measured."""
    return LOG_PATH.read_bytes()


def offline(data: bytes, path: str, schema: EventSchema) -> dict[str, Request]:
    """The log's requests joined offline, event by event (the reference)."""
    events = list(parse_events(data.splitlines(keepends=True), path))
    parser = RequestParser(schema)
    found = [r for e in merge_streams([events], schema) for r in parser.feed(e)]
    return {request_id(HOST, r): r for r in found + parser.close()}


@pytest.fixture(params=[10**9, 1], ids=["event by event", "in arrays"])
def joined(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The tail joins each read event by event, or every piece of it as arrays
    (``RequestParser.feed_many``), however short."""
    monkeypatch.setattr(batch_join, "BATCH_MIN", request.param)
    return str(request.param)


@dataclass
class Shipper:
    """What the main job does with a tail's results, with every document acknowledged at once
    (or never, for documents sent just before a crash)."""

    tail: ChunkTail
    acks: AckTracker = field(default_factory=AckTracker)
    docs: list[Document] = field(default_factory=list)
    committed: tuple[int, int] = (0, 0)
    results: list[LineResult] = field(default_factory=list)
    released: Counter[int] = field(default_factory=Counter)
    """Lines given an acknowledgement without a document, by end offset."""

    @property
    def chain(self) -> EventsChain:
        assert isinstance(self.tail.chain, EventsChain)
        return self.tail.chain

    def feed(self, data: bytes, start: int, now_s: float = 0.0) -> None:
        """Lines read at ``now_s`` (on the one clock the test moves), as one chunk."""
        self.chain.monotonic = lambda: now_s
        chunk = split_complete_lines(data, start)
        for res in self.tail.process(chunk, CTX, now_s * 1000):
            self.take(res)

    def feed_lines(self, data: bytes, start: int, every: int) -> list[int]:
        """``data`` (complete lines from byte ``start``) read ``every`` lines at a time; the
        line numbers each chunk ends at."""
        ends: list[int] = []
        lines = data.splitlines(keepends=True)
        for i in range(0, len(lines), every):
            piece = b"".join(lines[i : i + every])
            self.feed(piece, start)
            start += len(piece)
            ends.append(self.tail.line_no)
        return ends

    def take(self, res: LineResult) -> None:
        """What the tail made of one line: track it, then settle what it finished."""
        waits = len(res.docs) if res.pending is None else res.pending
        self.acks.track(self.tail.key, res.ref.line_no, res.ref.end_offset, waits)
        self.results.append(res)
        self.settle(list(res.docs), res.holds, res.releases)

    def idle(self, now_s: float, final: bool = True) -> None:
        self.chain.monotonic = lambda: now_s  # one clock that moves only as the test says
        rel = self.chain.idle(now_s, CTX, final=final)
        self.settle(list(rel.docs), rel.holds, rel.releases)

    def settle(self, docs: list[Document], holds: tuple[int, ...], rel: tuple[int, ...]) -> None:
        key = self.tail.key
        for end in holds:
            self.acks.hold(key, end)
        for end in rel:
            self.acks.ack(key, end)
            self.released[end] += 1
        for doc in docs:
            self.docs.append(doc)
            for ref in doc.refs:
                self.acks.ack(key, ref.end_offset)
        while (c := self.acks.committable(key)) is not None:
            self.committed = c


def new_tail(path: Path, schema: EventSchema, state: Path) -> ChunkTail:
    model = WorkloadModel("http_server", state / "model.json", RequestsSettings())
    return ChunkTail("k", str(path), EventsChain(str(path), HOST, schema, model))


def chunk_of(ends: list[int], line_no: int) -> int:
    """The last line of the chunk (ending at ``ends``) that holds ``line_no``."""
    return next(e for e in ends if e >= line_no)


def test_tailed_requests_equal_the_offline_ones_and_every_line_is_committed(
    log: bytes, schema: EventSchema, tmp_path: Path, joined: str
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(log)
    expected = offline(log, str(path), schema)
    assert len(expected) == 100
    ship = Shipper(new_tail(path, schema, tmp_path))
    # read in pieces that cut lines, as a tail of a growing file does
    pos = 0
    ends: list[int] = []
    for cut in range(10_000, len(log) + 10_000, 10_000):
        piece = split_complete_lines(log[pos:cut], pos)
        ship.feed(log[pos : piece.next_offset], pos)
        pos = piece.next_offset
        ends.append(ship.tail.line_no)
    assert len(ends) > 5 and len(ship.results) == len(ends)  # one result per read
    assert [r.ref.line_no for r in ship.results] == ends
    assert sum(r.lines for r in ship.results) == log.count(b"\n")
    old = os.stat(path).st_mtime + schema.parser.timeout_s
    ship.idle(old)
    got = {d.doc_id: d.source["iolens"]["request"] for d in ship.docs}
    assert got.keys() == expected.keys()
    for rid, r in expected.items():
        assert got[rid]["resources"] == r.resources
        assert got[rid]["canonical"] == canonical(r, schema).text()
        assert got[rid]["event_count"] == len(r.events)
        assert got[rid]["model"] == "http_server"
    # every line settled: the whole file committed, nothing held any more
    assert ship.committed == (len(log), log.count(b"\n"))
    assert ship.acks.pending_lines("k") == 0
    assert len(ship.chain._holds) == 0
    # a request's document waits for every chunk holding a line it derives from
    for d in ship.docs:
        chunks = sorted({chunk_of(ends, n) for n in expected[d.doc_id].lines})
        assert [ref.line_no for ref in d.refs] == chunks


def test_committed_offset_stops_at_the_oldest_open_request(
    log: bytes, schema: EventSchema, tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(log)
    lines = log.splitlines(keepends=True)
    half = sum(len(x) for x in lines[: len(lines) // 2])
    ship = Shipper(new_tail(path, schema, tmp_path))
    ends = ship.feed_lines(log[:half], 0, every=40)
    offset, line_no = ship.committed
    assert 0 < offset < half
    assert line_no in ends  # only whole chunks are committed
    # the next chunk holds a line of a request not delivered yet (or still queued)
    nxt = ends[ends.index(line_no) + 1]
    assert any(ship.chain._holds.held(n) for n in range(line_no + 1, nxt + 1))


@pytest.mark.parametrize("fraction", [0.13, 0.5, 0.77])
def test_restart_from_the_committed_offset_loses_and_duplicates_nothing(
    log: bytes, schema: EventSchema, tmp_path: Path, fraction: float, joined: str
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(log)
    expected = offline(log, str(path), schema)
    cut = split_complete_lines(log[: int(len(log) * fraction)], 0).next_offset
    first = Shipper(new_tail(path, schema, tmp_path))
    first.feed_lines(log[:cut], 0, every=37)  # then the process dies: what it held is lost
    offset, line_no = first.committed
    assert offset > 0 or fraction < 0.5  # past the first requests, whole chunks are committed
    first.chain.model.save()
    second = Shipper(new_tail(path, schema, tmp_path))
    second.tail.resume(offset, line_no, first.tail.take_snapshot(offset))
    second.feed(log[offset:], offset)
    second.idle(os.stat(path).st_mtime + schema.parser.timeout_s)
    # Elasticsearch keeps the first document of an id (a replay is a 409)
    kept: dict[str, Document] = {}
    for d in first.docs + second.docs:
        kept.setdefault(d.doc_id, d)
    assert kept.keys() == expected.keys()
    for rid, r in expected.items():
        assert kept[rid].source["iolens"]["request"]["resources"] == r.resources
    assert second.committed == (len(log), log.count(b"\n"))
    # the model counts each request once, and both halves share its clusters
    sizes = [cl.size for cl in second.chain.model.clusterer.clusters]
    assert sum(sizes) == len(expected)
    assert len(sizes) == 6


def test_bad_lines_are_reported_and_settled_at_once(schema: EventSchema, tmp_path: Path) -> None:
    data = (
        b'{"ts":1000,"ev":"ClockSync","wall_ns":1700000000000000000}\n'
        b"not json\n"
        b'{"ts":2000,"ev":"Accept","conn":"c1"}\n'
    )
    path = tmp_path / "e.jsonl"
    path.write_bytes(data)
    tail = new_tail(path, schema, tmp_path)
    [res] = tail.process(split_complete_lines(data, 0), CTX, 0.0)
    assert res.ref.line_no == 3 and res.ref.end_offset == len(data) and res.lines == 3
    [bad] = res.bad_lines
    assert bad.error.line_no == 2 and bad.error.path == str(path) and bad.raw == b"not json"
    assert bad.ref.line_no == 2 and bad.ref.end_offset == data.index(b"\n", 60) + 1
    assert res.pending == 1 and not res.docs  # the events' chunk waits for its own hold
    assert isinstance(tail.chain, EventsChain)
    assert tail.chain.wall_offset_ns == 1700000000000000000 - 1000


def test_a_quiet_file_flushes_its_open_request_as_incomplete(
    schema: EventSchema, tmp_path: Path
) -> None:
    data = (
        b'{"ts":1000000,"ev":"Accept","conn":"c1"}\n'
        b'{"ts":2000000,"ev":"Dequeue","conn":"c1","tid":7}\n'
        b'{"ts":3000000,"ev":"ReqStart","conn":"c1","tid":7}\n'
        b'{"ts":4000000,"ev":"Spin","tid":7,"cpu_ns":900000}\n'
    )  # no ReqEnd: the server died
    path = tmp_path / "e.jsonl"
    path.write_bytes(data)
    mtime = os.stat(path).st_mtime
    ship = Shipper(new_tail(path, schema, tmp_path))
    ship.feed(data, 0, now_s=mtime)
    assert not ship.docs and ship.committed == (0, 0)
    ship.idle(mtime + 2, final=False)  # queue drained after the 1 s window; request open
    assert not ship.docs and len(ship.chain._queue or []) == 0
    ship.idle(mtime + schema.parser.timeout_s)  # not modified for the timeout: flushed
    [doc] = ship.docs
    req = doc.source["iolens"]["request"]
    assert req["complete"] is False
    assert req["resources"]["cpu_ns"] == 900000
    assert ship.committed == (len(data), 4)


def test_a_long_read_is_taken_in_pieces_each_settled_as_one(
    log: bytes, schema: EventSchema, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(log)
    monkeypatch.setattr(ChunkTail, "piece_lines", 100)
    ship = Shipper(new_tail(path, schema, tmp_path))
    ship.feed(log, 0)  # one read of the whole log
    n = log.count(b"\n")
    assert [r.ref.line_no for r in ship.results] == [*range(100, n, 100), n]
    offsets = [i + 1 for i, c in enumerate(log) if c == ord("\n")]
    assert [r.ref.end_offset for r in ship.results] == [
        offsets[e - 1] for e in range(100, n, 100)
    ] + [len(log)]
    ship.idle(os.stat(path).st_mtime + schema.parser.timeout_s)
    assert ship.committed == (len(log), n)
    assert {d.doc_id for d in ship.docs} == offline(log, str(path), schema).keys()
