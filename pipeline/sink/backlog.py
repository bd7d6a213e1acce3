"""Documents the cluster has not taken yet: the disk spool, the documents held in memory while
the spool is full, and when to try them again.

A chunk nobody answered (connection refused, timeout) or that kept failing after its retries
goes to the :class:`~pipeline.sink.spool.Spool`. When the spool is full
(``sink.spool_max_bytes``), the documents are *held* in memory instead: :meth:`Backlog.full`
turns true and the sink's owner stops taking documents until the cluster or the spool takes them
again. :meth:`Backlog.drain` sends the spool, then the held documents; while that makes no
progress, the next automatic try waits on the capped exponential schedule of
:func:`~pipeline.sink.backoff.backoff_caps` (``sink.backoff_initial_s`` .. ``backoff_max_s``).

A spool whose file system is full (:class:`~pipeline.sink.spool.SpoolDiskFull`) is full in the
same way; :class:`~pipeline.sink.disk.DiskWatch` says so once, and once when it has room again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

from pipeline.records.core import Document
from pipeline.settings import SinkSettings
from pipeline.sink.backoff import backoff_caps
from pipeline.sink.disk import DiskWatch
from pipeline.sink.spool import Spool, SpoolDiskFull, SpoolFull
from pipeline.sink.stats import StreamCounts

log = logging.getLogger(__name__)

Deliver = Callable[[list[Document]], tuple[list[Document], bool]]
"""Sends one chunk with its retries; returns the documents still undeliverable and whether the
cluster answered the last request."""

Split = Callable[[Sequence[Document]], Iterator[list[Document]]]
"""Cuts documents into chunks (:func:`~pipeline.sink.actions.chunks`)."""


class _Pass:
    """One drain pass: sends chunk after chunk until the cluster stops answering; the chunks
    after that are left as they are."""

    def __init__(self, deliver: Deliver, split: Split) -> None:
        self._deliver = deliver
        self._split = split
        self.reachable = True

    def __call__(self, docs: list[Document]) -> list[Document]:
        left: list[Document] = []
        for chunk in self._split(docs):
            if not self.reachable:
                left.extend(chunk)
                continue
            undeliverable, self.reachable = self._deliver(chunk)
            left.extend(undeliverable)
        return left


class Backlog:
    """The spool and the held documents of one sink, with their retry schedule.

    Not thread-safe on its own: the sink's lock guards it (only :meth:`full` is read without).

    Args:
        spool: where undeliverable documents go.
        counts: counts ``spooled`` and ``unsent`` documents.
        settings: ``backoff_initial_s``, ``backoff_max_s`` (the retry schedule) and
            ``spool_max_bytes`` (named in the log).
        clock: monotonic seconds.
        disk: says when the spool's file system is full (default: a watch of its own).
    """

    def __init__(
        self,
        spool: Spool,
        counts: StreamCounts,
        settings: SinkSettings,
        clock: Callable[[], float],
        disk: DiskWatch | None = None,
    ) -> None:
        self.spool = spool
        self.disk = disk or DiskWatch(spool.root.parent, clock=clock)
        self._counts = counts
        self._settings = settings
        self._clock = clock
        self._held: list[Document] = []
        self._full_since: float | None = None
        self._failures = 0
        self._next_try = 0.0

    def full(self) -> bool:
        """Whether documents are held in memory because the spool is full."""
        return bool(self._held)

    def waiting(self) -> bool:
        """Whether anything is spooled or held."""
        return bool(self.spool.pending() or self._held)

    def due(self, now: float) -> bool:
        """Whether anything is waiting and its retry delay has passed at ``now`` (clock s)."""
        return self.waiting() and now >= self._next_try

    def pending(self) -> int:
        """Documents spooled or held."""
        return self.spool.pending() + len(self._held)

    def keep(self, docs: Sequence[Document]) -> None:
        """Spool ``docs``; when the spool is full, hold them in memory (see :meth:`full`)."""
        if not docs:
            return
        try:
            self.spool.put(docs)
        except SpoolDiskFull as err:
            waiting = (
                f"{len(self._held) + len(docs)} documents held in memory and "
                f"{self.spool.pending()} in the spool"
            )
            self.disk.full("spool", err.path, waiting)
            self._held.extend(docs)
            return
        except SpoolFull as err:
            if self._full_since is None:
                self._full_since = self._clock()
                log.error(
                    "%s: holding %s documents in memory and reading no more until "
                    "Elasticsearch takes documents again (nothing is dropped; raise "
                    "sink.spool_max_bytes to spool more)",
                    err,
                    len(docs),
                )
            self._held.extend(docs)
            return
        self._counts.add(docs, "spooled")

    def drain(self, deliver: Deliver, split: Split) -> None:
        """Send spooled documents, then the held ones; without progress, push the next
        automatic try back (backoff)."""
        before = self.pending()
        attempt = _Pass(deliver, split)
        self.spool.drain(attempt)
        self._retry_held(attempt)
        if not self._held:
            self.disk.ok("spool")
        if not self._held and self._full_since is not None:
            log.warning(
                "the spool takes documents again after %.0f s; reading resumes",
                self._clock() - self._full_since,
            )
            self._full_since = None
        self._schedule(before)

    def let_go(self) -> None:
        """Drop the held documents unacknowledged, with an error (at close: they are read again
        from their files next time) and counted as ``unsent``."""
        if self._held:
            why = (
                f"the disk of the state directory {self.disk.root} is full"
                if self.disk.is_full()
                else f"the spool is full, sink.spool_max_bytes = {self._settings.spool_max_bytes}"
            )
            log.error(
                "%s documents were neither delivered nor spooled (%s): they were not "
                "acknowledged, so they are read again from their files on the next run",
                len(self._held),
                why,
            )
            self._counts.add(self._held, "unsent")
            self._held = []

    def _retry_held(self, attempt: _Pass) -> None:
        """Send the held documents when the spool is empty and the cluster answers, else try
        the spool again (it may have room: segments taken out by hand)."""
        if self._held and attempt.reachable and not self.spool.pending():
            held, self._held = self._held, []
            self.keep(attempt(held))
        elif self._held:
            held, self._held = self._held, []
            self.keep(held)

    def _schedule(self, before: int) -> None:
        """Set the next automatic try: now after progress, else after the next backoff delay."""
        after = self.pending()
        if after < before or after == 0:
            self._failures = 0
            self._next_try = self._clock()
            return
        caps = backoff_caps(self._settings.backoff_initial_s, self._settings.backoff_max_s, 32)
        delay = caps[min(self._failures, len(caps) - 1)]
        self._failures += 1
        self._next_try = self._clock() + delay
        log.info(
            "cluster still not taking spooled documents; %s pending, next try in %.1f s",
            self.spool.pending(),
            delay,
        )
