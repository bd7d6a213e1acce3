"""Tailing a line format: framing, offsets and cursors, with the format's chain declared in its
package (:class:`LineChain`: decode a line into records, reduce and encode each into documents).

Files are tailed by line (only complete lines; a ``.gz`` file is read whole once complete). The
chain's :meth:`~LineChain.cursor` after each line is stored with it when the line is committed,
so a restart continues exactly there (:meth:`~LineChain.resume`); a document derives from one
line only, and its deterministic id makes a replay a 409. Tables with a header line (Slurm's
``sacct --parsable2``, LMT's CSV) share :class:`TableChain`, which keeps the header in force in
the cursor.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import ClassVar, Protocol
from zoneinfo import ZoneInfo

from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document, LineRef
from pipeline.shippers.interface import Idled, NewFile, Shipper, Tail
from pipeline.shippers.results import NOTHING, BadLine, LineResult, Released
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_lines
from pipeline.sink.documents import DocContext


@dataclass(slots=True)
class Held:
    """What one record settles when its line waits for other than its own documents (a
    reducer holds records across lines: sysstat's open intervals, a request's events).

    Attributes:
        docs: documents the record completes (they may derive from earlier lines).
        pending: acknowledgements the record's line waits for (e.g. 1: the document that will
            hold its sample, or its own hold, released later).
        holds: end offsets of earlier lines that each wait for one more acknowledgement.
        releases: end offsets of earlier lines given one acknowledgement without a document.
    """

    docs: tuple[Document, ...] = ()
    pending: int = 0
    holds: tuple[int, ...] = ()
    releases: tuple[int, ...] = ()


WAITING = Held(pending=1)
"""A record that completes nothing yet, whose line waits for one acknowledgement (never
changed: a chain returns it for every such record)."""


class TailChain:
    """What every chain of a tailed file has: a cursor stored with each committed position,
    resumed after a restart, told of each read, and asked what it lets go of while the file
    is quiet. :meth:`cursor` is the JSON state after the last line (None: none);
    :meth:`resume` continues from one (None: from a file's start)."""

    def cursor(self) -> Mapping[str, object] | None:
        """JSON-able state after the last line decoded and encoded (default: none)."""
        return None

    def resume(self, cursor: Mapping[str, object] | None) -> None:
        """Continue from a state :meth:`cursor` gave (None: start over)."""

    def begin(self, lines: Sequence[bytes], now_ms: float) -> None:
        """Before the lines of one read are decoded (``now_ms``: wall-clock ms)."""

    def idle(self, now_s: float, ctx: DocContext, final: bool) -> Released:
        """What the chain lets go of while no line comes (``final``: the run ends); default:
        nothing, as a chain that holds nothing."""
        return NOTHING


class LineChain(TailChain, ABC):
    """One line format's chain for one file: decode -> reduce -> encode, line by line.

    :meth:`decode` gives a line's records (and :class:`ParseError` values for what it cannot
    read; raising :class:`ParseError` refuses the whole file); :meth:`encode` reduces one
    record and gives the documents it completes or why it is refused (kept in the dead-letter
    area); a chain whose reducer holds records across lines returns :class:`Held` and lets
    go of what it holds while no line comes in :meth:`idle`.
    """

    @abstractmethod
    def decode(self, raw: bytes, line_no: int) -> Iterable[object]:
        """The records of one line (``line_no``: 1-based), or :class:`ParseError` values."""

    @abstractmethod
    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document] | Held | str:
        """The documents one decoded record of the line ``ref`` (starting at byte ``start``)
        completes (:class:`Held`: and the lines they settle), or why it is refused."""


