"""Tailing: read only complete lines from a file that may still be written.

fio writes its histogram logs while the job runs, so the last line of a file is often incomplete.
Like Filebeat's filestream reader (elastic.md §6.1) the tailer returns only newline-terminated
lines, reports where the next read starts, and notices truncation (the file is now shorter than
the committed offset), after which the caller resets the registry entry and reads from 0.

Compressed inputs (``*.gz``) cannot be tailed: they are read whole once complete, by
:func:`read_gzip_lines`, and their offsets are positions in the *decompressed* stream; the registry
stores those decompressed offsets for ``.gz`` files.

Lines are returned as raw bytes without their ``\\n`` (a ``\\r`` before it is kept; decoding and
stripping belong to the parser).
"""

from __future__ import annotations

import gzip
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

log = logging.getLogger(__name__)

OpenFn = Callable[..., IO[Any]]

_EXTEND_BYTES = 64 << 10
"""Read step used to finish a line longer than ``max_bytes``."""

MAX_LINE_BYTES = 1 << 20
"""A file whose end is this far from its last line end is not a text log: fio histogram
records are at most a few tens of KB."""

LONGEST_LINE_BYTES = 16 << 20
"""Longest complete line read (and handed to the parser, which rejects it as a bad line);
past this a line is not waited for."""


@dataclass(frozen=True)
class TailChunk:
    """Complete lines read from one file.

    Attributes:
        lines: the lines in file order, without the trailing newline.
        end_offsets: for each line, the byte offset just past its newline (what the registry may
            commit once the line is acknowledged; ``LineRef.end_offset``).
        next_offset: where the next read starts: the last end offset, or the start offset if no
            complete line was found; 0 when ``truncated``.
        truncated: the file is shorter than the requested offset; nothing was read and the caller
            should reset the file's registry entry and read again from 0.
    """

    lines: tuple[bytes, ...]
    end_offsets: tuple[int, ...]
    next_offset: int
    truncated: bool = False


def split_complete_lines(data: bytes, start_offset: int) -> TailChunk:
    """Split ``data`` read at ``start_offset`` into its newline-terminated lines.

    Bytes after the last newline (an incomplete line) are left out.

    Returns:
        The lines with their absolute end offsets; ``next_offset`` is just past the last newline.
    """
    last_newline = data.rfind(b"\n")
    if last_newline < 0:
        return TailChunk((), (), start_offset)
    lines = tuple(data[: last_newline + 1].split(b"\n")[:-1])
    end_offsets: list[int] = []
    pos = start_offset
    for line in lines:
        pos += len(line) + 1
        end_offsets.append(pos)
    return TailChunk(lines, tuple(end_offsets), pos)


class LineTooLong(ValueError):
    """No line end between a line start and the end of the file, ``max_line_bytes`` or more
    away: not a line-oriented log."""

    def __init__(self, path: str, offset: int, max_line_bytes: int) -> None:
        self.offset = offset
        super().__init__(
            f"no line end within {max_line_bytes} bytes after byte {offset}: not a text log"
        )


