"""Tailing a line format a read at a time: for formats whose documents each join many lines
(event logs), a whole read (a *chunk*) is decoded, reduced and settled as one, with one result,
one hold and one cursor, instead of one per line.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from pipeline.parsers.errors import ParseError
from pipeline.records.core import LineRef
from pipeline.shippers.line_tail import Held, LineTail, TailChain
from pipeline.shippers.results import BadLine, LineResult
from pipeline.shippers.tailer import TailChunk
from pipeline.sink.documents import DocContext


class ChunkChain(TailChain, ABC):
    """A line format's chain that takes a whole read at once (a *chunk*: the complete lines of
    one read), for formats whose documents each join many lines (event logs).

    A chunk is settled as one: it is tracked as its last line (:class:`ChunkRead`), waits for
    :attr:`Held.pending` acknowledgements (its own hold, given back through a later chunk's or
    an :meth:`idle`'s ``releases`` once nothing pending derives from its lines), and its end
    offset is committed once they came. Documents hold the chunks they derive from. Bad lines
    are kept in the dead-letter area one by one, the chunk going on without them.
    """

    @abstractmethod
    def take(
        self, read: ChunkRead, ctx: DocContext, created_ms: float
    ) -> tuple[Held, Sequence[ParseError]]:
        """Decode, reduce and encode the chunk ``read``: what it settles (documents completed,
        acknowledgements it waits for, holds and releases of chunks by end offset) and the
        lines it could not read.

        Raises:
            ParseError: the chain refuses the whole file.
        """


@dataclass(frozen=True, slots=True)
class ChunkRead:
    """The complete lines of one read of a file, taken by a :class:`ChunkChain` at once.

    Attributes:
        ref: the chunk's last line and end offset (what the chunk is tracked and held as).
        lines: its lines, without line ends.
        first_line_no: the line number of ``lines[0]`` (1-based).
    """

    ref: LineRef
    lines: Sequence[bytes]
    first_line_no: int


class ChunkTail(LineTail):
    """A :class:`LineTail` whose chain takes a read at once (a :class:`ChunkChain`), in
    pieces of at most :attr:`piece_lines` lines: one result per piece, tracked as its last
    line, with one cursor."""

    piece_lines: ClassVar[int] = 4096
    """Lines the chain takes at once: what a piece's events and documents cost in memory
    (about 400 KiB of event lines) against the per-piece work."""

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """The chunk through the chain a piece at a time: one result standing for each
        piece's lines (its bad lines in :attr:`LineResult.bad_lines`).

        Raises:
            ParseError: the chain refuses the whole file.
        """
        chain = self.chain
        assert isinstance(chain, ChunkChain)
        if not chunk.lines:
            return
        chain.begin(chunk.lines, created_ms)
        n = len(chunk.lines)
        for a in range(0, n, self.piece_lines):
            b = min(a + self.piece_lines, n)
            yield self._piece(chain, chunk, a, b, ctx, created_ms)

    def _piece(
        self,
        chain: ChunkChain,
        chunk: TailChunk,
        a: int,
        b: int,
        ctx: DocContext,
        created_ms: float,
    ) -> LineResult:
        """Lines ``a`` to ``b`` (exclusive) of ``chunk`` through the chain, the tail advanced
        past them."""
        first = self.line_no + 1
        self.line_no += b - a
        end = chunk.end_offsets[b - 1]
        ref = LineRef(self.key, self.path, self.line_no, end)
        held, errors = chain.take(ChunkRead(ref, chunk.lines[a:b], first), ctx, created_ms)
        now = chain.cursor()
        self.snapshots[end] = "" if now is None else json.dumps(now, separators=(",", ":"))
        self.offset = chunk.next_offset if b == len(chunk.lines) else end
        bad = tuple(
            BadLine(
                LineRef(self.key, self.path, e.line_no, chunk.end_offsets[a + e.line_no - first]),
                chunk.lines[a + e.line_no - first],
                e,
            )
            for e in errors
        )
        return LineResult(
            ref,
            held.docs,
            pending=held.pending,
            holds=held.holds,
            releases=held.releases,
            lines=b - a,
            bad_lines=bad,
        )
