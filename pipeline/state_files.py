"""The SQLite files of the state directory: telling damage from other failures, and moving a
damaged file aside.

A file is damaged when SQLite says so (``SQLITE_CORRUPT``: "database disk image is malformed",
a torn write or a truncated file; ``SQLITE_NOTADB``: "file is not a database", garbage) or when
``PRAGMA quick_check`` finds a fault. Every other failure (a read-only file system, a removed
directory, a full disk) is not damage: the file is left where it is and the caller reports it.

A damaged file is renamed, with its write-ahead log (``-wal``) and shared memory (``-shm``),
to ``<name>.damaged-<UTC time>`` (``registry.sqlite.damaged-20261126T021500Z``), so it can be
examined with ``sqlite3`` and is never silently lost.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DAMAGE_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""SQLite result codes that mean the file's content is damaged."""
COMPANIONS = ("-wal", "-shm")
"""Suffixes of the files SQLite keeps next to a database in WAL mode."""


@dataclass(frozen=True)
class SetAside:
    """A damaged file moved aside: why it was taken for damaged, and where it is now."""

    reason: str
    aside: Path


def is_damage(err: BaseException) -> bool:
    """Whether ``err`` says the database's content is damaged (not that it cannot be reached
    or written)."""
    code = getattr(err, "sqlite_errorcode", None)
    return isinstance(code, int) and (code & 0xFF) in DAMAGE_CODES  # extended codes too


def quick_check(db: sqlite3.Connection) -> str | None:
    """What ``PRAGMA quick_check`` finds wrong with ``db`` (its first fault), None when it is
    sound. Reads every page: about 20 ms for a registry of 100,000 files (11 MB).

    Raises:
        sqlite3.Error: SQLite cannot read the file at all (see :func:`is_damage`).
    """
    rows = db.execute("PRAGMA quick_check(1)").fetchall()
    first = str(rows[0][0]) if rows else "no answer to quick_check"
    if first == "ok":
        return None
    lines = [ln for ln in first.splitlines() if ln and not ln.startswith("***")]
    return "; ".join(lines) or first


def open_checked(path: Path, setup: Callable[[sqlite3.Connection], None]) -> sqlite3.Connection:
    """Check the SQLite file ``path`` when it exists (:func:`check`), then connect to it
    (autocommit, usable from any thread) and run ``setup`` on it.

    Raises:
        sqlite3.DatabaseError: the file is damaged (:func:`is_damage` is true of it).
        sqlite3.Error: any other failure (read-only, removed, full); the connection is closed.
    """
    if path.exists():
        check(path)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        setup(db)
    except BaseException:
        db.close()
        raise
    return db


def check(path: Path) -> None:
    """Check the SQLite file ``path`` (:func:`quick_check`) through a read-only connection,
    which changes nothing: a writing connection's close would copy a write-ahead log left by a
    crash into the damaged file and delete the log.

    An empty file (no write-ahead log with content beside it) is damaged too: it was cut to
    nothing, and SQLite would take it for a new database.

    Raises:
        sqlite3.DatabaseError: the file is damaged (:func:`is_damage` is true of it; a fault
            ``quick_check`` found, or an empty file, is raised with ``SQLITE_CORRUPT``).
        sqlite3.Error: it cannot be read for another reason.
    """
    if path.stat().st_size == 0 and not _has_content(Path(f"{path}-wal")):
        raise _damage("the file is empty")  # SQLite would take it for a new database
    db = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True)
    try:
        fault = quick_check(db)
    finally:
        db.close()
    if fault is not None:
        raise _damage(f"quick_check: {fault}")


def _damage(reason: str) -> sqlite3.DatabaseError:
    """A damage found by iolens rather than SQLite, as SQLite would raise it."""
    err = sqlite3.DatabaseError(reason)
    err.sqlite_errorcode = sqlite3.SQLITE_CORRUPT
    return err


def _has_content(path: Path) -> bool:
    """Whether ``path`` exists and is not empty."""
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


def move_aside(path: Path, clock: Callable[[], float] = time.time) -> Path:
    """Rename the damaged file ``path`` (and its ``-wal``/``-shm`` files) to
    ``<path>.damaged-<UTC time>`` (a counter is added if that name is taken).

    Returns:
        Where ``path`` now is.

    Raises:
        OSError: it cannot be renamed (the caller reports it).
    """
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock()))
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}.{n}")
    for suffix in COMPANIONS:
        companion = Path(f"{path}{suffix}")
        if companion.exists():
            os.replace(companion, f"{aside}{suffix}")
    os.replace(path, aside)
    return aside


def open_or_set_aside(
    path: Path, opener: Callable[[], T], clock: Callable[[], float] = time.time
) -> tuple[T, SetAside | None]:
    """``opener()``; when it finds the file at ``path`` damaged (:func:`is_damage`), the file
    is moved aside (:func:`move_aside`) and ``opener()`` called again on a new file.

    Returns:
        What ``opener`` returned, and the damaged file set aside (None when it was sound).

    Raises:
        sqlite3.Error: ``opener`` failed for another reason than damage (or failed again).
        OSError: ``opener`` failed so, or the damaged file cannot be renamed.
    """
    try:
        return opener(), None
    except sqlite3.Error as err:
        if not is_damage(err):
            raise
        reason = str(err)
    aside = move_aside(path, clock)
    return opener(), SetAside(reason, aside)
