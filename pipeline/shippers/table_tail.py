"""Tailing tables with a header line, appended to by periodic exports (Slurm ``sacct
--parsable2`` output, LMT per-OST CSV): framing, offsets and cursors, with each format's chain
(:class:`TableChain`: decode a row, reduce it, encode its documents) declared in its package.

Files are tailed by line (only complete lines). The cursor stored with each committed line holds
the header in force and the chain's reducer state (LMT: every OST's last counters), so a restart
continues exactly there; a document derives from one line only, and its deterministic id makes
a replay a 409.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import ClassVar, Protocol
from zoneinfo import ZoneInfo

from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document, LineRef
from pipeline.shippers.interface import NewFile, Shipper, Tail
from pipeline.shippers.results import BadLine, LineResult
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_complete_lines
from pipeline.sink.documents import DocContext

log = logging.getLogger(__name__)


class TableDecoder(Protocol):
    """A table's line decoder (:class:`pipeline.parsers.table.HeaderedLines`): records or
    :class:`ParseError` values from lines, remembering the header in force."""

    @property
    def header_line(self) -> str | None:
        """The header in force (its text), None before the first."""
        ...

    def feed(self, lines: Sequence[bytes], first_line_no: int) -> Iterable[object]:
        """Records and :class:`ParseError` values of ``lines``."""
        ...


class TableChain(Protocol):
    """One table format's chain, made per file: decode -> reduce -> encode.

    ``encode`` gives a record's documents (none while a reducer holds it) or the reason it is
    refused (kept in the dead-letter area); ``state``/``resume`` carry the reducer's state in the
    line's cursor (None: the format keeps none).
    """

    def decoder(self, path: str, header: str | None, tz: tzinfo) -> TableDecoder:
        """A decoder of the file at ``path``, resumed under ``header``."""
        ...

    def encode(
        self, record: object, ref: LineRef, ctx: DocContext, created_ms: float
    ) -> list[Document] | str:
        """The documents of one decoded record, or why it is refused."""
        ...

    def state(self) -> object | None:
        """JSON-able reducer state after the last record (None: no state)."""
        ...

    def resume(self, state: object | None) -> None:
        """Continue from a state :meth:`state` gave."""
        ...


@dataclass
class TableTail:
    """Read state of one table export (a :class:`~pipeline.shippers.interface.Tail`).

    Attributes:
        key: registry key; path: current path.
        chain: a factory of the format's chain (a new one on a restart).
        tz: time zone of the local times in the file (sacct prints the host's local time; LMT
            stores the database server's).
        offset: next byte to read; line_no: lines read.
    """

    key: str
    path: str
    chain: Callable[[], TableChain]
    tz: tzinfo
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    compressed: bool = False
    snapshots: dict[int, str] = field(default_factory=dict)
    _decoder: TableDecoder | None = None
    _chain: TableChain | None = None

    @property
    def _steps(self) -> TableChain:
        if self._chain is None:
            self._chain = self.chain()
        return self._chain

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line with the cursor stored with it."""
        self.offset, self.line_no = offset, line_no
        state = json.loads(cursor) if cursor else {}
        self._decoder = self._steps.decoder(self.path, state.get("header"), self.tz)
        self._steps.resume(state.get("reducer"))

    def cursor(self) -> str:
        """JSON state after the last line processed: the header and the reducer's state."""
        header = self._decoder.header_line if self._decoder else None
        state: dict[str, object] = {"header": header}
        reduced = self._steps.state()
        if reduced is not None:
            state["reducer"] = reduced
        return json.dumps(state)

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        self.offset = self.line_no = 0
        self._decoder = self._chain = None
        self.snapshots.clear()
        self.exhausted = False

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines."""
        return read_complete_lines(self.path, self.offset, max_bytes)

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for a line (and drop older ones)."""
        return pop_snapshot(self.snapshots, end_offset)

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """Each line through the chain: its documents, or a bad-line record."""
        if self._decoder is None:
            self._decoder = self._steps.decoder(self.path, None, self.tz)
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            self.offset = end
            ref = LineRef(self.key, self.path, self.line_no, end)
            docs: list[Document] = []
            bad: ParseError | None = None
            for rec in self._decoder.feed([raw], self.line_no):
                if isinstance(rec, ParseError):
                    bad = rec
                    continue
                out = self._steps.encode(rec, ref, ctx, created_ms)
                if isinstance(out, str):
                    bad = ParseError(self.path, self.line_no, out)
                else:
                    docs.extend(out)
            self.snapshots[end] = self.cursor()
            if bad is not None:
                yield LineResult(ref, bad=BadLine(ref, raw, bad))
            else:
                yield LineResult(ref, tuple(docs))


class TableShipper(Shipper):
    """A table export format's shipper: times in the drop's time zone (``drops[].tz``); the
    format's package gives its :attr:`chain`."""

    chain: ClassVar[Callable[[], TableChain]]
    final_line = True

    def open(self, file: NewFile) -> Tail:
        """A tail on a table export."""
        state = file.register()
        tail = TableTail(file.key, file.path, type(self).chain, ZoneInfo(file.drop.tz))
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail
