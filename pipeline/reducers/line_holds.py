"""Which input lines are still needed: reference counts that tell a shipper when a line's offset
may be committed (DESIGN.md, delivery promise).

The request parser and the reorder queue hold the lines of events they still keep; a line
whose last hold is dropped is *released*, and once its documents are acknowledged its offset
may be committed.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence

import numpy as np

from pipeline.records.core import LineRef


class LineHolds:
    """Reference counts of input lines (by line number) that are still needed.

    Whoever needs a line takes a hold on it and drops the hold when done; when the last hold of
    a line is dropped the line is *released* (:meth:`pop_released`): nothing derived from it is
    pending any more, so once its documents are acknowledged its offset may be committed.
    """

    def __init__(self) -> None:
        self._n: dict[int, int] = {}
        self._released: list[int] = []

    def take(self, line_no: int) -> None:
        """One more hold on ``line_no``."""
        self._n[line_no] = self._n.get(line_no, 0) + 1

    def drop(self, line_no: int) -> None:
        """Drop one hold on ``line_no``.

        Raises:
            KeyError: ``line_no`` holds nothing.
        """
        n = self._n[line_no] - 1
        if n:
            self._n[line_no] = n
        else:
            del self._n[line_no]
            self._released.append(line_no)

    def passed(self, lines: Iterable[int]) -> None:
        """Lines each held and let go at once (events joined and emitted within one batch,
        :meth:`~pipeline.reducers.request_join.RequestParser.feed_many`): each line no one holds
        is released, once."""
        held, released = self._n, self._released
        seen: set[int] = set()
        for line_no in lines:
            if line_no not in held and line_no not in seen:
                seen.add(line_no)
                released.append(line_no)

    def held(self, line_no: int) -> int:
        """Holds on ``line_no`` (0 when released or never taken)."""
        return self._n.get(line_no, 0)

    def __len__(self) -> int:
        return len(self._n)

    def pop_released(self) -> list[int]:
        """Lines released since the last call, in the order they were released."""
        out, self._released = self._released, []
        return out


class ChunkHolds:
    """Which chunks of a file still have held lines: a chunk (the lines of one read, settled
    as one, :class:`~pipeline.shippers.chunk_tail.ChunkChain`) is released when the last of its
    held lines is.

    Chunks are opened in reading order and closed with the number of lines they hold, which
    must each be released exactly once (:meth:`LineHolds.pop_released`).
    """

    def __init__(self) -> None:
        self._first: list[int] = []  # first line number of each chunk still held, ascending
        self._refs: list[LineRef] = []  # its ref (last line, end offset)
        self._left: list[int] = []  # its lines not released yet

    def __len__(self) -> int:
        return len(self._first)

    def open(self, first_line_no: int, ref: LineRef) -> None:
        """A chunk of lines ``first_line_no`` .. ``ref.line_no`` is being read: its lines may be
        named in :meth:`refs` until :meth:`close`.

        Raises:
            ValueError: the chunk is not after the last one.
        """
        if self._refs and first_line_no <= self._refs[-1].line_no:
            raise ValueError(f"chunk from line {first_line_no} is not after the last one")
        self._first.append(first_line_no)
        self._refs.append(ref)
        self._left.append(0)

    def close(self, lines: int) -> None:
        """The chunk opened last holds ``lines`` of its lines (0: none; it is forgotten)."""
        if lines:
            self._left[-1] = lines
        else:
            del self._first[-1], self._refs[-1], self._left[-1]

    def _index(self, line_no: int) -> int:
        i = bisect_right(self._first, line_no) - 1
        if i < 0 or line_no > self._refs[i].line_no:
            raise KeyError(f"line {line_no} is in no chunk held")
        return i

    def refs(self, lines: Sequence[int]) -> tuple[LineRef, ...]:
        """The refs of the chunks holding ``lines`` (ascending line numbers), each once, in
        order.

        Raises:
            KeyError: a line is in no chunk held.
        """
        out: list[LineRef] = []
        last = -1
        end = -1  # last line of chunk ``last``
        for n in lines:
            if n <= end:
                continue
            last = self._index(n)
            end = self._refs[last].line_no
            out.append(self._refs[last])
        return tuple(out)

    def release(self, lines: Iterable[int]) -> list[int]:
        """Lines released: the end offsets of the chunks that hold no line any more (they are
        forgotten), in the order they were released. Counted a read at a time (the lines
        found in their chunks by one sorted search), as if one by one.

        Raises:
            KeyError: a line is in no chunk held (nothing is counted then).
        """
        at = np.fromiter(lines, dtype=np.int64)
        if not len(at) or not self._first:
            if len(at):
                raise KeyError(f"line {int(at[0])} is in no chunk held")
            return []
        chunk = np.searchsorted(np.asarray(self._first, dtype=np.int64), at, side="right") - 1
        last = np.asarray([ref.line_no for ref in self._refs], dtype=np.int64)
        outside = (chunk < 0) | (at > last[np.maximum(chunk, 0)])
        if outside.any():
            raise KeyError(f"line {int(at[np.argmax(outside)])} is in no chunk held")
        left = np.asarray(self._left, dtype=np.int64)
        counts = np.bincount(chunk, minlength=len(left))
        # a chunk is released by the release that brings it to 0, its left[i]-th
        done = np.flatnonzero((left > 0) & (counts >= left))
        out: list[int] = []
        if len(done):
            by = np.argsort(chunk, kind="stable")  # the releases, by chunk then as given
            begin = np.concatenate(([0], np.cumsum(counts)[:-1]))
            when = by[begin[done] + left[done] - 1]
            out = [self._refs[int(i)].end_offset for i in done[np.argsort(when)]]
        left -= counts
        if not out:  # (a chunk still open, its lines not counted yet, is kept)
            self._left = left.tolist()
            return out
        keep = np.flatnonzero(left).tolist()
        self._first = [self._first[i] for i in keep]
        self._refs = [self._refs[i] for i in keep]
        self._left = left[keep].tolist()
        return out
