"""Durable list of output intervals whose merged percentiles are due (``<state_dir>/jobs.sqlite``).

When Elasticsearch acknowledges a histogram document, its interval is marked dirty here *before*
the file offset is committed, so a crash can only repeat work, never lose an interval. The
latency job clears an interval once its documents are acknowledged.

Clock steps (a wall clock set back or forward by hours while iolens runs) neither merge an
interval twice nor hold it back for hours:

* every touch takes the next number of a sequence (``seq``), and the latency job clears an
  interval only if it was not touched after the :meth:`DirtyIntervals.mark` it took before
  reading the histograms, whatever the clock did in between;
* how long an interval touched by this process has been quiet is measured on the monotonic
  clock, so a forward step does not make intervals still being written due at once;
* an interval touched by an earlier process is judged by its wall-clock ``touched_s``, and one
  touched "in the future" (the clock was set back since) is taken as touched now, so it waits
  ``settle_s`` more, not the hours the clock went back.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.shippers.registry import WAL_PAGES
from pipeline.sink.disk import is_disk_full
from pipeline.state_files import open_checked, open_or_set_aside

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dirty_intervals (
    interval_ms INTEGER NOT NULL,
    start_ms    INTEGER NOT NULL,
    touched_s   REAL NOT NULL,
    seq         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (interval_ms, start_ms)
)
"""


def _setup(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")  # a small log reuses its space
    db.execute(_SCHEMA)
    columns = {row[1] for row in db.execute("PRAGMA table_info(dirty_intervals)")}
    if "seq" not in columns:  # a list written before touches were numbered
        db.execute("ALTER TABLE dirty_intervals ADD COLUMN seq INTEGER NOT NULL DEFAULT 0")


class DirtyIntervals:
    """Intervals touched by acknowledged histogram documents, with the last touch time.

    Args:
        path: the SQLite file (kept as :attr:`path`).
        clock: wall-clock seconds (``time.time``), stored with each touch for the next process.
        monotonic: monotonic seconds (``time.monotonic``), for how long an interval touched by
            this process has been quiet.

    Raises:
        sqlite3.Error: the file cannot be opened; damaged
            (:func:`pipeline.state_files.is_damage`) when its content is
            (:func:`open_dirty_intervals` moves it aside).
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._clock, self._monotonic = clock, monotonic
        self._lock = threading.Lock()
        self._db = open_checked(path, _setup)
        row = self._db.execute("SELECT MAX(seq) FROM dirty_intervals").fetchone()
        self._seq = int(row[0] or 0)
        self._quiet_since: dict[tuple[int, int], float] = {}
        """Monotonic time of the last touch, for the intervals this process touched."""

    def touch(self, items: Iterable[tuple[int, int]]) -> None:
        """Mark ``(interval_ms, start_ms)`` pairs dirty now (one transaction).

        Raises:
            sqlite3.OperationalError: the disk is full (nothing written; the database stays
                usable).
        """
        pairs = set(items)
        if not pairs:
            return
        now, mono = self._clock(), self._monotonic()
        with self._lock:
            self._seq += 1
            rows = [(i, s, now, self._seq) for i, s in pairs]
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO dirty_intervals VALUES (?, ?, ?, ?) ON CONFLICT DO UPDATE "
                    "SET touched_s = excluded.touched_s, seq = excluded.seq",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            for pair in pairs:
                self._quiet_since[pair] = mono

    def mark(self) -> int:
        """The number of the last touch: :meth:`clear` with it leaves intervals touched later."""
        with self._lock:
            return self._seq

    def due(self, settle_s: float, force: bool = False) -> list[tuple[int, int]]:
        """Intervals untouched for ``settle_s`` seconds (all of them with ``force``), in order
        (see the module docstring for how the time is measured)."""
        now, mono = self._clock(), self._monotonic()
        with self._lock:
            # touched "in the future": the clock was set back since; quiet from now on
            with contextlib.suppress(sqlite3.OperationalError):  # a full disk: next time
                self._db.execute(
                    "UPDATE dirty_intervals SET touched_s = ? WHERE touched_s > ?", (now, now)
                )
            cur = self._db.execute(
                "SELECT interval_ms, start_ms, touched_s FROM dirty_intervals "
                "ORDER BY start_ms, interval_ms"
            )
            rows = [((int(a), int(b)), float(t)) for a, b, t in cur.fetchall()]
            return [
                item
                for item, touched_s in rows
                if force or self._quiet_s(item, touched_s, now, mono) >= settle_s
            ]

    def _quiet_s(self, item: tuple[int, int], touched_s: float, now: float, mono: float) -> float:
        """Seconds ``item`` has been untouched: by the monotonic clock when this process
        touched it, else by the wall clock."""
        since = self._quiet_since.get(item)
        return now - touched_s if since is None else mono - since

    def clear(self, item: tuple[int, int], touched_before: int | None = None) -> None:
        """Forget an interval, unless it was touched after the :meth:`mark` ``touched_before``.
        On a full disk it stays dirty (merged again later, which is harmless)."""
        try:
            self._clear(item, touched_before)
        except sqlite3.OperationalError as err:
            if not is_disk_full(err):
                raise
            log.debug("interval %s stays dirty: the disk is full (%s)", item, err)

    def _clear(self, item: tuple[int, int], touched_before: int | None) -> None:
        with self._lock:
            if touched_before is None:
                cur = self._db.execute(
                    "DELETE FROM dirty_intervals WHERE interval_ms = ? AND start_ms = ?", item
                )
            else:
                cur = self._db.execute(
                    "DELETE FROM dirty_intervals WHERE interval_ms = ? AND start_ms = ? "
                    "AND seq <= ?",
                    (*item, touched_before),
                )
            if cur.rowcount:
                self._quiet_since.pop(item, None)

    def count(self) -> int:
        """Number of dirty intervals."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM dirty_intervals").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


