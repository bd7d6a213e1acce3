"""Opening the state databases of a run, in the order a full or damaged state directory needs.

The spool is delivered first (:func:`~pipeline.sink.spool_first.deliver_spool_first`): on a
full disk that is what frees room. Then the registry and the dirty intervals are opened, each
moved aside and started again when damaged and, while the disk is too full for it, waited for
(:func:`~pipeline.sink.disk.open_when_room`, delivering the spool between tries). Their files
are watched for removal or replacement while the run goes on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pipeline.jobs.intervals import DirtyIntervals, open_dirty_intervals
from pipeline.jobs.state_lock import StateWatch
from pipeline.settings import Settings
from pipeline.shippers.registry import Registry
from pipeline.shippers.registry_open import open_registry
from pipeline.sink.client import Client
from pipeline.sink.disk import DiskWatch, open_when_room
from pipeline.sink.spool_first import deliver_spool_first


@dataclass
class StateDbs:
    """The state databases of a run, and the watch over them."""

    registry: Registry
    dirty: DirtyIntervals
    watch: StateWatch


def open_state_dbs(
    settings: Settings,
    client: Client,
    lock: IO[str],
    disk: DiskWatch,
    cluster: str | None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> StateDbs:
    """Deliver the spool, then open ``registry.sqlite`` (for ``cluster``) and ``jobs.sqlite``
    in ``settings.state_dir``, whose ``lock`` the caller holds.

    Raises:
        ConfigError: a database cannot be opened (read-only or removed state directory).
    """
    state = Path(settings.state_dir)
    room = functools.partial(
        deliver_spool_first, client.options(max_retries=0), settings.sink, state, disk
    )
    room()  # the spool first: delivered, it frees room for the rest
    reg, jobs_db = state / "registry.sqlite", state / "jobs.sqlite"
    registry = open_registry(
        reg, cluster=cluster, when_full=lambda opener: open_when_room(opener, reg, disk, room)
    )
    dirty = open_dirty_intervals(
        jobs_db,
        clock=clock,
        monotonic=monotonic,
        when_full=lambda opener: open_when_room(opener, jobs_db, disk, room),
    )
    return StateDbs(registry, dirty, StateWatch(state, lock, [registry.path, dirty.path]))
