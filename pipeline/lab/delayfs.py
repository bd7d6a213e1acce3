"""A pass-through FUSE file system that delays every read and write: a slow device on demand.

The lab puts its LUNs' backing files here and attaches loop devices to them, so a delay set
here is a real per-I/O service time of a real block device (sysstat's ``await`` and
``%util`` rise, fio's completion latency rises, Darshan's timers see it) with nothing mocked
above the file system (reference/sysstat.md 2.2: loop on a delaying FUSE file, ``await`` x25-270
at equal throughput).

Run as ``python -m pipeline.lab.delayfs BACKDIR MOUNTPOINT CONTROL``. ``CONTROL`` is a text
file, read again at most once a second, with lines ``<file name> <ms>``; ``*`` is the default
for files not named::

    * 0
    lun3.img 20

The file system is mounted with ``direct_io`` (no page cache between the loop device and the
delay) and serves each request on its own thread (concurrent requests are delayed in
parallel, like a device with a deep queue).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger(__name__)

RELOAD_S = 1.0
"""How often the control file is read again (s)."""


def parse_control(text: str) -> dict[str, float]:
    """``CONTROL`` text -> file name (``*`` = default) -> delay in seconds.

    Lines that are empty or start with ``#`` are skipped; a line with one number sets the
    default. Raises ValueError naming the line when a delay is not a number >= 0.
    """
    out: dict[str, float] = {}
    for no, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        name, value = ("*", fields[0]) if len(fields) == 1 else (fields[0], fields[1])
        try:
            ms = float(value)
        except ValueError:
            raise ValueError(f"line {no}: {value!r} is not a delay in ms") from None
        if not ms >= 0:
            raise ValueError(f"line {no}: delay {ms} ms is negative")
        out[name] = ms / 1000.0
    return out


def render_control(delays_ms: Mapping[str, float]) -> str:
    """The inverse of :func:`parse_control` (delays in ms)."""
    return "".join(f"{name} {ms:g}\n" for name, ms in sorted(delays_ms.items()))


class Delays:
    """Per-file delays from the control file, re-read at most every :data:`RELOAD_S`.

    Args:
        path: the control file; a missing or unreadable file means no delay, and a bad one
            keeps the delays read before (and is logged).
        clock: monotonic seconds.
    """

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.clock = clock
        self._delays: dict[str, float] = {}
        self._read_at = -RELOAD_S
        self._lock = threading.Lock()

    def of(self, name: str) -> float:
        """The delay (s) of file ``name`` (a base name) now."""
        with self._lock:
            now = self.clock()
            if now - self._read_at >= RELOAD_S:
                self._read_at = now
                self._reload()
            return self._delays.get(name, self._delays.get("*", 0.0))

    def _reload(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                self._delays = parse_control(f.read())
        except FileNotFoundError:
            self._delays = {}
        except (OSError, ValueError) as err:
            log.warning("%s: %s; keeping the delays read before", self.path, err)


class PassThrough:
    """The file operations of a delaying pass-through of ``root``, under fusepy's
    ``Operations`` names and signatures: every read and write first sleeps the delay
    ``delays`` has for the file's name. :func:`operations` mixes it with ``Operations``
    (which answers the operations not named here)."""

    def __init__(self, root: str, delays: Delays) -> None:
        self._root = root
        self._delays = delays

    def _real(self, path: str) -> str:
        return os.path.join(self._root, path.lstrip("/"))

    def _pause(self, path: str) -> None:
        s = self._delays.of(os.path.basename(path))
        if s > 0:
            time.sleep(s)

    def getattr(self, path: str, fh: int | None = None) -> dict[str, float]:
        from fuse import FuseOSError  # fusepy; only the lab needs it

        try:
            st = os.lstat(self._real(path))
        except OSError as err:
            raise FuseOSError(err.errno) from None
        keys = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid")
        times = ("st_atime", "st_mtime", "st_ctime")
        return {k: getattr(st, k) for k in (*keys, *times)}

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def open(self, path: str, flags: int) -> int:
        return os.open(self._real(path), flags & ~getattr(os, "O_DIRECT", 0))

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        self._pause(path)
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        self._pause(path)
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        os.truncate(self._real(path), length)

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        return 0


def operations(root: str, delays: Delays) -> Any:
    """The fusepy ``Operations`` of a delaying pass-through of ``root`` (:class:`PassThrough`;
    the class is named ``DelayFS``, the file system's name in the mount table)."""
    from fuse import Operations  # fusepy; only the lab needs it

    return type("DelayFS", (PassThrough, Operations), {})(root, delays)


def main(argv: list[str]) -> int:
    """``delayfs BACKDIR MOUNTPOINT CONTROL``: serve until unmounted; returns the exit status."""
    if len(argv) != 3:
        print("usage: python -m pipeline.lab.delayfs BACKDIR MOUNTPOINT CONTROL", file=sys.stderr)
        return 2
    back, mount, control = argv
    from fuse import FUSE  # fusepy

    FUSE(operations(back, Delays(control)), mount, foreground=True, nothreads=False, direct_io=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
