"""Cross-machine stitching: request fragments of several machines, each stamped by its own clock,
joined into whole requests through matching send and receive events, offline (seed 002,
section 4.2 "Cross-machine activity", and the end-to-end requests of its Table 6).

Each machine's events are on its own clock, so the temporal join
(:class:`~pipeline.reducers.request_join.RequestParser`) runs once per machine. The front end
then has the seeded request with the back end's part missing, and the back end has what it did
for that request as a sub-graph without a seed: a *fragment*. An RPC of the test server
(``tests/workloads/http_server.py --backend-events back.jsonl --backend-clock-skew-ns
3000000000``: the back end's clock 3 s ahead), from its two files::

    front.jsonl  {"ts":21726613770416,"ev":"RpcCall","pid":3192,"tid":3194,"rpc":"rpc3"}
    back.jsonl   {"ts":21729614099027,"ev":"RpcServe","pid":3192,"tid":3203,"rpc":"rpc3"}
    back.jsonl   {"ts":21729630420553,"ev":"RpcReply","pid":3192,"tid":3203,"rpc":"rpc3"}
    front.jsonl  {"ts":21726630515254,"ev":"RpcReturn","pid":3192,"tid":3194,"rpc":"rpc3"}

The schema's ``sync`` triples ``[source, attribute, destination]`` name the events that hand
work on. A source and a destination event with the same value of the attribute, on two
machines, are the two ends of one message: a *stitch point* (``RpcCall rpc=X`` -> ``RpcServe
rpc=X``, then ``RpcReply rpc=X`` -> ``RpcReturn rpc=X``). The stitcher:

1. runs each machine's parser with the schema's sync events counted as seeds too, so that a
   sub-graph holding one is emitted with its resources and CPU slices instead of being
   garbage-collected. Those holding a real seed are *seeded* fragments; the others are kept when
   they have an *endpoint*, a sync event whose partner is not in the same fragment;
2. pairs endpoints of different machines by (triple, value). A value sent or received more than
   once is *ambiguous* and paired with nothing. Paired fragments form groups (union-find);
3. bounds each pair of machines' clock offset θ = clock_B − clock_A with every message between
   them (:func:`estimate_offset`), and composes offsets along a path of machines;
4. makes each group that holds exactly one seeded fragment one request on the seed machine's
   clock: remote events and CPU slices are shifted by the offset; remote thread ids are made
   distinct (``tid + k * TID_STRIDE`` on the k-th machine of the request, the seed machine
   being 0); remote sync values that are not matched across machines are qualified with the
   machine (``back:task1``), so that :func:`~pipeline.reducers.canonical.canonical` links
   exactly the hand-offs it would link on one machine. Every event gets the attribute
   ``_machine``. The unseeded fragments of a group without a seeded fragment, or with more
   than one, are left *unattached* and reported with the reason (:class:`Detached`).

The offset of two machines is taken as constant over the trace: clock drift is not modelled.
When drift (or a wrong match) exceeds the message delays the bounds cross, which
:attr:`ClockOffset.consistent` reports.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from pipeline.parsers.event_schema import EventSchema
from pipeline.parsers.events import Event
from pipeline.reducers.request_join import (
    CpuSlice,
    Request,
    RequestParser,
    hashable,
    join_attributes,
)

log = logging.getLogger(__name__)

TID_STRIDE = 1 << 32
"""Thread ids of the k-th machine of a stitched request are ``tid + k * TID_STRIDE``."""

MACHINE_ATTR = "_machine"
"""The attribute that names an event's machine in a stitched request (never joined on)."""

Sync = tuple[str, str, str]
"""A schema sync triple: ``(source event, attribute, destination event)``."""


