"""The dead-letter area: documents Elasticsearch rejected and input the parsers could not read.

Layout under ``<state_dir>/deadletter/`` (elastic.md §6.2, Logstash's DLQ: the original event,
the reason, the stage that wrote it and a time; reading it back does not delete it):

``documents.ndjson`` -- one rejected document per line, replayable::

    {"@timestamp":"2025-01-01T12:00:02.345000+00:00","index":"metrics-fio.histogram-default",
     "_id":"Zq3...","document":{...},"status":400,"error":{"type":
     "strict_dynamic_mapping_exception","reason":"mapping set to strict, ..."},"stage":"sink",
     "refs":[{"file_key":"...","path":"...","line_no":17,"end_offset":81234}]}

``inputs.ndjson`` -- one quarantined input line per line::

    {"@timestamp":"...","file":"/drop/a_clat_hist.1.log","line":17,"reason":"expected ...",
     "raw":"1000, 0, 4096, 1, 0, ...","stage":"parse"}

(plus ``"raw_base64"`` with the exact bytes when they are not valid UTF-8).

Appends are single ``write`` calls of whole lines on a file opened with ``O_APPEND``, flushed and
fsync'ed. :meth:`DeadLetters.replay` first renames ``documents.ndjson`` to
``documents.replay-<ns>.ndjson`` so concurrent appends go to a fresh file; a crash during a replay
leaves that file behind, and it is read (and replayed) like the main file.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pipeline.records.core import Document
from pipeline.records.json import JsonObject
from pipeline.sink.disk import fsync_dir
from pipeline.sink.spool import compact_json, document_from_dict, ref_to_dict

log = logging.getLogger(__name__)

DOCUMENTS = "documents.ndjson"
INPUTS = "inputs.ndjson"
_REPLAY_GLOB = "documents.replay-*.ndjson"


@dataclass(frozen=True)
class DeadDocument:
    """One entry of ``documents.ndjson``.

    Attributes:
        doc: the document as it was sent (index, ``_id``, source, refs).
        status: HTTP status of the rejection (400, 404, ...).
        error_type: Elasticsearch ``error.type`` (``strict_dynamic_mapping_exception``), or None.
        reason: Elasticsearch ``error.reason``, or our own words.
        stage: which stage gave up on it (``"sink"``).
        timestamp: when it was dead-lettered (ISO 8601, UTC).
    """

    doc: Document
    status: int
    error_type: str | None
    reason: str | None
    stage: str
    timestamp: str


@dataclass(frozen=True)
class DeadInput:
    """One entry of ``inputs.ndjson``: an input line a parser rejected.

    Attributes:
        path: the input file; line_no: 1-based line (0 = not tied to a line).
        reason: why it was rejected; stage: who rejected it (``"parse"``).
        raw: the line as text (undecodable bytes replaced by U+FFFD).
        raw_bytes: the exact bytes (from ``raw_base64`` when present, else ``raw`` encoded).
        timestamp: when it was quarantined (ISO 8601, UTC).
    """

    path: str
    line_no: int
    reason: str
    stage: str
    raw: str
    raw_bytes: bytes
    timestamp: str


@dataclass(frozen=True)
class Rejection:
    """A document the cluster rejected again during a replay, with the new error."""

    doc: Document
    status: int
    error_type: str | None
    reason: str | None


class Resender(Protocol):
    """What :meth:`DeadLetters.replay` needs from a sink (``BulkSink`` provides it)."""

    def resend(self, docs: Sequence[Document]) -> list[Rejection]:
        """Deliver ``docs`` now; return those rejected permanently (not dead-lettering them).

        Documents that cannot be delivered for the moment are the sink's business (it spools
        them); acknowledged and duplicate ones are settled.
        """
        ...


def _utc_now() -> datetime:
    return datetime.now(UTC)


def origin(doc: Document) -> str:
    """Where ``doc`` comes from, for a message: ``from FILE line N`` (and how many more lines),
    or ``made by iolens`` for a document no input line made (merged intervals, metrics)."""
    lines = [r for r in doc.refs if r.path]
    if not lines:
        return "made by iolens"
    more = f" and {len(lines) - 1} more lines" if len(lines) > 1 else ""
    return f"from {lines[0].path} line {lines[0].line_no}{more}"


class DeadLetters:
    """The dead-letter area under ``root`` (``<state_dir>/deadletter/``, created if missing).

    Args:
        root: the directory.
        now: wall clock for the entries' ``@timestamp`` (timezone-aware).
    """

    def __init__(self, root: Path, *, now: Callable[[], datetime] = _utc_now) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._now = now

    @property
    def documents_path(self) -> Path:
        """``documents.ndjson``."""
        return self.root / DOCUMENTS

    @property
    def inputs_path(self) -> Path:
        """``inputs.ndjson``."""
        return self.root / INPUTS

    def _append(self, path: Path, entry: JsonObject) -> None:
        append_whole(path, (compact_json(entry) + "\n").encode("utf-8"))

    def _entry(
        self, doc: Document, status: int, error_type: str | None, reason: str | None, stage: str
    ) -> JsonObject:
        return {
            "@timestamp": self._now().isoformat(),
            "index": doc.index,
            "_id": doc.doc_id,
            "document": doc.source,
            "status": status,
            "error": {"type": error_type, "reason": reason},
            "stage": stage,
            "refs": [ref_to_dict(r) for r in doc.refs],
        }

    def write_document(
        self, doc: Document, status: int, error_type: str | None, reason: str | None, stage: str
    ) -> None:
        """Append a rejected document to ``documents.ndjson`` (durable when this returns).

        Raises:
            OSError: the disk refused it. TypeError/ValueError: the source has no JSON form.
        """
        self._append(self.documents_path, self._entry(doc, status, error_type, reason, stage))
        log.warning(
            "dead-lettered %s/%s (%s) at stage %s: %s %s: %s. It is kept in %s: fix the cause "
            "(the template or the input), then run iolens deadletter replay",
            doc.index,
            doc.doc_id,
            origin(doc),
            stage,
            status,
            error_type,
            reason,
            self.documents_path,
        )

    def write_input(self, path: str, line_no: int, reason: str, raw: bytes, stage: str) -> None:
        """Append a quarantined input line to ``inputs.ndjson`` (durable when this returns).

        Logged at DEBUG only: the caller says what was rejected and why, once (a bad line, a
        quarantined file), in its own words.

        Args:
            path: the input file. line_no: 1-based line number, 0 when not tied to a line.
            reason: why it was rejected. raw: the line's bytes (without or with its newline).
            stage: who rejected it, e.g. ``"parse"``.
        """
        entry: JsonObject = {
            "@timestamp": self._now().isoformat(),
            "file": path,
            "line": line_no,
            "reason": reason,
            "raw": raw.decode("utf-8", errors="replace"),
            "stage": stage,
        }
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            entry["raw_base64"] = base64.b64encode(raw).decode("ascii")
        self._append(self.inputs_path, entry)
        log.debug("quarantined %s:%s at stage %s: %s", path, line_no, stage, reason)

    def _document_files(self) -> list[Path]:
        files = sorted(self.root.glob(_REPLAY_GLOB))
        if self.documents_path.exists():
            files.append(self.documents_path)
        return files

    def iter_documents(self) -> Iterator[DeadDocument]:
        """Every dead-lettered document (leftovers of an interrupted replay first).

        Lines that are not valid entries (a torn last line after a crash) are skipped with a
        warning naming file and line.
        """
        for path in self._document_files():
            for line_no, line in _lines(path):
                entry = _parse_document(path, line_no, line)
                if entry is not None:
                    yield entry

    def iter_inputs(self) -> Iterator[DeadInput]:
        """Every quarantined input line, in the order written (invalid lines skipped, logged)."""
        if not self.inputs_path.exists():
            return
        for line_no, line in _lines(self.inputs_path):
            try:
                data = json.loads(line)
                raw = str(data["raw"])
                b64 = data.get("raw_base64")
                yield DeadInput(
                    path=str(data["file"]),
                    line_no=int(data["line"]),
                    reason=str(data["reason"]),
                    stage=str(data["stage"]),
                    raw=raw,
                    raw_bytes=base64.b64decode(b64) if b64 else raw.encode("utf-8"),
                    timestamp=str(data["@timestamp"]),
                )
            except (ValueError, KeyError, TypeError) as err:
                log.warning(
                    "%s:%s: not a dead-letter entry (%s); skipped", self.inputs_path, line_no, err
                )

    def count(self) -> dict[str, int]:
        """``{"documents": n, "inputs": m}``: entries in the area (valid lines)."""
        return {
            "documents": sum(1 for _ in self.iter_documents()),
            "inputs": sum(1 for _ in self.iter_inputs()),
        }

    def replay(self, sink: Resender, *, batch_size: int = 500) -> int:
        """Re-send every dead-lettered document through ``sink``.

        ``documents.ndjson`` is first renamed aside (so new dead letters written meanwhile are
        kept); documents rejected again are appended back with their new error; documents the
        sink could not deliver for now are spooled by the sink. The renamed file is deleted at
        the end. Invalid lines are appended back unchanged so nothing is lost.

        Args:
            sink: anything with ``resend(docs) -> list[Rejection]`` (``BulkSink``).
            batch_size: documents per ``resend`` call.

        Returns:
            Number of documents that left the dead-letter area (indexed, duplicate or spooled).
        """
        if batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {batch_size!r}")
        resent = 0
        for path in self._set_aside():
            resent += self._replay_file(sink, path, batch_size)
        log.info("replayed dead letters: %s left the queue", resent)
        return resent

    def _set_aside(self) -> list[Path]:
        """The files to replay: those a stopped replay left, then ``documents.ndjson`` renamed
        aside (so new dead letters are written to a new file meanwhile)."""
        files = sorted(self.root.glob(_REPLAY_GLOB))
        if self.documents_path.exists():
            aside = self.root / f"documents.replay-{time.time_ns()}.ndjson"
            os.replace(self.documents_path, aside)
            fsync_dir(self.root)
            files.append(aside)
        return files

    def _replay_file(self, sink: Resender, path: Path, batch_size: int) -> int:
        """Replay one set-aside file in batches, then delete it; the number that left."""
        resent = 0
        batch: list[DeadDocument] = []
        for line_no, line in _lines(path):
            entry = _parse_document(path, line_no, line)
            if entry is None:
                self._append_raw(line)
                continue
            batch.append(entry)
            if len(batch) >= batch_size:
                resent += self._replay_batch(sink, batch)
                batch = []
        if batch:
            resent += self._replay_batch(sink, batch)
        path.unlink()
        fsync_dir(self.root)
        return resent

    def _replay_batch(self, sink: Resender, batch: list[DeadDocument]) -> int:
        rejected = sink.resend([e.doc for e in batch])
        stages = {e.doc.doc_id: e.stage for e in batch}
        for r in rejected:
            stage = stages.get(r.doc.doc_id, "sink")
            self.write_document(r.doc, r.status, r.error_type, r.reason, stage)
        return len(batch) - len(rejected)

    def _append_raw(self, line: str) -> None:
        append_whole(self.documents_path, (line.rstrip("\n") + "\n").encode("utf-8"))


def append_whole(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created when missing) and fsync it: all of it or, when the
    disk refuses part of it (full), none (the file is cut back to its former end).

    Raises:
        OSError: the disk refused the write.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        end = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except OSError:
            os.ftruncate(fd, end)
            raise
    finally:
        os.close(fd)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                yield n, line


def _parse_document(path: Path, line_no: int, line: str) -> DeadDocument | None:
    try:
        data = json.loads(line)
        error = data.get("error") or {}
        return DeadDocument(
            doc=document_from_dict(data, source_key="document"),
            status=int(data["status"]),
            error_type=error.get("type"),
            reason=error.get("reason"),
            stage=str(data["stage"]),
            timestamp=str(data["@timestamp"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        log.warning("%s:%s: not a dead-letter entry (%s); skipped", path, line_no, err)
        return None


__all__ = [
    "DeadDocument",
    "DeadInput",
    "DeadLetters",
    "Rejection",
    "Resender",
]
