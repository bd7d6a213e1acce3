"""This instance's ``agent.id``: a random UUID kept in ``<state_dir>/agent_id``.

ECS ``agent.id`` identifies one agent for its whole life, across restarts (reference/elastic.md
3.1: ``id`` persistent across restarts; Beats keep theirs in ``data/meta.json``). An iolens
instance is its state directory (the registry of what it read, its spool, its dead letters),
so the id lives there: made once, on the first run, and read on every later one. The file is
one line::

    3f1c9a52-6f0e-4d2b-9b7e-2f4c1f0a8d11

The id says who wrote a document; it is never part of a document's ``_id`` (the same record
read by another instance is the same document).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path

from pipeline.sink.disk import write_atomically

log = logging.getLogger(__name__)

AGENT_ID_FILE = "agent_id"
"""File name of the id inside ``state_dir``."""


def agent_id(state_dir: Path, new: Callable[[], str] = lambda: str(uuid.uuid4())) -> str:
    """The ``agent.id`` of the instance whose state directory is ``state_dir``.

    The caller holds the state directory's lock
    (:func:`~pipeline.jobs.state_lock.lock_state_dir`), so no other process makes one at the
    same time.

    Args:
        state_dir: the state directory (it exists).
        new: makes a new id (a random UUID, as text).

    Returns:
        The id in ``<state_dir>/agent_id``; when there is none yet, or what is there is not a
        UUID (said with a warning naming the file), a new one, written there atomically. When
        it cannot be written (a full disk), the new id is used for this run and a warning says
        that the next run makes another.
    """
    path = state_dir / AGENT_ID_FILE
    found = _read(path)
    if found is not None:
        return found
    made = new()
    try:
        write_atomically(path, [made])  # temp file, fsync, rename, directory fsync
    except OSError as err:
        log.warning(
            "%s cannot be written (%s): agent.id %s holds for this run only", path, err, made
        )
    return made


def _read(path: Path) -> str | None:
    """The id in ``path``; None when there is none (missing, unreadable or not a UUID: said)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("%s cannot be read (%s): a new agent.id is made", path, err)
        return None
    try:
        return str(uuid.UUID(text))
    except ValueError:
        log.warning("%s holds no agent id (%.40r): a new agent.id is made", path, text)
        return None
