"""What the request parser emits: one request's events, bound attributes, resources and CPU
slices (seed 002, section 3: a request is the sub-graph of joined events that holds a seed).

Values only: :class:`Request` and :class:`CpuSlice` are frozen, and :func:`join_attributes` and
:func:`hashable` are pure; :mod:`pipeline.reducers.request_join` builds them from events.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event

Key = tuple[str, Hashable]
"""A valid-interval's ``(domain, value)``."""


SCALARS = frozenset({str, int, float, bool, type(None)})
"""The types :func:`hashable` passes as they are (checked first, by exact type)."""


def hashable(v: Any) -> Hashable:
    """An attribute value as a hash-table key: scalars as they are, anything else (a list, a
    mapping) by its ``repr``."""
    if type(v) in SCALARS:
        scalar: Hashable = v
        return scalar
    return v if isinstance(v, str | int | float | bool) or v is None else repr(v)


def join_attributes(events: Iterable[Event], schema: EventSchema) -> dict[str, tuple[Any, ...]]:
    """Join attribute name -> the values it bound in ``events``, in first-seen order."""
    out: dict[str, dict[Hashable, None]] = {}
    types = schema.events
    for e in events:
        etype = types.get(e.ev)
        if etype is None:
            continue
        attrs = e.attrs
        for name in etype.attrs:
            if name in attrs:
                v = attrs[name]
                values = out.get(name)
                if values is None:
                    values = out[name] = {}
                values[v if type(v) in SCALARS else hashable(v)] = None
    return {name: tuple(values) for name, values in out.items()}


@dataclass(frozen=True, slots=True)
class CpuSlice:
    """Time a thread ran on behalf of a request (from context switches), ns."""

    tid: int
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class Request:
    """One extracted request.

    Attributes:
        events: its events in timestamp order (synthetic ``<ev>Start`` ones included).
        start_ns / end_ns: its first and last event's timestamp.
        attributes: join attribute name -> the values it bound, in first-seen order.
        resources: resource name -> total (``cpu_ns``, ``disk_bytes``, ``net_bytes``...;
            ``sched_cpu_ns``: CPU from context switches), every resource of the schema present.
        cpu: the running slices charged to it, in time order.
        complete: False when it was flushed with intervals still open (timeout, end of input).
        seeds: seed events it holds (1 for a well-formed request).
        seed: the first of them.
        kernel_lines: line numbers of the context switches whose slices were charged to it.
    """

    events: tuple[Event, ...]
    start_ns: int
    end_ns: int
    attributes: dict[str, tuple[Any, ...]]
    resources: dict[str, float]
    cpu: tuple[CpuSlice, ...]
    complete: bool
    seeds: int
    seed: Event
    kernel_lines: tuple[int, ...] = ()

    @property
    def lines(self) -> tuple[int, ...]:
        """Every input line it derives from (its events' and the charged context switches'),
        ascending."""
        return tuple(sorted({e.line_no for e in self.events} | set(self.kernel_lines)))
