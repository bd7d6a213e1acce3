"""What a tail makes of the lines it read: documents, bad lines and line settlements.

Every format's tail yields one :class:`LineResult` per line read (see
:class:`pipeline.shippers.interface.Tail`); a tail that holds lines across reads (event logs)
lets go of them later as a :class:`Released`. The delivery code
(:mod:`pipeline.delivery.commit`) turns these into acknowledgements to wait for.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document, LineRef


@dataclass(frozen=True)
class BadLine:
    """A line that could not be parsed, to be kept in the dead-letter area."""

    ref: LineRef
    raw: bytes
    error: ParseError


@dataclass(frozen=True)
class LineResult:
    """What one line produced: its reference, documents, or a bad-line record.

    Attributes:
        ref: the line.
        docs: documents finished at this line (they may refer to earlier lines too).
        bad: the line could not be parsed.
    """

    ref: LineRef
    docs: tuple[Document, ...] = ()
    bad: BadLine | None = None
    pending: int | None = None
    """Acknowledgements the line waits for, when not ``len(docs)``: a line whose sample goes into
    a document finished later (downsampling) waits for that document."""
    holds: tuple[int, ...] = ()
    """End offsets of earlier lines of the file that each wait for one more acknowledgement
    (the documents finished here derive from them: a request's events)."""
    releases: tuple[int, ...] = ()
    """End offsets of earlier lines given one acknowledgement without a document (what held
    them, such as an open request, let go)."""
    lines: int = 1
    """Lines the result stands for: a chunk's (:class:`~pipeline.shippers.chunk_tail.ChunkTail`)
    is tracked as its last line and stands for every line of the read."""
    bad_lines: tuple[BadLine, ...] = ()
    """Lines of a chunk that could not be parsed (the chunk's other lines go on)."""


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
