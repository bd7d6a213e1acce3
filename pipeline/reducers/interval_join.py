"""Magpie's temporal join over a batch of events as array operations (seed 002, section 3).

:class:`~pipeline.reducers.request_join.RequestParser` joins events one at a time: a hash table
of valid-intervals per ``(domain, value)`` points at the sub-graph owning each, and sub-graphs
reached by one event are merged. Over a batch of time-ordered events the same outcome follows
from the intervals alone, which a sort and cumulative sums give:

* per key, its occurrences in time order: a ``BIND_START`` opens an interval (ending the one
  open before it, which it does not join); a ``BIND_BASIC`` or ``BIND_STOP`` joins the interval
  open then, if any (one open when the batch began counts: its owner is a sub-graph carried
  over), and a ``BIND_STOP`` ends it;
* the requests are the connected components of the graph whose nodes are the events and the
  carried sub-graphs, an edge joining each member of an interval to its opening event (or to its
  carried owner): a sub-graph is only emitted once none of its intervals is open, so nothing
  joins it afterwards, and everything that joined one of its intervals is in it;
* a component is emitted when its last interval ends: by a ``BIND_STOP`` of one of its events
  (or when an event of its own joins no interval), after that event, or by a ``BIND_START`` of
  an event outside it, while that event opens its intervals (in the order of its attributes);
  one with an interval still open at the end of the batch is carried over.

This holds while no sub-graph is flushed by the timeout, so the parser cuts a batch where it
sweeps (:func:`sweeps`) and sweeps there as it does event by event; :func:`plan` refuses
(None) a batch with an event that binds one key twice, which is then fed event by event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

START, BASIC, STOP = 0, 1, 2
"""Binding codes of :class:`Occurrences` (``BIND_START``, ``BIND_BASIC``, ``BIND_STOP``)."""
OPEN = np.iinfo(np.int64).max
"""The end of an interval, or the emission of a component, that is not in the batch."""

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Occurrences:
    """Where a batch's events bind their keys: one row per join attribute an event carries.

    Attributes:
        event: index of the event in the batch (ascending: the batch's order).
        key: the interned ``(domain, value)`` (0 .. keys - 1).
        bind: :data:`START`, :data:`BASIC` or :data:`STOP`.
        pos: the attribute's position in its event type's join attributes.
    """

    event: Ints
    key: Ints
    bind: Ints
    pos: Ints


@dataclass(frozen=True)
class Carried:
    """The parser's sub-graphs open when the batch begins (``graphs`` of them).

    Attributes:
        owner: per interned key, the carried sub-graph owning its open interval (-1: none).
        elsewhere: per sub-graph, whether it has an open interval of a key the batch does not
            bind (it stays open).
    """

    owner: Ints
    elsewhere: npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Plan:
    """The outcome of a batch of ``n`` events, from :func:`plan`.

    Nodes are the batch's events (0 .. n - 1) and the carried sub-graphs (n + g).

    Attributes:
        label: per node, its component (events that join nothing, or are not joined at all,
            have their own).
        emitted: the components emitted in the batch, in the order they are.
        open_components: the components carried over to the next batch.
        key_anchor: per key, the node whose component owns its interval open at the end of the
            batch (-1: none open).
    """

    label: Ints
    emitted: Ints
    open_components: Ints
    key_anchor: Ints


def plan(joined: npt.NDArray[np.bool_], occ: Occurrences, carried: Carried) -> Plan | None:
    """The components of a batch of events fed in a row, none flushed by the timeout, and
    when each is emitted (see the module docstring).

    Args:
        joined: per event of the batch (``n``), whether its type is joined (declared and not a
            kernel event).
        occ: the events' key bindings; carried: what the parser holds.

    Returns:
        the plan, or None when an event binds the same key twice (the batch is then fed event
        by event).
    """
    n = len(joined)
    by = np.lexsort((occ.event, occ.key))
    ev, key, bind, pos = occ.event[by], occ.key[by], occ.bind[by], occ.pos[by]
    k = len(ev)
    same_key = key[1:] == key[:-1]
    if np.any(same_key & (ev[1:] == ev[:-1])):
        return None
    idx = np.arange(k)
    first = np.ones(k, dtype=bool)
    first[1:] = ~same_key
    group = np.maximum.accumulate(np.where(first, idx, 0))  # where each key's rows begin
    group_end = _next(np.append(np.where(first, idx, k)[1:], k)[:k])  # where they end
    starts_at = np.flatnonzero(first)
    is_start, is_stop = bind == START, bind == STOP
    last_start = np.maximum.accumulate(np.where(is_start, idx, -1))
    stops = np.maximum.accumulate(np.where(is_stop, idx, -1))
    prev_stop = np.append(-1, stops[:-1])[:k]
    here = last_start >= group  # the interval open at a row (if any) was opened in the batch
    owner = carried.owner[key]
    live = np.where(here, prev_stop < last_start, (owner >= 0) & (prev_stop < group))
    member = live & ~is_start  # rows that join the interval open at them
    anchor = np.where(here, ev[np.maximum(last_start, 0)], n + owner)  # its opener
    # the intervals: one opened by each START row (its end is looked for after it), and one
    # per carried key (looked for from its first row on)
    carried_first = np.flatnonzero(first & (owner >= 0))
    start_rows = np.flatnonzero(is_start)
    rows = np.concatenate((start_rows, carried_first))
    after = np.concatenate((start_rows + 1, carried_first))
    int_anchor = np.concatenate((ev[start_rows], n + owner[carried_first]))
    big = np.int64(k)
    next_start = _next(np.where(is_start, idx, big))
    next_stop = _next(np.where(is_stop, idx, big))
    within = after < group_end[rows]
    at_c = np.minimum(after, max(k - 1, 0))
    ns = np.where(within, next_start[at_c], big)
    nt = np.where(within, next_stop[at_c], big)
    ends = group_end[rows]
    ns = np.where(ns < ends, ns, big)
    nt = np.where(nt < ends, nt, big)
    by_stop = nt < ns
    end_row = np.minimum(ns, nt)
    closed = end_row < big
    end_at = np.minimum(end_row, max(k - 1, 0))
    end_ev = np.where(closed, ev[end_at], OPEN)
    end_pos = np.where(closed & ~by_stop, pos[end_at], -1)
    graphs = len(carried.elsewhere)
    nodes = n + graphs
    label = components(nodes, ev[member], anchor[member])
    # emission: the latest end of a component's intervals (its own event when it has none)
    comps = int(label.max()) + 1 if nodes else 0
    emit = np.full(comps, -1, dtype=np.int64)
    events_at = np.flatnonzero(joined)
    np.maximum.at(emit, label[events_at], events_at)
    np.maximum.at(emit, label[int_anchor], end_ev)
    if graphs:
        emit[label[n + np.flatnonzero(carried.elsewhere)]] = OPEN
    closer = np.full(comps, -1, dtype=np.int64)
    at_end = (end_ev != OPEN) & (end_ev == emit[label[int_anchor]]) & ~by_stop
    np.maximum.at(closer, label[int_anchor[at_end]], end_pos[at_end])
    real = emit >= 0  # a component of joined events or carried sub-graphs
    if graphs:
        real[label[n:]] = True
    finite = real & (emit != OPEN)
    done = np.flatnonzero(finite)
    at = emit[done]
    # at one event, the components its STARTs end go in the order of its attributes; one
    # emitted after its own event is never among them (a START keeps its own one open)
    own = label[np.minimum(at, max(n - 1, 0))] == done
    order = np.lexsort((np.where(own, 0, closer[done]), at))
    # the interval of each key open at the end: its group's last opener, unless stopped
    key_anchor = np.full(len(carried.owner), -1, dtype=np.int64)
    if k:
        last_rows = np.append(starts_at[1:], k) - 1
        ls, st = last_start[last_rows], stops[last_rows]
        g0 = starts_at
        open_in = (ls >= g0) & (st < ls)
        open_carried = (ls < g0) & (owner[g0] >= 0) & (st < g0)
        anchors = np.where(open_in, ev[np.maximum(ls, 0)], n + owner[g0])
        key_anchor[key[g0]] = np.where(open_in | open_carried, anchors, -1)
    return Plan(label, done[order], np.flatnonzero(real & (emit == OPEN)), key_anchor)


def components(nodes: int, src: Ints, dst: Ints) -> Ints:
    """The connected components of an undirected graph: per node (0 .. nodes - 1), the least
    node of its component.

    Each round hooks the root of every edge's greater end under the root of its lesser end
    (the least offered), then points every node at its root; every root with an edge to
    another is merged in a round, so the roots of a component at least halve each round:
    O(log nodes) rounds of O(nodes + edges) (Shiloach and Vishkin's hooking and shortcutting).
    ``scipy.sparse.csgraph.connected_components`` finds the same components (numbered by
    their least node); it is not used for what importing it costs (34 MiB resident).
    """
    label = np.arange(nodes, dtype=np.int64)
    while True:
        a, b = label[src], label[dst]
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        apart = lo != hi
        if not apart.any():
            return label
        np.minimum.at(label, hi[apart], lo[apart])
        while True:
            up = label[label]
            if np.array_equal(up, label):
                break
            label = up


def _next(values: Ints) -> Ints:
    """Per row, the least of ``values`` at or after it."""
    return np.minimum.accumulate(values[::-1])[::-1]


def sweeps(ts: Ints, step_ns: int, next_sweep: int) -> list[int]:
    """Where a parser sweeps in a batch of events (indices into ``ts``, their timestamps in
    ascending order): before the first event at or after ``next_sweep``, then before the first
    at least ``step_ns`` after the one it swept at, and so on."""
    out: list[int] = []
    i = int(np.searchsorted(ts, next_sweep, side="left"))
    while i < len(ts):
        out.append(i)
        i = int(np.searchsorted(ts, int(ts[i]) + step_ns, side="left"))
    return out
