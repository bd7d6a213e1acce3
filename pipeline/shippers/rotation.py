"""Rotation: finding again files read before, under the names log rotation gave them.

Two kinds of rotation keep a file's lines readable after its name changed:

- by *rename* (logrotate's default): the file keeps its identity; when it was renamed while
  iolens was not running to a name the drop's pattern does not match, :func:`renamed_while_away`
  finds it by inode;
- by *copy* (``copytruncate``): the copy is a new file; :func:`adopt_rotated` registers it at
  the offset its original was committed to, so what was read is not read again.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from pipeline.settings import DropSettings
from pipeline.shippers.hosts import unrotated
from pipeline.shippers.registry import FileState, Registry

log = logging.getLogger(__name__)


def lines_up_to(path: Path, offset: int, lines: int) -> bool:
    """Whether the first ``offset`` bytes of ``path`` are ``lines`` whole lines (the last one
    ending at ``offset``); False when the file is shorter or compressed, or cannot be read."""
    if path.suffix in (".gz", ".bz2", ".xz", ".zst"):
        return False
    try:
        with path.open("rb") as fh:
            count, left = 0, offset
            while left > 0:
                block = fh.read(min(left, 1 << 20))
                if not block:
                    return False
                count += block.count(b"\n")
                left -= len(block)
                last = block[-1:]
    except OSError:
        return False
    return count == lines and last == b"\n"


def _is_copy_of(orig: FileState | None, key: str, path: Path) -> bool:
    """Whether the new file ``key`` at ``path`` is a copy of ``orig`` read to a line end."""
    return not (
        orig is None
        or orig.key == key
        or orig.key.rsplit(":", 1)[-1] != key.rsplit(":", 1)[-1]
        or orig.offset <= 0
        or not lines_up_to(path, orig.offset, orig.line_no)
    )


def adopt_rotated(
    registry: Registry, truncated: Mapping[str, FileState], key: str, path: Path
) -> FileState | None:
    """Register a new file that is a rotated *copy* (logrotate ``copytruncate``) of a file
    already read, at the offset that file was committed to, so what was read is not read
    again.

    The original is a file registered at the copy's name without its rotation suffix
    (:func:`~pipeline.shippers.hosts.unrotated`), newest first, or the one truncated there
    by this process (``truncated``: path -> its state before). The copy must begin with the
    same bytes (the fingerprint of its identity) and hold, up to that offset, exactly as many
    lines as were committed, the last one ending there. Otherwise it is read from its start:
    its documents are already there (409s). An original whose lines went to another cluster
    than the registry's (:meth:`FileState.delivered_elsewhere`) is no original here: the copy
    is read from its start into this cluster. Returns the new file's state, or None when
    ``path`` is not such a copy.
    """
    stem = unrotated(path)
    if stem == path:
        return None
    for orig in (truncated.get(str(stem)), *registry.by_path(stem)):
        if orig is None or orig.delivered_elsewhere(registry.cluster):
            continue
        if not _is_copy_of(orig, key, path):
            continue
        log.info(
            "%s is a rotated copy of %s: reading it from byte %s (line %s), where that was read to",
            path,
            orig.path,
            orig.offset,
            orig.line_no,
        )
        registry.upsert_new(key, path, orig.anchor_ms)
        return registry.commit(key, orig.offset, orig.line_no, orig.cursor)
    return None


def _unfinished_by_dir(
    registry: Registry, drops: Iterable[DropSettings]
) -> dict[Path, list[tuple[FileState, DropSettings]]]:
    """The registry's files not read to their end, with their drops, by directory."""
    roots = [(Path(d.path), d) for d in drops]
    by_dir: dict[Path, list[tuple[FileState, DropSettings]]] = {}
    for st in registry.all():
        path = Path(st.path)
        if st.done:
            continue
        drop = next((d for root, d in roots if root in path.parents), None)
        if drop is not None:
            by_dir.setdefault(path.parent, []).append((st, drop))
    return by_dir


def _files_by_inode(directory: Path) -> dict[int, str]:
    """Inode -> path of the regular files in ``directory`` (none when it cannot be listed)."""
    try:
        with os.scandir(directory) as entries:
            return {e.inode(): e.path for e in entries if e.is_file()}
    except OSError:
        return {}


def renamed_while_away(
    registry: Registry,
    drops: Iterable[DropSettings],
    scanned: set[str],
    identify: Callable[[str], str | None],
) -> list[tuple[Path, DropSettings]]:
    """Files of the registry, not read to their end, that were renamed while iolens was not
    running to a name outside the drop's pattern (a rotation by rename): their remaining
    lines are still read. One ``scandir`` per directory that held such a file.

    Args:
        registry: the files read before.
        drops: the drops.
        scanned: paths the drops' scans found (those are read anyway).
        identify: path -> registry key (None while it cannot be identified).
    """
    found: list[tuple[Path, DropSettings]] = []
    for directory, states in _unfinished_by_dir(registry, drops).items():
        inodes = _files_by_inode(directory)
        for st, drop in states:
            new = inodes.get(int(st.key.split(":")[1]))
            if new is None or new in scanned:
                continue
            with contextlib.suppress(OSError):
                if identify(new) == st.key:
                    log.info("%s was renamed to %s while iolens was away", st.path, new)
                    found.append((Path(new), drop))
    return found
