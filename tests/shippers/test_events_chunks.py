"""An event log read in chunks that end anywhere, with a crash between any two of them: every
request of the reference join (offline, event by event) is delivered, exactly once as
Elasticsearch keeps it (a replay is a 409), and only whole chunks are ever committed."""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.core import Document
from pipeline.records.event_schema import EventSchema, load_event_schema
from tests.shippers.test_events_tail import (
    LOG_PATH,
    SCHEMA_PATH,
    Shipper,
    new_tail,
    offline,
)

RESYNC = (
    b'{"ts":20450677397853,"ev":"ClockSync","pid":2663,"tid":2663,"wall_ns":1795639720135029719}\n'
)
"""A second clock sync, 100 ms later on the wall clock than the first says."""
LINES = [*LOG_PATH.read_bytes().splitlines(keepends=True)[:150]]
LINES.insert(90, RESYNC)
"""The first 150 lines of the recorded server run, the clock synced again at line 91: a dozen
requests, interleaved, some cut off at the end (incomplete, flushed when the file goes
quiet)."""
DATA = b"".join(LINES)


def _schema() -> EventSchema:
    s = load_event_schema(SCHEMA_PATH)
    return s.model_copy(update={"parser": s.parser.model_copy(update={"reorder_window_ms": 20})})


SCHEMA = _schema()


def line_by_line() -> dict[str, object]:
    """``@timestamp`` of each request read one line at a time (placed in time by the clock
    offset in force when it completed)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(DATA)
        ship = Shipper(new_tail(path, SCHEMA, Path(tmp)))
        feed_chunks(ship, list(range(1, len(LINES))), 0)
        ship.idle(os.stat(path).st_mtime + SCHEMA.parser.timeout_s)
        return {d.doc_id: d.source["@timestamp"] for d in ship.docs}


def feed_chunks(ship: Shipper, cuts: list[int], start_line: int) -> list[int]:
    """Lines ``start_line`` .. the end read as chunks ending before each of ``cuts`` (line
    indices) and at the end; the line numbers the chunks end at."""
    ends: list[int] = []
    bounds = [c for c in cuts if c > start_line] + [len(LINES)]
    pos = start_line
    for b in bounds:
        piece = b"".join(LINES[pos:b])
        ship.feed(piece, sum(len(x) for x in LINES[:pos]))
        ends.append(ship.tail.line_no)
        pos = b
    return ends


TIMES = line_by_line()


def test_requests_before_a_clock_sync_keep_the_offset_they_completed_under() -> None:
    first = 1795639720035029719 - 20450568430682  # wall ns - ts of the first sync
    second = 1795639720135029719 - 20450677397853
    with tempfile.TemporaryDirectory() as tmp:
        expected = offline(DATA, str(Path(tmp) / "events.jsonl"), SCHEMA)
    under: list[int] = []
    for rid, r in expected.items():
        got = datetime.fromisoformat(str(TIMES[rid])).timestamp() * 1000
        [offset] = [o for o in (first, second) if abs((r.start_ns + o) / 1e6 - got) < 1]
        under.append(offset)
        assert offset == first or r.end_ns > 20450677397853 - 20_000_000  # window: 20 ms
    assert under.count(first) >= 5 and under.count(second) >= 5


@settings(max_examples=60, deadline=None)
@given(
    cuts=st.lists(st.integers(1, len(LINES) - 1), unique=True, max_size=12).map(sorted),
    crash_after=st.integers(0, 12),
)
def test_any_chunking_and_any_crash_deliver_every_request_once(
    cuts: list[int], crash_after: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = root / "events.jsonl"
        path.write_bytes(DATA)
        expected = offline(DATA, str(path), SCHEMA)
        assert len(expected) >= 10

        first = Shipper(new_tail(path, SCHEMA, root))
        crash = cuts[crash_after] if crash_after < len(cuts) else len(LINES)
        ends = feed_chunks(first, [c for c in cuts if c < crash] + [crash], 0)
        offset, line_no = first.committed
        assert line_no == 0 or line_no in ends  # only whole chunks are committed
        first.chain.model.save()  # then the process dies: what it held is lost

        second = Shipper(new_tail(path, SCHEMA, root))
        second.tail.resume(offset, line_no, first.tail.take_snapshot(offset))
        ends = feed_chunks(second, cuts, line_no)
        assert second.committed[1] in (0, *ends)  # nothing yet, or a chunk's end
        second.idle(os.stat(path).st_mtime + SCHEMA.parser.timeout_s)

        kept: dict[str, Document] = {}
        for d in first.docs + second.docs:
            kept.setdefault(d.doc_id, d)
        assert kept.keys() == expected.keys()
        for rid, r in expected.items():
            got = kept[rid].source["iolens"]["request"]
            assert got["resources"] == r.resources
            assert got["event_count"] == len(r.events)
            assert got["complete"] is r.complete
        assert {k: d.source["@timestamp"] for k, d in kept.items()} == TIMES
        assert second.committed == (len(DATA), len(LINES))
        assert second.acks.pending_lines("k") == 0
