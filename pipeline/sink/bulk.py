"""Bulk indexing with per-item outcomes, an owned retry loop, a disk spool and dead letters.

The stages follow elasticsearch-py's ``helpers/actions.py`` (elastic.md §6.4), one module each:
*expand* a document into its action and source lines and *chunk* by count and bytes
(:mod:`pipeline.sink.actions`; :class:`BulkSink` buffers, and sends when a chunk is full or
old), *send one chunk* (:mod:`pipeline.sink.bulk_request`), and *pair each response item with
its document* by position (:mod:`pipeline.sink.responses`). Each item is classified by
:func:`~pipeline.sink.outcome.classify`, and this module acts on it:

* OK / DUPLICATE (409 on ``create``): settled, acknowledged.
* DEAD_LETTER (other 4xx): written to the dead-letter area with status and error, acknowledged.
* RETRY (429, 5xx): re-sent after the delays of :func:`~pipeline.sink.backoff.backoff_delays`
  (``max_retries`` times), then spooled.

A transport failure of the whole request (connection refused, timeout) spools the whole chunk at
once, without sleeping; the spool is drained by :meth:`BulkSink.flush` and, at most once per
backoff delay, by :meth:`BulkSink.maybe_flush`. A spooled document is acknowledged only when it
is finally delivered, so the registry never advances past it (DESIGN.md, data flow step 5).

When the spool is full (``sink.spool_max_bytes``), undeliverable documents are *held* in memory
instead (:mod:`pipeline.sink.backlog`): :meth:`BulkSink.full` turns true, the sender stops
taking documents (so reading waits on the bounded queue), and the held documents are retried on
the spool's backoff schedule until the cluster or the spool takes them. Documents still held
when the sink is closed are let go unacknowledged, with an error naming how many: they are read
again from their files next time.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Unpack

from elasticsearch import Elasticsearch

from pipeline.records.core import Document
from pipeline.settings import SinkSettings
from pipeline.sink.actions import as_text, chunks, expand
from pipeline.sink.backlog import Backlog
from pipeline.sink.backoff import backoff_delays
from pipeline.sink.bulk_request import send_chunk
from pipeline.sink.deadletter import DeadLetters, Rejection
from pipeline.sink.disk import DiskWatch, is_disk_full
from pipeline.sink.hooks import SinkHooks, ignore_acks
from pipeline.sink.outcome import Outcome
from pipeline.sink.responses import BulkItem
from pipeline.sink.spool import Spool, SpoolFull
from pipeline.sink.stats import StreamCounts, StreamStats

__all__ = ["STAGE", "BulkSink"]

log = logging.getLogger(__name__)

STAGE = "sink"


class BulkSink:
    """Buffers documents and writes them with the bulk API, exactly once or to a dead letter.

    Thread-safe (one lock; a sending thread blocks the others, which is the back-pressure).

    Args:
        client: the Elasticsearch client (or anything with a compatible ``bulk``).
        settings: chunk limits, flush interval, retries and backoff.
        state_dir: ``spool/`` and ``deadletter/`` are created under it.
        **hooks: (:class:`~pipeline.sink.hooks.SinkHooks`)
            ``on_ack``: called with the documents that became settled (indexed, duplicate or
            dead-lettered), exactly once per document added; spooled documents are acknowledged
            when they are delivered later, possibly by another ``BulkSink`` after a restart.
            ``clock``: monotonic seconds, for the flush interval and the spool retry delay.
            ``sleep``: blocks for the backoff delays (seconds). ``rng``: uniform [0, 1] for the
            backoff jitter.
    """

    def __init__(
        self,
        client: Elasticsearch,
        settings: SinkSettings,
        state_dir: Path,
        **hooks: Unpack[SinkHooks],
    ) -> None:
        self._client = client
        self._settings = settings
        self._on_ack = hooks.get("on_ack", ignore_acks)
        self._clock = hooks.get("clock", time.monotonic)
        self._sleep = hooks.get("sleep", time.sleep)
        self._rng = hooks.get("rng", random.random)
        self._counts = StreamCounts()
        self.disk = hooks.get("disk") or DiskWatch(state_dir, clock=self._clock)
        self._backlog = Backlog(
            Spool(state_dir / "spool", settings.spool_max_bytes, statvfs=self.disk.statvfs),
            self._counts,
            settings,
            self._clock,
            self.disk,
        )
        self.spool = self._backlog.spool
        self.deadletters = DeadLetters(state_dir / "deadletter")
        self._lock = threading.RLock()
        self._buf: list[Document] = []
        self._buf_bytes = 0
        self._oldest: float | None = None
        self._closed = False

    # -- public API ---------------------------------------------------------------------------

    def add(self, doc: Document) -> None:
        """Buffer ``doc``; send the buffer when it reaches ``chunk_max_docs`` or
        ``chunk_max_bytes`` (a document that would overflow the byte limit is sent in the next
        chunk).

        A document whose source has no JSON form (NaN, infinity, an unserialisable value:
        a bug in the stage that built it) is dead-lettered at once, its values written as
        text, and acknowledged, so it neither stops the pipeline nor holds up its file.

        Raises:
            RuntimeError: the sink is closed.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("BulkSink.add() after close()")
            try:
                _, _, nbytes = expand(doc)
            except ValueError as err:
                self._dead_letter_not_json(doc, err)
                return
            if self._buf and self._buf_bytes + nbytes > self._settings.chunk_max_bytes:
                self._send_buffer()
            self._buffer(doc, nbytes)

    def maybe_flush(self) -> bool:
        """Send the buffer if its oldest document waited ``flush_interval_s`` or longer, and
        retry the spool if its retry delay has passed.

        Returns:
            Whether anything was sent.
        """
        with self._lock:
            sent = False
            now = self._clock()
            if self._backlog.due(now):
                self._drain_spool()
                sent = True
            if self._oldest is not None and now - self._oldest >= self._settings.flush_interval_s:
                self._send_buffer()
                sent = True
            return sent

    def flush(self) -> None:
        """Try to drain the spool and the held documents, then send everything buffered
        (undeliverable -> spool, or held when the spool is full)."""
        with self._lock:
            if self._backlog.waiting():
                self._drain_spool()
            self._send_buffer()

    def full(self) -> bool:
        """Whether documents are held in memory because the spool is full (the sender must
        stop taking new ones until this turns false again).

        Does not wait for the sink's lock (a bulk request in flight holds it): the reading
        thread asks this between chunks, and a value a moment old does no harm.
        """
        return self._backlog.full()

    def close(self) -> None:
        """Flush and refuse further documents. Idempotent.

        Documents still held (cluster away, spool full) are let go unacknowledged, with an
        error: their lines are read again from their files next time.
        """
        with self._lock:
            if not self._closed:
                self.flush()
                self._closed = True
                self._backlog.let_go()

    def __enter__(self) -> BulkSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resend(self, docs: Sequence[Document]) -> list[Rejection]:
        """Deliver dead-lettered ``docs`` again (for :meth:`DeadLetters.replay`).

        They were acknowledged when first dead-lettered, so they are not acknowledged again;
        rejected ones are returned (not written); undeliverable ones are spooled, or returned as
        rejected (``spool_full``) when the spool is full, so they stay dead letters.
        """
        rejected: list[Rejection] = []
        with self._lock:
            pieces = list(self._chunks(docs))
            for i, chunk in enumerate(pieces):
                undeliverable, reachable = self._deliver(chunk, rejected)
                self._spool_or_reject(undeliverable, rejected)
                if not reachable:
                    for rest in pieces[i + 1 :]:
                        self._spool_or_reject(rest, rejected)
                    break
        return rejected

    def stats(self) -> dict[str, StreamStats]:
        """A snapshot of the counters, by data stream name."""
        with self._lock:
            return self._counts.snapshot()

    def buffered(self) -> int:
        """Documents buffered for the next bulk request."""
        with self._lock:
            return len(self._buf)

    def pending(self) -> int:
        """Documents buffered, held or spooled, i.e. added but not yet settled."""
        with self._lock:
            return len(self._buf) + self._backlog.pending()

    # -- stages -------------------------------------------------------------------------------

    def _dead_letter_not_json(self, doc: Document, err: ValueError) -> None:
        """Dead-letter ``doc`` (refused by :func:`expand`) with its values as text; settled."""
        text = Document(doc.index, doc.doc_id, as_text(doc.source), doc.refs)
        if not self._write_dead_letter(text, 0, "not_json", str(err)):
            self._counts.add([doc], "unsent")  # not acknowledged: read again next time
            return
        self._counts.add([doc], "dead_lettered")
        self._on_ack([doc])

    def _write_dead_letter(
        self, doc: Document, status: int, error_type: str | None, reason: str | None
    ) -> bool:
        """Write ``doc`` to the dead-letter area; False when the disk is full (said once)."""
        try:
            self.deadletters.write_document(doc, status, error_type, reason, STAGE)
        except OSError as err:
            if not is_disk_full(err):
                raise
            self.disk.full("dead letters", self.deadletters.documents_path, "rejected documents")
            return False
        self.disk.ok("dead letters")
        return True

    def _buffer(self, doc: Document, nbytes: int) -> None:
        """Append ``doc`` (``nbytes`` of NDJSON) to the buffer; send it once it is a chunk."""
        if not self._buf:
            self._oldest = self._clock()
        self._buf.append(doc)
        self._buf_bytes += nbytes
        if (
            len(self._buf) >= self._settings.chunk_max_docs
            or self._buf_bytes >= self._settings.chunk_max_bytes
        ):
            self._send_buffer()

    def _chunks(self, docs: Sequence[Document]) -> Iterator[list[Document]]:
        """Split ``docs`` by ``chunk_max_docs`` and ``chunk_max_bytes``."""
        return chunks(docs, self._settings.chunk_max_docs, self._settings.chunk_max_bytes)

    def _send_buffer(self) -> None:
        docs, self._buf, self._buf_bytes, self._oldest = self._buf, [], 0, None
        if docs:
            undeliverable, _ = self._deliver(docs, None)
            self._backlog.keep(undeliverable)

    def _spool_or_reject(self, docs: Sequence[Document], rejected: list[Rejection]) -> None:
        """Spool replayed ``docs``; when the spool is full, reject them (``spool_full``)."""
        if not docs:
            return
        try:
            self.spool.put(docs)
        except SpoolFull as err:
            rejected.extend(Rejection(d, 0, "spool_full", str(err)) for d in docs)
            return
        self._counts.add(docs, "spooled")

    def _drain_spool(self) -> None:
        """Send spooled documents, then the held ones (:meth:`Backlog.drain`)."""
        self._backlog.drain(lambda chunk: self._deliver(chunk, None), self._chunks)

    def _deliver(
        self, docs: list[Document], rejected: list[Rejection] | None
    ) -> tuple[list[Document], bool]:
        """Send ``docs`` with the retry loop and settle every item.

        Args:
            docs: one chunk.
            rejected: ``None`` = dead-letter rejected documents and acknowledge settled ones
                (normal path); a list = collect rejections there, acknowledge nothing (replay).

        Returns:
            (documents still undeliverable, whether the cluster answered the last request).
        """
        delays = self._retry_delays()
        pending = docs
        for attempt in range(len(delays) + 1):
            items = send_chunk(self._client, pending)
            if items is None:
                return pending, False
            pending = self._settle(items, rejected)
            if not pending:
                return [], True
            if attempt < len(delays):
                self._counts.add(pending, "retried")
                self._sleep(delays[attempt])
        log.warning(
            "%s documents still failing after %s retries; spooling them", len(pending), len(delays)
        )
        return pending, True

    def _retry_delays(self) -> list[float]:
        """A fresh jittered schedule of ``max_retries`` delays (s) for one chunk."""
        return backoff_delays(
            self._settings.backoff_initial_s,
            self._settings.backoff_max_s,
            self._settings.max_retries,
            self._rng,
        )

    def _settle(
        self, items: Sequence[BulkItem], rejected: list[Rejection] | None
    ) -> list[Document]:
        """Count, dead-letter and acknowledge settled items; return the ones to retry."""
        settled: list[Document] = []
        retry: list[Document] = []
        for it in items:
            if it.outcome is Outcome.RETRY:
                retry.append(it.doc)
                continue
            if it.outcome is Outcome.OK:
                self._counts.add([it.doc], "indexed")
            elif it.outcome is Outcome.DUPLICATE:
                self._counts.add([it.doc], "duplicate")
            elif rejected is not None:
                rejected.append(Rejection(it.doc, it.status, it.error_type, it.reason))
                continue
            elif not self._write_dead_letter(it.doc, it.status, it.error_type, it.reason):
                retry.append(it.doc)  # no room for it: tried again like a 429
                continue
            else:
                self._counts.add([it.doc], "dead_lettered")
            settled.append(it.doc)
        if settled and rejected is None:
            self._on_ack(settled)
        return retry
