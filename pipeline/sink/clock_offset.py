"""How far this host's wall clock is from the cluster's.

Every document iolens writes is stamped with the time of its data, and that time comes from the
clock of the host that recorded it: fio's ``log_unix_epoch`` timestamps, sadc's records, the
event logs' clocks. A host whose clock runs off puts its data on the wrong intervals of the
cluster-wide fio merge and the peer comparison's common grid. iolens cannot correct what other
tools wrote, but it can see it: the cluster's nodes report their own clock in node stats
(``GET _nodes/stats``: ``nodes.<id>.timestamp``, Unix ms), so the offset is the node's time
minus the middle of the request's round trip on our clock, within half the round trip (the
Cristian method, NTP's single-sample estimate). The best of a few probes (the shortest round
trip) is kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from elastic_transport import TransportError
from elasticsearch import ApiError, Elasticsearch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClockOffset:
    """This host's clock against the cluster's.

    Attributes:
        offset_s: the cluster's clock minus ours, seconds (positive: ours is behind).
        uncertainty_s: half the round trip of the probe, plus the node's 1 ms resolution.
    """

    offset_s: float
    uncertainty_s: float

    def off_by_more_than(self, limit_s: float) -> bool:
        """Whether the clocks surely differ by more than ``limit_s`` seconds."""
        return abs(self.offset_s) - self.uncertainty_s > limit_s

    def text(self) -> str:
        """``this host's clock is 12.3 s behind the cluster's (± 0.01 s)``."""
        side = "behind" if self.offset_s > 0 else "ahead of"
        return (
            f"this host's clock is {abs(self.offset_s):.3f} s {side} the cluster's "
            f"(± {self.uncertainty_s:.2g} s)"
        )


def measure(
    client: Elasticsearch, clock: Callable[[], float] = time.time, probes: int = 3
) -> ClockOffset | None:
    """The offset of the shortest of ``probes`` round trips, or None when the cluster does not
    answer or reports no node time."""
    best: ClockOffset | None = None
    for _ in range(probes):
        t0 = clock()
        try:
            resp = client.nodes.stats(metric="os")
        except (ApiError, TransportError) as err:
            log.debug("clock offset not measured: %s", err)
            return best
        t1 = clock()
        stamps = [n.get("timestamp") for n in resp.get("nodes", {}).values()]
        stamps = [s for s in stamps if isinstance(s, int | float)]
        if not stamps:
            return None
        found = ClockOffset(stamps[0] / 1000 - (t0 + t1) / 2, (t1 - t0) / 2 + 0.001)
        if best is None or found.uncertainty_s < best.uncertainty_s:
            best = found
    return best


@dataclass
class ClockWatch:
    """Measures the offset every ``every_s`` and says once when it passes ``limit_s`` (and
    when it is back within).

    Args:
        probe: measures the offset (:func:`measure` bound to a client).
        limit_s: the largest offset taken as synchronised (``jobs.max_clock_offset_s``).
        every_s: seconds between measurements (monotonic).
        monotonic: monotonic seconds.
    """

    probe: Callable[[], ClockOffset | None]
    limit_s: float
    every_s: float = 300.0
    monotonic: Callable[[], float] = time.monotonic
    last: ClockOffset | None = None
    _due: float | None = None
    _warned: bool = False

    def check(self) -> ClockOffset | None:
        """The latest offset, measured again when due (None: never measured)."""
        now = self.monotonic()
        if self._due is not None and now < self._due:
            return self.last
        self._due = now + self.every_s
        found = self.probe()
        if found is None:
            return self.last
        self.last = found
        if found.off_by_more_than(self.limit_s) and not self._warned:
            log.warning(
                "%s: the fio, sysstat and event times recorded on this host are off by as much, "
                "and land on the wrong intervals (more than jobs.max_clock_offset_s %s s); "
                "synchronise its clock (chrony, ntpd)",
                found.text(),
                self.limit_s,
            )
            self._warned = True
        elif self._warned and not found.off_by_more_than(self.limit_s):
            log.info("%s: within jobs.max_clock_offset_s again", found.text())
            self._warned = False
        return found
