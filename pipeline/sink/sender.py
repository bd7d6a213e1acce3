"""The bulk sink on a thread of its own, behind a bounded and instrumented queue.

The main job's thread reads, parses and reduces; the documents it makes go into a
:class:`pipeline.sink.stage_queue.StageQueue` of ``sink.queue_docs`` documents, and a sender
thread takes them out into the :class:`pipeline.sink.bulk.BulkSink` (chunks, retries, spool,
dead letters). The queue is the back-pressure: when Elasticsearch is slower than the reading,
the main thread waits in :meth:`AsyncSink.add`, so the documents in memory stay bounded
however slow the cluster is. Its two ends are what the service-rate monitor samples
(:mod:`pipeline.jobs.service_monitor`, seed 003): the head gives the sink's non-blocking service
rate, the tail the producing stages'.

Acknowledgements come back to the main thread: the sender only records which documents
settled, and :meth:`AsyncSink.poll` (called by the main job between chunks, and by
:meth:`flush`) hands them to ``on_ack`` there, so the registry and the acknowledgement tracker
are only ever touched by the thread that owns them.

When the spool is full (:meth:`BulkSink.full`), the sender takes nothing more from the queue and
retries what the sink holds on the spool's backoff schedule, so reading waits in :meth:`add`
until Elasticsearch takes documents again. That wait ends early when ``stop`` is set (or at
once when ``wait_when_full`` is false, for a one-shot run): :meth:`add` and :meth:`flush` then
let the documents that found no room go unacknowledged (counted in ``unsent``); their lines
are read again from their files next time. The bulk request size follows the sink's
measured service rate (:meth:`AsyncSink.set_rate`): about ``target_bulk_s`` of its work per
request, between ``MIN_BULK_DOCS`` and ``chunk_max_docs``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Unpack

from elasticsearch import Elasticsearch

from pipeline.records.core import Document
from pipeline.settings import SinkSettings
from pipeline.sink.bulk import BulkSink
from pipeline.sink.deadletter import DeadLetters, Rejection
from pipeline.sink.disk import DiskWatch
from pipeline.sink.hooks import SinkHooks, ignore_acks
from pipeline.sink.spool import Spool
from pipeline.sink.stage_queue import StageQueue
from pipeline.sink.stats import StreamStats

log = logging.getLogger(__name__)

MIN_BULK_DOCS = 10
"""Smallest bulk request the rate-based sizing makes."""

_WAKE_S = 0.1
"""How often a wait for room in a full queue looks at whether to give up (s)."""

STALE_S = 3600.0
"""A document not acknowledged this long after :meth:`AsyncSink.add` (spooled during an
outage) is no longer followed for the lag."""


class _Acks:
    """Acknowledgements on their way from the sender thread to the owner's ``on_ack``, and
    the lag of documents from :meth:`AsyncSink.add` to their acknowledgement (s,
    ``time.perf_counter``), followed by the document's identity."""

    def __init__(self, on_ack: Callable[[Sequence[Document]], None]) -> None:
        self.arrived: deque[Sequence[Document]] = deque()
        """Settled documents, appended by the sender thread."""
        self._on_ack = on_ack
        self._added: dict[int, float] = {}
        self._lag = (0, 0.0, 0.0)  # acknowledged, summed and largest lag (s) since take

    def deliver(self) -> None:
        """Hand what arrived to ``on_ack`` (on the calling thread), measuring the lag."""
        while self.arrived:
            docs = self.arrived.popleft()
            self.acknowledged(docs, time.perf_counter())
            self._on_ack(docs)

    def added(self, doc: Document, when: float) -> None:
        """``doc`` was queued at ``when``."""
        self._added[id(doc)] = when

    def forget(self, docs: Sequence[Document]) -> None:
        """``docs`` will not be acknowledged (let go)."""
        for d in docs:
            self._added.pop(id(d), None)

    def acknowledged(self, docs: Sequence[Document], now: float) -> None:
        """``docs`` were acknowledged at ``now``; those followed add to the lag."""
        n, total, worst = self._lag
        for d in docs:
            added = self._added.pop(id(d), None)
            if added is not None:
                lag = now - added
                n, total, worst = n + 1, total + lag, max(worst, lag)
        self._lag = (n, total, worst)

    def take(self, now: float) -> tuple[int, float | None, float | None]:
        """Documents acknowledged since the last call, their mean and largest lag (s; None
        without any); then zeroed, and documents added before ``now - STALE_S`` forgotten."""
        n, total, worst = self._lag
        self._lag = (0, 0.0, 0.0)
        # documents spooled for later (perhaps for another process) are no longer followed
        cutoff = now - STALE_S
        for key in [k for k, t in self._added.items() if t < cutoff]:
            del self._added[key]
        return n, (total / n if n else None), (worst if n else None)


