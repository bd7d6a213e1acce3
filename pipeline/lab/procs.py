"""Processes of the lab: stopping them, noting them, and stopping those a crashed lab left
behind."""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def stop_all(procs: Sequence[subprocess.Popen[Any]], timeout_s: float) -> None:
    """SIGTERM to every process still running, then wait for each, SIGKILL after
    ``timeout_s``."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()


def remember(pids_file: Path, pid: int | None) -> None:
    """Note a process the lab started in ``pids_file``, so a run after a crash of this one
    stops it (:func:`stop_leftovers`)."""
    if pid is None:
        return
    with open(pids_file, "a", encoding="utf-8") as f:
        f.write(f"{pid}\n")
