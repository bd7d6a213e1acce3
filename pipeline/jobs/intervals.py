"""Durable list of output intervals whose merged percentiles are due (``<state_dir>/jobs.sqlite``).

When Elasticsearch acknowledges a histogram document, its interval is marked dirty here *before*
the file offset is committed, so a crash can only repeat work, never lose an interval. The
latency job clears an interval once its documents are acknowledged.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from pipeline.shippers.registry import WAL_PAGES
from pipeline.sink.disk import is_disk_full

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dirty_intervals (
    interval_ms INTEGER NOT NULL,
    start_ms    INTEGER NOT NULL,
    touched_s   REAL NOT NULL,
    PRIMARY KEY (interval_ms, start_ms)
)
"""


class DirtyIntervals:
    """Intervals touched by acknowledged histogram documents, with the last touch time.

    Args:
        path: the SQLite file.
        clock: wall-clock seconds (``time.time``).
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")
            self._db.execute(_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def touch(self, items: Iterable[tuple[int, int]]) -> None:
        """Mark ``(interval_ms, start_ms)`` pairs dirty now (one transaction).

        Raises:
            sqlite3.OperationalError: the disk is full (nothing written; the database stays
                usable).
        """
        now = self._clock()
        rows = [(i, s, now) for i, s in set(items)]
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO dirty_intervals VALUES (?, ?, ?) ON CONFLICT DO UPDATE "
                    "SET touched_s = excluded.touched_s",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise

    def due(self, settle_s: float, force: bool = False) -> list[tuple[int, int]]:
        """Intervals untouched for ``settle_s`` seconds (all of them with ``force``), in order."""
        limit = float("inf") if force else self._clock() - settle_s
        with self._lock:
            cur = self._db.execute(
                "SELECT interval_ms, start_ms FROM dirty_intervals WHERE touched_s <= ? "
                "ORDER BY start_ms, interval_ms",
                (limit,),
            )
            return [(int(a), int(b)) for a, b in cur.fetchall()]

    def clear(self, item: tuple[int, int], touched_before: float | None = None) -> None:
        """Forget an interval (unless it was touched again after ``touched_before``). On a
        full disk it stays dirty (merged again later, which is harmless)."""
        try:
            self._clear(item, touched_before)
        except sqlite3.OperationalError as err:
            if not is_disk_full(err):
                raise
            log.debug("interval %s stays dirty: the disk is full (%s)", item, err)

    def _clear(self, item: tuple[int, int], touched_before: float | None) -> None:
        with self._lock:
            if touched_before is None:
                self._db.execute(
                    "DELETE FROM dirty_intervals WHERE interval_ms = ? AND start_ms = ?", item
                )
            else:
                self._db.execute(
                    "DELETE FROM dirty_intervals WHERE interval_ms = ? AND start_ms = ? "
                    "AND touched_s <= ?",
                    (*item, touched_before),
                )

    def count(self) -> int:
        """Number of dirty intervals."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM dirty_intervals").fetchone()[0])

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()