class AsyncSink:
    """A :class:`BulkSink` fed by a sender thread through a bounded :class:`StageQueue`.

    It has the sink's API (``add``, ``flush``, ``maybe_flush``, ``close``, ``pending``,
    ``stats``, ``resend``, ``spool``, ``deadletters``), plus :meth:`poll`.

    Args:
        client, settings, state_dir: as for :class:`BulkSink`.
        target_bulk_s: the sink's work one bulk request should hold at its measured rate.
        **hooks: as for :class:`BulkSink` (:class:`~pipeline.sink.hooks.SinkHooks`), except
            that ``on_ack`` is called on the thread that calls :meth:`poll`, :meth:`flush` or
            :meth:`maybe_flush`, with the documents that settled.

    Raises:
        RuntimeError: from ``add``/``flush``, when the sender thread failed (its exception is
            chained).
    """

    def __init__(
        self,
        client: Elasticsearch,
        settings: SinkSettings,
        state_dir: Path,
        *,
        target_bulk_s: float = 0.5,
        **hooks: Unpack[SinkHooks],
    ) -> None:
        self._acks = _Acks(hooks.get("on_ack", ignore_acks))
        sink_hooks: SinkHooks = {**hooks, "on_ack": self._acks.arrived.append}
        self.sink = BulkSink(client, settings, state_dir, **sink_hooks)
        self.settings = settings
        clock = hooks.get("clock", time.monotonic)
        self.queue: StageQueue[Document] = StageQueue(settings.queue_docs, clock)
        self.target_bulk_s = target_bulk_s
        self.bulk_docs = settings.chunk_max_docs
        self.put_wait_s = 0.0
        """Seconds :meth:`add` spent waiting for room in the queue (the back-pressure)."""
        self.stop = threading.Event()
        """Set (or replaced) by the owner when it stops: waits for a full spool end."""
        self.wait_when_full = True
        """Whether :meth:`add` and :meth:`flush` wait for a full spool to take documents again
        (False: let them go at once, unacknowledged)."""
        self.unsent = 0
        """Documents let go unacknowledged by :meth:`add` and :meth:`flush` (spool full)."""
        self._error: BaseException | None = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._run, name="iolens-sink", daemon=True)
        self._thread.start()

    # -- the sink's API ----------------------------------------------------------------------

    @property
    def spool(self) -> Spool:
        """The sink's spool."""
        return self.sink.spool

    @property
    def disk(self) -> DiskWatch:
        """What waits because the state directory's disk is full."""
        return self.sink.disk

    @property
    def deadletters(self) -> DeadLetters:
        """The sink's dead-letter area."""
        return self.sink.deadletters

    def add(self, doc: Document) -> bool:
        """Queue ``doc`` for the sender, waiting while the queue is full.

        Returns:
            True when queued; False when it was let go unacknowledged because the spool is full
            and the owner stops (or does not wait, see :meth:`refusing`).
        """
        self._check()
        start = time.perf_counter()
        if self.queue.put(doc, timeout_s=0.0):
            self._acks.added(doc, start)
            return True
        try:
            while True:
                if self.refusing():
                    self.unsent += 1
                    return False
                if self.queue.put(doc, timeout_s=_WAKE_S):
                    break
                self._check()
            self._acks.added(doc, start)
            return True
        finally:
            self.put_wait_s += time.perf_counter() - start

    def refusing(self) -> bool:
        """Whether documents that find no room are let go: the spool is full and the owner
        stops (``stop``) or does not wait (``wait_when_full`` false)."""
        return self.sink.full() and (self.stop.is_set() or not self.wait_when_full)

    def poll(self) -> None:
        """Hand the documents settled since the last call to ``on_ack`` (on this thread)."""
        self._acks.deliver()

    def take_lag(self) -> tuple[int, float | None, float | None]:
        """Documents acknowledged since the last call, and their mean and largest lag from
        :meth:`add` to acknowledgement (s; None without any); then zeroed."""
        return self._acks.take(time.perf_counter())

    def maybe_flush(self) -> bool:
        """Deliver acknowledgements; the sender flushes by itself. Returns whether any came."""
        had = bool(self._acks.arrived)
        self.poll()
        self._check()
        return had

    def flush(self) -> None:
        """Wait until every queued document reached the sink, send what it buffers (or spool
        it), and deliver the acknowledgements."""
        self._check()
        while not self.queue.join(timeout_s=_WAKE_S):
            self._check()
            if self.refusing():
                self._let_go_queued()
                break
        self._check()
        self.sink.flush()
        self.poll()

    def _let_go_queued(self) -> None:
        """Take everything queued out, unacknowledged (see :meth:`refusing`)."""
        docs = self.queue.get_batch(len(self.queue), timeout_s=0.0)
        self.queue.done(len(docs))
        self._acks.forget(docs)
        self.unsent += len(docs)
        if docs:
            log.error(
                "%s queued documents were let go unacknowledged (the spool is full): they are "
                "read again from their files on the next run",
                len(docs),
            )

    def close(self) -> None:
        """Flush, stop the sender and close the sink. Idempotent."""
        if not self._closing.is_set():
            try:
                self.flush()
            finally:
                self._closing.set()
                self._thread.join()
                self.sink.close()
                self.poll()

    def pending(self) -> int:
        """Documents queued, buffered or spooled: added but not yet settled."""
        return len(self.queue) + self.sink.pending()

    def stats(self) -> dict[str, StreamStats]:
        """The sink's counters, by data stream."""
        return self.sink.stats()

    def resend(self, docs: Sequence[Document]) -> list[Rejection]:
        """:meth:`BulkSink.resend`, after what is queued."""
        self.flush()
        return self.sink.resend(docs)

    def set_rate(self, docs_per_s: float) -> None:
        """The sink's measured non-blocking service rate: bulk requests are sized to about
        ``target_bulk_s`` of it."""
        n = int(docs_per_s * self.target_bulk_s)
        self.bulk_docs = max(MIN_BULK_DOCS, min(self.settings.chunk_max_docs, n))

    # -- the sender thread -------------------------------------------------------------------

    def _check(self) -> None:
        if self._error is not None:
            raise RuntimeError("the sink's sender thread failed") from self._error

    def _run(self) -> None:
        idle_s = min(self.settings.flush_interval_s, 0.1)
        while True:
            if self.sink.full():  # take nothing more: reading waits on the queue
                if self._closing.is_set():
                    return
                self._guard(self.sink.maybe_flush)
                self._closing.wait(idle_s)
                continue
            docs = self.queue.get_batch(1, timeout_s=idle_s)
            if not docs:
                if self._closing.is_set():
                    return
                self._guard(self.sink.maybe_flush)
                continue
            try:
                self._guard(functools.partial(self._take, docs[0]))
            finally:
                self.queue.done(1)

    def _take(self, doc: Document) -> None:
        self.sink.add(doc)
        if self.sink.buffered() >= self.bulk_docs:
            self.sink.flush()
        else:
            self.sink.maybe_flush()

    def _guard(self, fn: Callable[[], object]) -> None:
        if self._error is not None:
            return
        try:
            fn()
        except BaseException as err:  # handed to the main thread by _check
            log.error("the sink's sender thread failed: %s", err)
            self._error = err
