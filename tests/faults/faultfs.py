"""A pass-through FUSE file system that fails or holds reads of chosen files on demand: the
network file system of the fault tests (there is no NFS server here).

``python faultfs.py BACKDIR MOUNTPOINT CONTROL`` serves BACKDIR at MOUNTPOINT (fusepy, as
``pipeline.lab.delayfs``) until unmounted. CONTROL is read again whenever it changes; each line
is ``<file name> <fault>``:

- ``estale``: every read of the file, and every ``fstat`` of an open one, fails with ``ESTALE``
  (what an NFS client answers once the server no longer knows the file handle);
- ``estale-once``: the next read at an offset past 0 fails with ``ESTALE``, later ones succeed
  (a stale handle that a fresh lookup by path cures);
- ``hold``: reads at an offset past 0 wait until the line is gone; while one waits, the file
  ``CONTROL.held`` exists (a file kept open in the middle of a read, for the test to act on).

Inode numbers are the backing files' (``use_ino``); no page cache (``direct_io``) and no
attribute cache, so every read and ``stat`` reaches this process.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from fuse import FUSE, FuseOSError, Operations  # fusepy

STAT_KEYS = ("st_mode", "st_nlink", "st_size", "st_uid", "st_gid", "st_ino")
TIME_KEYS = ("st_atime", "st_mtime", "st_ctime")


class Faults:
    """The faults CONTROL asks for, read again when its modification time changes."""

    def __init__(self, control: str) -> None:
        self.control = control
        self._seen: int | None = None
        self._faults: dict[str, str] = {}
        self._used: set[str] = set()
        self._lock = threading.Lock()

    def of(self, name: str) -> str | None:
        """The fault set for file ``name`` now, if any."""
        with self._lock:
            try:
                mtime = os.stat(self.control).st_mtime_ns
            except FileNotFoundError:
                mtime = None
            if mtime != self._seen:
                self._seen = mtime
                self._used.clear()
                text = "" if mtime is None else Path(self.control).read_text()
                self._faults = dict(line.split()[:2] for line in text.splitlines() if line.strip())
            return self._faults.get(name)

    def once(self, name: str) -> bool:
        """Whether an ``estale-once`` of ``name`` is still to be given (and give it)."""
        with self._lock:
            if name in self._used:
                return False
            self._used.add(name)
            return True


class FaultFS(Operations):  # type: ignore[misc]
    """The pass-through operations, with :class:`Faults` on reads and ``fstat``."""

    def __init__(self, root: str, control: str) -> None:
        self.root = root
        self.faults = Faults(control)
        self.held = control + ".held"

    def _p(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except OSError as err:
            raise FuseOSError(err.errno) from None

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        if fh is not None and self.faults.of(os.path.basename(path)) == "estale":
            raise FuseOSError(errno.ESTALE)
        st = self._call(os.lstat, self._p(path))
        return {k: getattr(st, k) for k in (*STAT_KEYS, *TIME_KEYS)}

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        name = os.path.basename(path)
        fault = self.faults.of(name)
        if fault == "estale" or (fault == "estale-once" and offset > 0 and self.faults.once(name)):
            raise FuseOSError(errno.ESTALE)
        if fault == "hold" and offset > 0:
            Path(self.held).touch()
            while self.faults.of(name) == "hold":
                time.sleep(0.02)
            os.unlink(self.held)
        return bytes(os.pread(fh, size, offset))

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *self._call(os.listdir, self._p(path))]

    def open(self, path: str, flags: int) -> int:
        return int(self._call(os.open, self._p(path), flags))

    def create(self, path: str, mode: int, fi: Any = None) -> int:
        return int(self._call(os.open, self._p(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode))

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return int(os.pwrite(fh, data, offset))

    def truncate(self, path: str, length: int, fh: int | None = None) -> None:
        self._call(os.truncate, self._p(path), length)

    def rename(self, old: str, new: str) -> None:
        self._call(os.rename, self._p(old), self._p(new))

    def unlink(self, path: str) -> None:
        self._call(os.unlink, self._p(path))

    def mkdir(self, path: str, mode: int) -> None:
        self._call(os.mkdir, self._p(path), mode)

    def rmdir(self, path: str) -> None:
        self._call(os.rmdir, self._p(path))

    def chmod(self, path: str, mode: int) -> None:
        self._call(os.chmod, self._p(path), mode)

    def chown(self, path: str, uid: int, gid: int) -> None:
        self._call(os.chown, self._p(path), uid, gid)

    def utimens(self, path: str, times: Any = None) -> None:
        self._call(os.utime, self._p(path), times)

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        return 0


if __name__ == "__main__":
    back, mount, control = sys.argv[1:4]
    FUSE(
        FaultFS(back, control),
        mount,
        foreground=True,
        nothreads=False,
        direct_io=True,
        use_ino=True,
        attr_timeout=0,
        entry_timeout=0,
        negative_timeout=0,
    )
