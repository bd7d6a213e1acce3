"""The state directory's file system filling up: telling a full disk from other errors, the
free bytes, and saying once that it is full and once that it has room again.

Everything iolens keeps lives in ``<state_dir>``: the spool, the dead letters, the registry and
the jobs' SQLite databases, the notices and service rates. When that file system is full, iolens
does what Filebeat and Logstash's persistent queue do: it stops reading new input and waits,
keeping what it already accepted, and tries again:

* the spool leaves :data:`RESERVE_BYTES` free for the state databases: a segment that would
  eat into them is refused as if ``sink.spool_max_bytes`` were reached
  (:class:`~pipeline.sink.spool.Spool`), so the documents are held in memory and reading waits;
* a write that finds the disk full anyway (``ENOSPC``, ``EDQUOT``, SQLite's
  ``SQLITE_FULL``: "database or disk is full") is not fatal: what it would have written is
  kept (in memory, or where it was) and written again later;
* :class:`DiskWatch` says it once (the path, the free bytes, what waits), and once when the
  writes go through again.

The spool is delivered as soon as the cluster answers, which frees the space.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

RESERVE_BYTES = 256 << 10
"""Bytes of the state directory's file system the spool leaves free for the registry, the jobs'
database, dead letters and notices (bytes)."""

FULL_MESSAGE = (
    "the state directory's disk is full: cannot write %s (%s bytes free on the file system of "
    "%s); %s wait and reading new input waits until there is room (nothing is dropped; what "
    "is spooled is delivered when Elasticsearch answers, which frees space). iolens tries "
    "again by itself; to go on sooner, free space there or move state_dir to a larger file "
    "system"
)
"""Said once when the state directory's disk fills (path, free bytes, directory, what waits)."""

_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})

Statvfs = Callable[[Path], os.statvfs_result]


def is_disk_full(err: BaseException) -> bool:
    """Whether ``err`` says the disk (or the user's quota) is full: an ``OSError`` with
    ``ENOSPC``/``EDQUOT``, or SQLite's ``SQLITE_FULL``."""
    if isinstance(err, OSError):
        return err.errno in _FULL_ERRNOS
    if isinstance(err, sqlite3.OperationalError):
        code = getattr(err, "sqlite_errorcode", None)
        return code == sqlite3.SQLITE_FULL or "database or disk is full" in str(err)
    return False


def too_full_to_open(err: BaseException, free: int | None) -> bool:
    """Whether SQLite's ``err`` on opening a database comes from a full disk: SQLITE_FULL, or
    an I/O error (making its ``-shm`` file) while less than :data:`RESERVE_BYTES` are
    ``free``."""
    if is_disk_full(err):
        return True
    if not isinstance(err, sqlite3.OperationalError) or free is None or free >= RESERVE_BYTES:
        return False
    code = getattr(err, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_IOERR


def open_when_room(
    open_db: Callable[[], T],
    path: Path,
    disk: DiskWatch,
    make_room: Callable[[], object],
    *,
    sleep: Callable[[float], None] = time.sleep,
    delays_s: Sequence[float] = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0),
) -> T:
    """``open_db()`` (a state database at ``path``); while the disk is too full for it, say so
    once (``disk``), wait (``delays_s``, the last repeated), ``make_room()`` (deliver the spool)
    and try again.

    Raises:
        sqlite3.Error: the database cannot be opened for another reason.
    """
    for attempt in itertools.count():
        try:
            db = open_db()
        except sqlite3.OperationalError as err:
            if not too_full_to_open(err, disk.free()):
                raise
            waiting = (
                "the start of the run (the spool is delivered first, when Elasticsearch answers)"
            )
            disk.full("open", path, waiting)
            sleep(delays_s[min(attempt, len(delays_s) - 1)])
            make_room()
            continue
        disk.ok("open")
        return db
    raise AssertionError("unreachable")


def free_bytes(path: Path, statvfs: Statvfs = os.statvfs) -> int | None:
    """Bytes an unprivileged writer can still put on the file system of ``path`` (the nearest
    existing parent is asked); None when it cannot be told."""
    where = path
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        st = statvfs(where)
        return int(st.f_bavail * st.f_frsize)
    except OSError:
        return None


class DiskWatch:
    """What waits because the state directory's disk is full, said once when it fills and once
    when it has room again. Thread-safe (the sink's thread and the reading thread report).

    Args:
        root: the state directory.
        clock: monotonic seconds (how long it was full).
        statvfs: ``os.statvfs`` (a fake in tests).
    """

    def __init__(
        self,
        root: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        statvfs: Statvfs = os.statvfs,
    ) -> None:
        self.root = root
        self.statvfs = statvfs
        self._clock = clock
        self._lock = threading.Lock()
        self._waiting: dict[str, str] = {}
        self._since: float | None = None

    def free(self) -> int | None:
        """Free bytes of the state directory's file system (None: cannot tell)."""
        return free_bytes(self.root, self.statvfs)

    def is_full(self) -> bool:
        """Whether some write is waiting for room."""
        with self._lock:
            return bool(self._waiting)

    def full(self, what: str, path: Path, waiting: str) -> None:
        """A write of ``path`` by ``what`` (e.g. ``"spool"``) found no room; ``waiting`` says
        what waits for it (e.g. ``"120 documents"``). Said at ERROR the first time the disk
        fills, at DEBUG while it stays full."""
        free = self.free()
        with self._lock:
            first = not self._waiting
            self._waiting[what] = waiting
            if first:
                self._since = self._clock()
        args = (path, "unknown" if free is None else free, self.root, waiting)
        if first:
            log.error(FULL_MESSAGE, *args)
        else:
            log.debug(FULL_MESSAGE, *args)

    def ok(self, what: str) -> None:
        """The writes of ``what`` go through again; when nothing waits any more, say once that
        the disk has room again."""
        with self._lock:
            if what not in self._waiting:
                return
            del self._waiting[what]
            if self._waiting or self._since is None:
                return
            took = self._clock() - self._since
            self._since = None
        log.warning(
            "the state directory %s has room again after %.0f s (%s bytes free); reading resumes",
            self.root,
            took,
            self.free(),
        )


def write_atomically(path: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (each without its newline) to ``path`` via temp file + fsync + rename.

    The directory is fsync'ed afterwards so the rename itself survives a crash.
    A write that fails (the disk is full) removes the temporary file and leaves ``path`` as it
    was.

    Raises:
        OSError: the disk refused the write.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for line in lines:
                fh.write(line)
                fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so that renames and unlinks in it are durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
