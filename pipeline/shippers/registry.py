"""The registry: durable per-file reading state in SQLite, keyed by file identity.

Like Filebeat's registry (elastic.md §6.1), it stores per file its identity key, the path it was
last seen at and the committed offset; on restart each file resumes at that offset. Unlike Filebeat,
the offset is committed only after Elasticsearch acknowledged every document derived from the bytes
before it (see :mod:`pipeline.delivery.acks`), and a truncation bumps a per-file ``generation`` that
callers put into document ids, so rewritten content at an old offset is not mistaken for a
duplicate (elastic.md §6.1, design implication 3).

Each row also names the cluster its committed lines were delivered to (``cluster``: the
cluster's identity from :func:`pipeline.sink.cluster_id.cluster_id`; NULL in rows written
before the column existed, which count as delivered to whatever cluster is in use). A file
whose lines went to another cluster is not resumed there: its offset means nothing to the new
cluster (:meth:`FileState.delivered_elsewhere`, :meth:`Registry.redeliver`).

Storage: ``<state_dir>/registry.sqlite`` in WAL mode with ``synchronous=FULL``; every mutation is
one transaction, so a committed value survives a crash of the process or the machine. A
transaction the disk refuses (full) is rolled back and its error raised; the registry stays
usable. For ``.gz``
inputs (read whole, see :func:`pipeline.shippers.tailer.read_gzip_lines`) ``offset`` and
``size_seen`` count *decompressed* bytes.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pipeline.state_files import open_checked

log = logging.getLogger(__name__)

REGISTRY_FILE = "registry.sqlite"
"""File name of the registry inside ``state_dir``."""

WAL_PAGES = 32
"""Pages (4 KiB) the write-ahead log grows to before it is copied into the database and written
again from its start: a WAL that stays small and reuses its space keeps commits going on a full
state directory (SQLite's default, 1000 pages, outgrows a small one)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    key            TEXT PRIMARY KEY,
    path           TEXT NOT NULL,
    offset         INTEGER NOT NULL DEFAULT 0,
    line_no        INTEGER NOT NULL DEFAULT 0,
    size_seen      INTEGER NOT NULL DEFAULT 0,
    cursor         TEXT,
    anchor_ms      INTEGER,
    first_seen_ms  INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    done           INTEGER NOT NULL DEFAULT 0,
    generation     INTEGER NOT NULL DEFAULT 0,
    cluster        TEXT
)
"""

_MIGRATIONS = (("cluster", "ALTER TABLE files ADD COLUMN cluster TEXT"),)
"""Columns added since the first schema, with the statement that adds each to an older
registry (their rows get NULL)."""

_COLUMNS = (
    "key, path, offset, line_no, size_seen, cursor, anchor_ms, first_seen_ms, updated_ms, done, "
    "generation, cluster"
)

Row = tuple[str, str, int, int, int, str | None, int | None, int, int, int, int, str | None]


@dataclass(frozen=True)
class FileState:
    """The committed state of one file.

    Attributes:
        key: the file's identity key, ``device:inode:fingerprint``.
        path: where the file was last seen.
        offset: bytes committed: every line ending at or before it is fully acknowledged.
        line_no: lines committed (the 1-based number of the last committed line; 0 = none).
        size_seen: the file size (bytes) last observed by the shipper.
        cursor: JSON text a parser needs to resume at ``offset``; opaque here. None = no state.
        anchor_ms: a time anchor for the file (e.g. fio's run start in Unix ms); opaque here.
        first_seen_ms: when the file was first registered (Unix ms).
        updated_ms: when the row last changed (Unix ms).
        done: the file was read completely and will not change (whole-file inputs).
        generation: how many times the file was truncated and restarted at 0; part of doc ids.
        cluster: the identity of the cluster the committed lines went to; None when unknown
            (rows from before the column existed, or runs that could not tell).
    """

    key: str
    path: str
    offset: int
    line_no: int
    size_seen: int
    cursor: str | None
    anchor_ms: int | None
    first_seen_ms: int
    updated_ms: int
    done: bool
    generation: int
    cluster: str | None = None

    @classmethod
    def _from_row(cls, row: Row) -> FileState:
        key, path, offset, line_no, size_seen, cursor, anchor, first, updated, done, gen, c = row
        return cls(
            key,
            path,
            offset,
            line_no,
            size_seen,
            cursor,
            anchor,
            first,
            updated,
            bool(done),
            gen,
            c,
        )

    def delivered_elsewhere(self, cluster: str | None) -> bool:
        """Whether lines of this file were committed for a cluster other than ``cluster``.

        False when nothing was committed (``offset`` 0), when either cluster is unknown (None:
        an old row counts as delivered to the cluster in use) or when they are the same.
        """
        return bool(self.offset and self.cluster and cluster and self.cluster != cluster)


class Registry:
    """Durable per-file state in one SQLite file. Thread-safe (one connection behind a lock).

    Args:
        path: the database file, normally ``<state_dir>/registry.sqlite``; its directory is created.
        clock: seconds since the Unix epoch (``time.time``), for ``first_seen_ms``/``updated_ms``.
        cluster: the identity of the cluster this process delivers to; :meth:`commit` records
            it with each file's offset. None: unknown (the recorded cluster is left as it is).

    A registry written before a column was added is brought up to date when opened (the
    new columns are NULL in its rows).

    Raises:
        sqlite3.Error: the database cannot be opened or is not a registry; damaged
            (:func:`pipeline.state_files.is_damage`) when SQLite or ``PRAGMA quick_check``
            finds its content damaged (:func:`open_registry` moves it aside).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        clock: Callable[[], float] = time.time,
        cluster: str | None = None,
    ) -> None:
        self.path = Path(path)
        self.cluster = cluster
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.Lock()
        self._db = open_checked(self.path, self._setup)

    def _setup(self, db: sqlite3.Connection) -> None:
        """WAL, full sync, a small log, the table and its newer columns (after the file was
        checked)."""
        self._db = db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_PAGES}")  # a small log reuses its space
        db.execute(_SCHEMA)
        self._migrate()

    def _migrate(self) -> None:
        """Add the columns an older registry lacks (another process may be doing the same)."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(files)")}
        for column, statement in _MIGRATIONS:
            if column in have:
                continue
            try:
                self._db.execute(statement)
            except sqlite3.OperationalError as err:
                if "duplicate column" not in str(err):
                    raise
            log.debug("registry %s: added column %s", self.path, column)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any error."""
        with self._lock:
            cur = self._db.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
                cur.execute("COMMIT")  # a full disk fails here, with the transaction still open
            except BaseException:
                if self._db.in_transaction:
                    cur.execute("ROLLBACK")
                raise

    @staticmethod
    def _select(cur: sqlite3.Cursor, key: str) -> FileState | None:
        row = cur.execute(f"SELECT {_COLUMNS} FROM files WHERE key = ?", (key,)).fetchone()
        return None if row is None else FileState._from_row(row)

    @classmethod
    def _require(cls, cur: sqlite3.Cursor, key: str) -> FileState:
        state = cls._select(cur, key)
        if state is None:
            raise KeyError(f"no registry entry for file {key}")
        return state

    def get(self, key: str) -> FileState | None:
        """The state of file ``key``, or None if it was never registered."""
        with self._lock:
            return self._select(self._db.cursor(), key)

    def all(self) -> list[FileState]:
        """Every registered file, ordered by key."""
        with self._lock:
            rows = self._db.execute(f"SELECT {_COLUMNS} FROM files ORDER BY key").fetchall()
        return [FileState._from_row(r) for r in rows]

    def by_path(self, path: str | Path) -> list[FileState]:
        """Every file last seen at ``path`` (several when it was rewritten or replaced),
        newest first."""
        with self._lock:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM files WHERE path = ? ORDER BY first_seen_ms DESC, key",
                (str(path),),
            ).fetchall()
        return [FileState._from_row(r) for r in rows]

    def upsert_new(self, key: str, path: str | Path, anchor_ms: int | None = None) -> FileState:
        """Register a newly seen file at offset 0, or return the existing entry.

        An existing entry keeps its progress, cursor, anchor and generation; only its path is
        updated (the file may have been renamed while the shipper was down).

        Returns:
            The entry as stored after the call.
        """
        now = self._now_ms()
        with self._tx() as cur:
            if self._select(cur, key) is None:
                cur.execute(
                    "INSERT INTO files (key, path, anchor_ms, first_seen_ms, updated_ms) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (key, str(path), anchor_ms, now, now),
                )
                log.debug("registered %s at %s", key, path)
            else:
                cur.execute(
                    "UPDATE files SET path = ?, updated_ms = ? WHERE key = ? AND path != ?",
                    (str(path), now, key, str(path)),
                )
            return self._require(cur, key)

    def commit(self, key: str, offset: int, line_no: int, cursor: str | None) -> FileState:
        """Move file ``key`` forward to ``offset``/``line_no`` with the parser's ``cursor``,
        delivered to :attr:`cluster` (when known).

        One transaction. Committing the current position again (with a new cursor) is allowed.

        Raises:
            KeyError: ``key`` is not registered.
            ValueError: ``offset`` or ``line_no`` is below the committed value (only :meth:`reset`
                moves backwards).
        """
        with self._tx() as cur:
            state = self._require(cur, key)
            if offset < state.offset or line_no < state.line_no:
                raise ValueError(
                    f"registry commit for {key} would move backwards: offset {state.offset} -> "
                    f"{offset}, line {state.line_no} -> {line_no} (use reset() after a truncation)"
                )
            cur.execute(
                "UPDATE files SET offset = ?, line_no = ?, cursor = ?, updated_ms = ?, "
                "cluster = COALESCE(?, cluster) WHERE key = ?",
                (offset, line_no, cursor, self._now_ms(), self.cluster, key),
            )
            return self._require(cur, key)

    def reset(self, key: str) -> FileState:
        """Restart file ``key`` at 0 after a truncation: offset, line_no, size_seen 0, cursor None,
        done False, generation + 1 (Filebeat's truncation handling plus elastic.md §6.1, item 3).

        Raises:
            KeyError: ``key`` is not registered.
        """
        with self._tx() as cur:
            state = self._require(cur, key)
            cur.execute(
                "UPDATE files SET offset = 0, line_no = 0, size_seen = 0, cursor = NULL, done = 0, "
                "generation = generation + 1, updated_ms = ? WHERE key = ?",
                (self._now_ms(), key),
            )
            log.info(
                "%s (%s) was truncated at offset %s; reading it again from 0 as generation %s",
                state.path,
                key,
                state.offset,
                state.generation + 1,
            )
            return self._require(cur, key)

    def redeliver(self) -> int:
        """Forget what was delivered to clusters other than :attr:`cluster`: each such file
        (see :meth:`FileState.delivered_elsewhere`) restarts at 0 (offset, line_no, size_seen,
        cursor; its cluster unknown until lines are committed again) so it is read again into
        this cluster. Its generation is kept, so document ids stay those of the first delivery
        (delivering to the old cluster again gives duplicates, not copies). Quarantined files
        (``done``) stay as they are.

        Returns:
            How many files will be read again (0 when :attr:`cluster` is unknown).
        """
        if self.cluster is None:
            return 0
        with self._tx() as cur:
            cur.execute(
                "UPDATE files SET offset = 0, line_no = 0, size_seen = 0, cursor = NULL, "
                "cluster = NULL, updated_ms = ? "
                "WHERE offset > 0 AND done = 0 AND cluster IS NOT NULL AND cluster != ?",
                (self._now_ms(), self.cluster),
            )
            return cur.rowcount

    def _update(self, key: str, column: str, value: object) -> FileState:
        with self._tx() as cur:
            self._require(cur, key)
            cur.execute(
                f"UPDATE files SET {column} = ?, updated_ms = ? WHERE key = ?",
                (value, self._now_ms(), key),
            )
            return self._require(cur, key)

    def set_path(self, key: str, path: str | Path) -> FileState:
        """Record that file ``key`` now lives at ``path`` (a rename). Raises KeyError if unknown."""
        return self._update(key, "path", str(path))

    def set_size_seen(self, key: str, size: int) -> FileState:
        """Record the size (bytes) last observed for file ``key``. Raises KeyError if unknown."""
        return self._update(key, "size_seen", size)

    def mark_done(self, key: str, done: bool = True) -> FileState:
        """Mark file ``key`` as completely read (or not). Raises KeyError if unknown."""
        return self._update(key, "done", int(done))

    def forget(self, key: str) -> bool:
        """Delete the entry of file ``key`` (Filebeat's clean_removed); True if there was one."""
        with self._tx() as cur:
            cur.execute("DELETE FROM files WHERE key = ?", (key,))
            return cur.rowcount > 0

    def close(self) -> None:
        """Close the database. The registry must not be used afterwards."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
