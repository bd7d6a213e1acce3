"""One stitched request: a seeded fragment and the fragments paired with it, put on the seed
machine's clock (seed 002, section 4.2 "Cross-machine activity").

Remote events and CPU slices are shifted by their machine's clock offset; remote thread ids are
made distinct (``tid + k * TID_STRIDE`` on the k-th machine of the request, the seed machine
being 0); remote sync values that are not matched across machines are qualified with the
machine (``back:task1``), so that :func:`~pipeline.reducers.canonical.canonical` links exactly
the hand-offs it would link on one machine. Every event gets the attribute ``_machine``.
:mod:`pipeline.reducers.stitch` decides which fragments go together.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.clock_offset import ClockOffset
from pipeline.reducers.fragments import Endpoint, Fragment
from pipeline.reducers.request_record import CpuSlice, Request, hashable, join_attributes

TID_STRIDE = 1 << 32
"""Thread ids of the k-th machine of a stitched request are ``tid + k * TID_STRIDE``."""

MACHINE_ATTR = "_machine"
"""The attribute that names an event's machine in a stitched request (never joined on)."""


@dataclass(frozen=True)
class StitchedRequest:
    """A request whose fragments may come from several machines.

    Attributes:
        request: every fragment's events in one request, on the seed machine's clock (remote
            thread ids ``tid + k * TID_STRIDE``, every event with ``_machine``); resources are
            the fragments' sums, ``complete`` is every fragment's. Line numbers stay those of
            each machine's files; ``kernel_lines`` are the seed fragment's only.
        machine: the machine of its seed.
        machines: the machines it spans, its seed's first.
        offsets: each other machine's clock minus the seed machine's.
        fragments: how many fragments it was stitched from.
        unmatched: endpoints of its fragments that were paired with nothing.
    """

    request: Request
    machine: str
    machines: tuple[str, ...]
    offsets: Mapping[str, ClockOffset]
    fragments: int
    unmatched: tuple[Endpoint, ...]


@dataclass(frozen=True, slots=True)
class Link:
    """A message between two fragments: the indices of its sender's and receiver's fragments,
    and its two endpoints."""

    send: int  # fragment index
    recv: int
    send_end: Endpoint
    recv_end: Endpoint


def join_fragments(
    seed: Fragment,
    members: Sequence[Fragment],
    links: Sequence[Link],
    offsets: Mapping[str, ClockOffset],
    order: Mapping[str, int],
    schema: EventSchema,
) -> StitchedRequest:
    """One request of a seeded fragment and the fragments paired with it (``links``), on the
    seed machine's clock (``offsets``: each machine's clock minus the seed machine's)."""
    members = sorted(members, key=lambda f: (f is not seed, order[f.machine]))
    machines = tuple(dict.fromkeys(f.machine for f in members))
    matched: dict[str, set[Hashable]] = {}  # sync attribute -> values linked across machines
    for link in links:
        matched.setdefault(link.send_end.sync[1], set()).add(link.send_end.value)
    events, cpu, seed_event = _on_seed_clock(seed, members, machines, offsets, matched, schema)
    linked = {end for link in links for end in (link.send_end, link.recv_end)}
    return StitchedRequest(
        _merged(seed.request, members, events, cpu, seed_event, schema),
        seed.machine,
        machines,
        {m: offsets[m] for m in machines[1:]},
        len(members),
        tuple(ep for f in members for ep in f.endpoints if ep not in linked),
    )


def _on_seed_clock(
    seed: Fragment,
    members: Sequence[Fragment],
    machines: tuple[str, ...],
    offsets: Mapping[str, ClockOffset],
    matched: Mapping[str, set[Hashable]],
    schema: EventSchema,
) -> tuple[list[Event], list[CpuSlice], Event]:
    """Every member's events (in time order) and CPU slices on the seed machine's clock, and
    the seed event as placed."""
    events: list[Event] = []
    cpu: list[CpuSlice] = []
    seed_event = seed.request.seed
    for f in members:
        nth = machines.index(f.machine)
        shift = offsets[f.machine].offset_ns if nth else 0
        placed, slices = _placed(f, nth, shift, matched, schema)
        for e, moved in zip(f.request.events, placed, strict=True):
            if e is seed.request.seed:
                seed_event = moved
        events += placed
        cpu += slices
    events.sort(key=lambda e: e.ts_ns)  # stable: on a tie, the seed machine's first
    return events, cpu, seed_event


def _placed(
    f: Fragment,
    nth: int,
    shift: int,
    matched: Mapping[str, set[Hashable]],
    schema: EventSchema,
) -> tuple[list[Event], list[CpuSlice]]:
    """The events and CPU slices of ``f``, the ``nth`` machine of a request, on the seed
    machine's clock (``shift``: its clock minus the seed machine's, ns)."""
    events = [_place(e, f.machine, nth, shift, matched, schema) for e in f.request.events]
    cpu = [
        CpuSlice(c.tid + nth * TID_STRIDE, c.start_ns - shift, c.end_ns - shift)
        for c in f.request.cpu
    ]
    return events, cpu


def _place(
    e: Event,
    machine: str,
    nth: int,
    shift: int,
    matched: Mapping[str, set[Hashable]],
    schema: EventSchema,
) -> Event:
    """``e`` of the ``nth`` machine of a request (the seed machine being 0) on the seed
    machine's clock: shifted by ``shift`` ns, remote thread ids made distinct, remote sync
    values not in ``matched`` qualified with the machine, and ``_machine`` set."""
    attrs = dict(e.attrs)
    if nth:
        thread_attr = schema.parser.thread_attr
        tid = attrs.get(thread_attr)
        if isinstance(tid, int) and not isinstance(tid, bool):
            attrs[thread_attr] = tid + nth * TID_STRIDE
        sync_attrs = {attr for _src, attr, _dst in schema.sync}
        for a in sync_attrs & attrs.keys():
            if hashable(attrs[a]) not in matched.get(a, ()):
                attrs[a] = f"{machine}:{attrs[a]}"
    attrs[MACHINE_ATTR] = machine
    return Event(e.ts_ns - shift, e.ev, attrs, e.line_no)


def _merged(
    seed: Request,
    members: Sequence[Fragment],
    events: list[Event],
    cpu: list[CpuSlice],
    seed_event: Event,
    schema: EventSchema,
) -> Request:
    """The seed fragment's request holding every member's ``events`` (in time order) and
    ``cpu`` slices, with the members' resources summed."""
    resources: dict[str, float] = {}
    for f in members:
        for name, v in f.request.resources.items():
            resources[name] = resources.get(name, 0.0) + v
    return replace(
        seed,
        events=tuple(events),
        start_ns=events[0].ts_ns,
        end_ns=events[-1].ts_ns,
        attributes=join_attributes(events, schema),
        resources=resources,
        cpu=tuple(sorted(cpu, key=lambda c: c.start_ns)),
        complete=all(f.request.complete for f in members),
        seeds=sum(f.request.seeds for f in members),
        seed=seed_event,
    )
