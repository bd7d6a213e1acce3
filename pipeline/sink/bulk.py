"""Bulk indexing with per-item outcomes, an owned retry loop, a disk spool and dead letters.

The stages follow elasticsearch-py's ``helpers/actions.py`` (elastic.md §6.4): *expand* a
document into its action and source lines (:func:`expand`), *chunk* by count, bytes and age
(:class:`BulkSink` buffer), *send one chunk* (``client.bulk(operations=..., filter_path=...)``),
and *pair each response item with its document* by position (the bulk API answers in request
order, elastic.md §6.3). Each item is classified by :func:`~pipeline.sink.outcome.classify`:

* OK / DUPLICATE (409 on ``create``): settled, acknowledged.
* DEAD_LETTER (other 4xx): written to the dead-letter area with status and error, acknowledged.
* RETRY (429, 5xx): re-sent after the delays of :func:`~pipeline.sink.backoff.backoff_delays`
  (``max_retries`` times), then spooled.

A transport failure of the whole request (connection refused, timeout) spools the whole chunk at
once, without sleeping; the spool is drained by :meth:`BulkSink.flush` and, at most once per
backoff delay, by :meth:`BulkSink.maybe_flush`. A spooled document is acknowledged only when it
is finally delivered, so the registry never advances past it (DESIGN.md, data flow step 5).

When the spool is full (``sink.spool_max_bytes``), undeliverable documents are *held* in memory
instead: :meth:`BulkSink.full` turns true, the sender stops taking documents (so reading waits
on the bounded queue), and the held documents are retried on the spool's backoff schedule until
the cluster or the spool takes them. Documents still held when the sink is closed are let go
unacknowledged, with an error naming how many: they are read again from their files next time.

The action is always ``create`` (data streams accept nothing else, elastic.md §1.2) with the
document's deterministic ``_id``, so re-sending after a crash or a lost response is a 409.
"""

from __future__ import annotations

import logging
import math
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from elasticsearch import ApiError, Elasticsearch, TransportError

from pipeline.records import Document
from pipeline.settings import SinkSettings
from pipeline.sink.backoff import backoff_caps, backoff_delays
from pipeline.sink.deadletter import DeadLetters, Rejection
from pipeline.sink.outcome import Outcome, classify
from pipeline.sink.spool import Spool, SpoolFull, encode_json

log = logging.getLogger(__name__)

FILTER_PATH = "errors,items.*.status,items.*.error.type,items.*.error.reason"
"""Only what the pairing stage reads from a bulk response (elastic.md §6.3)."""

STAGE = "sink"

_SPOOL_NOT_DLQ = frozenset({401, 403})
"""Whole-request statuses that mean "fix the credentials", not "this document is bad"."""


@dataclass(frozen=True)
class StreamStats:
    """Counters of one data stream (numbers of documents; ``retried`` counts re-sends)."""

    indexed: int = 0
    duplicate: int = 0
    dead_lettered: int = 0
    retried: int = 0
    spooled: int = 0
    unsent: int = 0
    """Let go unacknowledged at close because the spool was full (read again next run)."""


@dataclass(frozen=True)
class _Item:
    """One response item paired with its document."""

    doc: Document
    outcome: Outcome
    status: int
    error_type: str | None
    reason: str | None


def expand(doc: Document) -> tuple[dict[str, Any], Mapping[str, Any], int]:
    """The bulk action and source of ``doc`` and their NDJSON size in bytes (two lines).

    Raises:
        ValueError: the source has no JSON form (NaN, infinity, unserialisable value); that is
            a bug in the stage that built it, so it is not dead-lettered.
    """
    action = {"create": {"_index": doc.index, "_id": doc.doc_id}}
    try:
        nbytes = len(_action(doc)) + len(_source(doc)) + 2
    except (TypeError, ValueError) as err:
        raise ValueError(f"document {doc.index}/{doc.doc_id} is not JSON: {err}") from err
    return action, doc.source, nbytes


def _source(doc: Document) -> bytes:
    """The source line of ``doc``: its producer's encoding, or :func:`encode_json`."""
    return doc.encoded if doc.encoded is not None else encode_json(doc.source)


