"""Handing a finished file over to a drop directory, so it appears there complete, in one step.

Drop watchers skip dot files, so a file copied across filesystems is written under a hidden
``.<name>.tmp`` name and renamed when complete; an existing file is never overwritten.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path


def free_name(name: str, *dirs: Path) -> str:
    """``name``, or ``name-1``, ``name-2``, ... : the first that exists in none of ``dirs``."""
    candidate, n = name, 0
    while any((d / candidate).exists() for d in dirs):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def hand_over(path: Path, drop: Path) -> Path:
    """Move a finished file into ``drop`` so that it appears there complete, in one step.

    ``os.replace`` when both are on one filesystem; otherwise a copy to ``.<name>.tmp`` in
    ``drop`` (hidden: watchers skip dot files), fsync, ``os.replace`` to the final name and
    removal of the source. An existing file of the same name is never overwritten
    (:func:`free_name`).

    Returns:
        The file's path in ``drop``.

    Raises:
        OSError: the move or copy failed; the source is left in place.
    """
    dest = drop / free_name(path.name, drop)
    try:
        os.replace(path, dest)
        return dest
    except OSError as err:
        if err.errno != errno.EXDEV:
            raise
    tmp = drop / f".{dest.name}.tmp"
    with path.open("rb") as src, tmp.open("wb") as out:
        shutil.copyfileobj(src, out)
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, dest)
    path.unlink()
    return dest
