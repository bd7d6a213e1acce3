"""Which input lines are still needed: reference counts that tell a shipper when a line's offset
may be committed (DESIGN.md, delivery promise).

The request parser and the reorder queue hold the lines of events they still keep; a line
whose last hold is dropped is *released*, and once its documents are acknowledged its offset
may be committed.
"""

from __future__ import annotations


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

    def held(self, line_no: int) -> int:
        """Holds on ``line_no`` (0 when released or never taken)."""
        return self._n.get(line_no, 0)

    def __len__(self) -> int:
        return len(self._n)

    def pop_released(self) -> list[int]:
        """Lines released since the last call, in the order they were released."""
        out, self._released = self._released, []
        return out
