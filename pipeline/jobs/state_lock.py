"""One process per state directory: an exclusive lock on ``<state>/lock``; and the files it
holds open there, watched for removal while it runs."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from pipeline.errors import ConfigError

log = logging.getLogger(__name__)


def lock_state_dir(state: Path) -> IO[str]:
    """Hold an exclusive lock on ``<state>/lock`` for the life of the process.

    Raises:
        ConfigError: the directory cannot be created or written (read-only, no permission),
            or another iolens process uses the state directory (two processes would
            commit each other's offsets).
    """
    if state.exists() and not state.is_dir():
        raise ConfigError(
            f"state directory {state} is a file, not a directory: move it away or pass another "
            "--state-dir (state_dir in the configuration)"
        )
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
        if not os.access(state, os.W_OK):  # the lock file may be writable, its directory not
            fh.close()
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(state))
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
    with contextlib.suppress(OSError):  # a full disk: the lock holds, its pid is not shown
        os.write(fh.fileno(), f"{os.getpid()}\n".encode())
    return fh


class StateWatch:
    """The files of the state directory this process holds open, each known by its identity
    (device and inode) when it was opened, so that their removal or replacement while iolens
    runs is noticed (:meth:`check`), and the directory's turning read-only.

    Args:
        state: the state directory.
        lock: the lock :func:`lock_state_dir` returned.
        files: the databases the process keeps open in it (``registry.sqlite``,
            ``jobs.sqlite``).
    """

    def __init__(self, state: Path, lock: IO[str], files: Sequence[Path]) -> None:
        self.state = state
        self._held = {state / "lock": os.fstat(lock.fileno())}
        self._held.update((path, os.stat(path)) for path in files)

    def check(self) -> None:
        """Check that every file is still the one opened.

        Raises:
            ConfigError: the directory was removed (its lock file is gone or another), a
                database in it was removed or replaced, or the directory can no longer be
                written: what is read can no longer be recorded, so the process must stop.
        """
        if (gone := self.gone()) is not None:
            raise gone

    def gone(self) -> ConfigError | None:
        """What went away or can no longer be written (the error :meth:`check` raises), None
        when nothing did."""
        for path, held in self._held.items():
            try:
                same = os.path.samestat(held, os.stat(path))
            except OSError:
                same = False
            if same:
                continue
            if path.name == "lock":
                return ConfigError(
                    f"state directory {self.state} was removed while iolens was running: the "
                    "registry, spool and dead letters it held are gone, so what is read can no "
                    "longer be recorded. iolens stops; start it again to begin a new state "
                    "directory there (the files are read again from their start; documents the "
                    "cluster already holds are counted as already there, not indexed twice)"
                )
            return ConfigError(
                f"{path} was removed or replaced while iolens was running, so what is read can "
                "no longer be recorded in it. iolens stops; start it again: it opens the file now "
                "at that path, or starts a new one (a new registry reads every file again from "
                "its start; documents the cluster already holds are counted as already there, "
                "not indexed twice)"
            )
        if not os.access(self.state, os.W_OK):
            return ConfigError(
                f"state directory {self.state} can no longer be written (it became read-only, "
                "or its permissions changed) while iolens was running, so what is read can no "
                "longer be recorded. iolens stops; make it writable (remount it read-write) and "
                "start it again: it goes on from what was recorded (documents the cluster "
                "already holds are counted as already there, not indexed twice)"
            )
        return None