@dataclass
class LineTail:
    """Read state of one file of a line format (a :class:`~pipeline.shippers.interface.Tail`).

    Attributes:
        key: registry key; path: current path.
        chain: the format's chain for this file (a :class:`LineChain`; a :class:`ChunkTail`'s
            is a :class:`ChunkChain`).
        offset: next byte to read; line_no: lines read.
        snapshots: the cursor after each line read but not committed, by its end offset.
        exhausted: a compressed file was read to its end.
    """

    key: str
    path: str
    chain: TailChain
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    snapshots: dict[int, str] = field(default_factory=dict)

    @property
    def compressed(self) -> bool:
        """A ``.gz`` file is read whole once complete."""
        return self.path.endswith(".gz")

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line with the cursor stored with it."""
        self.offset, self.line_no = offset, line_no
        self.chain.resume(json.loads(cursor) if cursor else None)

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        self.offset = self.line_no = 0
        self.chain.resume(None)
        self.snapshots.clear()
        self.exhausted = False

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines (a ``.gz`` file: all remaining lines)."""
        return read_lines(self.path, self.offset, max_bytes)

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for a line (and drop older ones); None if unknown."""
        return pop_snapshot(self.snapshots, end_offset)

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """Each line through the chain: its documents, or a bad-line record.

        Raises:
            ParseError: the chain refuses the whole file (e.g. an fio log whose first record
                matches no bin layout).
        """
        start = self.offset
        chain, snapshots = self.chain, self.snapshots
        assert isinstance(chain, LineChain)
        chain.begin(chunk.lines, created_ms)
        state: object = None
        text = ""
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            line_start, self.offset = start, end
            start = end
            ref = LineRef(self.key, self.path, self.line_no, end)
            res = self._line(chain, raw, ref, line_start, ctx, created_ms)
            now = chain.cursor()
            if now is not state:  # a chain whose state did not change gives the same object
                state = now
                text = "" if now is None else json.dumps(now, separators=(",", ":"))
            snapshots[end] = text
            yield res
        self.offset = chunk.next_offset if chunk.lines else self.offset

    def _line(
        self,
        chain: LineChain,
        raw: bytes,
        ref: LineRef,
        start: int,
        ctx: DocContext,
        created_ms: float,
    ) -> LineResult:
        """One line through the chain: its documents and settlements, or a bad line."""
        docs: list[Document] = []
        bad: ParseError | None = None
        held: list[Held] = []
        for rec in chain.decode(raw, ref.line_no):
            if type(rec) is ParseError:
                bad = rec
                continue
            out = chain.encode(rec, ref, start, ctx, created_ms)
            if isinstance(out, Held):
                held.append(out)
            elif isinstance(out, str):
                bad = ParseError(self.path, ref.line_no, out)
            else:
                docs.extend(out)
        if bad is not None:
            return LineResult(ref, bad=BadLine(ref, raw, bad))
        if not held:
            return LineResult(ref, tuple(docs))
        if len(held) == 1 and not docs:
            h = held[0]
            return LineResult(ref, h.docs, pending=h.pending, holds=h.holds, releases=h.releases)
        return LineResult(
            ref,
            tuple(docs) + tuple(d for h in held for d in h.docs),
            pending=len(docs) + sum(h.pending for h in held),
            holds=tuple(o for h in held for o in h.holds),
            releases=tuple(o for h in held for o in h.releases),
        )


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


class TableChain(LineChain):
    """The chain of a table with a header line: decode with the format's
    :meth:`decoder` under the header in force, reduce and encode with :meth:`encode`. The
    cursor holds the header and the reducer's :meth:`state`.

    Args:
        path: the file; tz: time zone of its local times (``drops[].tz``).
    """

    def __init__(self, path: str, tz: tzinfo = UTC) -> None:
        self.path, self.tz = path, tz
        self._decoder = self.decoder(None)
        self._cursor: tuple[str | None, Mapping[str, object]] | None = None

    @abstractmethod
    def decoder(self, header: str | None) -> TableDecoder:
        """A decoder of :attr:`path` resumed under ``header``."""

    @abstractmethod
    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document] | Held | str:
        """The documents of one decoded record (:class:`Held`: and the lines they settle), or
        why it is refused."""

    def state(self) -> object | None:
        """JSON-able reducer state after the last record (None: the format keeps none)."""
        return None

    def resume_state(self, state: object | None) -> None:
        """Continue from a :meth:`state` (None: a fresh reducer)."""

    def decode(self, raw: bytes, line_no: int) -> Iterable[object]:
        """The line through the decoder."""
        return self._decoder.feed([raw], line_no)

    def cursor(self) -> Mapping[str, object]:
        """``{"header": ..., "reducer": ...}`` (``reducer`` only with a state); the same object
        while neither changed."""
        header, reduced = self._decoder.header_line, self.state()
        if reduced is None and self._cursor is not None and self._cursor[0] is header:
            return self._cursor[1]
        state: dict[str, object] = {"header": header}
        if reduced is not None:
            state["reducer"] = reduced
        self._cursor = (header, state)
        return state

    def resume(self, cursor: Mapping[str, object] | None) -> None:
        """Continue under the cursor's header, from its reducer state."""
        header = (cursor or {}).get("header")
        self._decoder = self.decoder(header if isinstance(header, str) else None)
        self.resume_state((cursor or {}).get("reducer"))


class LineShipper(Shipper):
    """A line format's shipper: each file a :class:`LineTail` running the chain
    :meth:`chain_for` makes for it. Files are exports: a last line without a line end is a line
    at the end of ``iolens run --once``."""

    final_line = True

    tail_type: ClassVar[type[LineTail]] = LineTail
    """The tail that runs the chain (:class:`~pipeline.shippers.chunk_tail.ChunkTail` for a
    format whose chain takes a read at once)."""

    @abstractmethod
    def chain_for(self, file: NewFile) -> TailChain:
        """The format's chain for one file (of the kind :attr:`tail_type` runs)."""

    def open(self, file: NewFile) -> Tail:
        """A tail on the file, resumed from its registry entry."""
        chain = self.chain_for(file)
        state = file.register()
        tail = self.tail_type(file.key, file.path, chain)
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail

    def idle(self, tails: Sequence[Tail], now_s: float, final: bool) -> Iterator[Idled]:
        """What each file's chain lets go of while no line comes (:meth:`LineChain.idle`)."""
        for tail in tails:
            if isinstance(tail, LineTail):
                released = tail.chain.idle(now_s, self.ctx.doc_ctx, final)
                if released is not NOTHING:
                    yield Idled(tail.key, released)


class TableShipper(LineShipper):
    """A table export format's shipper: times in the drop's time zone (``drops[].tz``); the
    format's package gives its :attr:`chain`."""

    chain: ClassVar[type[TableChain]]

    def chain_for(self, file: NewFile) -> LineChain:
        """The format's table chain, in the drop's time zone."""
        return type(self).chain(file.path, ZoneInfo(file.drop.tz))
