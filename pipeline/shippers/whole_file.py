"""Reading a whole-file format: framing, offsets and stability, with the format's chain declared
in its package (:class:`FileChain`: how far a file reaches, and the documents of all of it).

A whole file (a Darshan log, a binary sadc file, a ``sadf -j`` document) is read when its size
and modification time have been still for ``stable_s`` (measured by
:class:`~pipeline.shippers.stillness.Stillness`, so a stepped clock neither holds a file back for
hours nor takes one still being copied for finished; a file still changing raises
:class:`NotStable` and is tried again later). The whole file is one pseudo-line for the
registry, ending at its *extent* (:meth:`FileChain.extent`: its size, or the size of what it is
converted to); its offset moves there once every document derived from it is acknowledged. A
file whose extent shrinks was replaced (read again from the start); one that grows is read again
whole when the chain says so (:attr:`FileChain.rereads`). A file the chain cannot read at all
is quarantined whole by the caller (:meth:`WholeFileTail.process` raises the chain's
:class:`ParseError`).
"""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pipeline.parsers.errors import ParseError
from pipeline.shippers.results import LineResult
from pipeline.shippers.stillness import Stillness
from pipeline.shippers.tailer import TailChunk, pop_snapshot
from pipeline.sink.documents import DocContext


class NotStable(EOFError):
    """The file changed less than ``stable_s`` ago (still being written or copied)."""


@dataclass(frozen=True)
class WholeRead:
    """One reading of a whole file, for its chain.

    Attributes:
        key: registry key; path: current path.
        line_no: pseudo-lines counted before this reading (0 on the first).
        extent: where the reading ends (:meth:`FileChain.extent`).
    """

    key: str
    path: str
    line_no: int
    extent: int


class FileChain(ABC):
    """One whole-file format's chain: decode, reduce and encode a file at once."""

    rereads: ClassVar[bool] = False
    """A file that grows after it was read is read again whole (written in place)."""

    def prepare(self, path: str) -> None:  # noqa: B027 (a hook: most formats need none)
        """Start work on a stable file beside the reading of others (a worker pool)."""

    @abstractmethod
    def extent(self, path: str) -> int:
        """How far the file reaches now (bytes, in the chain's coordinates; 0: nothing to read
        yet).

        Raises:
            ParseError: the file cannot be read at all.
            OSError: it is gone or unreadable.
        """

    @abstractmethod
    def encode(self, read: WholeRead, ctx: DocContext, created_ms: float) -> Sequence[LineResult]:
        """What the file holds: each part's documents or bad input, on pseudo-lines ending at
        ``read.extent`` or before (line numbers after ``read.line_no``).

        Raises:
            ParseError: nothing in the file could be read (the caller quarantines it).
        """


@dataclass
class WholeFileTail:
    """Read state of one whole file (a :class:`~pipeline.shippers.interface.Tail`).

    Attributes:
        key: registry key; path: current path.
        chain: the format's chain.
        stable_s: how long the file must be unchanged before it is read (0: read at once).
        clock: wall-clock seconds; monotonic: monotonic seconds (for ``stable_s``).
        offset: the extent read and shipped; line_no: pseudo-lines read.
    """

    key: str
    path: str
    chain: FileChain
    stable_s: float = 0.0
    clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    compressed: bool = True
    snapshots: dict[int, str] = field(default_factory=dict)
    _still: Stillness = field(default_factory=Stillness)
    _rejection: ParseError | None = None

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue from the registry (offset > 0: the file was shipped already)."""
        self.offset, self.line_no = offset, line_no

    def restart(self) -> None:
        """Read again from the start (the file was replaced in place)."""
        self.offset = self.line_no = 0
        self.snapshots.clear()
        self.exhausted = False
        self._rejection = None

    def stable(self) -> bool:
        """Whether the file has been unchanged for ``stable_s``."""
        if self.stable_s <= 0:
            return True
        st = os.stat(self.path)
        state = (st.st_mtime_ns, st.st_size)
        still_s = self._still.still_s(
            state, st.st_mtime, self.stable_s, self.clock(), self.monotonic()
        )
        return still_s >= self.stable_s

    def prefetch(self) -> None:
        """Let the chain start on the file now, if it is stable and not read yet."""
        try:
            if self.offset == 0 and self.stable():
                self.chain.prepare(self.path)
        except OSError:
            pass

    def read(self, max_bytes: int) -> TailChunk:
        """The whole file as one pseudo-line, once (again when it grew and the chain rereads;
        a file the chain cannot read at all: a pseudo-line whose :meth:`process` raises why).

        Raises:
            NotStable: it changed less than ``stable_s`` ago.
            FileNotFoundError: it is gone.
        """
        nothing = TailChunk((), (), self.offset)
        if self.offset == 0 and not self.stable():
            raise NotStable(f"{self.path} changed less than {self.stable_s:g} s ago")
        try:
            extent = self.chain.extent(self.path)
        except ParseError as err:
            if self.offset > 0:
                return nothing
            self._rejection = err
            size = max(os.stat(self.path).st_size, 1)
            return TailChunk((b"",), (size,), size)
        if self.offset > 0 and extent < self.offset:
            return TailChunk((), (), 0, truncated=True)
        if extent == 0 or (self.offset > 0 and (extent == self.offset or not self.chain.rereads)):
            return nothing
        return TailChunk((b"",), (extent,), extent)

    def take_snapshot(self, end_offset: int) -> str | None:
        """Whole files keep no cursor."""
        return pop_snapshot(self.snapshots, end_offset)

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """What the chain makes of the file.

        Raises:
            ParseError: the file cannot be read at all (the caller quarantines it).
        """
        if self._rejection is not None:
            err, self._rejection = self._rejection, None
            raise err
        if not chunk.lines:
            return
        read = WholeRead(self.key, self.path, self.line_no, chunk.next_offset)
        results = self.chain.encode(read, ctx, created_ms)
        self.offset = chunk.next_offset
        for res in results:
            self.line_no = max(self.line_no, res.ref.line_no)
            self.snapshots[res.ref.end_offset] = ""
            yield res
