"""On-disk spool for documents that could not be delivered while the cluster was unreachable.

Layout: ``<state_dir>/spool/seg-<12-digit sequence>.ndjson``; one segment per :meth:`Spool.put`,
one document per line::

    {"index":"metrics-fio.histogram-default","_id":"Zq3...","source":{...},"refs":[{"file_key":
    "2049:1311:9f2c...","path":"/drop/a_clat_hist.1.log","line_no":17,"end_offset":81234}]}

The spool is bounded: a :class:`Spool` made with ``max_bytes`` (``sink.spool_max_bytes``) refuses
a segment that would take it past that many bytes with :class:`SpoolFull`, and the sink then
holds the documents in memory and stops taking new ones (:mod:`pipeline.sink.backlog`): reading
waits, as a Filebeat disk queue that reached its ``max_size`` blocks its inputs. Nothing is
dropped; documents a stopped process could neither deliver nor spool were never acknowledged,
so they are read again from their files.

The spool also leaves :data:`~pipeline.sink.disk.RESERVE_BYTES` of its file system free for
the state databases: a segment that would eat into them, or whose write the disk refuses
(``ENOSPC``), raises :class:`SpoolDiskFull`, a :class:`SpoolFull`, and the sink holds the
documents and waits as for the bound.

Segments are written to a temporary name, fsync'ed and renamed into place (and the directory is
fsync'ed), so a crash leaves either a whole segment or none; a write that fails half-way removes
its temporary file and counts nothing as spooled. :meth:`Spool.drain` deletes a segment
only after its documents were delivered; a crash in between re-sends them, which is harmless
because every action is a ``create`` with a deterministic ``_id`` (a replay is a 409, elastic.md
§6.5). This mirrors the Logstash persistent queue's page files (elastic.md §6.2).

The module also holds the NDJSON codec of :class:`~pipeline.records.core.Document` shared with the
dead-letter area.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path

import orjson

from pipeline.records.core import Document, LineRef
from pipeline.records.json import JsonObject
from pipeline.sink.disk import (
    RESERVE_BYTES,
    Statvfs,
    free_bytes,
    fsync_dir,
    is_disk_full,
    write_atomically,
)

log = logging.getLogger(__name__)

_SEGMENT = re.compile(r"^seg-(\d{12})\.ndjson$")


class SpoolFull(Exception):
    """The spool cannot take a segment without growing past its bound.

    Attributes:
        root: the spool directory.
        size: bytes spooled now.
        needed: bytes of the refused segment.
        max_bytes: the bound (``sink.spool_max_bytes``).
    """

    def __init__(self, root: Path, size: int, needed: int, max_bytes: int) -> None:
        super().__init__(
            f"the spool {root} is full: {size} bytes spooled, {needed} more would pass "
            f"sink.spool_max_bytes = {max_bytes}"
        )
        self.root = root
        self.size = size
        self.needed = needed
        self.max_bytes = max_bytes
        self.advice = "raise sink.spool_max_bytes to spool more"
        """What the user can do about it."""


class SpoolDiskFull(SpoolFull):
    """The spool's file system has no room for a segment (less than the reserve would be left
    free, or the disk refused the write).

    Attributes:
        free: bytes free on the file system (None: unknown).
        path: the segment that was not written.
    """

    def __init__(
        self, root: Path, size: int, needed: int, free: int | None, path: Path, reserve: int
    ) -> None:
        SpoolFull.__init__(self, root, size, needed, 0)
        self.args = (
            f"the file system of the spool {root} is full: {free} bytes free, a segment of "
            f"{needed} bytes would leave less than the {reserve} kept for the state databases",
        )
        self.free = free
        self.path = path
        self.advice = "free space there or move state_dir to a larger file system"


def _default(obj: object) -> object:
    """JSON fallback for values reducers put in sources: mappings, tuples, dates, numpy scalars."""
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, datetime | date):
        return obj.isoformat()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    item = getattr(obj, "item", None)  # numpy scalars and 0-d arrays
    if callable(item):
        return item()
    tolist = getattr(obj, "tolist", None)  # numpy arrays
    if callable(tolist):
        return tolist()
    raise TypeError(f"cannot serialise {type(obj).__name__} to JSON")


_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY


def encode_json(obj: object) -> bytes:
    """:func:`compact_json` as UTF-8 bytes, fast: orjson, whose only difference that matters
    is that it writes NaN and infinity as ``null``; so output with a ``null`` value is encoded
    again by :func:`compact_json`, which rejects them.

    Raises:
        TypeError: a value has no JSON form.
        ValueError: NaN or infinity.
    """
    try:
        out = orjson.dumps(obj, default=_default, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:  # e.g. a non-string key, which json converts
        return compact_json(obj).encode()
    if b"null" in out:  # a null value or NaN (or a string holding "null": encoded alike)
        return compact_json(obj).encode()
    return out


def compact_json(obj: object) -> str:
    """Compact JSON (no spaces, UTF-8 kept) of ``obj``, as it would travel in a bulk body.

    Raises:
        TypeError: a value has no JSON form (see :func:`_default` for what is converted).
        ValueError: NaN or infinity (Elasticsearch rejects them; so do we, early).
    """
    return json.dumps(
        obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_default
    )


def ref_to_dict(ref: LineRef) -> JsonObject:
    """The JSON form of a :class:`LineRef`: its fields by name."""
    return dataclasses.asdict(ref)


def ref_from_dict(data: JsonObject) -> LineRef:
    """Inverse of :func:`ref_to_dict`. Raises ``KeyError``/``TypeError`` on a bad entry."""
    return LineRef(
        file_key=str(data["file_key"]),
        path=str(data["path"]),
        line_no=int(data["line_no"]),
        end_offset=int(data["end_offset"]),
    )


def document_to_dict(doc: Document) -> JsonObject:
    """``{"index", "_id", "source", "refs"}`` for one document."""
    return {
        "index": doc.index,
        "_id": doc.doc_id,
        "source": doc.source,
        "refs": [ref_to_dict(r) for r in doc.refs],
    }


def document_from_dict(data: JsonObject, source_key: str = "source") -> Document:
    """Inverse of :func:`document_to_dict`; ``source_key`` names the body (dead letters use
    ``"document"``).

    Raises:
        KeyError, TypeError, ValueError: the entry is not a document.
    """
    source = data[source_key]
    if not isinstance(source, dict):
        raise TypeError(f"{source_key!r} must be a JSON object")
    return Document(
        index=str(data["index"]),
        doc_id=str(data["_id"]),
        source=source,
        refs=tuple(ref_from_dict(r) for r in data.get("refs", ())),
    )


class Spool:
    """Append-only NDJSON segments of undelivered documents under ``<state_dir>/spool/``.

    Thread-safe. One process should own a state directory (the shipper's lock does that).

    Args:
        root: the spool directory (created if missing).
        max_bytes: most bytes of segments kept; ``None`` = unbounded. A spool left larger by an
            earlier process (with a larger bound) is drained, not truncated.
        reserve_bytes: bytes of the file system the spool leaves free (for the state databases).
        statvfs: ``os.statvfs`` (a fake in tests).
    """

    def __init__(
        self,
        root: Path,
        max_bytes: int | None = None,
        *,
        reserve_bytes: int = RESERVE_BYTES,
        statvfs: Statvfs = os.statvfs,
    ) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        for tmp in self.root.glob(".seg-*.tmp"):  # a write cut short by a crash
            tmp.unlink(missing_ok=True)
        self.max_bytes = max_bytes
        self.reserve_bytes = reserve_bytes
        self._statvfs = statvfs
        self._lock = threading.RLock()
        self._counts: dict[Path, int] = {}
        self._sizes: dict[Path, int] = {}
        self._gone: dict[Path, set[str]] = {}
        """Ids of documents delivered from a segment the full disk did not let be rewritten."""
        for seg in self._segments():
            self._counts[seg] = _count_lines(seg)
            self._sizes[seg] = seg.stat().st_size
        self._next_seq = 1 + max((_seq(s) for s in self._counts), default=0)

    def _segments(self) -> list[Path]:
        return sorted(p for p in self.root.iterdir() if _SEGMENT.match(p.name))

    def put(self, docs: Sequence[Document]) -> Path | None:
        """Spool ``docs`` as one new, durable segment.

        Returns:
            The segment written, or ``None`` when ``docs`` is empty.

        Raises:
            SpoolFull: the segment would take the spool past ``max_bytes`` (nothing written).
            SpoolDiskFull: the file system has no room for it (nothing written, nothing counted).
            OSError: the disk refused the write (the caller must not acknowledge the documents).
            TypeError, ValueError: a source cannot be serialised (see :func:`compact_json`).
        """
        if not docs:
            return None
        lines = [compact_json(document_to_dict(d)) for d in docs]
        needed = sum(len(line.encode()) + 1 for line in lines)
        with self._lock:
            size = sum(self._sizes.values())
            if self.max_bytes is not None and size + needed > self.max_bytes:
                raise SpoolFull(self.root, size, needed, self.max_bytes)
            seg = self.root / f"seg-{self._next_seq:012d}.ndjson"
            self._write(seg, lines, size, needed)
            self._next_seq += 1
            self._counts[seg] = len(lines)
            self._sizes[seg] = needed
        log.info("spooled %s documents to %s", len(lines), seg)
        return seg

    def _write(self, seg: Path, lines: list[str], size: int, needed: int) -> None:
        """Write segment ``seg`` unless that leaves less than the reserve free.

        Raises:
            SpoolDiskFull: no room (nothing written).
            OSError: another refusal of the disk (nothing written).
        """
        free = free_bytes(self.root, self._statvfs)
        if free is not None and free - needed < self.reserve_bytes:
            raise SpoolDiskFull(self.root, size, needed, free, seg, self.reserve_bytes)
        try:
            write_atomically(seg, lines)
        except OSError as err:
            if not is_disk_full(err):
                raise
            free = free_bytes(self.root, self._statvfs)
            raise SpoolDiskFull(self.root, size, needed, free, seg, self.reserve_bytes) from err

    def pending(self) -> int:
        """Number of documents waiting in the spool."""
        with self._lock:
            return sum(self._counts.values())

    def size(self) -> int:
        """Bytes of the spool's segments."""
        with self._lock:
            return sum(self._sizes.values())

    def drain(self, send: Callable[[list[Document]], list[Document]]) -> int:
        """Send the spooled documents, oldest segment first.

        ``send`` receives one segment's documents and returns those still undeliverable. A fully
        delivered segment is deleted; a partly delivered one is rewritten atomically with the
        rest and draining stops there (the cluster is evidently still in trouble). A segment
        that cannot be parsed is renamed to ``*.corrupt`` and reported in the log.

        Returns:
            Number of documents that left the spool (delivered, duplicate or dead-lettered by
            ``send``).

        Raises:
            Whatever ``send`` raises; the segment is then kept as it was.
        """
        delivered = 0
        with self._lock:
            for seg in list(self._counts):
                try:
                    docs = self._unsent(seg)
                except (ValueError, KeyError, TypeError) as err:
                    self._quarantine(seg, err)
                    continue
                remaining = send(docs)
                delivered += len(docs) - len(remaining)
                if self._keep_rest(seg, docs, remaining):
                    break  # the cluster is evidently still in trouble
        if delivered:
            log.info("delivered %s spooled documents; %s still spooled", delivered, self.pending())
        return delivered

    def _quarantine(self, seg: Path, err: Exception) -> None:
        """Rename the unreadable segment ``seg`` to ``*.corrupt`` and forget it."""
        bad = seg.with_name(seg.name + ".corrupt")
        log.error("spool segment %s is unreadable (%s); moved to %s", seg, err, bad)
        os.replace(seg, bad)
        del self._counts[seg], self._sizes[seg]
        self._gone.pop(seg, None)

    def _unsent(self, seg: Path) -> list[Document]:
        """The documents of ``seg`` not delivered yet by this process.

        Raises:
            ValueError, KeyError, TypeError: the segment cannot be parsed.
        """
        gone = self._gone.get(seg, set())
        return [d for d in _read_segment(seg) if d.doc_id not in gone]

    def _keep_rest(self, seg: Path, sent: list[Document], remaining: list[Document]) -> bool:
        """After the documents ``sent`` of ``seg`` went out: delete it when none remain
        (False), else rewrite it with the ``remaining`` ones (True: draining stops). When the
        disk has no room for the rewrite, the segment is kept as it is and the documents that
        left it are remembered, so this process neither sends nor acknowledges them twice."""
        if not remaining:
            seg.unlink()
            fsync_dir(self.root)
            del self._counts[seg], self._sizes[seg]
            self._gone.pop(seg, None)
            return False
        if len(remaining) < len(sent):
            try:
                write_atomically(seg, [compact_json(document_to_dict(d)) for d in remaining])
            except OSError as err:
                if not is_disk_full(err):
                    raise
                log.debug("%s kept as it was: no room to rewrite it (%s)", seg, err)
                left = {d.doc_id for d in remaining}
                self._gone.setdefault(seg, set()).update(
                    d.doc_id for d in sent if d.doc_id not in left
                )
            else:
                self._gone.pop(seg, None)
                self._sizes[seg] = seg.stat().st_size
            self._counts[seg] = len(remaining)
        return True

    def iter_documents(self) -> Iterable[Document]:
        """The spooled documents, oldest first (for inspection and tests)."""
        with self._lock:
            segments = list(self._counts)
        for seg in segments:
            yield from self._unsent(seg)


def _seq(seg: Path) -> int:
    m = _SEGMENT.match(seg.name)
    return int(m.group(1)) if m else 0


def _count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _read_segment(path: Path) -> list[Document]:
    docs: list[Document] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                docs.append(document_from_dict(json.loads(line)))
    return docs
