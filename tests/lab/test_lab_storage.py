"""The lab's storage on this machine (root, FUSE, loop devices): built, slowed, torn down,
and built again after a crash that left it all mounted."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from pipeline.lab import storage

pytestmark = pytest.mark.usefixtures("lab_host")


def mounted_below(root: Path) -> list[str]:
    points = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    return sorted(p for p in points if p.startswith(str(root.resolve())))


def loops_on(root: Path) -> list[str]:
    out = subprocess.run(
        ["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"], capture_output=True, text=True
    ).stdout
    return [line.split()[0] for line in out.splitlines() if str(root.resolve()) in line]


def timed_write(path: Path) -> float:
    """Seconds to write and fsync 4 KiB 5 times (each sync reaches the device)."""
    t = time.monotonic()
    with open(path, "wb") as f:
        for _ in range(5):
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())
    return time.monotonic() - t


def test_luns_are_slowed_on_demand_and_rebuilt_after_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "storage"
    st = storage.setup(root, 3, 64)
    try:
        assert [lun.mount_point for lun in st.luns] == [
            str(root / "mnt" / f"lun{k}") for k in (1, 2, 3)
        ]
        assert mounted_below(root) == sorted(
            [str(root / "fuse"), *(lun.mount_point for lun in st.luns)]
        )  # type: ignore[misc]
        assert len(loops_on(root)) == 3
        fast = timed_write(Path(st.luns[1].mount_point or "") / "f")
        st.set_delays({2: 100})
        time.sleep(1.2)  # delayfs reads its control file once a second
        slow = timed_write(Path(st.luns[1].mount_point or "") / "f")
        assert slow >= 5 * 0.1 > fast  # every sync waits at least one delayed write
        # a crash: the lab is gone, the FUSE process killed, everything still mounted
        assert st.fuse_pid is not None
        os.kill(st.fuse_pid, signal.SIGKILL)
        again = storage.setup(root, 3, 64)
        assert len(again.luns) == 3 and len(loops_on(root)) == 3
        assert len(mounted_below(root)) == 4
    finally:
        storage.teardown(root)
    assert mounted_below(root) == []
    assert loops_on(root) == []
    assert not (root / "storage.json").exists()
