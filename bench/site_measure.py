"""Measuring one ``iolens run`` of the site benchmark: its process tree's CPU and memory from
``/proc``, and the documents and bytes its namespace holds in the cluster.

CPU time is ``utime + stime + cutime + cstime`` of ``/proc/<pid>/stat`` summed over the process
and its living descendants (the Darshan worker pool), in seconds; a descendant's own reaped
children are in its ``cutime``/``cstime``, so nothing is counted twice. Memory is the sum of
``VmRSS`` over the same processes (pages shared after a fork are counted in each), sampled by
the caller; ``os.wait4``'s ``ru_maxrss`` gives the main process's own peak at the end.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CLK_TCK = os.sysconf("SC_CLK_TCK")
WALL_DATASETS = ("iolens.service_rate", "iolens.pipeline", "iolens.workload_model")
"""Datasets written per wall-clock period (the pipeline's own metrics, model snapshots), not per
input: they never fall quiet while the instance runs, and scale with wall time, not span."""
PAGE = os.sysconf("SC_PAGE_SIZE")


def children(pid: int) -> list[int]:
    """Every living descendant of ``pid`` (``/proc/<pid>/task/*/children``, recursively)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*/children"):
            try:
                kids = [int(x) for x in task.read_text().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime


def _rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of ``pid`` and its descendants, living and reaped."""
    return sum(_cpu_ticks(p) for p in [pid, *children(pid)]) / CLK_TCK


def tree_rss_bytes(pid: int) -> int:
    """Resident bytes of ``pid`` and its living descendants, summed."""
    return sum(_rss_bytes(p) for p in [pid, *children(pid)])


def hwm_bytes(pid: int) -> int:
    """``VmHWM`` of ``pid`` (its peak resident set) in bytes, 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Sampler:
    """Peak of the process tree's summed RSS, sampled whenever :meth:`sample` is called."""

    pid: int
    peak_bytes: int = 0
    samples: int = 0

    def sample(self) -> None:
        """One sample of the tree's RSS."""
        self.peak_bytes = max(self.peak_bytes, tree_rss_bytes(self.pid))
        self.samples += 1


@dataclass
class IndexStats:
    """Documents and ``store.size`` bytes per index of one namespace."""

    docs: dict[str, int] = field(default_factory=dict)
    store_bytes: dict[str, int] = field(default_factory=dict)

    @property
    def data_docs(self) -> dict[str, int]:
        """Documents per index, without the :data:`WALL_DATASETS`."""
        return {k: v for k, v in self.docs.items() if not is_wall(k)}

    @property
    def total_docs(self) -> int:
        """Documents of every index."""
        return sum(self.docs.values())

    @property
    def total_bytes(self) -> int:
        """``store.size`` of every index, bytes."""
        return sum(self.store_bytes.values())


def is_wall(index: str) -> bool:
    """Whether ``index`` is one of the :data:`WALL_DATASETS`' data streams."""
    return any(f"-{d}-" in index for d in WALL_DATASETS)


def index_stats(client: Any, namespace: str) -> IndexStats:
    """Refresh the namespace's indices, then ``GET _cat/indices/*-<ns>?bytes=b``."""
    pattern = f"*-{namespace}"
    client.indices.refresh(index=pattern, ignore_unavailable=True, allow_no_indices=True)
    rows = client.cat.indices(index=pattern, format="json", bytes="b")
    stats = IndexStats()
    for r in rows:
        stats.docs[r["index"]] = int(r["docs.count"])
        stats.store_bytes[r["index"]] = int(r["store.size"])
    return stats


def wait_drained(
    stats: Callable[[], IndexStats],
    primary: str,
    expected: int,
    *,
    quiet_s: float,
    timeout_s: float,
    tick: Callable[[], None],
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[IndexStats, bool]:
    """Wait until ``primary`` holds ``expected`` documents and no count changed for ``quiet_s``
    (the :data:`WALL_DATASETS` aside).

    Args:
        stats: the namespace's current counts.
        primary: index with one document per input unit.
        expected: documents ``primary`` must reach.
        quiet_s: seconds without any change that mean drained (s).
        timeout_s: give up after this long (s).
        tick: called about every half second (RSS sampling).

    Returns:
        The last counts, and whether it drained (False: timed out).
    """
    start = since = clock()
    last: dict[str, int] | None = None
    while True:
        now = clock()
        current = stats()
        if current.data_docs != last:
            last, since = current.data_docs, now
        elif current.docs.get(primary, 0) >= expected and now - since >= quiet_s:
            return current, True
        if now - start >= timeout_s:
            return current, False
        for _ in range(2):
            tick()
            sleep(0.5)
