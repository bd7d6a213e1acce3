"""Processes of the lab: stopping them, and those a crashed lab left behind."""

from __future__ import annotations

import logging
import signal
import subprocess
from pathlib import Path

from pipeline.lab import storage

log = logging.getLogger(__name__)


LEFTOVERS = (b"fio", b"mpiexec", b"mpiio_writer", b"pipeline.cli.main", b"sadc")
"""Programs a crashed lab may have left running (matched in ``/proc/<pid>/cmdline``)."""


def stop_leftovers(pids_file: Path) -> None:
    """Stop the processes a previous lab started and left running (it crashed, or was
    killed), those still running one of :data:`LEFTOVERS`; then forget them."""
    try:
        pids = [int(x) for x in pids_file.read_text(encoding="utf-8").split()]
    except (OSError, ValueError):
        pids = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if any(name in cmdline for name in LEFTOVERS):
            log.warning("stopping process %s left by an earlier lab", pid)
            storage.stop_pid(pid)
    pids_file.unlink(missing_ok=True)


def stop_process(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM (``iolens run`` delivers what it read and exits), then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
