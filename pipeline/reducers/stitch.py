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
   ``_machine`` (:mod:`pipeline.reducers.fragment_join`). The unseeded fragments of a group
   without a seeded fragment, or with more than one, are left *unattached* and reported with
   the reason (:class:`Detached`).

The offset of two machines is taken as constant over the trace: clock drift is not modelled.
When drift (or a wrong match) exceeds the message delays the bounds cross, which
:attr:`ClockOffset.consistent` reports.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.clock_offset import ClockOffset, estimate_offset, offsets_from
from pipeline.reducers.fragment_join import (
    Link,
    StitchedRequest,
    join_fragments,
)
from pipeline.reducers.fragments import (
    Endpoint,
    Fragment,
    MachineStats,
    Sync,
    machine_fragments,
)

__all__ = [
    "Detached",
    "Stitched",
    "Unattached",
    "stitch",
    "stitch_fragments",
]

log = logging.getLogger(__name__)

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
    groups, by_group = _groups(len(fragments), links)
    conflicts = {g for g, ids in groups.items() if sum(fragments[i].seeded for i in ids) > 1}
    clocks = _clocks([k for g, ks in by_group.items() if g not in conflicts for k in ks], order)
    reach = {m: offsets_from(m, clocks) for m in order}
    requests: list[StitchedRequest] = []
    unattached: list[Unattached] = []
    for g, ids in groups.items():
        members = [fragments[i] for i in ids]
        seeded = [f for f in members if f.seeded]
        if len(seeded) == 1:
            offsets = reach[seeded[0].machine]
            joined = join_fragments(seeded[0], members, by_group.get(g, []), offsets, order, schema)
            requests.append(joined)
            continue
        requests += [join_fragments(f, [f], [], {}, order, schema) for f in seeded]
        unattached += [
            Unattached(f, _detached(i, f, len(ids), bool(seeded), ambiguous))
            for i, f in zip(ids, members, strict=True)
            if not f.seeded
        ]
    if conflicts:
        log.warning("%d groups of fragments joined more than one seeded request", len(conflicts))
    requests.sort(key=lambda s: (s.request.start_ns, order[s.machine]))
    unattached.sort(key=lambda u: (order[u.fragment.machine], u.fragment.request.start_ns))
    return Stitched(tuple(requests), tuple(unattached), clocks)


def _groups(n: int, links: Sequence[Link]) -> tuple[dict[int, list[int]], dict[int, list[Link]]]:
    """The groups of ``n`` fragments that ``links`` join (union-find), each keyed by its root:
    the indices of its fragments, ascending, and its links, in input order."""
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for link in links:
        parent[find(link.send)] = find(link.recv)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    by_group: dict[int, list[Link]] = {}
    for k in links:
        by_group.setdefault(find(k.send), []).append(k)
    return groups, by_group


def _detached(
    i: int,
    fragment: Fragment,
    group_size: int,
    group_seeded: bool,
    ambiguous: set[tuple[int, Endpoint]],
) -> Detached:
    """Why the unseeded ``fragment`` (index ``i``) of a group without exactly one seeded
    fragment joined no request."""
    if group_seeded:
        return Detached.CONFLICT
    if group_size > 1:
        return Detached.UNSEEDED
    if any((i, ep) in ambiguous for ep in fragment.endpoints):
        return Detached.AMBIGUOUS
    return Detached.UNMATCHED


def _pair(fragments: Sequence[Fragment]) -> tuple[list[Link], set[tuple[int, Endpoint]]]:
    """Links of the endpoints whose key has one sender and one receiver, on two machines; and
    the endpoints whose key has several senders or several receivers."""
    by_key: dict[tuple[Sync, Hashable], list[tuple[int, Endpoint]]] = {}
    for i, f in enumerate(fragments):
        for ep in f.endpoints:
            by_key.setdefault(ep.key, []).append((i, ep))
    links: list[Link] = []
    ambiguous: set[tuple[int, Endpoint]] = set()
    for ends in by_key.values():
        sends = [x for x in ends if x[1].sends]
        recvs = [x for x in ends if not x[1].sends]
        if len(sends) > 1 or len(recvs) > 1:
            ambiguous.update(ends)
        elif sends and recvs and sends[0][1].machine != recvs[0][1].machine:
            (s, s_end), (r, r_end) = sends[0], recvs[0]
            links.append(Link(s, r, s_end, r_end))
    return links, ambiguous


def _clocks(links: Sequence[Link], order: Mapping[str, int]) -> dict[tuple[str, str], ClockOffset]:
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