# -- clocks --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """How far machine B's clock is ahead of machine A's: θ = clock_B − clock_A, ns.

    Attributes:
        offset_ns: the estimate: the middle of ``[lower_ns, upper_ns]``, or the one bound.
        lower_ns: θ is at least this (messages B -> A); None without such messages.
        upper_ns: θ is at most this (messages A -> B); None without such messages.
        messages: how many messages the bounds come from.
    """

    offset_ns: int
    lower_ns: int | None
    upper_ns: int | None
    messages: int

    @property
    def consistent(self) -> bool:
        """False when the bounds cross: the clocks drifted apart during the trace by more than
        the fastest messages' delays, or a pair of events was not one message."""
        return self.lower_ns is None or self.upper_ns is None or self.lower_ns <= self.upper_ns

    def inverse(self) -> ClockOffset:
        """clock_A − clock_B."""
        return ClockOffset(
            -self.offset_ns,
            None if self.upper_ns is None else -self.upper_ns,
            None if self.lower_ns is None else -self.lower_ns,
            self.messages,
        )

    def then(self, other: ClockOffset) -> ClockOffset:
        """clock_C − clock_A, ``other`` being clock_C − clock_B (bounds add up; a bound is
        None when either lacks it; messages add up)."""
        return ClockOffset(
            self.offset_ns + other.offset_ns,
            _add(self.lower_ns, other.lower_ns),
            _add(self.upper_ns, other.upper_ns),
            self.messages + other.messages,
        )


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def estimate_offset(
    forward: Iterable[tuple[int, int]], backward: Iterable[tuple[int, int]]
) -> ClockOffset:
    """θ = clock_B − clock_A of two machines, from the messages between them.

    A message is received after it was sent, so (with ``d`` its delay) a message A -> B gives
    ``t_recv_B − t_send_A = d + θ ≥ θ`` and a message B -> A gives ``t_send_B − t_recv_A =
    θ − d ≤ θ``. The bounds are the tightest of each kind; the estimate is their middle, off by
    at most half the sum of the fastest delay each way, or the one bound there is when messages
    went one way only (off by the fastest delay).

    Args:
        forward: ``(t_send, t_recv)`` of messages A -> B, ns: sent on A's clock, received on B's.
        backward: ``(t_send, t_recv)`` of messages B -> A, ns: sent on B's clock, received on A's.

    Raises:
        ValueError: no message either way.
    """
    ups = [r - s for s, r in forward]
    lows = [s - r for s, r in backward]
    n = len(ups) + len(lows)
    if not ups and not lows:
        raise ValueError("no message between the two machines: their offset is unknown")
    if not ups:
        return ClockOffset(max(lows), max(lows), None, n)
    if not lows:
        return ClockOffset(min(ups), None, min(ups), n)
    lower, upper = max(lows), min(ups)
    return ClockOffset((lower + upper) // 2, lower, upper, n)


def offsets_from(
    origin: str, clocks: Mapping[tuple[str, str], ClockOffset]
) -> dict[str, ClockOffset]:
    """Every machine's clock minus ``origin``'s, along the shortest chain of machine pairs
    that exchanged messages (``clocks[(a, b)]`` is clock_b − clock_a); ``origin`` itself and
    machines no chain reaches are left out."""
    links: dict[str, list[tuple[str, ClockOffset]]] = {}
    for (a, b), c in clocks.items():
        links.setdefault(a, []).append((b, c))
        links.setdefault(b, []).append((a, c.inverse()))
    out: dict[str, ClockOffset] = {}
    todo: deque[str] = deque([origin])
    while todo:
        m = todo.popleft()
        for n, c in links.get(m, []):
            if n == origin or n in out:
                continue
            out[n] = c if m == origin else out[m].then(c)
            todo.append(n)
    return out


# -- fragments of one machine --------------------------------------------------------------


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
    carried: dict[Hashable, dict[str, Any]] = {}
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


# -- stitching -----------------------------------------------------------------------------


class Detached(StrEnum):
    """Why an unseeded fragment joined no request."""

    UNMATCHED = "unmatched"
    """No endpoint of it met its other end on another machine."""
    AMBIGUOUS = "ambiguous"
    """Its endpoints' values were sent or received more than once, so none was paired."""
    UNSEEDED = "unseeded"
    """Paired only with fragments that hold no seed either."""
    CONFLICT = "conflict"
    """Paired, directly or not, with more than one seeded request."""


@dataclass(frozen=True)
class Unattached:
    """An unseeded fragment left out of every request, and why."""

    fragment: Fragment
    reason: Detached


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


@dataclass(frozen=True)
class Stitched:
    """The requests of several machines.

    Attributes:
        requests: by start time (on each one's seed machine's clock).
        unattached: the unseeded fragments that joined no request.
        clocks: ``(a, b)`` -> clock_b − clock_a, for machines that exchanged messages (``a``
            before ``b`` in input order).
        stats: per machine, what its parser found.
    """

    requests: tuple[StitchedRequest, ...]
    unattached: tuple[Unattached, ...]
    clocks: Mapping[tuple[str, str], ClockOffset]
    stats: Mapping[str, MachineStats] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Link:
    send: int  # fragment index
    recv: int
    send_end: Endpoint
    recv_end: Endpoint


def stitch(machines: Mapping[str, Iterable[Event]], schema: EventSchema) -> Stitched:
    """The requests of several machines' events (each in timestamp order on its own clock:
    :func:`~pipeline.reducers.request_join.merge_streams` of the machine's sources)."""
    fragments: list[Fragment] = []
    stats: dict[str, MachineStats] = {}
    for machine, events in machines.items():
        found, stats[machine] = machine_fragments(machine, events, schema)
        fragments += found
    return replace(stitch_fragments(fragments, schema), stats=stats)


def stitch_fragments(fragments: Sequence[Fragment], schema: EventSchema) -> Stitched:
    """Pair the fragments' endpoints across machines, estimate the clocks, and join each group
    of paired fragments that holds exactly one seeded fragment into one request (see the module
    docstring). Machines are ordered as they first appear in ``fragments``."""
    order = {m: n for n, m in enumerate(dict.fromkeys(f.machine for f in fragments))}
    links, ambiguous = _pair(fragments)
    parent = list(range(len(fragments)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for link in links:
        parent[find(link.send)] = find(link.recv)
    groups: dict[int, list[int]] = {}
    for i in range(len(fragments)):
        groups.setdefault(find(i), []).append(i)
    conflicts = {g for g, ids in groups.items() if sum(fragments[i].seeded for i in ids) > 1}
    clocks = _clocks([k for k in links if find(k.send) not in conflicts], order)
    reach = {m: offsets_from(m, clocks) for m in order}
    by_group: dict[int, list[_Link]] = {}
    for k in links:
        by_group.setdefault(find(k.send), []).append(k)
    requests: list[StitchedRequest] = []
    unattached: list[Unattached] = []
    for g, ids in groups.items():
        seeded = [i for i in ids if fragments[i].seeded]
        if len(seeded) == 1:
            members = [fragments[i] for i in ids]
            seed = fragments[seeded[0]]
            joined = _join(seed, members, by_group.get(g, []), reach[seed.machine], order, schema)
            requests.append(joined)
            continue
        for i in ids:
            f = fragments[i]
            if f.seeded:
                requests.append(_join(f, [f], [], {}, order, schema))
            elif seeded:
                unattached.append(Unattached(f, Detached.CONFLICT))
            elif len(ids) > 1:
                unattached.append(Unattached(f, Detached.UNSEEDED))
            elif any((i, ep) in ambiguous for ep in f.endpoints):
                unattached.append(Unattached(f, Detached.AMBIGUOUS))
            else:
                unattached.append(Unattached(f, Detached.UNMATCHED))
    if conflicts:
        log.warning("%d groups of fragments joined more than one seeded request", len(conflicts))
    requests.sort(key=lambda s: (s.request.start_ns, order[s.machine]))
    unattached.sort(key=lambda u: (order[u.fragment.machine], u.fragment.request.start_ns))
    return Stitched(tuple(requests), tuple(unattached), clocks)


def _pair(fragments: Sequence[Fragment]) -> tuple[list[_Link], set[tuple[int, Endpoint]]]:
    """Links of the endpoints whose key has one sender and one receiver, on two machines; and
    the endpoints whose key has several senders or several receivers."""
    by_key: dict[tuple[Sync, Hashable], list[tuple[int, Endpoint]]] = {}
    for i, f in enumerate(fragments):
        for ep in f.endpoints:
            by_key.setdefault(ep.key, []).append((i, ep))
    links: list[_Link] = []
    ambiguous: set[tuple[int, Endpoint]] = set()
    for ends in by_key.values():
        sends = [x for x in ends if x[1].sends]
        recvs = [x for x in ends if not x[1].sends]
        if len(sends) > 1 or len(recvs) > 1:
            ambiguous.update(ends)
        elif sends and recvs and sends[0][1].machine != recvs[0][1].machine:
            (s, s_end), (r, r_end) = sends[0], recvs[0]
            links.append(_Link(s, r, s_end, r_end))
    return links, ambiguous


def _clocks(links: Sequence[_Link], order: Mapping[str, int]) -> dict[tuple[str, str], ClockOffset]:
    """Per pair of machines ``(a, b)``, ``a`` first in ``order``: clock_b − clock_a from the
    linked messages between them, both ways."""
    ways: dict[tuple[str, str], tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}
    for k in links:
        a, b = k.send_end.machine, k.recv_end.machine
        message = (k.send_end.ts_ns, k.recv_end.ts_ns)
        if order[a] < order[b]:
            ways.setdefault((a, b), ([], []))[0].append(message)
        else:
            ways.setdefault((b, a), ([], []))[1].append(message)
    clocks: dict[tuple[str, str], ClockOffset] = {}
    for a, b in sorted(ways, key=lambda pair: (order[pair[0]], order[pair[1]])):
        c = clocks[(a, b)] = estimate_offset(*ways[(a, b)])
        if not c.consistent:
            log.warning(
                "clock of %s minus clock of %s: the bounds cross (%s > %s ns, %d messages): "
                "clock drift or a wrong match; using %s ns",
                b,
                a,
                c.lower_ns,
                c.upper_ns,
                c.messages,
                c.offset_ns,
            )
    return clocks


def _join(
    seed: Fragment,
    members: Sequence[Fragment],
    links: Sequence[_Link],
    offsets: Mapping[str, ClockOffset],
    order: Mapping[str, int],
    schema: EventSchema,
) -> StitchedRequest:
    """One request of a seeded fragment and the fragments paired with it (``links``), on the
    seed machine's clock (``offsets``: each machine's clock minus the seed machine's)."""
    members = sorted(members, key=lambda f: (f is not seed, order[f.machine]))
    machines = tuple(dict.fromkeys(f.machine for f in members))
    matched: dict[str, set[Hashable]] = {}
    for link in links:
        matched.setdefault(link.send_end.sync[1], set()).add(link.send_end.value)
    sync_attrs = {attr for _src, attr, _dst in schema.sync}
    thread_attr = schema.parser.thread_attr
    events: list[Event] = []
    cpu: list[CpuSlice] = []
    resources: dict[str, float] = {}
    seed_event = seed.request.seed
    for f in members:
        nth = machines.index(f.machine)
        shift = offsets[f.machine].offset_ns if nth else 0
        for e in f.request.events:
            attrs = dict(e.attrs)
            if nth:
                tid = attrs.get(thread_attr)
                if isinstance(tid, int) and not isinstance(tid, bool):
                    attrs[thread_attr] = tid + nth * TID_STRIDE
                for a in sync_attrs & attrs.keys():
                    if hashable(attrs[a]) not in matched.get(a, ()):
                        attrs[a] = f"{f.machine}:{attrs[a]}"
            attrs[MACHINE_ATTR] = f.machine
            moved = Event(e.ts_ns - shift, e.ev, attrs, e.line_no)
            if e is seed.request.seed:
                seed_event = moved
            events.append(moved)
        cpu += [
            CpuSlice(c.tid + nth * TID_STRIDE, c.start_ns - shift, c.end_ns - shift)
            for c in f.request.cpu
        ]
        for name, v in f.request.resources.items():
            resources[name] = resources.get(name, 0.0) + v
    events.sort(key=lambda e: e.ts_ns)  # stable: on a tie, the seed machine's first
    linked = {end for link in links for end in (link.send_end, link.recv_end)}
    request = replace(
        seed.request,
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
    return StitchedRequest(
        request,
        seed.machine,
        machines,
        {m: offsets[m] for m in machines[1:]},
        len(members),
        tuple(ep for f in members for ep in f.endpoints if ep not in linked),
    )
