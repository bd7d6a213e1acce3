"""The sub-graphs of the request join (seed 002, section 3): what
:class:`~pipeline.reducers.request_join.RequestParser` joins events into, event by event or a
batch at a time (:class:`~pipeline.reducers.batch_join.BatchJoin`), and the counts it keeps."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pipeline.records.events import Event
from pipeline.reducers.request_record import CpuSlice, Key

EXACT = float(2**53)
"""Integer resource amounts sum to the same float in any order while the sum of their absolute
values stays below this: every partial sum is then an integer a float holds exactly (the batch
join adds them in another order than event by event)."""


@dataclass(eq=False, slots=True)
class SubGraph:
    """A sub-graph of joined events: its events (timestamp, arrival, event), the keys whose
    intervals it owns, its seeds, resources and CPU slices, and the context-switch lines
    charged to it."""

    events: list[tuple[int, int, Event]] = field(default_factory=list)  # (ts, order, event)
    open: set[Key] = field(default_factory=set)
    seeds: int = 0
    last_ns: int = 0
    resources: dict[str, float] = field(default_factory=dict)
    cpu: list[CpuSlice] = field(default_factory=list)
    kernel_lines: set[int] = field(default_factory=set)
    magnitude: float = 0.0  # the sum of the absolute resource amounts summed in resources

    def absorb(self, other: SubGraph) -> None:
        """``other`` merged into this one."""
        self.events += other.events
        self.open |= other.open
        self.seeds += other.seeds
        self.last_ns = max(self.last_ns, other.last_ns)
        for k, v in other.resources.items():
            self.resources[k] = self.resources.get(k, 0.0) + v
        self.magnitude += other.magnitude
        self.cpu += other.cpu
        self.kernel_lines |= other.kernel_lines


@dataclass
class ParserStats:
    """Counts of what the parser did with its input."""

    events: int = 0
    unknown: int = 0
    requests: int = 0
    incomplete: int = 0
    garbage_graphs: int = 0
    garbage_events: int = 0


def magnitude(v: float) -> float:
    """A resource amount's share of :data:`EXACT`: its absolute value when it is an integer
    (or a float that is one), infinite otherwise (its sums depend on their order)."""
    if type(v) is int:
        return float(abs(v)) if abs(v) < EXACT else math.inf
    if type(v) is float and v.is_integer():
        return abs(v)
    return math.inf


def began(g: SubGraph) -> tuple[int, int]:
    """When ``g`` began: its first event's (timestamp, arrival); sub-graphs flushed at once
    come out in this order."""
    return min((t, o) for t, o, _e in g.events)


def by_time(item: tuple[int, int, Event]) -> tuple[int, int]:
    """The sort key of a sub-graph's event: (timestamp, arrival)."""
    return item[0], item[1]
