"""Files that cannot be read now: said once, with the reason and what to do, and tried again.

A file of a drop that cannot be opened or read (permission denied, a stale NFS file handle, an
I/O error) is not read for now and not dead-lettered: nothing of it was read, so there is nothing
to keep, and the cause is usually fixed outside iolens (a ``chmod``, a remount). Every other file
is read meanwhile; this one is tried again at each pass over the drop (file events, and every
``jobs.tick_s``) from the offset committed for it, so nothing is read twice. The warning is given
once per file and reason (later failures are DEBUG lines), and an INFO line says when the file
can be read again. ``iolens run --once`` names, at its end, the files it could not read.

On ``ESTALE`` the caller first opens the file again by its path (a fresh lookup gets a fresh
handle from the server, as NFS clients do) and reads on from the offset when it is the same
file (device, inode and leading bytes); only when that fails too is the file reported here.
"""

from __future__ import annotations

import errno
import logging
import os

log = logging.getLogger(__name__)


def advice(err: OSError) -> str:
    """What to do about ``err`` (an error opening or reading an input file), one sentence.

    Pure except for the user id it names (``os.geteuid``).
    """
    if err.errno in (errno.EACCES, errno.EPERM):
        return (
            f"give the user iolens runs as (uid {os.geteuid()}) read access to it and search "
            "access to its directories"
        )
    if err.errno == errno.ESTALE:
        return (
            "the network file system no longer knows the file (removed or replaced on the "
            "server, or the export remounted) and opening it again by its path did not help; "
            "check the mount on this host"
        )
    if err.errno == errno.EIO:
        return "check the device or the network file system it is on (kernel log)"
    return "check the file and the file system it is on"


def reason(err: OSError) -> str:
    """``err`` as a short reason: its text and symbolic errno (``Permission denied, EACCES``)."""
    name = errno.errorcode.get(err.errno or 0, str(err.errno))
    return f"{err.strerror or err}, {name}"


class Unreadable:
    """The files that could not be read, by path, with the last reason (errno).

    Attributes:
        failing: path -> errno of the files not readable now.
    """

    def __init__(self) -> None:
        self.failing: dict[str, int] = {}

    def report(self, path: str, err: OSError) -> None:
        """``path`` cannot be read (``err``): a WARNING the first time for this reason (with
        what to do), a DEBUG line after that."""
        code = err.errno or 0
        if self.failing.get(path) == code:
            log.debug("%s still cannot be read (%s)", path, reason(err))
            return
        self.failing[path] = code
        log.warning(
            "%s cannot be read (%s): %s. It is not read for now and tried again at each pass "
            "over the drop, from where it was read to; the other files are read meanwhile",
            path,
            reason(err),
            advice(err),
        )

    def readable(self, path: str) -> None:
        """``path`` could be opened and read again: say so if it could not before."""
        if self.failing.pop(path, None) is not None:
            log.info("%s can be read again: reading it from where it was read to", path)

    def forget(self, path: str) -> None:
        """``path`` was deleted: it is tried no more."""
        self.failing.pop(path, None)
