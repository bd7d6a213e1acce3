"""Reading: every complete line of a file -> its format's shipper -> the sink and delivery.

:meth:`Pump.pump` reads a file chunk by chunk until it has no complete line left; each line's
result (documents, a bad line, holds and releases) goes to the sink, the dead-letter area and
:class:`~pipeline.delivery.commit.Delivery`. A file that is not a line log (no line end within
1 MiB, damaged gzip data) or that its parser rejects whole is quarantined: copied to
``deadletter/files/`` and read no more.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import logging
import os
import shutil
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pipeline.delivery.commit import Delivery
from pipeline.jobs.service_monitor import ServiceMonitor
from pipeline.jobs.summary import RunSummary
from pipeline.parsers.errors import ParseError
from pipeline.records.core import LineRef
from pipeline.shippers.discovery import FileSet
from pipeline.shippers.interface import Shipper, Tail
from pipeline.shippers.results import BadLine, LineResult, Released
from pipeline.shippers.tailer import LineTooLong, TailChunk, read_last_line
from pipeline.sink.disk import is_disk_full
from pipeline.sink.documents import DocContext
from pipeline.sink.sender import AsyncSink

log = logging.getLogger(__name__)


def keep_file(path: str, dest: Path) -> Path:
    """Copy ``path`` into ``dest`` under its name (``name.N`` when another file of that name
    is there); the copy's path (nothing is copied when the file is gone)."""
    dest.mkdir(parents=True, exist_ok=True)
    name = Path(path).name
    kept, n = dest / name, 0
    while kept.exists():
        n += 1
        kept = dest / f"{name}.{n}"
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(path, kept)
    return kept


