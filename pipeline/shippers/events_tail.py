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
the schema's ``timeout_s`` (on the events' clock, advanced by the wall time since the last
line) are flushed, seeded ones as incomplete requests; once the file was not modified for
``timeout_s`` every open request is flushed.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from pipeline.parsers.errors import ParseError
from pipeline.parsers.event_schema import EventSchema
from pipeline.parsers.events import Event, parse_event_line
from pipeline.records import Document, LineRef
from pipeline.reducers.canonical import Canonical, canonical
from pipeline.reducers.request_cluster import Assignment, Clusterer
from pipeline.reducers.request_join import (
    LineHolds,
    ParserStats,
    ReorderQueue,
    Request,
    RequestParser,
)
from pipeline.settings import RequestsSettings
from pipeline.shippers.fio_tail import BadLine, LineResult
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_complete_lines, read_gzip_lines
from pipeline.sink.documents import DocContext
from pipeline.sink.request_documents import (
    CLOCK_EVENT,
    model_documents,
    request_document,
    request_id,
)

log = logging.getLogger(__name__)

EPOCH_NS_MIN = 10**18
"""A ``ts`` at least this large (September 2001 in ns since the epoch) is wall-clock time."""

RECENT_IDS = 1 << 16
"""Request ids a model remembers, so a request read again after a restart is not counted
twice (the replay after a crash is bounded by the schema's timeout)."""


@dataclass(frozen=True)
class Released:
    """What a quiet file let go of: finished requests' documents, and line settlements.

    Attributes:
        docs: documents of the requests flushed.
        holds: end offsets of lines that now wait for one more acknowledgement (one per line a
            document derives from).
        releases: end offsets of lines the parser no longer needs.
    """

    docs: tuple[Document, ...] = ()
    holds: tuple[int, ...] = ()
    releases: tuple[int, ...] = ()


NOTHING = Released()


class WorkloadModel:
    """The workload model of one events drop (seed 002, section 5), kept across runs.

    Requests are placed incrementally (:class:`pipeline.reducers.request_cluster.Clusterer`);
    the model (clusters with their representatives and counters) is saved as JSON at
    ``path`` with every snapshot and when the shipper stops, and continued on the next start.

    Args:
        name: the model's name (the schema file's stem): ``iolens.*.model`` in documents.
        path: where the model is kept.
        settings: threshold and snapshot period.

    Raises:
        ValueError: the file at ``path`` exists but is not a saved model.
    """

    def __init__(self, name: str, path: Path, settings: RequestsSettings) -> None:
        self.name, self.path, self.settings = name, path, settings
        self.clusterer = Clusterer(settings.threshold)
        self.measured: dict[str, float] = {}
        self.recent: dict[str, None] = {}
        self.changed = False
        self.last_snapshot_s: float | None = None
        if path.exists():
            try:
                state = json.loads(path.read_text(encoding="utf-8"))
                self.clusterer = Clusterer.from_state(state["clusterer"])
                self.measured = {str(k): float(v) for k, v in state["measured"].items()}
                self.recent = dict.fromkeys(state["recent"])
            except (OSError, ValueError, KeyError, TypeError) as err:
                raise ValueError(f"{path}: not a saved workload model ({err})") from None
            if self.clusterer.threshold != settings.threshold:
                log.warning(
                    "%s was built with threshold %g; requests.threshold %g applies to new "
                    "clusters only",
                    path,
                    self.clusterer.threshold,
                    settings.threshold,
                )
                self.clusterer.threshold = settings.threshold

    def place(self, request_id: str, form: Canonical) -> tuple[Assignment, bool]:
        """Add one request (canonical form) unless its id was placed already; its cluster,
        distance and outlier flag."""
        if request_id in self.recent:
            a = self.clusterer.nearest(form)
            return a, self.clusterer.is_outlier(a.cluster, a.distance)
        a = self.clusterer.add(form)
        for k, v in form.resources.items():
            self.measured[k] = self.measured.get(k, 0.0) + v
        self.recent[request_id] = None
        if len(self.recent) > RECENT_IDS:
            del self.recent[next(iter(self.recent))]
        self.changed = True
        return a, self.clusterer.is_outlier(a.cluster, a.distance)

    def due(self, now_s: float) -> bool:
        """Whether a snapshot is due: requests were placed since the last one, and
        ``snapshot_s`` has passed (the first one is due at once)."""
        if not self.changed:
            return False
        last = self.last_snapshot_s
        return last is None or now_s - last >= self.settings.snapshot_s

    def snapshot(self, ctx: DocContext, host: str, now_s: float) -> list[Document]:
        """The model's documents now (one per cluster), and the model saved."""
        self.last_snapshot_s = now_s
        self.changed = False
        self.save()
        return list(
            model_documents(
                ctx, host, self.clusterer, self.measured, now_s * 1000, now_s * 1000, self.name
            )
        )

    def save(self) -> None:
        """Write the model to ``path`` (atomically: a temporary file renamed over it)."""
        state = {
            "clusterer": self.clusterer.state(),
            "measured": self.measured,
            "recent": list(self.recent),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, separators=(",", ":")), encoding="utf-8")
        os.replace(tmp, self.path)


@dataclass
class EventsTail:
    """Read state of one event log (the Tail protocol of the main job).

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
        if self.compressed:
            return read_gzip_lines(self.path, self.offset)
        return read_complete_lines(self.path, self.offset, max_bytes)

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
        assert self._parser is not None and self._queue is not None
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            self.offset = end
            ref = LineRef(self.key, self.path, self.line_no, end)
            if not raw.strip():
                self.snapshots[end] = self.cursor()
                yield LineResult(ref)
                continue
            try:
                e = parse_event_line(raw, self.path, self.line_no)
            except ParseError as err:
                self.snapshots[end] = self.cursor()
                yield LineResult(ref, bad=BadLine(ref, raw, err))
                continue
            self._clock(e, chunk)
            self._ends[self.line_no] = end
            requests: list[Request] = []
            for ev in self._queue.push(e):
                requests += self._parser.feed(ev)
                self._holds.drop(ev.line_no)
            out = self._settle(requests, ctx, created_ms)
            self.snapshots[end] = self.cursor()
            yield LineResult(ref, out.docs, pending=1, holds=out.holds, releases=out.releases)
        if chunk.lines:
            self.offset = chunk.next_offset

    def idle(self, now_s: float, ctx: DocContext, *, final: bool = False) -> Released:
        """Let go of what a quiet file holds (see the module docstring).

        Args:
            now_s: wall-clock seconds now.
            final: the run ends (``iolens run --once``, ``ingest``): drain the queue whatever
                its age.
        """
        assert self._parser is not None and self._queue is not None
        quiet_s = now_s - self.last_read_s
        window_s = self.schema.parser.reorder_window_ms / 1000
        requests: list[Request] = []
        if len(self._queue) and (final or quiet_s >= window_s):
            for ev in self._queue.drain():
                requests += self._parser.feed(ev)
                self._holds.drop(ev.line_no)
        if not len(self._queue):
            try:
                modified_s = os.stat(self.path).st_mtime
            except FileNotFoundError:
                modified_s = float("-inf")
            if now_s - modified_s >= self.schema.parser.timeout_s:
                requests += self._parser.close()
            elif self._queue.newest >= 0:
                requests += self._parser.sweep(self._queue.newest + int(max(quiet_s, 0) * 1e9))
        return self._settle(requests, ctx, now_s * 1000)

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
        assignment, outlier = self.model.place(request_id(self.host, r), form)
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