def _action(doc: Document) -> bytes:
    """``{"create":{"_index":...,"_id":...}}`` of ``doc``. Index names and ids are plain
    ASCII (data stream names, url-safe base64), written as they are; anything else is
    encoded as JSON strings."""
    if _PLAIN.fullmatch(doc.index) and _PLAIN.fullmatch(doc.doc_id):
        return f'{{"create":{{"_index":"{doc.index}","_id":"{doc.doc_id}"}}}}'.encode()
    index, ident = encode_json(doc.index), encode_json(doc.doc_id)
    return b'{"create":{"_index":' + index + b',"_id":' + ident + b"}}"


_PLAIN = re.compile(r"[A-Za-z0-9._\-]*")


def ndjson(docs: Sequence[Document]) -> bytes:
    """The bulk request body of ``docs``: a ``create`` action line and a source line each.

    Raises:
        ValueError: a source has no JSON form (see :func:`expand`).
    """
    parts: list[bytes] = []
    for doc in docs:
        parts.append(_action(doc))
        parts.append(_source(doc))
    parts.append(b"")
    return b"\n".join(parts)


def _error_of(item: Mapping[str, Any]) -> tuple[str | None, str | None]:
    error = item.get("error")
    if isinstance(error, Mapping):
        return error.get("type"), error.get("reason")
    if error is None:
        return None, None
    return None, str(error)


