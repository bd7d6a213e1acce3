"""The lab's storage: N LUNs, each a loop device on a file of the delaying FUSE file system,
with ext4 on it, mounted at ``<dir>/mnt/lun<K>`` (K = 1..N; the lab's ``<dir>`` is
``<lab>/storage``).

Layout under the storage directory::

    backing/lun<K>.img     the LUNs' bytes (sparse files)
    fuse/                  delayfs's view of backing/ (pipeline.lab.delayfs)
    delay                  delayfs's control file: "* 0", "lun3.img 20" ...
    mnt/lun<K>             ext4 on /dev/loopX, X attached to fuse/lun<K>.img
    storage.json           what is set up (pid of delayfs, loop devices, mounts)

Everything set up is written to ``storage.json`` before the next step, and :func:`teardown`
undoes whatever it finds there and whatever ``/proc/mounts`` and ``losetup`` still show below
the lab directory, so a run after a crash (or ``kill -9``) starts clean. Needs root,
``/dev/fuse``, loop devices, ``losetup``, ``mkfs.ext4`` and fusepy.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.lab.delayfs import parse_control, render_control

log = logging.getLogger(__name__)

RunFn = Callable[..., "subprocess.CompletedProcess[str]"]


class LabError(Exception):
    """The lab cannot run here (not root, no FUSE, no loop devices, a tool missing) or a step
    failed; the message says which and what to do."""


@dataclass
class Lun:
    """One LUN of the lab.

    Attributes:
        index: K in ``lun<K>`` (1-based).
        image: its backing file, seen through delayfs (``<lab>/fuse/lun<K>.img``).
        device: the loop device (``/dev/loop3``), once attached.
        mount_point: where its ext4 is mounted, once mounted.
    """

    index: int
    image: str
    device: str | None = None
    mount_point: str | None = None

    @property
    def name(self) -> str:
        """``lun<K>``."""
        return f"lun{self.index}"

    @property
    def kernel_name(self) -> str:
        """The device's name as sysstat prints it (``loop3``)."""
        assert self.device is not None
        return Path(self.device).name


