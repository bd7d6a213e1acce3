"""Settling lines and committing offsets: the ack -> commit path.

Lines are tracked as they are shipped (each waits for its documents), settled further as a
format's tail holds or releases them, and acknowledged as the sink reports documents indexed
(:meth:`Delivery.acknowledged`, on the sink's callback). Whenever a file's longest fully
acknowledged prefix grows, its end offset and line number are committed to the registry with
the cursor the tail stored for that line. Nothing is committed before it is acknowledged, so a
crash repeats work (a 409 on replay) and never loses it.

The fio intervals acknowledged documents touched are marked dirty (``touch``) before any offset
is committed. When the state directory's disk is full, neither write is fatal: the intervals
and the positions to commit are kept in memory and written on the next commit or
:meth:`Delivery.retry` (an offset that is not written yet only means lines read again, as 409s,
after a crash).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pipeline.delivery.acks import AckTracker
from pipeline.records.core import Document, LineRef
from pipeline.shippers.interface import Tail
from pipeline.shippers.registry import Registry
from pipeline.sink.disk import DiskWatch, is_disk_full

log = logging.getLogger(__name__)

HISTOGRAM_INDEX_PREFIX = "metrics-fio.histogram-"
"""Documents of these indices mark their fio interval dirty (for the latency job)."""


@dataclass(frozen=True)
class Acknowledged:
    """What a batch of acknowledged documents settles, by who waits for it.

    Attributes:
        intervals: ``(interval_ms, start_ms)`` of fio histogram documents.
        job_refs: refs of documents derived from a job's own state (not a file's lines).
        file_refs: refs of file lines, in order.
    """

    intervals: frozenset[tuple[int, int]]
    job_refs: tuple[LineRef, ...]
    file_refs: tuple[LineRef, ...]


def sort_acknowledged(docs: Sequence[Document], job_key: str) -> Acknowledged:
    """Sort the refs of acknowledged ``docs``: those of ``job_key`` (a job's pseudo-file) from
    those of files, with the fio intervals the documents touched."""
    intervals: set[tuple[int, int]] = set()
    job_refs: list[LineRef] = []
    file_refs: list[LineRef] = []
    for doc in docs:
        if doc.index.startswith(HISTOGRAM_INDEX_PREFIX):
            iv = doc.source["fio"]["interval"]
            intervals.add((int(iv["ms"]), int(iv["start_ms"])))
        for ref in doc.refs:
            (job_refs if ref.file_key == job_key else file_refs).append(ref)
    return Acknowledged(frozenset(intervals), tuple(job_refs), tuple(file_refs))


class Delivery:
    """The lines read of each file, what they wait for, and their commits.

    Not thread-safe: the sink calls :meth:`acknowledged` on the thread that adds documents.

    Args:
        registry: where offsets are committed.
        find: registry key -> the file's tail (read or retired), whose stored cursor is
            committed with a line; None when there is none.
        touch: marks ``(interval_ms, start_ms)`` fio intervals dirty, durably
            (:meth:`DirtyIntervals.touch <pipeline.jobs.intervals.DirtyIntervals.touch>`).
        disk: told when the state directory's disk is full and when it has room again.
    """

    def __init__(
        self,
        registry: Registry,
        find: Callable[[str], Tail | None],
        touch: Callable[[Iterable[tuple[int, int]]], None],
        disk: DiskWatch,
    ) -> None:
        self.registry = registry
        self.acks = AckTracker()
        self._find = find
        self._touch = touch
        self._disk = disk
        self._intervals: set[tuple[int, int]] = set()
        self._keys: set[str] = set()
        self._unwritten: dict[str, tuple[int, int, str | None]] = {}

    def track(self, key: str, line_no: int, end_offset: int, waits: int) -> None:
        """A line was read that waits for ``waits`` acknowledgements."""
        self.acks.track(key, line_no, end_offset, waits)

    def settle(self, key: str, holds: Sequence[int], releases: Sequence[int]) -> None:
        """Lines (by end offset) that wait for one more acknowledgement each, then lines given
        one."""
        for end in holds:
            self.acks.hold(key, end)
        for end in releases:
            self.acks.ack(key, end)

    def forget(self, key: str) -> None:
        """Drop what is tracked of a file (it was truncated: read again from 0)."""
        self.acks.forget(key)
        self._unwritten.pop(key, None)
        self._keys.discard(key)

    def ack_lines(self, refs: Iterable[LineRef]) -> set[str]:
        """Acknowledge one document of each line; the keys of the files concerned."""
        keys: set[str] = set()
        for ref in refs:
            try:
                self.acks.ack(ref.file_key, ref.end_offset)
            except (KeyError, ValueError):
                # Delivered from the spool of an earlier process, or a second copy of
                # a line read again after a restart: the line is settled either way.
                log.debug("ack for %s:%s not tracked here", ref.path, ref.line_no)
                continue
            keys.add(ref.file_key)
        return keys

    def acknowledged(self, intervals: Iterable[tuple[int, int]], keys: Iterable[str]) -> None:
        """Mark ``intervals`` dirty, then commit the files ``keys`` (see :meth:`commit`)."""
        self._intervals.update(intervals)
        self._keys.update(keys)
        self.retry()

    def commit(self, key: str) -> None:
        """Commit file ``key`` up to its longest fully acknowledged prefix of lines (after the
        intervals waiting to be marked dirty); kept for :meth:`retry` when the disk is full."""
        self._keys.add(key)
        self.retry()

    def waiting(self) -> int:
        """Files whose acknowledged lines wait for a full disk to be committed."""
        return len(self._keys)

    def retry(self) -> None:
        """Write what waits: the dirty intervals first, then the files' offsets. A full disk
        is said once (:class:`~pipeline.sink.disk.DiskWatch`) and the rest kept for later.

        Raises:
            OSError, sqlite3.Error: a write failed for another reason than a full disk.
        """
        try:
            if self._intervals:
                self._touch(self._intervals)
                self._intervals = set()
            for key in sorted(self._keys):
                self._commit(key)
                self._keys.discard(key)
        except (OSError, sqlite3.OperationalError) as err:
            if not is_disk_full(err):
                raise
            waiting = f"the offsets of {len(self._keys)} files read and acknowledged"
            self._disk.full("registry", self.registry.path, waiting)
            return
        self._disk.ok("registry")

    def _commit(self, key: str) -> None:
        """Commit file ``key`` to the last position it reached (kept when the write fails)."""
        tail = self._find(key)
        latest = self._unwritten.pop(key, None)
        while (c := self.acks.committable(key)) is not None:
            offset, line_no = c
            latest = (offset, line_no, tail.take_snapshot(offset) if tail else None)
        if latest is None:
            return
        try:
            self.registry.commit(key, *latest)
        except BaseException:
            self._unwritten[key] = latest
            raise