def _as_text(value: Any) -> Any:
    """``value`` with what JSON cannot hold (NaN, infinity, other objects) written as text."""
    if isinstance(value, Mapping):
        return {str(k): _as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_text(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)


def pair_items(docs: Sequence[Document], response: Mapping[str, Any]) -> list[_Item]:
    """Pair each bulk response item with the document at the same position and classify it.

    Raises:
        ValueError: the response does not hold one item per document.
    """
    items = response.get("items")
    if not isinstance(items, list) or len(items) != len(docs):
        got = len(items) if isinstance(items, list) else "no"
        raise ValueError(f"bulk response has {got} items for {len(docs)} documents")
    paired: list[_Item] = []
    for doc, raw in zip(docs, items, strict=True):
        item = next(iter(raw.values())) if isinstance(raw, Mapping) and raw else {}
        status = int(item.get("status") or 0)
        error_type, reason = _error_of(item)
        paired.append(_Item(doc, classify(status, error_type), status, error_type, reason))
    return paired


class BulkSink:
    """Buffers documents and writes them with the bulk API, exactly once or to a dead letter.

    Thread-safe (one lock; a sending thread blocks the others, which is the back-pressure).

    Args:
        client: the Elasticsearch client (or anything with a compatible ``bulk``).
        settings: chunk limits, flush interval, retries and backoff.
        state_dir: ``spool/`` and ``deadletter/`` are created under it.
        on_ack: called with the documents that became settled (indexed, duplicate or
            dead-lettered), exactly once per document added; spooled documents are acknowledged
            when they are delivered later, possibly by another ``BulkSink`` after a restart.
        clock: monotonic seconds, for the flush interval and the spool retry delay.
        sleep: blocks for the backoff delays (seconds).
        rng: uniform [0, 1] for the backoff jitter.
    """

    def __init__(
        self,
        client: Elasticsearch,
        settings: SinkSettings,
        state_dir: Path,
        *,
        on_ack: Callable[[Sequence[Document]], None] = lambda d: None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._client = client
        self._settings = settings
        self._on_ack = on_ack
        self._clock = clock
        self._sleep = sleep
        self._rng = rng
        self.spool = Spool(state_dir / "spool", settings.spool_max_bytes)
        self.deadletters = DeadLetters(state_dir / "deadletter")
        self._lock = threading.RLock()
        self._buf: list[Document] = []
        self._held: list[Document] = []
        self._full_since: float | None = None
        self._buf_bytes = 0
        self._oldest: float | None = None
        self._counts: dict[str, Counter[str]] = {}
        self._spool_failures = 0
        self._next_spool_try = 0.0
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
                as_text = Document(doc.index, doc.doc_id, _as_text(doc.source), doc.refs)
                self.deadletters.write_document(as_text, 0, "not_json", str(err), STAGE)
                self._count([doc], "dead_lettered")
                self._on_ack([doc])
                return
            if self._buf and self._buf_bytes + nbytes > self._settings.chunk_max_bytes:
                self._send_buffer()
            if not self._buf:
                self._oldest = self._clock()
            self._buf.append(doc)
            self._buf_bytes += nbytes
            if (
                len(self._buf) >= self._settings.chunk_max_docs
                or self._buf_bytes >= self._settings.chunk_max_bytes
            ):
                self._send_buffer()

    def maybe_flush(self) -> bool:
        """Send the buffer if its oldest document waited ``flush_interval_s`` or longer, and
        retry the spool if its retry delay has passed.

        Returns:
            Whether anything was sent.
        """
        with self._lock:
            sent = False
            now = self._clock()
            if (self.spool.pending() or self._held) and now >= self._next_spool_try:
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
            if self.spool.pending() or self._held:
                self._drain_spool()
            self._send_buffer()

    def full(self) -> bool:
        """Whether documents are held in memory because the spool is full (the sender must
        stop taking new ones until this turns false again).

        Does not wait for the sink's lock (a bulk request in flight holds it): the reading
        thread asks this between chunks, and a value a moment old does no harm.
        """
        return bool(self._held)

    def close(self) -> None:
        """Flush and refuse further documents. Idempotent.

        Documents still held (cluster away, spool full) are let go unacknowledged, with an
        error: their lines are read again from their files next time.
        """
        with self._lock:
            if not self._closed:
                self.flush()
                self._closed = True
                if self._held:
                    log.error(
                        "%s documents were neither delivered nor spooled (the spool is full, "
                        "sink.spool_max_bytes = %s): they were not acknowledged, so they are "
                        "read again from their files on the next run",
                        len(self._held),
                        self._settings.spool_max_bytes,
                    )
                    self._count(self._held, "unsent")
                    self._held = []

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

        def keep(docs: Sequence[Document]) -> None:
            if not docs:
                return
            try:
                self.spool.put(docs)
            except SpoolFull as err:
                rejected.extend(Rejection(d, 0, "spool_full", str(err)) for d in docs)
                return
            self._count(docs, "spooled")

        with self._lock:
            chunks = list(self._chunks(docs))
            for i, chunk in enumerate(chunks):
                undeliverable, reachable = self._deliver(chunk, rejected)
                keep(undeliverable)
                if not reachable:
                    for rest in chunks[i + 1 :]:
                        keep(rest)
                    break
        return rejected

    def stats(self) -> dict[str, StreamStats]:
        """A snapshot of the counters, by data stream name."""
        with self._lock:
            return {
                index: StreamStats(**{k: c[k] for k in StreamStats.__dataclass_fields__})
                for index, c in sorted(self._counts.items())
            }

    def buffered(self) -> int:
        """Documents buffered for the next bulk request."""
        with self._lock:
            return len(self._buf)

    def pending(self) -> int:
        """Documents buffered, held or spooled, i.e. added but not yet settled."""
        with self._lock:
            return len(self._buf) + len(self._held) + self.spool.pending()

    # -- stages -------------------------------------------------------------------------------

    def _count(self, docs: Sequence[Document], what: str) -> None:
        for doc in docs:
            self._counts.setdefault(doc.index, Counter())[what] += 1

    def _chunks(self, docs: Sequence[Document]) -> Iterator[list[Document]]:
        """Split ``docs`` by ``chunk_max_docs`` and ``chunk_max_bytes``."""
        chunk: list[Document] = []
        size = 0
        for doc in docs:
            nbytes = expand(doc)[2]
            if chunk and (
                len(chunk) >= self._settings.chunk_max_docs
                or size + nbytes > self._settings.chunk_max_bytes
            ):
                yield chunk
                chunk, size = [], 0
            chunk.append(doc)
            size += nbytes
        if chunk:
            yield chunk

    def _send_buffer(self) -> None:
        docs, self._buf, self._buf_bytes, self._oldest = self._buf, [], 0, None
        if docs:
            undeliverable, _ = self._deliver(docs, None)
            self._to_spool(undeliverable)

    def _to_spool(self, docs: Sequence[Document]) -> None:
        """Spool ``docs``; when the spool is full, hold them in memory (see :meth:`full`)."""
        if not docs:
            return
        try:
            self.spool.put(docs)
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
        self._count(docs, "spooled")

    def _drain_spool(self) -> None:
        """Send spooled documents, then the held ones; on failure, push the next automatic
        try back (backoff)."""
        reachable = True

        def send(docs: list[Document]) -> list[Document]:
            nonlocal reachable
            left: list[Document] = []
            for chunk in self._chunks(docs):
                if not reachable:
                    left.extend(chunk)
                    continue
                undeliverable, reachable = self._deliver(chunk, None)
                left.extend(undeliverable)
            return left

        before = self.spool.pending() + len(self._held)
        self.spool.drain(send)
        if self._held and reachable and not self.spool.pending():
            held, self._held = self._held, []
            self._to_spool(send(held))
        elif self._held:  # the spool may have room again (segments taken out by hand)
            held, self._held = self._held, []
            self._to_spool(held)
        if not self._held and self._full_since is not None:
            log.warning(
                "the spool takes documents again after %.0f s; reading resumes",
                self._clock() - self._full_since,
            )
            self._full_since = None
        after = self.spool.pending() + len(self._held)
        if after < before or after == 0:
            self._spool_failures = 0
            self._next_spool_try = self._clock()
        else:
            caps = backoff_caps(self._settings.backoff_initial_s, self._settings.backoff_max_s, 32)
            delay = caps[min(self._spool_failures, len(caps) - 1)]
            self._spool_failures += 1
            self._next_spool_try = self._clock() + delay
            log.info(
                "cluster still not taking spooled documents; %s pending, next try in %.1f s",
                self.spool.pending(),
                delay,
            )

    def _request(self, docs: Sequence[Document]) -> list[_Item] | None:
        """Send one chunk. ``None`` = no answer (transport failure); else the paired items.

        A whole-request error status is spread over the chunk's items.
        """
        payload = ndjson(docs)  # already measured (and so known to serialise) by expand()
        try:
            # The body goes as encoded NDJSON bytes (elastic-transport's NDJSON serializer
            # forwards bytes as they are): each source is encoded once, by orjson.
            response = self._client.bulk(
                operations=cast("Sequence[Mapping[str, Any]]", payload), filter_path=FILTER_PATH
            )
        except ApiError as err:
            status = int(err.status_code or 0)
            reason = str(err.message)
            log.warning("bulk request of %s documents failed: %s %s", len(docs), status, reason)
            if status in _SPOOL_NOT_DLQ:
                log.error(
                    "Elasticsearch refused the credentials (%s): spooling until it accepts them; "
                    "check elasticsearch.api_key / username / password",
                    status,
                )
                return None
            outcome = classify(status, "request_error")
            return [_Item(d, outcome, status, "request_error", reason) for d in docs]
        except TransportError as err:
            log.warning("bulk request of %s documents got no answer: %s", len(docs), err)
            return None
        body: Any = getattr(response, "body", response)
        try:
            return pair_items(docs, body)
        except ValueError as err:
            log.error("unusable bulk response (%s); spooling the chunk", err)
            return None

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
        delays = backoff_delays(
            self._settings.backoff_initial_s,
            self._settings.backoff_max_s,
            self._settings.max_retries,
            self._rng,
        )
        pending = docs
        attempt = 0
        while True:
            items = self._request(pending)
            if items is None:
                return pending, False
            retry = self._settle(items, rejected)
            if not retry:
                return [], True
            if attempt >= len(delays):
                log.warning(
                    "%s documents still failing after %s retries; spooling them",
                    len(retry),
                    attempt,
                )
                return retry, True
            self._count(retry, "retried")
            self._sleep(delays[attempt])
            attempt += 1
            pending = retry

    def _settle(self, items: Sequence[_Item], rejected: list[Rejection] | None) -> list[Document]:
        """Count, dead-letter and acknowledge settled items; return the ones to retry."""
        settled: list[Document] = []
        retry: list[Document] = []
        for it in items:
            if it.outcome is Outcome.RETRY:
                retry.append(it.doc)
                continue
            if it.outcome is Outcome.OK:
                self._count([it.doc], "indexed")
            elif it.outcome is Outcome.DUPLICATE:
                self._count([it.doc], "duplicate")
            elif rejected is not None:
                rejected.append(Rejection(it.doc, it.status, it.error_type, it.reason))
                continue
            else:
                self.deadletters.write_document(it.doc, it.status, it.error_type, it.reason, STAGE)
                self._count([it.doc], "dead_lettered")
            settled.append(it.doc)
        if settled and rejected is None:
            self._on_ack(settled)
        return retry