def open_dirty_intervals(
    path: Path,
    *,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    when_full: Callable[[Callable[[], DirtyIntervals]], DirtyIntervals] | None = None,
) -> DirtyIntervals:
    """Open ``<state_dir>/jobs.sqlite`` (as :class:`DirtyIntervals`, with ``clock`` and
    ``monotonic``); a damaged one is moved
    aside (:func:`pipeline.state_files.move_aside`) and a new one started, with a warning
    naming both files and what was lost: the intervals whose merged percentiles were still
    due. They are computed again when new histograms arrive for them, or when the files are
    read again (the registry moved aside too: nothing is indexed twice).

    ``when_full(opener)`` opens it when given: it waits while the disk is too full for the file
    (:func:`pipeline.sink.disk.open_when_room`), inside the check for damage.

    Raises:
        ConfigError: the file cannot be opened for another reason (a read-only or removed
            state directory), naming it and what to do.
    """

    def opener() -> DirtyIntervals:
        return DirtyIntervals(path, clock=clock, monotonic=monotonic)

    try:
        dirty, damaged = open_or_set_aside(
            path, opener if when_full is None else lambda: when_full(opener), clock
        )
    except (OSError, sqlite3.Error) as err:
        raise ConfigError(
            f"{path} cannot be opened ({err}): make the state directory {path.parent} "
            "writable (remount it read-write, fix its owner or mode) or pass another --state-dir"
        ) from None
    if damaged is not None:
        log.warning(
            "%s is damaged (%s): moved it aside to %s and started a new one. Merged "
            "percentiles (metrics-fio.latency) still due for intervals it listed are computed "
            "only when new histograms arrive for them; to compute them all again, stop iolens "
            "and move %s aside too (the files are read again, nothing is indexed twice)",
            path,
            damaged.reason,
            damaged.aside,
            path.with_name("registry.sqlite"),
        )
    return dirty
