"""One process per state directory: an exclusive lock on ``<state>/lock``."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from pipeline.settings import ConfigError


def lock_state_dir(state: Path) -> IO[str]:
    """Hold an exclusive lock on ``<state>/lock`` for the life of the process.

    Raises:
        ConfigError: another iolens process uses the state directory (two processes would
            commit each other's offsets).
    """
    fh = (state / "lock").open("a+")
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