class Pump:
    """Reads files and ships their lines.

    Args:
        files: the files being read.
        delivery: line tracking and offset commits.
        sink: where documents and bad lines go.
        doc_ctx: the documents' namespace.
        summary: counters of the run (lines, bad lines, bad files).
        read_chunk_bytes: read budget per chunk (``shipper.read_chunk_bytes``).
        clock: wall-clock seconds.
        monitor: the service-rate monitor (read and parse times), if enabled.
        after_chunk: called after each chunk shipped (the service-rate documents the monitor
            made meanwhile are sent).
    """

    def __init__(
        self,
        files: FileSet,
        delivery: Delivery,
        sink: AsyncSink,
        doc_ctx: DocContext,
        summary: RunSummary,
        read_chunk_bytes: int,
        clock: Callable[[], float],
        monitor: ServiceMonitor | None,
        after_chunk: Callable[[], None],
    ) -> None:
        self.files, self.delivery, self.sink = files, delivery, sink
        self.doc_ctx, self.summary = doc_ctx, summary
        self.read_chunk_bytes, self.clock, self.monitor = read_chunk_bytes, clock, monitor
        self.after_chunk = after_chunk
        self.stopping = threading.Event()
        """Set: reading stops between chunks (the rest is read next time)."""
        self.read_keys: set[str] = set()
        self._unended_said: set[str] = set()
        self._bad_lines: Counter[str] = Counter()
        """Files of which lines were read."""

    def shipper_of(self, tail: Tail) -> Shipper:
        """The shipper of ``tail``'s drop format."""
        return self.files.shippers[self.files.drops[tail.key].type]

    def pump(self, tail: Tail) -> int:
        """Read and ship every complete line now in the file; returns lines read.

        A file that is not a line log (no line end within 1 MiB, damaged gzip data) is
        quarantined whole; a ``.gz`` still being written is tried again later. Reading stops
        between chunks once :attr:`stopping` is set (the rest is read next time).
        """
        n = 0
        if not self.files.still_there(tail):
            return n
        while not self.stopping.is_set() and not self.sink.refusing():
            started = time.perf_counter()
            chunk = self._read(tail)
            if chunk is None:
                return n
            if chunk.truncated:
                self.files.truncated_now(tail)
                self.delivery.forget(tail.key)
                continue
            if not chunk.lines:
                tail.exhausted = tail.compressed
                self._unended(tail)
                return n
            n += len(chunk.lines)
            if not self._ship_timed(tail, chunk, started):
                return n
            if tail.compressed:
                tail.exhausted = True
                return n
        return n

    def _read(self, tail: Tail) -> TailChunk | None:
        """The next chunk; None when reading stops here (gone, incomplete, unreadable,
        replaced, or quarantined).

        On a stale file handle (``ESTALE``) the file is opened again by its path and, when it is
        the same file, read on from its offset; a file that cannot be read is reported (see
        :class:`~pipeline.shippers.unreadable.Unreadable`) and tried again later.
        """
        for attempt in (0, 1):
            try:
                chunk = tail.read(self.read_chunk_bytes)
            except FileNotFoundError:
                self.files.retire(tail.key)
            except EOFError:
                log.info("%s: not complete yet; will retry", tail.path)
            except (LineTooLong, gzip.BadGzipFile, zlib.error) as err:
                self.quarantine(tail, ParseError(tail.path, tail.line_no + 1, str(err)))
            except OSError as err:
                if err.errno == errno.ESTALE and attempt == 0 and self._reopened(tail):
                    continue
                self.files.unreadable.report(tail.path, err)
            else:
                self.files.unreadable.readable(tail.path)
                return chunk if self._same_file(tail) else None
            return None
        return None

    def _unended(self, tail: Tail) -> None:
        """At the end of ``iolens run --once``, say (once per file) that an export's last line
        has no line end and is not read: a writer may still be writing it, and it is read once
        it ends (see :attr:`Shipper.final_line`)."""
        shipper = self.shipper_of(tail)
        if not (shipper.final_line and shipper.ctx.once) or tail.compressed:
            return
        if tail.key in self._unended_said:
            return
        try:
            chunk = read_last_line(tail.path, tail.offset)
        except OSError:
            return
        if chunk.lines:
            self._unended_said.add(tail.key)
            log.warning(
                "%s: the last line (line %d, bytes %d to %d) has no line end and is not read: a "
                "line still being written ends like this; if the file is complete, end it with "
                "a newline and run again",
                tail.path,
                tail.line_no + 1,
                tail.offset,
                chunk.next_offset,
            )

    def _reopened(self, tail: Tail) -> bool:
        """After ``ESTALE``: whether ``tail.path``, opened again, is still the tail's file (a
        fresh lookup gets a fresh handle from the server)."""
        if not self.files.still_there(tail):
            return False
        log.info(
            "%s: stale file handle (ESTALE); opened again by its path, it is the same file: "
            "reading on from byte %s",
            tail.path,
            tail.offset,
        )
        return True

    def _same_file(self, tail: Tail) -> bool:
        """Whether ``tail.path`` still holds the tail's file after a read (device and inode);
        if another file replaced it meanwhile, what was just read may be either's: it is not
        shipped, and the replacement is handled (:meth:`FileSet.still_there`). A file gone
        since counts as the same (it was opened before it went)."""
        try:
            st = os.stat(tail.path)
        except OSError:
            return True
        if tail.key.split(":")[:2] == [str(st.st_dev), str(st.st_ino)]:
            return True
        self.files.still_there(tail)
        return False

    def _ship_timed(self, tail: Tail, chunk: TailChunk, started: float) -> bool:
        """Ship ``chunk`` and tell the monitor the read and parse times; False when the file
        was quarantined."""
        self.read_keys.add(tail.key)
        read_s = time.perf_counter() - started
        waited = self.sink.put_wait_s
        try:
            self.ship(tail, chunk)
        except ParseError as err:
            self.quarantine(tail, err)
            return False
        if self.monitor is not None:
            parse_s = time.perf_counter() - started - read_s - (self.sink.put_wait_s - waited)
            self.monitor.busy("read", len(chunk.lines), read_s)
            self.monitor.busy("parse", len(chunk.lines), max(parse_s, 0.0))
        return True

    def ship(self, tail: Tail, chunk: TailChunk) -> None:
        """Ship what each line of ``chunk`` produced, until the sink refuses more.

        Raises:
            ParseError: the file is unusable as a whole (its format's first line).
        """
        now_ms = self.clock() * 1000
        for res in self.shipper_of(tail).ship(tail, chunk, self.doc_ctx, now_ms):
            self._line(tail.key, res)
            if self.sink.refusing():  # the rest of the chunk is read again next time
                break
        self.sink.poll()
        self.after_chunk()

    def _line(self, key: str, res: LineResult) -> None:
        """One line's (or chunk's) result: its bad lines kept, its documents added, the line
        tracked."""
        self.summary.lines += res.lines
        unkept = 0
        bad = res.bad_lines if res.bad is None else (res.bad, *res.bad_lines)
        for b in bad:
            self.summary.bad_lines += 1
            if not self._keep_bad_line(b.ref, b):
                unkept += 1  # never acknowledged: not committed
        waits = unkept + (len(res.docs) if res.pending is None else res.pending)
        self.delivery.track(key, res.ref.line_no, res.ref.end_offset, waits)
        self.delivery.settle(key, res.holds, res.releases)
        for doc in res.docs:
            self.sink.add(doc)
        if not waits or res.releases:
            self.delivery.commit(key)

    def _keep_bad_line(self, ref: LineRef, bad: BadLine) -> bool:
        """Keep the bad line ``ref`` in the dead-letter area; False when the disk is full (said
        once): the line is then not committed, so the next run reads it again."""
        try:
            self.sink.deadletters.write_input(
                ref.path, ref.line_no, bad.error.reason, bad.raw, "parse"
            )
        except OSError as err:
            if not is_disk_full(err):
                raise
            waiting = f"bad lines to keep (line {ref.line_no} of {ref.path} first)"
            self.sink.disk.full("bad lines", self.sink.deadletters.inputs_path, waiting)
            return False
        self._bad_lines[ref.path] += 1
        if self._bad_lines[ref.path] == 1:
            log.warning(
                "%s (kept in the dead-letter area; more bad lines of this file are counted and "
                "said at the end of the run)",
                bad.error,
            )
        else:
            log.debug("%s (kept in the dead-letter area)", bad.error)
        self.sink.disk.ok("bad lines")
        return True

    def idle(self, final: bool = False) -> None:
        """Let quiet files go of what they hold, and formats ship what is due without new
        lines (workload model snapshots); everything, when ``final``."""
        now = self.clock()
        if final:
            self._say_bad_lines()
        tails = list(self.files.tails.values())
        for shipper in self.files.shippers.values():
            mine = [t for t in tails if self.shipper_of(t) is shipper]
            for idled in shipper.idle(mine, now, final):
                self._released(idled.key, idled.released)

    def _say_bad_lines(self) -> None:
        """Per file with more than one, how many bad lines were kept (each file's first was
        logged as it came)."""
        for path, n in sorted(self._bad_lines.items()):
            if n > 1:
                log.warning(
                    "%s: %d bad lines in all, kept in the dead-letter area (iolens deadletter "
                    "list)",
                    path,
                    n,
                )
        self._bad_lines.clear()

    def _released(self, key: str | None, rel: Released) -> None:
        if key is not None:
            self.delivery.settle(key, rel.holds, rel.releases)
        for doc in rel.docs:
            self.sink.add(doc)
        if key is not None and rel.releases:
            self.delivery.commit(key)

    def quarantine(self, tail: Tail, err: ParseError) -> None:
        """Copy a file that cannot be read at all to ``deadletter/files/`` (see
        :func:`keep_file`), note it with the reason, and read it no more."""
        self.summary.bad_files += 1
        kept = keep_file(tail.path, self.sink.deadletters.root / "files")
        self.sink.deadletters.write_input(tail.path, err.line_no, err.reason, b"", "parse")
        log.error("%s; the file is kept as %s and skipped", err, kept)
        self.files.registry.mark_done(tail.key)
        self.files.retire(tail.key)
