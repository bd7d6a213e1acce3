"""Tailing event logs: JSON-lines events -> requests (Magpie, seed 002) -> documents.

Each file of an ``events`` drop is one machine's stream: its application events and, appended
to the same file, its kernel context switches (``iolens requests convert-perf``). Lines are
parsed as they are tailed, put back in timestamp order by a reorder queue and joined into
requests by the drop's schema (:class:`pipeline.reducers.request_join.RequestParser`); each
finished request becomes a ``logs-iolens.request`` document, placed in the drop's workload model
(:class:`WorkloadModel`), whose snapshots are ``metrics-iolens.workload_model`` documents.

Delivery (DESIGN.md, delivery promise): a request spans many lines and lines of many requests
interleave, so a line is settled only when nothing pending derives from it. Every event line is
held (:class:`pipeline.reducers.request_join.LineHolds`) while it waits in the reorder queue,
while its sub-graph is open and, for a context switch, while its slice runs or is charged to an
open sub-graph; the document of a finished request waits for one acknowledgement per line it
derives from. A line's offset is committed once its holds are released and those documents are
acknowledged, so after a crash the file is read again from the oldest line of any request not
yet delivered. Requests delivered before the crash are found again with the same id (a 409),
and the fragments of them that are read again without their first lines are collected as
unseeded groups, never indexed.

Time: ``ts`` is ns on the machine's own clock. A ``ClockSync`` event (``wall_ns``) pairs it with
the wall clock; without one, a ``ts`` after 2001 in ns is taken as epoch ns, and otherwise the
file's modification time as the time of its newest event. The offset is kept in the cursor.

A file that stays quiet: after the reorder window its queue is drained; its sub-graphs idle for
the schema's ``timeout_s`` (on the events' clock, advanced by the time since the last line)
are flushed, seeded ones as incomplete requests; once the file was not modified for
``timeout_s`` every open request is flushed. How long the file has been quiet is measured on
the monotonic clock (:class:`~pipeline.shippers.stillness.Stillness`), so a wall clock stepped
forward does not flush requests still being written, nor one stepped back hold them for hours.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import orjson

from pipeline.formats.events.decode import parse_event_line
from pipeline.formats.events.encode import CLOCK_EVENT, request_document, request_id
from pipeline.formats.events.workload_model import WorkloadModel
from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document, LineRef
from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.canonical import canonical
from pipeline.reducers.event_order import ReorderQueue
from pipeline.reducers.line_holds import LineHolds
from pipeline.reducers.request_join import ParserStats, RequestParser
from pipeline.reducers.request_record import Request
from pipeline.shippers.results import NOTHING, BadLine, LineResult, Released
from pipeline.shippers.stillness import Stillness
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_lines
from pipeline.sink.documents import DocContext

log = logging.getLogger(__name__)

EPOCH_NS_MIN = 10**18
"""A ``ts`` at least this large (September 2001 in ns since the epoch) is wall-clock time."""


@dataclass
class EventsTail:
    """Read state of one event log (a :class:`~pipeline.shippers.interface.Tail`).

    Attributes:
        key: registry key; path: current path.
        host: ``host.name`` of its requests.
        schema: the drop's event schema.
        model: the drop's workload model.
        offset: next byte to read; line_no: lines read.
    """

    key: str
    path: str
    host: str
    schema: EventSchema
    model: WorkloadModel
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    snapshots: dict[int, str] = field(default_factory=dict)
    kind: str = "events"
    wall_offset_ns: int | None = None
    last_read_s: float = 0.0
    """When lines were last read (``monotonic`` seconds)."""
    monotonic: Callable[[], float] = time.monotonic
    _still: Stillness = field(default_factory=Stillness)
    _holds: LineHolds = field(default_factory=LineHolds)
    _parser: RequestParser | None = None
    _queue: ReorderQueue | None = None
    _ends: dict[int, int] = field(default_factory=dict)
    _cursor: tuple[int | None, str] = (-1, "")

    def __post_init__(self) -> None:
        self._reset_join()

    def _reset_join(self) -> None:
        self._holds = LineHolds()
        self._parser = RequestParser(self.schema, holds=self._holds)
        window = int(self.schema.parser.reorder_window_ms * 1e6)
        self._queue = ReorderQueue(window, self.schema, self._holds)
        self._ends = {}

    @property
    def compressed(self) -> bool:
        """A ``.gz`` log is read whole once complete."""
        return self.path.endswith(".gz")

    @property
    def stats(self) -> ParserStats:
        """The parser's counters."""
        assert self._parser is not None
        return self._parser.stats

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line with the cursor stored with it."""
        self.offset, self.line_no = offset, line_no
        if cursor:
            self.wall_offset_ns = json.loads(cursor).get("wall_offset_ns")

    def cursor(self) -> str:
        """JSON state to store with a committed line: the clock offset."""
        if self._cursor[0] != self.wall_offset_ns:
            state = {"wall_offset_ns": self.wall_offset_ns, "host": self.host}
            self._cursor = (self.wall_offset_ns, json.dumps(state))
        return self._cursor[1]

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        self.offset = self.line_no = 0
        self.wall_offset_ns = None
        self.snapshots.clear()
        self.exhausted = False
        self._reset_join()

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines (a ``.gz`` file: all remaining lines)."""
        return read_lines(self.path, self.offset, max_bytes)

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for a line (and drop older ones)."""
        return pop_snapshot(self.snapshots, end_offset)

    def _clock(self, e: Event, chunk: TailChunk) -> None:
        if e.ev == CLOCK_EVENT and isinstance(e.attrs.get("wall_ns"), int):
            self.wall_offset_ns = int(e.attrs["wall_ns"]) - e.ts_ns
        elif self.wall_offset_ns is None:
            if e.ts_ns >= EPOCH_NS_MIN:
                self.wall_offset_ns = 0
            else:  # the newest line of the chunk was written at the file's mtime
                last = _last_ts(chunk)
                mtime_ns = os.stat(self.path).st_mtime_ns
                self.wall_offset_ns = mtime_ns - (last if last is not None else e.ts_ns)

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """Parse each line, join its events and yield what each line finished.

        Each event line waits for one acknowledgement of its own (its hold, given back through
        a later result's ``releases``).
        """
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            self.offset = end
            yield self._line(
                raw, LineRef(self.key, self.path, self.line_no, end), chunk, ctx, created_ms
            )
        if chunk.lines:
            self.offset = chunk.next_offset

    def _line(
        self, raw: bytes, ref: LineRef, chunk: TailChunk, ctx: DocContext, created_ms: float
    ) -> LineResult:
        """One event line: what the requests it finished produced, or a bad line."""
        assert self._parser is not None and self._queue is not None
        end = ref.end_offset
        if not raw.strip():
            self.snapshots[end] = self.cursor()
            return LineResult(ref)
        try:
            e = parse_event_line(raw, self.path, self.line_no)
        except ParseError as err:
            self.snapshots[end] = self.cursor()
            return LineResult(ref, bad=BadLine(ref, raw, err))
        self._clock(e, chunk)
        self._ends[self.line_no] = end
        requests: list[Request] = []
        for ev in self._queue.push(e):
            requests += self._parser.feed(ev)
            self._holds.drop(ev.line_no)
        out = self._settle(requests, ctx, created_ms)
        self.snapshots[end] = self.cursor()
        return LineResult(ref, out.docs, pending=1, holds=out.holds, releases=out.releases)

    def mark_read(self, now_s: float) -> None:
        """Lines were read from the file at ``now_s`` (wall-clock s): its quiet time starts
        now, and its state is seen now (so a clock stepped later does not change its age)."""
        self.last_read_s = self.monotonic()
        self._still_s(now_s, self.last_read_s)

    def idle(self, now_s: float, ctx: DocContext, *, final: bool = False) -> Released:
        """Let go of what a quiet file holds (see the module docstring).

        Args:
            now_s: wall-clock seconds now (``event.created`` of what is flushed).
            final: the run ends (``iolens run --once``, ``ingest``): drain the queue whatever
                its age.
        """
        assert self._parser is not None and self._queue is not None
        mono_s = self.monotonic()
        quiet_s = mono_s - self.last_read_s
        window_s = self.schema.parser.reorder_window_ms / 1000
        requests: list[Request] = []
        if len(self._queue) and (final or quiet_s >= window_s):
            for ev in self._queue.drain():
                requests += self._parser.feed(ev)
                self._holds.drop(ev.line_no)
        if not len(self._queue):
            if self._still_s(now_s, mono_s) >= self.schema.parser.timeout_s:
                requests += self._parser.close()
            elif self._queue.newest >= 0:
                requests += self._parser.sweep(self._queue.newest + int(max(quiet_s, 0) * 1e9))
        return self._settle(requests, ctx, now_s * 1000)

    def _still_s(self, now_s: float, mono_s: float) -> float:
        """Seconds the file has been unchanged (``timeout_s`` at most on first sight; as
        long as the timeout when it is gone)."""
        timeout_s = self.schema.parser.timeout_s
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return timeout_s
        state = (st.st_mtime_ns, st.st_size)
        return self._still.still_s(state, st.st_mtime, timeout_s, now_s, mono_s)

    def _settle(self, requests: list[Request], ctx: DocContext, created_ms: float) -> Released:
        released = self._holds.pop_released()
        if not requests and not released:
            return NOTHING
        docs: list[Document] = []
        holds: list[int] = []
        for r in requests:
            doc = self._document(r, ctx, created_ms)
            docs.append(doc)
            holds += [ref.end_offset for ref in doc.refs]
        releases = [self._ends.pop(n) for n in released]
        return Released(tuple(docs), tuple(holds), tuple(releases))

    def _document(self, r: Request, ctx: DocContext, created_ms: float) -> Document:
        form = canonical(r, self.schema)
        refs = tuple(LineRef(self.key, self.path, n, self._ends[n]) for n in r.lines)
        rid = request_id(self.host, r)
        assignment, outlier = self.model.place(rid, form)
        return request_document(
            ctx,
            self.host,
            r,
            form,
            self.wall_offset_ns or 0,
            refs,
            created_ms,
            assignment,
            outlier,
            self.model.name,
            rid,
        )


def _last_ts(chunk: TailChunk) -> int | None:
    """The ``ts`` of the chunk's last line that has one (orjson: a line nested deeper than
    1024 levels is an error like any line that is not JSON, never a RecursionError)."""
    for raw in reversed(chunk.lines):
        try:
            ts = orjson.loads(raw).get("ts")
        except (ValueError, AttributeError):
            continue
        if isinstance(ts, int):
            return ts
    return None
