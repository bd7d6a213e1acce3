"""Events put back in timestamp order before the temporal join (seed 002, section 3: the ~1 s
reorder queue per source, then a merge of a machine's sources).

An event of a type with ``start_attr`` (posted at the end of an operation, stamped with its
start) also yields a synthetic ``<ev>Start`` event at that start time, so the join sees the
operation open and close.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator

from pipeline.parsers.event_schema import EventSchema
from pipeline.parsers.events import Event
from pipeline.reducers.line_holds import LineHolds


class ReorderQueue:
    """One source's events put back in timestamp order (seed 002, 3: the ~1 s reorder queue).

    :meth:`push` returns the events that can no longer be preceded by a later arrival: those
    stamped ``window_ns`` or more before the newest event seen. An event of a type with
    ``start_attr`` (posted at the end of an operation) also queues a synthetic ``<ev>Start``
    event, stamped with that attribute's value and carrying the same line number. Events later
    than the window allows are passed on at the next push, out of order.

    Args:
        window_ns: the reorder window, ns.
        schema: for ``start_attr``; None: no synthetic events.
        holds: when given, each queued event holds its line until the caller, having fed it
            on, drops the hold.
    """

    def __init__(
        self, window_ns: int, schema: EventSchema | None = None, holds: LineHolds | None = None
    ) -> None:
        self.window_ns = window_ns
        self.schema = schema
        self._holds = holds
        self.newest = -1
        """Timestamp of the newest event pushed, ns (-1 before the first)."""
        self._heap: list[tuple[int, int, Event]] = []
        self._order = itertools.count()
        self._start_attrs = (
            {}
            if schema is None
            else {ev: t.start_attr for ev, t in schema.events.items() if t.start_attr is not None}
        )

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, e: Event) -> list[Event]:
        """Queue ``e`` (and its synthetic start); the events now due, in timestamp order."""
        heapq.heappush(self._heap, (e.ts_ns, next(self._order), e))
        if self._holds is not None:
            self._holds.take(e.line_no)
        start_attr = self._start_attrs.get(e.ev)
        if start_attr is not None:
            start = e.attrs.get(start_attr)
            if isinstance(start, int) and not isinstance(start, bool):
                attrs = {k: v for k, v in e.attrs.items() if k != start_attr}
                synthetic = Event(start, f"{e.ev}Start", attrs, e.line_no)
                heapq.heappush(self._heap, (start, next(self._order), synthetic))
                if self._holds is not None:
                    self._holds.take(e.line_no)
        if e.ts_ns > self.newest:
            self.newest = e.ts_ns
        heap = self._heap
        due_ns = self.newest - self.window_ns
        if heap[0][0] > due_ns:
            return []
        due: list[Event] = []
        while heap and heap[0][0] <= due_ns:
            due.append(heapq.heappop(heap)[2])
        return due

    def drain(self) -> list[Event]:
        """Every queued event, in timestamp order (end of input, or a quiet source)."""
        return [heapq.heappop(self._heap)[2] for _ in range(len(self._heap))]


def reorder(
    events: Iterable[Event], window_ns: int, schema: EventSchema | None = None
) -> Iterator[Event]:
    """One source's events in timestamp order through a :class:`ReorderQueue`."""
    queue = ReorderQueue(window_ns, schema)
    for e in events:
        yield from queue.push(e)
    yield from queue.drain()


def merge_streams(streams: Iterable[Iterable[Event]], schema: EventSchema) -> Iterator[Event]:
    """Several sources of one machine (an application log, a kernel log...) as one
    time-ordered stream: each through :func:`reorder` with the schema's window, then merged."""
    window = int(schema.parser.reorder_window_ms * 1e6)
    ordered = [reorder(s, window, schema) for s in streams]
    return heapq.merge(*ordered, key=lambda e: e.ts_ns)
