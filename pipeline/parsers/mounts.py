"""Mount tables: which mount point, and so which device (LUN), holds a file.

Darshan records name files by path; the peer comparison names LUNs by ``host/device``. A
mount table joins the two for any file system, as ``darshan.ost_luns`` does for Lustre OSTs.
Its rows come from the configuration (``darshan.mounts``: mount point -> LUN) and from the
reading host's ``/proc/mounts`` (``proc(5)``: device, mount point, type, options, dump, pass,
white space inside fields written as octal escapes)::

    /dev/loop3 /var/lib/iolens/lab/storage/mnt/lun3 ext4 rw,relatime 0 0
    server:/export /home nfs4 rw,vers=4.2,addr=10.0.0.1 0 0

A file belongs to the longest mount point that is a whole-component prefix of its path, as the
kernel resolves it (``/mnt/lun1`` holds ``/mnt/lun1/a`` but not ``/mnt/lun10/a``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    """One row of a mount table.

    Attributes:
        mount_point: absolute path, no trailing slash (``/`` for the root).
        lun: the LUN as the peer comparison names it (``host/device``), or None when the
            mount is not on a block device the peer comparison can know (NFS, tmpfs, FUSE).
        fs_type: the file system type (``ext4``, ``xfs``, ``gpfs``, ``nfs4``), or ``""``.
    """

    mount_point: str
    lun: str | None
    fs_type: str = ""


def _unescape(field: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def _norm(path: str) -> str:
    return path.rstrip("/") or "/"


def parse_proc_mounts(text: str, host: str) -> list[Mount]:
    """Rows of a ``/proc/mounts`` (or ``/etc/mtab``) text.

    Args:
        text: the file's content.
        host: the name of the host whose table it is (``host.name`` of its sysstat data).

    Returns:
        One :class:`Mount` per line with at least two fields; a mount of a block device
        (``/dev/sdc``, ``/dev/mapper/vg-lv``, ``/dev/loop3``) gets the LUN ``host/<name>``
        with the name below ``/dev/`` (``mapper/vg-lv`` stays as sysstat's ``-p`` prints it
        after the ``mapper/`` prefix: ``vg-lv``); others get None.
    """
    out = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        device, mount_point = _unescape(fields[0]), _unescape(fields[1])
        fs_type = fields[2] if len(fields) > 2 else ""
        lun = None
        if device.startswith("/dev/"):
            lun = f"{host}/{device.removeprefix('/dev/').removeprefix('mapper/')}"
        out.append(Mount(_norm(mount_point), lun, fs_type))
    return out


def configured_mounts(mounts: Mapping[str, str], host: str) -> list[Mount]:
    """Rows of ``darshan.mounts`` (mount point -> ``host/device``, or ``/dev/<name>`` for a
    device of ``host``)."""
    out = []
    for mount_point, target in mounts.items():
        lun = target
        if target.startswith("/dev/"):
            lun = f"{host}/{target.removeprefix('/dev/').removeprefix('mapper/')}"
        out.append(Mount(_norm(mount_point), lun))
    return out


class MountTable:
    """Longest-prefix lookup of files in mount tables; earlier tables win on equal mount
    points (configured rows before ``/proc/mounts``), and within a table the last row (the
    mount on top)."""

    def __init__(self, *tables: Iterable[Mount]) -> None:
        self._by_point: dict[str, Mount] = {}
        for table in reversed(tables):
            # within a table the last row wins: a mount over another hides it, as in the kernel
            self._by_point.update({m.mount_point: m for m in table})

    def __len__(self) -> int:
        return len(self._by_point)

    def mounts(self) -> list[Mount]:
        """Every row, by mount point."""
        return [self._by_point[k] for k in sorted(self._by_point)]

    def lookup(self, path: str) -> Mount | None:
        """The mount holding ``path`` (absolute), or None (relative path, hashed name of an
        anonymized log, or no table row above it)."""
        if not path.startswith("/"):
            return None
        probe = _norm(path)
        while True:
            found = self._by_point.get(probe)
            if found is not None:
                return found
            if probe == "/":
                return None
            probe = probe.rsplit("/", 1)[0] or "/"
