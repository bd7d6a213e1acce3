"""Notices about a cluster (what it lacks), said once per cluster and state directory.

:func:`pipeline.sink.capabilities.detect` finds, on every start, what the cluster cannot do;
telling the user each time is noise. :func:`announce` logs a notice at INFO the first time it
is given for a cluster and state directory, and at DEBUG afterwards; ``iolens status`` shows
them all with when they were first said (:func:`said`). They are kept in
``<state_dir>/notices.json``, by cluster identity (:func:`pipeline.sink.cluster_id.cluster_id`)::

    {"iolens:9b1c0e4f...": {"ILM is not available on this cluster (...): ...":
                            "2026-11-25T22:18:34Z"}}
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pipeline.sink.disk import is_disk_full

log = logging.getLogger(__name__)

NOTICES_FILE = "notices.json"
"""File name of the notices inside ``state_dir``."""
UNKNOWN = "unknown"
"""The key of notices about a cluster whose identity could not be read."""

Said = dict[str, dict[str, str]]
"""Cluster identity -> notice -> when it was first said (ISO 8601, UTC)."""


def _load(path: Path) -> Said:
    """The notices in ``path``; none when it is missing or not what this module writes (said
    with a warning: they are then said again)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as err:
        log.warning("%s cannot be read (%s): the cluster's notices are said again", path, err)
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        log.warning("%s is not a notices file: the cluster's notices are said again", path)
        return {}
    return {str(k): {str(m): str(t) for m, t in v.items()} for k, v in data.items()}


def said(state_dir: str | Path, cluster: str | None) -> dict[str, str]:
    """The notices said about ``cluster`` (None: unknown) in ``state_dir``, each with when it
    was first said (ISO 8601, UTC)."""
    return _load(Path(state_dir) / NOTICES_FILE).get(cluster or UNKNOWN, {})


def announce(
    messages: Sequence[str],
    cluster: str | None,
    state_dir: str | Path,
    *,
    clock: Callable[[], float] = time.time,
) -> list[str]:
    """Log each of ``messages`` about ``cluster``: at INFO the first time for this cluster and
    ``state_dir``, at DEBUG afterwards; remember the new ones (written atomically).

    Args:
        messages: the notices, e.g. :attr:`Capabilities.messages
            <pipeline.sink.capabilities.Capabilities.messages>`.
        cluster: the cluster's identity; None (unknown) keeps them under ``"unknown"``.
        state_dir: the state directory (created when missing).
        clock: seconds since the Unix epoch, for when a notice was first said.

    Returns:
        The messages said for the first time, in order.

    A full disk only means the new ones are not remembered (they are said again next time).

    Raises:
        OSError: ``notices.json`` cannot be written for another reason.
    """
    path = Path(state_dir) / NOTICES_FILE
    known = _load(path)
    mine = known.setdefault(cluster or UNKNOWN, {})
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
    new = [m for m in dict.fromkeys(messages) if m not in mine]
    for msg in messages:
        log.log(logging.DEBUG if msg in mine else logging.INFO, "%s", msg)
    if not new:
        return new
    mine.update((m, stamp) for m in new)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps(known, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        if not is_disk_full(err):
            raise
        log.debug("%s not written (the disk is full): %s", path, err)
    return new
