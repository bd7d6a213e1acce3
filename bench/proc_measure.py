"""Whole-process measurement of one command: wall time, peak RSS and CPU time, with a timeout.

The child runs with standard output and error redirected to files. Its exit is awaited on a
Linux pidfd (so the timeout needs no polling and the kill cannot hit a reused pid), then it is
reaped with ``os.wait4``, whose ``ru_maxrss`` is the child's peak resident set size (KiB on
Linux) — the same figure as ``/usr/bin/time -v``'s "Maximum resident set size". Wall time runs
from just before the process is started until its exit is seen, so interpreter start-up and
imports are included.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

KIB = 1024


@dataclass(frozen=True)
class Measurement:
    """One run of a command.

    Attributes:
        wall_s: elapsed seconds (until the kill, if it timed out).
        max_rss_bytes: peak resident set size of the process.
        user_s: user CPU seconds.
        sys_s: system CPU seconds.
        exit_code: exit status, or minus the signal number if it was killed.
        timed_out: True if it was killed at the timeout.
        stdout: file holding its standard output.
        stderr: file holding its standard error.
    """

    wall_s: float
    max_rss_bytes: int
    user_s: float
    sys_s: float
    exit_code: int
    timed_out: bool
    stdout: Path
    stderr: Path

    @property
    def ok(self) -> bool:
        """Finished in time with exit status 0."""
        return not self.timed_out and self.exit_code == 0


def _wait_exit(pid: int, timeout_s: float | None) -> bool:
    """Wait until ``pid`` exits or ``timeout_s`` passes; kill it on timeout. True if killed."""
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout_s)
        if ready:
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [])
        return True
    finally:
        os.close(pidfd)


def measure(
    argv: Sequence[str],
    stdout: Path,
    stderr: Path,
    *,
    timeout_s: float | None = None,
    cwd: Path | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Measurement:
    """Run ``argv`` once and measure it.

    Args:
        argv: the command; ``argv[0]`` must be executable.
        stdout: file to receive its standard output (overwritten).
        stderr: file to receive its standard error (overwritten).
        timeout_s: kill it (SIGKILL) after this many seconds; None waits forever.
        cwd: working directory for the command.
        clock: monotonic clock in seconds.

    Returns:
        The measurement; a non-zero exit is reported in it, not raised.

    Raises:
        OSError: the command cannot be started.
    """
    stdout.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        start = clock()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=cwd)
        timed_out = _wait_exit(proc.pid, timeout_s)
        wall_s = clock() - start
        _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here; keep Popen consistent
    return Measurement(
        wall_s=wall_s,
        max_rss_bytes=usage.ru_maxrss * KIB,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        exit_code=proc.returncode,
        timed_out=timed_out,
        stdout=stdout,
        stderr=stderr,
    )
