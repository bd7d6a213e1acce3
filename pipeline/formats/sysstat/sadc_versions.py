"""Which sysstat wrote a sadc file, which sadf reads it here, and ``sadf -c`` for older formats.

A sadc file starts with its ``file_magic`` (sysstat's sa.h): the magic number ``0xd596``, the
file format (``0x2175`` since sysstat 11.7.1; ``0x2173``, ``0x2171``, ``0x2170`` before), then
the version of the sysstat that wrote it as four bytes (version, patch level, sublevel, extra
version). Numbers are in the byte order of the recording host, so the magic is read both ways.
Examples (``tests/`` of sysstat's repository)::

    96 d5 70 21 09 01 05 00   sysstat 9.1.5, format 0x2170
    96 d5 73 21 0a 03 01 00   sysstat 10.3.1, format 0x2173
    96 d5 75 21 0c 06 01 00   sysstat 12.6.1, format 0x2175

``sadf`` reads files of its own format; it converts the earlier formats it knows with
``sadf -c FILE > NEW`` (:func:`convert_format`). A file written by a newer sysstat than the
host's may print nothing at all (exit 0), so its version is compared with ``sadf -V``'s.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pipeline.parsers.errors import ParseError

SYSSTAT_MAGIC = 0xD596
"""First two bytes of every sadc file (sysstat's ``SYSSTAT_MAGIC``), in the writer's order."""

OLD_FORMAT = "cannot read the format of this file"
"""What sadf says of a file of an earlier format (``Current sysstat version cannot read ...``)."""

RunFn = Callable[..., "subprocess.CompletedProcess[bytes]"]


@dataclass(frozen=True)
class SadcFormat:
    """The ``file_magic`` head of a sadc file.

    Attributes:
        version: ``(version, patch level, sublevel)`` of the sysstat that wrote it.
        format_magic: the file format number (``0x2175`` for sysstat 11.7.1 and later).
    """

    version: tuple[int, int, int]
    format_magic: int

    @property
    def text(self) -> str:
        """``sysstat 12.6.1 (file format 0x2175)``."""
        return f"sysstat {'.'.join(map(str, self.version))} (file format 0x{self.format_magic:04x})"


def sadc_format(path: str | os.PathLike[str]) -> SadcFormat | None:
    """The writer's version and file format of a sadc file; None if it does not start with
    sysstat's magic number (not a sadc file, or too short).

    Raises:
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        head = f.read(8)
    if len(head) < 8:
        return None
    for order in ("<", ">"):
        magic, format_magic = struct.unpack(f"{order}HH", head[:4])
        if magic == SYSSTAT_MAGIC:
            return SadcFormat((head[4], head[5], head[6]), format_magic)
    return None


@lru_cache(maxsize=8)
def sadf_version(sadf: str) -> tuple[int, int, int] | None:
    """The version of the sysstat ``sadf`` belongs to (``sadf -V``), or None if it cannot tell."""
    try:
        done = subprocess.run([sadf, "-V"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(rb"sysstat version (\d+)\.(\d+)\.(\d+)", done.stdout + done.stderr)
    return (int(found[1]), int(found[2]), int(found[3])) if found else None


def version_text(version: tuple[int, int, int] | None) -> str:
    """``12.6.1``, or ``unknown``."""
    return ".".join(map(str, version)) if version else "unknown"


def newer_than_sadf(path: str, sadf: str) -> str | None:
    """Why ``sadf`` cannot read ``path`` when a newer sysstat wrote it (None when not newer, or
    when the file cannot be read: sadf's own message says why then)."""
    try:
        fmt = sadc_format(path)
    except OSError:
        return None
    host = sadf_version(sadf)
    if fmt is None or host is None or fmt.version <= host:
        return None
    return (
        f"written by {fmt.text}, newer than this host's sadf ({version_text(host)}), which "
        "cannot read it; install that sysstat version or later here, or convert the file where "
        "it was recorded"
    )


def convert_format(
    path: str, work_dir: Path, *, sadf: str, timeout_s: float, run: RunFn, env: dict[str, str]
) -> Path:
    """Convert a sadc file of an earlier format with ``sadf -c`` into ``work_dir``.

    Returns:
        The converted file (``<work_dir>/<name>.sadf-c``); the caller deletes it when read.

    Raises:
        ParseError: sadf cannot convert it, or crashed converting it (its output is not used);
            the reason names the file's version and format, sadf's message and what to do.
    """
    fmt = sadc_format(path)
    what = fmt.text if fmt else "an unknown sysstat"
    work_dir.mkdir(parents=True, exist_ok=True)
    out = work_dir / f"{Path(path).name}.sadf-c"
    argv = [sadf, "-c", path]
    try:
        done = run(argv, capture_output=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise ParseError(path, 0, f"sadf -c took more than {timeout_s:g} s") from None
    if done.returncode != 0 or not done.stdout:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        if done.returncode < 0:
            why = f"crashed converting it ({signal.Signals(-done.returncode).name})"
        else:
            why = f"could not convert it (exit status {done.returncode}: "
            why += f"{message[-1] if message else 'no message'})"
        raise ParseError(
            path,
            0,
            f"written by {what}, a format this host's sadf ({version_text(sadf_version(sadf))}) "
            f"does not read, and sadf -c {why}; convert it with the sadf -c of a later sysstat, "
            "or read it with the sysstat that wrote it",
        )
    out.write_bytes(done.stdout)
    return out