def read_complete_lines(
    path: str | os.PathLike[str],
    offset: int,
    max_bytes: int,
    *,
    open_: OpenFn = open,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> TailChunk:
    """Read the complete lines of ``path`` that start at or after ``offset``.

    Reads about ``max_bytes`` (``shipper.read_chunk_bytes``) but always returns at least one
    complete line if there is one, however long (fio histogram lines are 5–15 KB; a line of
    garbage megabytes long is returned too, for the parser to reject as a bad line, so the
    lines after it are still read); an incomplete last line is never returned: it is read
    again, whole, on a later call.

    Args:
        path: a plain (not compressed) file.
        offset: byte offset of the start of a line (0 or a committed ``end_offset``), >= 0.
        max_bytes: read budget in bytes, > 0.
        open_: ``open`` or a fake, called as ``open_(path, "rb")``.
        max_line_bytes: a file that ends ``max_line_bytes`` or more after ``offset`` without a
            line end is not a text log (see :class:`LineTooLong`).

    Returns:
        The lines; with ``truncated=True`` (and no lines) when the file is shorter than ``offset``.

    Raises:
        LineTooLong: no line end from ``offset`` to the end of the file, ``max_line_bytes`` or
            more away, or none within :data:`LONGEST_LINE_BYTES`.
        ValueError: ``offset`` is negative or ``max_bytes`` is not positive.
        OSError: the file cannot be opened or read (FileNotFoundError if it vanished).
    """
    if offset < 0 or max_bytes <= 0:
        raise ValueError(f"need offset >= 0 and max_bytes > 0, got {offset} and {max_bytes}")
    with open_(os.fspath(path), "rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size < offset:
            log.info("%s is shorter (%s bytes) than offset %s: truncated", path, size, offset)
            return TailChunk((), (), 0, truncated=True)
        f.seek(offset)
        data = f.read(max_bytes)
        if b"\n" not in data and len(data) == max_bytes:
            data = _finish_long_line(f, data, os.fspath(path), offset, max_line_bytes)
        elif b"\n" not in data and len(data) >= max_line_bytes:
            raise LineTooLong(os.fspath(path), offset, max_line_bytes)
    return split_complete_lines(data, offset)


def read_last_line(path: str | os.PathLike[str], offset: int) -> TailChunk:
    """The last line of a complete file when it has no line end (an export written without a
    final newline): the bytes from ``offset`` to the end, as one line; no lines when there are
    none, or when they hold a line end (complete lines are :func:`read_complete_lines`').

    Args:
        path: a plain file taken to be complete (``iolens run --once``).
        offset: where the complete lines end (the tail's offset).

    Raises:
        OSError: the file cannot be read.
    """
    with open(os.fspath(path), "rb") as f:
        f.seek(offset)
        data = f.read(MAX_LINE_BYTES + 1)
    if not data.strip() or b"\n" in data or len(data) > MAX_LINE_BYTES:
        return TailChunk((), (), offset)
    end = offset + len(data)
    return TailChunk((data.rstrip(b"\r"),), (end,), end)


def _finish_long_line(
    f: IO[Any], data: bytes, path: str, offset: int, max_line_bytes: int
) -> bytes:
    """One line longer than the read budget (``data``, read at ``offset``): read on to its
    end; only that line (empty if incomplete yet), the rest waits for the next call.

    Raises:
        LineTooLong: no line end ``max_line_bytes`` or more (or past
            :data:`LONGEST_LINE_BYTES`) after ``offset``.
    """
    parts, total = [data], len(data)
    while total <= LONGEST_LINE_BYTES:
        more = f.read(_EXTEND_BYTES)
        if not more:
            break
        parts.append(more)
        total += len(more)
        if b"\n" in more:
            break
    data = b"".join(parts)
    end = data.find(b"\n")
    if end < 0 and (total >= max_line_bytes or total > LONGEST_LINE_BYTES):
        raise LineTooLong(path, offset, max_line_bytes)
    return data[: end + 1]


def read_gzip_lines(
    path: str | os.PathLike[str], offset: int = 0, *, open_: OpenFn = gzip.open
) -> TailChunk:
    """Read all lines of a complete gzip file, after decompressed offset ``offset``.

    The file is taken to be complete (the caller waits until it is stable), so a last line without
    a newline is a line too; its end offset is the decompressed size.

    Args:
        path: a ``.gz`` file.
        offset: decompressed byte offset of the start of a line (0, or a committed end offset).
        open_: ``gzip.open`` or a fake, called as ``open_(path, "rb")``.

    Returns:
        The lines with end offsets in *decompressed* bytes; ``truncated=True`` (and no lines) when
        the decompressed stream is shorter than ``offset`` (the file was replaced by a shorter one).

    Raises:
        ValueError: ``offset`` is negative.
        EOFError: the file ends before its gzip end-of-stream marker (still being written, or cut).
        gzip.BadGzipFile: the file is not gzip data.
        OSError: the file cannot be opened or read.
    """
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    with open_(os.fspath(path), "rb") as f:
        data = f.read()
    if len(data) < offset:
        log.info("%s decompresses to %s bytes, less than offset %s", path, len(data), offset)
        return TailChunk((), (), 0, truncated=True)
    rest = data[offset:]
    if rest and not rest.endswith(b"\n"):
        rest += b"\n"
        chunk = split_complete_lines(rest, offset)
        # The synthetic newline does not exist in the stream: the last line ends at len(data).
        return TailChunk(chunk.lines, (*chunk.end_offsets[:-1], len(data)), len(data))
    return split_complete_lines(rest, offset)


def pop_snapshot(snapshots: dict[int, str], end_offset: int) -> str | None:
    """Pop the cursor a tail stored for the line ending at ``end_offset`` (the registry commits
    it with that line) and drop those of the lines before it; None if there is none (or it is
    empty)."""
    snap = snapshots.pop(end_offset, None)
    for k in [k for k in snapshots if k < end_offset]:
        del snapshots[k]
    return snap or None


def read_lines(path: str, offset: int, max_bytes: int) -> TailChunk:
    """The next complete lines of ``path`` from byte ``offset``: about ``max_bytes`` of a plain
    file (:func:`read_complete_lines`), every remaining line of a ``.gz`` one, decompressed
    (:func:`read_gzip_lines`; ``offset`` is then in the decompressed stream)."""
    if path.endswith(".gz"):
        return read_gzip_lines(path, offset)
    return read_complete_lines(path, offset, max_bytes)
