"""The chain of an event log: JSON-lines events -> requests (Magpie, seed 002) -> documents,
tailed by line (:class:`~pipeline.shippers.line_tail.LineTail`).

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
file's modification time as the time of its newest event. The clock offset is kept in the
cursor.

A file that stays quiet: after the reorder window its queue is drained; its sub-graphs idle for
the schema's ``timeout_s`` (on the events' clock, advanced by the time since the last line)
are flushed, seeded ones as incomplete requests; once the file was not modified for
``timeout_s`` every open request is flushed. How long the file has been quiet is measured on
the monotonic clock (:class:`~pipeline.shippers.stillness.Stillness`), so a wall clock stepped
forward does not flush requests still being written, nor one stepped back hold them for hours.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence

import orjson

from pipeline.formats.events.decode import parse_event_line
from pipeline.formats.events.encode import CLOCK_EVENT, request_document, request_id
from pipeline.formats.events.workload_model import WorkloadModel
from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document
from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.canonical import canonical
from pipeline.reducers.event_order import ReorderQueue
from pipeline.reducers.line_holds import ChunkHolds, LineHolds
from pipeline.reducers.request_join import ParserStats, RequestParser
from pipeline.reducers.request_record import Request
from pipeline.shippers.chunk_tail import ChunkChain, ChunkRead
from pipeline.shippers.line_tail import Held
from pipeline.shippers.results import NOTHING, Released
from pipeline.shippers.stillness import Stillness
from pipeline.sink.documents import DocContext

log = logging.getLogger(__name__)

EPOCH_NS_MIN = 10**18
"""A ``ts`` at least this large (September 2001 in ns since the epoch) is wall-clock time."""


class EventsChain(ChunkChain):
    """decode -> reorder and join -> encode of one event log, a read at a time (a
    :class:`~pipeline.shippers.chunk_tail.ChunkChain`).

    Args:
        path: the log; host: ``host.name`` of its requests.
        schema: the drop's event schema; model: the drop's workload model.
        monotonic: monotonic seconds (how long the file has been quiet).

    Attributes:
        wall_offset_ns: wall-clock ns minus the log's ``ts`` (None: not known yet).
        last_read_s: when lines were last read (``monotonic`` seconds).
    """

    def __init__(
        self,
        path: str,
        host: str,
        schema: EventSchema,
        model: WorkloadModel,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self.host, self.schema, self.model = path, host, schema, model
        self.monotonic = monotonic
        self.wall_offset_ns: int | None = None
        self.last_read_s = 0.0
        self._still = Stillness()
        self._lines: Sequence[bytes] = ()
        self._cursor: tuple[int | None, dict[str, object]] = (-1, {})
        self._reset_join()

    def _reset_join(self) -> None:
        self._holds = LineHolds()
        self._parser = RequestParser(self.schema, holds=self._holds)
        window = int(self.schema.parser.reorder_window_ms * 1e6)
        self._queue = ReorderQueue(window, self.schema, self._holds)
        self._chunks = ChunkHolds()

    @property
    def stats(self) -> ParserStats:
        """The parser's counters."""
        return self._parser.stats

    def resume(self, cursor: Mapping[str, object] | None) -> None:
        """Continue with the clock offset of a cursor (None: a file's start, joined afresh)."""
        if cursor is None:
            self.wall_offset_ns = None
            self._reset_join()
            return
        offset = cursor.get("wall_offset_ns")
        self.wall_offset_ns = offset if isinstance(offset, int) else None

    def cursor(self) -> Mapping[str, object]:
        """The clock offset (and the host)."""
        if self._cursor[0] != self.wall_offset_ns:
            self._cursor = (
                self.wall_offset_ns,
                {"wall_offset_ns": self.wall_offset_ns, "host": self.host},
            )
        return self._cursor[1]

    def begin(self, lines: Sequence[bytes], now_ms: float) -> None:
        """Lines were read from the file at ``now_ms`` (wall clock): its quiet time starts
        now, and its state is seen now (so a clock stepped later does not change its age)."""
        self._lines = lines
        self.last_read_s = self.monotonic()
        self._still_s(now_ms / 1000, self.last_read_s)

    def take(
        self, read: ChunkRead, ctx: DocContext, created_ms: float
    ) -> tuple[Held, Sequence[ParseError]]:
        """Parse the chunk's events, put them in order and join what leaves the reorder queue.
        The chunk waits for its own hold (one acknowledgement, given back through a later
        ``releases`` once none of its lines is held); the documents of the requests finished
        here hold the chunks they derive from. Blank lines are skipped; lines that are not
        events are returned (kept in the dead-letter area)."""
        errors: list[ParseError] = []
        events: list[Event] = []
        clocks: list[int] = []  # where clock events are in ``events``
        path = self.path
        for line_no, raw in enumerate(read.lines, start=read.first_line_no):
            try:
                e = parse_event_line(raw, path, line_no)
            except ParseError as err:
                if raw.strip():
                    errors.append(err)
                continue
            if e.ev == CLOCK_EVENT:
                clocks.append(len(events))
            events.append(e)
        if events and self.wall_offset_ns is None:
            clocks.insert(0, 0)
        self._chunks.open(read.first_line_no, read.ref)
        docs: list[Document] = []
        doc_holds: list[int] = []
        start = 0
        for at in [*clocks, len(events)]:  # each request placed in time by the clock
            requests = self._join(events[start:at])  # offset it completed under
            self._documents(requests, ctx, created_ms, docs, doc_holds)
            if at < len(events):
                self._clock(events[at])
            start = at
        self._chunks.close(len(events))
        releases = self._chunks.release(self._holds.pop_released())
        held = Held(tuple(docs), 1 if events else 0, tuple(doc_holds), tuple(releases))
        return held, errors

    def _join(self, events: Sequence[Event]) -> list[Request]:
        """Put ``events`` in order and join what leaves the reorder queue: the requests
        finished."""
        due = self._queue.push_many(events)
        requests = self._parser.feed_many(due)
        drop = self._holds.drop
        for ev in due:
            drop(ev.line_no)
        return requests

    def _clock(self, e: Event) -> None:
        if e.ev == CLOCK_EVENT and isinstance(e.attrs.get("wall_ns"), int):
            self.wall_offset_ns = int(e.attrs["wall_ns"]) - e.ts_ns
        elif self.wall_offset_ns is None:
            if e.ts_ns >= EPOCH_NS_MIN:
                self.wall_offset_ns = 0
            else:  # the newest line of the read was written at the file's mtime
                last = _last_ts(self._lines)
                mtime_ns = os.stat(self.path).st_mtime_ns
                self.wall_offset_ns = mtime_ns - (last if last is not None else e.ts_ns)

    def idle(self, now_s: float, ctx: DocContext, final: bool) -> Released:
        """Let go of what a quiet file holds (see the module docstring).

        Args:
            now_s: wall-clock seconds now (``event.created`` of what is flushed).
            final: the run ends (``iolens run --once``, ``ingest``): drain the queue whatever
                its age.
        """
        mono_s = self.monotonic()
        quiet_s = mono_s - self.last_read_s
        window_s = self.schema.parser.reorder_window_ms / 1000
        requests: list[Request] = []
        if len(self._queue) and (final or quiet_s >= window_s):
            due = self._queue.drain()
            requests += self._parser.feed_many(due)
            for ev in due:
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
        """The documents of ``requests``, then the chunks whose last held line was released
        (the order matters: a released chunk is forgotten)."""
        docs: list[Document] = []
        holds: list[int] = []
        self._documents(requests, ctx, created_ms, docs, holds)
        released = self._holds.pop_released()
        if not docs and not released:
            return NOTHING
        releases = self._chunks.release(released)
        return Released(tuple(docs), tuple(holds), tuple(releases))

    def _documents(
        self,
        requests: list[Request],
        ctx: DocContext,
        created_ms: float,
        docs: list[Document],
        holds: list[int],
    ) -> None:
        """Append the documents of ``requests`` to ``docs``, and to ``holds`` the end offset of
        each chunk each derives from."""
        for r in requests:
            doc = self._document(r, ctx, created_ms)
            docs.append(doc)
            holds += [ref.end_offset for ref in doc.refs]

    def _document(self, r: Request, ctx: DocContext, created_ms: float) -> Document:
        form = canonical(r, self.schema)
        refs = self._chunks.refs(r.lines)
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


def _last_ts(lines: Sequence[bytes]) -> int | None:
    """The ``ts`` of the last of ``lines`` that has one (orjson: a line nested deeper than
    1024 levels is an error like any line that is not JSON, never a RecursionError)."""
    for raw in reversed(lines):
        try:
            ts = orjson.loads(raw).get("ts")
        except (ValueError, AttributeError):
            continue
        if isinstance(ts, int):
            return ts
    return None
