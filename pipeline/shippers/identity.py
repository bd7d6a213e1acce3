"""File identity: device + inode plus a fingerprint of the file's first bytes.

This follows Filebeat's filestream ``file_identity``: the ``native`` method (device + inode)
combined with the ``fingerprint`` method (a hash of a leading byte range), elastic.md §6.1. The
inode alone is not enough on Lustre, NFS and overlay filesystems, which reuse inodes: a new file
that gets an old inode has different leading bytes and therefore a new identity, while a rename
keeps both the inode and the content and therefore the identity.

The hashed range is the first ``min(fingerprint_bytes, end of the first line)`` bytes, so a line
format gets its final identity as soon as its first line is complete, long before the file reaches
``fingerprint_bytes`` bytes (Filebeat instead ignores files shorter than the range). A reused inode
whose new first line is byte-for-byte the old one is indistinguishable; such a file is taken for the
old one (Filebeat has the same limitation).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

FINGERPRINT_HEX_CHARS = 16
"""Length of the hex fingerprint (the first 64 bits of a sha256)."""

StatFn = Callable[[str], os.stat_result]
OpenFn = Callable[..., IO[Any]]


@dataclass(frozen=True)
class FileIdentity:
    """Who a file is, independent of its path.

    Attributes:
        device: ``st_dev`` of the file.
        inode: ``st_ino`` of the file.
        fingerprint: the first 16 hex digits of the sha256 of the file's leading bytes.
    """

    device: int
    inode: int
    fingerprint: str

    @property
    def key(self) -> str:
        """The registry key, ``"{device}:{inode}:{fingerprint}"``."""
        return f"{self.device}:{self.inode}:{self.fingerprint}"


def fingerprint_range(
    head: bytes, fingerprint_bytes: int, *, whole_file: bool = False
) -> int | None:
    """How many leading bytes of ``head`` make up the fingerprint, or None if not yet known.

    Args:
        head: the file's first bytes (at most ``fingerprint_bytes`` of them).
        fingerprint_bytes: the configured range length (``shipper.fingerprint_bytes``), > 0.
        whole_file: the file is known to be complete (a stable ``.gz``): any non-empty head will do.

    Returns:
        ``min(fingerprint_bytes, position just past the first newline)``; None while the head has
        neither a newline nor ``fingerprint_bytes`` bytes (or, with ``whole_file``, is empty).

    Raises:
        ValueError: ``fingerprint_bytes`` is not positive.
    """
    if fingerprint_bytes <= 0:
        raise ValueError(f"fingerprint_bytes must be positive, got {fingerprint_bytes}")
    head = head[:fingerprint_bytes]
    newline = head.find(b"\n")
    if newline >= 0:
        return newline + 1
    if len(head) == fingerprint_bytes or (whole_file and head):
        return len(head)
    return None


def identify(
    path: str | os.PathLike[str],
    fingerprint_bytes: int,
    *,
    whole_file: bool = False,
    stat: StatFn = os.stat,
    open_: OpenFn = open,
) -> FileIdentity | None:
    """Identify the file at ``path`` (Filebeat ``native`` + ``fingerprint``, elastic.md §6.1).

    The file is stat'ed before and after its head is read; if the device or inode changed in
    between (the path was replaced meanwhile), the answer is None and the caller tries again later.

    Args:
        path: the file.
        fingerprint_bytes: at most this many leading bytes are hashed
            (``shipper.fingerprint_bytes``).
        whole_file: the file is complete (e.g. a ``.gz`` that is no longer written), so a short
            file without a newline is identifiable by all of its bytes. Never set this for a file
            that may still grow: its identity would change when it does.
        stat: ``os.stat`` or a fake taking the path as ``str``.
        open_: ``open`` or a fake, called as ``open_(path, "rb")``.

    Returns:
        The identity, or None while the file is not yet identifiable: it has neither a complete
        first line nor ``fingerprint_bytes`` bytes, or it was replaced while being read.

    Raises:
        OSError: the file cannot be stat'ed or opened (FileNotFoundError if it vanished).
        ValueError: ``fingerprint_bytes`` is not positive.
    """
    spath = os.fspath(path)
    before = stat(spath)
    with open_(spath, "rb") as f:
        head = f.read(fingerprint_bytes)
    after = stat(spath)
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino):
        log.debug("%s was replaced while being identified; trying again later", spath)
        return None
    length = fingerprint_range(head, fingerprint_bytes, whole_file=whole_file)
    if length is None:
        return None
    digest = hashlib.sha256(head[:length]).hexdigest()[:FINGERPRINT_HEX_CHARS]
    return FileIdentity(device=before.st_dev, inode=before.st_ino, fingerprint=digest)


def find_renamed(key: str, path: Path) -> Path | None:
    """Where file ``key`` (``device:inode:fingerprint``), last seen at ``path``, is now, if it
    was renamed within its directory (a rotation by rename: ``app.log`` -> ``app.log.1``).

    Looks for an entry of ``path``'s directory with the key's inode and device, other than
    ``path`` itself; the caller confirms the fingerprint (:func:`identify`). One ``scandir`` of
    the directory (inode numbers come with the directory entries on Linux).

    Returns:
        The new path, or None when no other name in the directory has that inode (the file was
        deleted, moved elsewhere, or the directory cannot be read).
    """
    try:
        device, inode = (int(part) for part in key.split(":")[:2])
    except ValueError:
        return None
    try:
        with os.scandir(path.parent) as entries:
            for entry in entries:
                if entry.inode() != inode or entry.path == str(path):
                    continue
                if entry.is_file(follow_symlinks=False) and entry.stat().st_dev == device:
                    return Path(entry.path)
    except OSError:
        return None
    return None
