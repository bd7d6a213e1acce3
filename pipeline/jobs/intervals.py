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

from pipeline.errors import ConfigError
from pipeline.state_files import open_checked, open_or_set_aside

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS dirty_intervals (
    interval_ms INTEGER NOT NULL,
    start_ms    INTEGER NOT NULL,
    touched_s   REAL NOT NULL,
    PRIMARY KEY (interval_ms, start_ms)
)
"""


def _setup(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(_SCHEMA)


class DirtyIntervals:
    """Intervals touched by acknowledged histogram documents, with the last touch time.

    Args:
        path: the SQLite file (kept as :attr:`path`).
        clock: wall-clock seconds (``time.time``).

    Raises:
        sqlite3.Error: the file cannot be opened; damaged
            (:func:`pipeline.state_files.is_damage`) when its content is
            (:func:`open_dirty_intervals` moves it aside).
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._db = open_checked(path, _setup)

    def touch(self, items: Iterable[tuple[int, int]]) -> None:
        """Mark ``(interval_ms, start_ms)`` pairs dirty now (one transaction)."""
        now = self._clock()
        rows = [(i, s, now) for i, s in set(items)]
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "INSERT INTO dirty_intervals VALUES (?, ?, ?) ON CONFLICT DO UPDATE "
                "SET touched_s = excluded.touched_s",
                rows,
            )
            self._db.execute("COMMIT")

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
        """Forget an interval (unless it was touched again after ``touched_before``)."""
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


def open_dirty_intervals(path: Path, *, clock: Callable[[], float] = time.time) -> DirtyIntervals:
    """Open ``<state_dir>/jobs.sqlite`` (as :class:`DirtyIntervals`); a damaged one is moved
    aside (:func:`pipeline.state_files.move_aside`) and a new one started, with a warning
    naming both files and what was lost: the intervals whose merged percentiles were still
    due. They are computed again when new histograms arrive for them, or when the files are
    read again (the registry moved aside too: nothing is indexed twice).

    Raises:
        ConfigError: the file cannot be opened for another reason (a read-only or removed
            state directory), naming it and what to do.
    """
    try:
        dirty, damaged = open_or_set_aside(path, lambda: DirtyIntervals(path, clock=clock), clock)
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
