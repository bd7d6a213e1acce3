"""Events put back in timestamp order before the temporal join (seed 002, section 3: the ~1 s
reorder queue per source, then a merge of a machine's sources).

An event of a type with ``start_attr`` (posted at the end of an operation, stamped with its
start) also yields a synthetic ``<ev>Start`` event at that start time, so the join sees the
operation open and close.
"""

from __future__ import annotations

import heapq
import itertools
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Sequence

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.line_holds import LineHolds

BATCH = 4096
"""Events :func:`reorder` pushes at a time."""


class ReorderQueue:
    """One source's events put back in timestamp order (seed 002, 3: the ~1 s reorder queue).

    :meth:`push` returns the events that can no longer be preceded by a later arrival: those
    stamped ``window_ns`` or more before the newest event seen. An event of a type with
    ``start_attr`` (posted at the end of an operation) also queues a synthetic ``<ev>Start``
    event, stamped with that attribute's value and carrying the same line number. Events later
    than the window allows are passed on at the next push, out of order.

    Logs are mostly in order already, so the queue is two: a run of events in timestamp order
    (appended, popped from the front) and a heap of those that came after a later one (and the
    synthetic starts); the earlier of the two heads goes first, ties in order of arrival, so
    the order is that of one heap.

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
        self._run: deque[tuple[int, int, Event]] = deque()
        self._order = itertools.count()
        self._start_attrs = (
            {}
            if schema is None
            else {ev: t.start_attr for ev, t in schema.events.items() if t.start_attr is not None}
        )

    def __len__(self) -> int:
        return len(self._heap) + len(self._run)

    def _queue(self, item: tuple[int, int, Event]) -> None:
        run = self._run
        if not run or run[-1][0] <= item[0]:
            run.append(item)
        else:
            heapq.heappush(self._heap, item)

    def _pop_due(self, due_ns: float) -> list[Event]:
        """The queued events stamped ``due_ns`` or before, in (timestamp, arrival) order."""
        heap, run = self._heap, self._run
        due: list[Event] = []
        while True:
            if run and (not heap or run[0] < heap[0]):
                if run[0][0] > due_ns:
                    return due
                due.append(run.popleft()[2])
            elif heap and heap[0][0] <= due_ns:
                due.append(heapq.heappop(heap)[2])
            else:
                return due

    def push(self, e: Event) -> list[Event]:
        """Queue ``e`` (and its synthetic start); the events now due, in timestamp order."""
        self._queue((e.ts_ns, next(self._order), e))
        if self._holds is not None:
            self._holds.take(e.line_no)
        start_attr = self._start_attrs.get(e.ev)
        if start_attr is not None:
            synthetic = self._synthetic(e, start_attr)
            if synthetic is not None:
                self._queue((synthetic.ts_ns, next(self._order), synthetic))
                if self._holds is not None:
                    self._holds.take(e.line_no)
        if e.ts_ns > self.newest:
            self.newest = e.ts_ns
        return self._pop_due(self.newest - self.window_ns)

    def push_many(self, events: Sequence[Event]) -> list[Event]:
        """Queue ``events`` in turn: the events due after the last of them, in the order
        pushing them one by one (:meth:`push`) would pass them on.

        When none of them comes later than the window allows (stamped at or before the
        newest event seen before it minus the window, or its synthetic start so), that order
        is the (timestamp, arrival) order of the queue and the new events, due up to the newest
        minus the window: one sort of the queue and the new events, as the seed's reorder
        queue over a batch. Otherwise the events are pushed one by one.
        """
        window, start_attrs = self.window_ns, self._start_attrs
        newest = self.newest
        for e in events:  # would any event be passed on out of order?
            due = newest - window
            if e.ts_ns <= due:
                return [d for x in events for d in self.push(x)]
            attr = start_attrs.get(e.ev) if start_attrs else None
            if attr is not None:
                start = e.attrs.get(attr)
                if isinstance(start, int) and not isinstance(start, bool) and start <= due:
                    return [d for x in events for d in self.push(x)]
            if e.ts_ns > newest:
                newest = e.ts_ns
        items = [*self._run, *self._heap]
        order, holds = self._order, self._holds
        for e in events:
            items.append((e.ts_ns, next(order), e))
            if holds is not None:
                holds.take(e.line_no)
            if start_attrs and e.ev in start_attrs:
                synthetic = self._synthetic(e, start_attrs[e.ev])
                if synthetic is not None:
                    items.append((synthetic.ts_ns, next(order), synthetic))
                    if holds is not None:
                        holds.take(e.line_no)
        items.sort(key=_ts_order)
        self.newest = newest
        k = bisect_right(items, newest - window, key=_ts)
        self._run, self._heap = deque(items[k:]), []
        return [item[2] for item in items[:k]]

    @staticmethod
    def _synthetic(e: Event, start_attr: str) -> Event | None:
        """The ``<ev>Start`` event of ``e``, stamped with its ``start_attr`` (None: none)."""
        start = e.attrs.get(start_attr)
        if not isinstance(start, int) or isinstance(start, bool):
            return None
        attrs = {k: v for k, v in e.attrs.items() if k != start_attr}
        return Event(start, f"{e.ev}Start", attrs, e.line_no)

    def drain(self) -> list[Event]:
        """Every queued event, in timestamp order (end of input, or a quiet source)."""
        return self._pop_due(math.inf)


def _ts_order(item: tuple[int, int, Event]) -> tuple[int, int]:
    return item[0], item[1]


def _ts(item: tuple[int, int, Event]) -> int:
    return item[0]


def reorder(
    events: Iterable[Event], window_ns: int, schema: EventSchema | None = None
) -> Iterator[Event]:
    """One source's events in timestamp order through a :class:`ReorderQueue`, pushed
    :data:`BATCH` at a time (:meth:`ReorderQueue.push_many`: what pushing them one by one
    gives)."""
    queue = ReorderQueue(window_ns, schema)
    it = iter(events)
    while batch := list(itertools.islice(it, BATCH)):
        yield from queue.push_many(batch)
    yield from queue.drain()


def merge_streams(streams: Iterable[Iterable[Event]], schema: EventSchema) -> Iterator[Event]:
    """Several sources of one machine (an application log, a kernel log...) as one
    time-ordered stream: each through :func:`reorder` with the schema's window, then merged."""
    window = int(schema.parser.reorder_window_ms * 1e6)
    ordered = [reorder(s, window, schema) for s in streams]
    if len(ordered) == 1:
        return ordered[0]
    return heapq.merge(*ordered, key=lambda e: e.ts_ns)
