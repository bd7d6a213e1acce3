"""A bounded FIFO between two pipeline stages, instrumented for service-rate estimation.

Seed 003 (Beard & Chamberlain 2015, section III; reference/magpie-servicerate.md B.2–B.3 step 1)
instruments each end of every queue: the consumer (*head*) counts the items it takes and sets a
flag when a take found the queue empty; the producer (*tail*) counts the items it puts and sets
a flag when a put found the queue full. A monitor fetches and zeroes both pairs once per
sampling period (:meth:`StageQueue.take`) and feeds them to a
:class:`pipeline.reducers.service_rate.ServiceRateEstimator`: the head's counts in periods that
were not read-blocked estimate the consumer's non-blocking service rate, the tail's counts in
periods that were not write-blocked the producer's. Each end also accumulates how long it
waited, so that a period with a short wait can still be used, its rate taken over the time the
stage worked.

The counters are plain integers updated under the queue's own lock, which every put and get
takes anyway, so the instrumentation adds two increments and a flag store per operation; the
monitor takes the same lock to read and zero them, which makes the fetch-and-zero atomic.

Being bounded, the queue is also the back-pressure: a producer that outruns the consumer waits
in :meth:`put`, so the items in flight (and the memory they hold) never exceed ``capacity``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

T = TypeVar("T")
End = Literal["head", "tail"]
"""The consumer's end of a queue (``head``) or the producer's (``tail``)."""


@dataclass(frozen=True)
class EndCounts:
    """One end of a queue over one sampling period.

    Attributes:
        count: items taken (head) or put (tail) in the period.
        blocked: a take found the queue empty (head), or a put found it full (tail).
        waited_s: how long the end waited in the period (head: on an empty queue; tail: on a
            full one, in :meth:`StageQueue.join`, or idle), s by the queue's clock; not
            compared.
    """

    count: int
    blocked: bool
    waited_s: float = field(default=0.0, compare=False)


class StageQueue(Generic[T]):
    """A bounded FIFO of items between a producer and a consumer thread.

    Args:
        capacity: most items held; ``put`` waits while it is full. > 0.
        clock: monotonic seconds (for timeouts).

    Raises:
        ValueError: ``capacity`` is not positive.
    """

    def __init__(self, capacity: int, clock: Callable[[], float] = time.monotonic) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        self.capacity = capacity
        self._items: deque[T] = deque()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._clock = clock
        self._head_count = 0
        self._head_blocked = False
        self._tail_count = 0
        self._tail_blocked = False
        self._unfinished = 0
        self._all_done = threading.Condition(self._lock)
        self._waiting_to_get = 0
        self._waiting_to_put = 0
        self._producer_idle = False
        self._waited_s: dict[End, float] = {"head": 0.0, "tail": 0.0}
        self._wait_since: dict[End, float | None] = {"head": None, "tail": None}
        self._wait_depth: dict[End, int] = {"head": 0, "tail": 0}

    def _wait(self, end: End, begin: bool) -> None:
        """An end starts (``begin``) or stops waiting; nested waits count once. Under the
        lock."""
        now = self._clock()
        if begin:
            if self._wait_depth[end] == 0:
                self._wait_since[end] = now
            self._wait_depth[end] += 1
            return
        self._wait_depth[end] -= 1
        since = self._wait_since[end]
        if self._wait_depth[end] == 0 and since is not None:
            self._waited_s[end] += now - since
            self._wait_since[end] = None

    def _take_waited(self, end: End) -> float:
        """Seconds ``end`` waited since the last call (a wait in progress is split). Under the
        lock."""
        since = self._wait_since[end]
        if since is not None:
            now = self._clock()
            self._waited_s[end] += now - since
            self._wait_since[end] = now
        waited, self._waited_s[end] = self._waited_s[end], 0.0
        return waited

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def put(self, item: T, timeout_s: float | None = None) -> bool:
        """Append ``item``, waiting (up to ``timeout_s``) while the queue is full (the producer
        is then write-blocked for the period).

        Returns:
            True when appended; False when the timeout passed first (nothing appended).
        """
        with self._not_full:
            if len(self._items) >= self.capacity:
                self._tail_blocked = True
                deadline = None if timeout_s is None else self._clock() + timeout_s
                self._waiting_to_put += 1
                self._wait("tail", True)
                try:
                    while len(self._items) >= self.capacity:
                        left = None if deadline is None else deadline - self._clock()
                        if left is not None and left <= 0:
                            return False
                        self._not_full.wait(left)
                finally:
                    self._waiting_to_put -= 1
                    self._wait("tail", False)
            self._items.append(item)
            self._tail_count += 1
            self._unfinished += 1
            self._not_empty.notify()
            return True

    def get_batch(self, max_items: int, timeout_s: float | None = None) -> list[T]:
        """Take up to ``max_items`` items, waiting (up to ``timeout_s``) for the first one.

        A take that finds the queue empty marks the consumer read-blocked for the period.

        Returns:
            The items, oldest first; empty when the timeout passed with nothing to take.
        """
        with self._not_empty:
            if not self._items:
                self._head_blocked = True
                deadline = None if timeout_s is None else self._clock() + timeout_s
                self._waiting_to_get += 1
                self._wait("head", True)
                try:
                    while not self._items:
                        left = None if deadline is None else deadline - self._clock()
                        if left is not None and left <= 0:
                            return []
                        self._not_empty.wait(left)
                finally:
                    self._waiting_to_get -= 1
                    self._wait("head", False)
            n = min(max_items, len(self._items))
            out = [self._items.popleft() for _ in range(n)]
            self._head_count += n
            self._not_full.notify(n)
            return out

    def producer_idle(self, idle: bool) -> None:
        """The producer has no input (True) or works again (False). A period in which it was
        idle is not one of its service: the tail counts as blocked for it (as RaftLib accepts
        arrival samples only while arrivals run)."""
        with self._lock:
            if idle != self._producer_idle:
                self._wait("tail", idle)
            self._producer_idle = idle
            if idle:
                self._tail_blocked = True

    def done(self, n: int) -> None:
        """The consumer finished ``n`` items it took (see :meth:`join`)."""
        with self._lock:
            self._unfinished -= n
            if self._unfinished <= 0:
                self._unfinished = 0
                self._all_done.notify_all()

    def join(self, timeout_s: float | None = None) -> bool:
        """Wait until every item put was taken and reported :meth:`done`; False on timeout."""
        with self._all_done:
            if self._unfinished == 0:
                return True
            # the producer waits for the consumer: for it, as good as a put on a full queue
            self._tail_blocked = True
            self._waiting_to_put += 1
            self._wait("tail", True)
            try:
                return self._all_done.wait_for(lambda: self._unfinished == 0, timeout_s)
            finally:
                self._waiting_to_put -= 1
                self._wait("tail", False)

    def take(self, end: End) -> EndCounts:
        """One end's counts since the last call for that end, fetched and zeroed atomically
        (``head``: items taken, read-blocked; ``tail``: items put, write-blocked) and how long
        it waited. An end waiting at that moment starts the next period blocked too."""
        with self._lock:
            if end == "head":
                out = EndCounts(self._head_count, self._head_blocked, self._take_waited(end))
                self._head_count = 0
                self._head_blocked = self._waiting_to_get > 0
            else:
                out = EndCounts(self._tail_count, self._tail_blocked, self._take_waited(end))
                self._tail_count = 0
                self._tail_blocked = self._waiting_to_put > 0 or self._producer_idle
            return out
