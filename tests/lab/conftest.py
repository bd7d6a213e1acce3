"""What the lab's tests need of this machine: root, /dev/fuse, loop devices and the tools
``make test`` installs as root; a test that needs them is skipped, naming what is missing."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipeline.lab import storage

TOOLS = ("fio", "sadf", "mpiexec", "mpicc", "losetup", "mkfs.ext4")


def missing_for_lab() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the lab needs root (loop devices, mounts)"
    for dev in ("/dev/fuse", "/dev/loop-control"):
        if not Path(dev).exists():
            return f"{dev} is missing on this machine"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make test installs it as root)"
    try:
        storage.check_host()
    except storage.LabError as err:
        return str(err)
    return None


@pytest.fixture(scope="session")
def lab_host() -> None:
    """Skip, with the reason, where the lab cannot run."""
    why = missing_for_lab()
    if why:
        pytest.skip(why)
