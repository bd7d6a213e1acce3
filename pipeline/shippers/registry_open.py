"""Opening the registry of a run: a damaged registry is moved aside and a new one started,
said as a warning; one that cannot be opened at all is a :class:`ConfigError` naming the fix.

Starting a new registry is safe for the documents: every file is read again from its start
with the document ids of its first reading (they derive from the file's identity and
position), so the cluster answers 409 for each document it holds and the summary counts it as
already there. Documents stamped with the time they were made (the workload model's snapshots,
service rates, the pipeline's health) are not re-made by reading again: a workload model
remembers the requests it placed, and the others describe the run that makes them.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pipeline.errors import ConfigError
from pipeline.shippers.registry import Registry
from pipeline.state_files import open_or_set_aside

log = logging.getLogger(__name__)

T = TypeVar("T")

OTHER_STATE = ("jobs.sqlite", "models")
"""What a run leaves in the state directory besides the registry: when they are there and the
registry is not, the registry was lost (a new state directory has none of them)."""


def open_registry(
    path: str | Path,
    *,
    clock: Callable[[], float] = time.time,
    cluster: str | None = None,
    when_full: Callable[[Callable[[], Registry]], Registry] | None = None,
) -> Registry:
    """Open the registry at ``path`` (as :class:`Registry`); a damaged one (a torn write, a
    truncated file, garbage) is moved aside (:func:`pipeline.state_files.move_aside`) and a new
    one started, with a warning naming both files. The files are then read again from their
    start: their document ids are those of the first reading, so the cluster answers 409 for
    the documents it holds and they count as already there, not twice.

    A missing registry in a state directory that holds what a run leaves (``jobs.sqlite``, a
    workload model) was removed or lost: it is started again with a warning too.

    ``when_full(opener)`` opens it when given: it waits while the disk is too full for the file
    (:func:`pipeline.sink.disk.open_when_room`), inside the check for damage.

    Raises:
        ConfigError: the registry cannot be opened for another reason (a read-only or removed
            state directory), or the damaged file cannot be moved aside; naming the file and
            what to do.
    """
    path = Path(path)
    lost = _lost(path)

    def opener() -> Registry:
        return Registry(path, clock=clock, cluster=cluster)

    try:
        registry, damaged = open_or_set_aside(path, _opener(opener, when_full), clock)
    except (OSError, sqlite3.Error) as err:
        raise ConfigError(
            f"registry {path} cannot be opened ({err}): make the state directory "
            f"{path.parent} writable (remount it read-write, fix its owner or mode) or pass "
            "another --state-dir"
        ) from None
    if damaged is not None:
        log.warning(
            "registry %s is damaged (%s): moved it aside to %s and started a new registry. "
            "Every file in the drop directories is read again from its start; documents the "
            "cluster already holds are counted as already there, not indexed twice",
            path,
            damaged.reason,
            damaged.aside,
        )
    elif lost:
        log.warning(
            "registry %s is missing while the state directory holds other state (%s): it was "
            "removed or lost, so a new registry is started. Every file in the drop directories "
            "is read again from its start; documents the cluster already holds are counted as "
            "already there, not indexed twice",
            path,
            ", ".join(lost),
        )
    return registry


def _opener(
    opener: Callable[[], T], when_full: Callable[[Callable[[], T]], T] | None
) -> Callable[[], T]:
    """``opener``, or ``opener`` opened through ``when_full``."""
    if when_full is None:
        return opener
    return lambda: when_full(opener)


def _lost(path: Path) -> list[str]:
    """What the state directory holds that a run writes besides the registry at ``path``,
    when the registry itself is missing (it was removed, or lost with part of the directory);
    empty when the registry is there or the directory is new."""
    if path.exists():
        return []
    return [name for name in OTHER_STATE if (path.parent / name).exists()]
