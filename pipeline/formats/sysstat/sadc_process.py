"""Starting sadc and watching it: the process side of the ``cycle`` daemon
(:mod:`pipeline.formats.sysstat.sadc_cycle`).

sadc runs with ``LC_ALL=C`` and ``TZ=UTC``; its stderr goes to a temporary file (no pipe to
fill while it runs for a day). Tests pass a fake :data:`Spawn`.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from typing import IO, Protocol


def sadc_command(sadc: str, interval_s: int, count: int, path: str | os.PathLike[str]) -> list[str]:
    """``sadc -S DISK <interval> <count> <file>`` (reference/sysstat.md 1.1)."""
    return [sadc, "-S", "DISK", str(interval_s), str(count), os.fspath(path)]


class SadcHandle(Protocol):
    """A started sadc process."""

    def wait(self, timeout: float | None) -> int | None:
        """Wait up to ``timeout`` seconds (None: until it exits); exit status or None."""

    def terminate(self) -> None:
        """Ask it to stop (SIGTERM)."""

    def kill(self) -> None:
        """Force it to stop (SIGKILL)."""

    def stderr_text(self) -> str:
        """What it wrote to stderr (complete once it has exited)."""


Spawn = Callable[[Sequence[str]], SadcHandle]
"""Starts ``argv``; raises ``OSError`` when it cannot be started."""


class PopenHandle:
    """:class:`SadcHandle` of a real process; stderr goes to a temporary file (no pipe to fill)."""

    def __init__(self, proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
        self._proc = proc
        self._stderr = stderr

    def wait(self, timeout: float | None) -> int | None:
        """Exit status, or None if still running after ``timeout`` seconds."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self) -> None:
        """SIGTERM."""
        self._proc.terminate()

    def kill(self) -> None:
        """SIGKILL."""
        self._proc.kill()

    def stderr_text(self) -> str:
        """Everything written to stderr so far, decoded leniently; closes the file once exited."""
        self._stderr.seek(0)
        text = self._stderr.read().decode("utf-8", "replace").strip()
        if self._proc.poll() is not None:
            self._stderr.close()
        return text


def popen_spawn(argv: Sequence[str]) -> PopenHandle:
    """Start ``argv`` with ``LC_ALL=C``, ``TZ=UTC``, no stdin/stdout, stderr captured.

    Raises:
        OSError: the executable is missing or not executable.
    """
    err = tempfile.TemporaryFile()  # noqa: SIM115 (PopenHandle owns and closes it)
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=env
        )
    except OSError:
        err.close()
        raise
    return PopenHandle(proc, err)
