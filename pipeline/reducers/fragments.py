"""Fragments of one machine: the parts of requests its parser found, with their endpoints, the
sync events whose other end was logged on another machine (seed 002, section 4.2 "Cross-machine
activity").

A machine's events (on its own clock) go through the temporal join with the schema's sync events
counted as seeds too (:func:`with_endpoint_seeds`), so that a sub-graph holding one is emitted
rather than garbage-collected. A sub-graph with a real seed is a *seeded* fragment (a request);
one without a seed is kept when it has an endpoint. :mod:`pipeline.reducers.stitch` then pairs
the endpoints of different machines.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, replace

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.request_join import RequestParser
from pipeline.reducers.request_record import Request, hashable

Sync = tuple[str, str, str]
"""A schema sync triple: ``(source event, attribute, destination event)``."""


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One end of a message between machines: a sync event whose partner is not in its fragment.

    Attributes:
        machine: where it was logged.
        sync: the schema triple ``(source, attribute, destination)``.
        value: the attribute's value (the event's own, or the one its thread last carried).
        sends: True for the source event (the sender), False for the destination.
        ts_ns: its timestamp, ns on its machine's clock.
    """

    machine: str
    sync: Sync
    value: Hashable
    sends: bool
    ts_ns: int

    @property
    def key(self) -> tuple[Sync, Hashable]:
        """What the two ends of one message share."""
        return self.sync, self.value


@dataclass(frozen=True)
class Fragment:
    """What one machine's parser found of a request.

    Attributes:
        machine: the machine.
        request: as the parser emitted it, on the machine's clock; ``seeds`` and ``seed`` are
            the schema's real seeds (an unseeded fragment has ``seeds == 0`` and its first sync
            event as ``seed``).
        seeded: it holds a seed event.
        endpoints: its sync events whose partner is not in it, in time order.
    """

    machine: str
    request: Request
    seeded: bool
    endpoints: tuple[Endpoint, ...]


@dataclass
class MachineStats:
    """What the parser of one machine found."""

    events: int = 0
    unknown: int = 0
    requests: int = 0
    fragments: int = 0
    dropped_groups: int = 0
    dropped_events: int = 0


def with_endpoint_seeds(schema: EventSchema) -> EventSchema:
    """``schema`` with the source and destination events of its sync triples marked as seeds
    too (the parser then emits, instead of dropping, the sub-graphs that hold one)."""
    ends = {name for src, _attr, dst in schema.sync for name in (src, dst)}
    events = {
        name: t.model_validate({**t.model_dump(), "seed": True}) if name in ends else t
        for name, t in schema.events.items()
    }
    return EventSchema.model_validate(
        {"events": events, "sync": schema.sync, "parser": schema.parser}
    )


def endpoints(events: Sequence[Event], schema: EventSchema, machine: str) -> tuple[Endpoint, ...]:
    """The sync events of one fragment (``events`` in time order) whose partner, the other end
    with the same triple and value, is not among ``events``. An event without the triple's
    attribute takes the value its thread (``parser.thread_attr``) last carried (seed 002,
    section 4: "transitively shared through other joined events on the same thread")."""
    carried: dict[Hashable, dict[str, object]] = {}
    found: list[Endpoint] = []
    for e in events:
        mine = carried.setdefault(hashable(e.attrs.get(schema.parser.thread_attr)), {})
        mine.update(e.attrs)
        for sync in schema.sync:
            src, attr, dst = sync
            if e.ev not in (src, dst) or mine.get(attr) is None:
                continue
            value = hashable(mine[attr])
            if e.ev == src:
                found.append(Endpoint(machine, sync, value, True, e.ts_ns))
            if e.ev == dst:
                found.append(Endpoint(machine, sync, value, False, e.ts_ns))
    present = {(ep.key, ep.sends) for ep in found}
    return tuple(ep for ep in found if (ep.key, not ep.sends) not in present)


def machine_fragments(
    machine: str, events: Iterable[Event], schema: EventSchema
) -> tuple[list[Fragment], MachineStats]:
    """The seeded requests and the unseeded fragments with an endpoint of one machine's events
    (in timestamp order, on the machine's clock: :func:`~pipeline.reducers.request_join.
    merge_streams`), in the order the parser completed them; sub-graphs with neither a seed nor
    an endpoint are dropped and counted."""
    parser = RequestParser(with_endpoint_seeds(schema))
    found = [r for e in events for r in parser.feed(e)]
    found += parser.close()
    st = parser.stats
    stats = MachineStats(
        st.events, st.unknown, dropped_groups=st.garbage_graphs, dropped_events=st.garbage_events
    )
    seeds = {name for name, t in schema.events.items() if t.seed}
    out: list[Fragment] = []
    for r in found:
        real = [e for e in r.events if e.ev in seeds]
        ends = endpoints(r.events, schema, machine)
        if real:
            stats.requests += 1
            out.append(Fragment(machine, replace(r, seeds=len(real), seed=real[0]), True, ends))
        elif ends:
            stats.fragments += 1
            out.append(Fragment(machine, replace(r, seeds=0), False, ends))
        else:
            stats.dropped_groups += 1
            stats.dropped_events += len(r.events)
    return out, stats
