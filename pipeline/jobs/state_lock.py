"""One process per state directory: an exclusive lock on ``<state>/lock``."""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import IO

from pipeline.settings import ConfigError

log = logging.getLogger(__name__)


def lock_state_dir(state: Path) -> IO[str]:
    """Hold an exclusive lock on ``<state>/lock`` for the life of the process.

    Raises:
        ConfigError: the directory cannot be created or written (read-only, no permission),
            or another iolens process uses the state directory (two processes would
            commit each other's offsets).
    """
    if not state.is_dir():
        log.debug(
            "state directory %s does not exist: creating it; every file in the drop "
            "directories is read from its start (documents the cluster already holds are "
            "counted as already there)",
            state,
        )
    try:
        state.mkdir(parents=True, exist_ok=True)
        fh = (state / "lock").open("a+")
    except OSError as err:
        raise ConfigError(
            f"state directory {state} cannot be written ({err.strerror}): iolens keeps its "
            "registry, spool and dead letters there. Make it writable (remount it read-write, "
            "fix its owner or mode) or pass another --state-dir (state_dir in the configuration)"
        ) from None
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "unknown"
        fh.close()
        raise ConfigError(
            f"state directory {state} is in use by another iolens process (pid {holder}); "
            "stop it or pass another --state-dir"
        ) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh


def check_state_dir(state: Path, lock: IO[str]) -> None:
    """Check that ``state`` is still the directory this process locked (:func:`lock_state_dir`
    returned ``lock``): it was not removed, or replaced by another, while iolens ran.

    Raises:
        ConfigError: it was removed (or replaced): the registry, spool and dead letters this
            process writes are gone with it, so it must stop.
    """
    try:
        same = os.path.samestat(os.fstat(lock.fileno()), os.stat(state / "lock"))
    except OSError:
        same = False
    if not same:
        raise ConfigError(
            f"state directory {state} was removed while iolens was running: the registry, "
            "spool and dead letters it held are gone, so what is read can no longer be "
            "recorded. iolens stops; start it again to begin a new state directory there (the "
            "files are read again from their start; documents the cluster already holds are "
            "counted as already there, not indexed twice)"
        )
