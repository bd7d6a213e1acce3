"""Acknowledgement tracking: when may a file's offset advance?

The design's delivery promise (DESIGN.md, data flow step 5) is that a file's offset in the registry
advances only after Elasticsearch acknowledged every document derived from the bytes before it.
Filebeat does the same with its acker: the registry offset is updated only for events the output
acknowledged (elastic.md §6.1). Acknowledgements arrive out of order (bulk chunks, retries, spool),
so the tracker keeps, per file, the lines read but not yet committed, in reading order, each with
the number of its documents still unacknowledged, and hands out the end of the longest fully
acknowledged prefix.

Pure and in memory: no I/O, no clock; not thread-safe (one owner, or an external lock).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class _Line:
    line_no: int
    end_offset: int
    remaining: int


@dataclass
class _FileAcks:
    lines: deque[_Line] = field(default_factory=deque)
    by_offset: dict[int, _Line] = field(default_factory=dict)
    last_line_no: int = 0
    last_end_offset: int = -1
    outstanding: int = 0


class AckTracker:
    """Per file, the lines read whose documents are not all acknowledged yet.

    A line is identified by its ``end_offset`` (byte offset just past its newline,
    :attr:`pipeline.records.core.LineRef.end_offset`), which is unique within one generation of
    a file.
    """

    def __init__(self) -> None:
        self._files: dict[str, _FileAcks] = {}

    def track(self, file_key: str, line_no: int, end_offset: int, n_docs: int) -> None:
        """Register a line that was read and produced ``n_docs`` documents.

        Lines must be tracked in reading order: ``line_no`` and ``end_offset`` strictly increase per
        file. A line with ``n_docs == 0`` (a header, a record buffered into a later document's
        counts... anything that needs no acknowledgement) is settled at once.

        Raises:
            ValueError: ``n_docs`` is negative, or the line is not after the last tracked line.
        """
        if n_docs < 0:
            raise ValueError(f"n_docs must be >= 0, got {n_docs}")
        state = self._files.setdefault(file_key, _FileAcks())
        if line_no <= state.last_line_no or end_offset <= state.last_end_offset:
            raise ValueError(
                f"{file_key}: line {line_no} ending at {end_offset} is not after the last tracked "
                f"line {state.last_line_no} ending at {state.last_end_offset}"
            )
        line = _Line(line_no, end_offset, n_docs)
        state.lines.append(line)
        state.by_offset[end_offset] = line
        state.last_line_no = line_no
        state.last_end_offset = end_offset
        state.outstanding += n_docs

    def ack(self, file_key: str, end_offset: int) -> None:
        """Settle one document of the line of ``file_key`` that ends at ``end_offset``.

        A document derived from several lines is acknowledged once per line it refers to.

        Raises:
            KeyError: no such line is tracked (unknown file, never tracked, already committed, or
                dropped by :meth:`forget`; a late ack after a truncation is expected to land here).
            ValueError: the line has no unacknowledged document left.
        """
        state = self._files.get(file_key)
        line = state.by_offset.get(end_offset) if state is not None else None
        if state is None or line is None:
            raise KeyError(f"{file_key}: no tracked line ends at offset {end_offset}")
        if line.remaining == 0:
            raise ValueError(
                f"{file_key}: line {line.line_no} ending at {end_offset} was acknowledged more "
                "often than it has documents"
            )
        line.remaining -= 1
        state.outstanding -= 1

    def hold(self, file_key: str, end_offset: int) -> None:
        """One more acknowledgement for the tracked line ending at ``end_offset`` to wait for:
        a document derived from it was made after it was read (a request that ended later).

        Raises:
            KeyError: no such line is tracked, or it was committed already.
        """
        state = self._files.get(file_key)
        line = state.by_offset.get(end_offset) if state is not None else None
        if state is None or line is None:
            raise KeyError(f"{file_key}: no tracked line ends at offset {end_offset}")
        line.remaining += 1
        state.outstanding += 1

    def committable(self, file_key: str) -> tuple[int, int] | None:
        """Pop the longest fully acknowledged prefix of the file's tracked lines.

        Returns:
            ``(end_offset, line_no)`` of the last line of that prefix, to pass to
            :meth:`pipeline.shippers.registry.Registry.commit`; None if the first tracked line is
            still unsettled or nothing is tracked. Each line is returned at most once.
        """
        state = self._files.get(file_key)
        if state is None:
            return None
        last: _Line | None = None
        while state.lines and state.lines[0].remaining == 0:
            last = state.lines.popleft()
            del state.by_offset[last.end_offset]
        return None if last is None else (last.end_offset, last.line_no)

    def outstanding(self, file_key: str) -> int:
        """Documents of ``file_key`` still waiting for an acknowledgement (0 if unknown)."""
        state = self._files.get(file_key)
        return 0 if state is None else state.outstanding

    def pending_lines(self, file_key: str) -> int:
        """Lines of ``file_key`` tracked and not yet returned by :meth:`committable`."""
        state = self._files.get(file_key)
        return 0 if state is None else len(state.lines)

    def forget(self, file_key: str) -> None:
        """Drop everything tracked for ``file_key`` (after a truncation or when it is removed)."""
        self._files.pop(file_key, None)