@dataclass
class Storage:
    """What is set up, as written to ``storage.json``."""

    lab_dir: str
    fuse_pid: int | None = None
    luns: list[Lun] = field(default_factory=list)

    @property
    def state_file(self) -> Path:
        """``<lab>/storage.json``."""
        return Path(self.lab_dir) / "storage.json"

    def save(self) -> None:
        """Write the state (atomically) before going on."""
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1), encoding="utf-8")
        os.replace(tmp, self.state_file)

    def set_delays(self, delays_ms: Mapping[int, float]) -> None:
        """Set the per-I/O delay (ms) of LUNs by index; LUNs not named get none."""
        text = render_control({"*": 0, **{f"lun{k}.img": ms for k, ms in delays_ms.items()}})
        control = Path(self.lab_dir) / "delay"
        tmp = control.with_suffix(".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, control)


def check_tools(which: Callable[[str], str | None] = shutil.which) -> None:
    """Raise LabError naming the Debian package of the first workload tool missing."""
    for tool, package in (
        ("fio", "fio"),
        ("sadf", "sysstat"),
        ("mpiexec", "mpich"),
        ("mpicc", "libmpich-dev"),
    ):
        if which(tool) is None:
            raise LabError(f"{tool} not found: apt-get install {package}")


def check_host(which: Callable[[str], str | None] = shutil.which) -> None:
    """Raise :class:`LabError` naming what is missing to build the lab here."""
    if os.geteuid() != 0:
        raise LabError("the lab needs root (loop devices, mounts, FUSE): run it as root")
    if not Path("/dev/fuse").exists():
        raise LabError("/dev/fuse is missing: the lab needs FUSE (modprobe fuse)")
    if not Path("/dev/loop-control").exists():
        raise LabError("/dev/loop-control is missing: the lab needs loop devices")
    for tool, package in (("losetup", "mount"), ("mkfs.ext4", "e2fsprogs")):
        if which(tool) is None:
            raise LabError(f"{tool} not found: apt-get install {package}")
    try:
        import fuse  # noqa: F401  (fusepy)
    except (ImportError, OSError) as err:
        raise LabError(
            f"fusepy cannot load ({err}): pip install fusepy; apt-get install libfuse2"
        ) from None


def _run(cmd: list[str], run: RunFn = subprocess.run) -> str:
    proc = run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise LabError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return str(proc.stdout)


def _wait_for(pred: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not pred():
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)


def setup(lab_dir: Path, n: int, size_mib: int) -> Storage:
    """Tear down what a previous run left, then build ``n`` LUNs of ``size_mib`` MiB.

    Raises:
        LabError: a step failed (what was set up is undone).
    """
    teardown(lab_dir)
    st = Storage(str(lab_dir.resolve()))
    try:
        _build(st, n, size_mib)
    except BaseException:
        teardown(lab_dir)
        raise
    log.info("lab storage: %s", ", ".join(f"{x.name}={x.device}" for x in st.luns))
    return st


def _build(st: Storage, n: int, size_mib: int) -> None:
    """Backing images, the delaying FUSE file system over them, then each LUN on it."""
    root = Path(st.lab_dir)
    for sub in ("backing", "fuse", "mnt"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    st.set_delays({})
    for k in range(1, n + 1):
        with open(root / "backing" / f"lun{k}.img", "wb") as f:
            f.truncate(size_mib * 2**20)
    st.fuse_pid = _start_delayfs(root)
    st.save()
    _wait_for(
        lambda: os.path.ismount(root / "fuse"),
        f"the FUSE file system at fuse/ (see {root / 'delayfs.log'})",
    )
    for k in range(1, n + 1):
        _attach(st, Lun(k, str(root / "fuse" / f"lun{k}.img")))


def _start_delayfs(root: Path) -> int:
    """Start :mod:`pipeline.lab.delayfs` on ``backing/`` at ``fuse/`` (its own session, output
    to ``delayfs.log``); its pid."""
    with open(root / "delayfs.log", "ab") as fuse_log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipeline.lab.delayfs",
                str(root / "backing"),
                str(root / "fuse"),
                str(root / "delay"),
            ],
            stdout=fuse_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return proc.pid


def _attach(st: Storage, lun: Lun) -> None:
    """A loop device on ``lun``'s image, ext4 on it, mounted under ``mnt/``; the state is saved
    before each step, so a teardown after a failure undoes what was done."""
    root = Path(st.lab_dir)
    st.luns.append(lun)
    lun.device = _run(["losetup", "-f", "--show", lun.image]).strip()
    st.save()
    _run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", lun.device])
    mnt = root / "mnt" / lun.name
    mnt.mkdir(exist_ok=True)
    lun.mount_point = str(mnt)
    st.save()
    _run(["mount", "-t", "ext4", lun.device, str(mnt)])


def _delays(control: Path) -> dict[str, float]:
    try:
        return parse_control(control.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _mounts_below(root: str) -> list[str]:
    """Mount points at or below ``root`` in /proc/mounts, deepest first."""
    out = []
    for line in Path("/proc/mounts").read_text(encoding="utf-8").splitlines():
        point = line.split()[1].replace("\\040", " ")
        if point == root or point.startswith(root.rstrip("/") + "/"):
            out.append(point)
    return sorted(out, key=len, reverse=True)


def _loops_on(root: str) -> list[str]:
    """Loop devices whose backing file lies below ``root`` (``losetup -l -n -O NAME,BACK-FILE``)."""
    try:
        text = _run(["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"])
    except LabError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().startswith(root.rstrip("/") + "/"):
            out.append(parts[0])
    return out


def teardown(lab_dir: Path) -> None:
    """Unmount, detach and stop everything of a lab at ``lab_dir`` (this run's or a crashed
    one's); safe to call when nothing is set up. Data under ``backing/`` is deleted."""
    root = str(lab_dir.resolve())
    state = Path(root) / "storage.json"
    saved: dict[str, object] = {}
    if state.exists():
        try:
            saved = json.loads(state.read_text(encoding="utf-8"))
        except ValueError:
            log.warning("%s is damaged; cleaning up from /proc/mounts and losetup", state)
    control = Path(root) / "delay"
    if control.exists() and any(v > 0 for v in _delays(control).values()):
        Storage(root).set_delays({})  # unmounting a slowed LUN waits for every delayed I/O
        time.sleep(1.2)  # delayfs reads its control file once a second
    for point in _mounts_below(str(Path(root) / "mnt")):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    for dev in _loops_on(str(Path(root) / "fuse")):
        subprocess.run(["losetup", "-d", dev], capture_output=True, check=False)
    for point in _mounts_below(str(Path(root) / "fuse")):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    pid = saved.get("fuse_pid")
    if isinstance(pid, int):
        _stop(pid)
    shutil.rmtree(Path(root) / "backing", ignore_errors=True)
    state.unlink(missing_ok=True)


def _stop(pid: int) -> None:
    """Stop delayfs ``pid`` if it is still ours (its command line names the module)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"pipeline.lab.delayfs" in cmdline:
        stop_pid(pid)


def stop_pid(pid: int) -> None:
    """SIGTERM ``pid``, SIGKILL after 5 s; a child of ours that exited is reaped."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running(pid):
        os.kill(pid, signal.SIGKILL)
        _running(pid)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a child of ours that exited is reaped)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        status = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"
