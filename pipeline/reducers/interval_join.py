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
    rows = _Rows.of(occ, carried)
    if rows is None:
        return None
    label = components(n + len(carried.elsewhere), *rows.edges(n))
    emitted, still_open = _emission(label, joined, rows.intervals(n), carried)
    return Plan(label, emitted, still_open, rows.key_anchor(n, len(carried.owner)))


@dataclass(frozen=True)
class _Rows:
    """A batch's occurrences sorted by key, then event, with what the cumulative maxima give
    per row: where its key's rows begin and end, the last START and STOP at or before it."""

    ev: Ints
    key: Ints
    pos: Ints
    first: npt.NDArray[np.bool_]  # the first row of its key
    group: Ints  # where its key's rows begin
    group_end: Ints  # and end (one past)
    is_start: npt.NDArray[np.bool_]
    is_stop: npt.NDArray[np.bool_]
    last_start: Ints  # the last START row at or before it (-1: none)
    stops: Ints  # the last STOP row at or before it (-1: none)
    owner: Ints  # the carried sub-graph owning its key's interval open at the batch's start

    @classmethod
    def of(cls, occ: Occurrences, carried: Carried) -> _Rows | None:
        """The sorted rows; None when an event binds one key twice."""
        by = np.lexsort((occ.event, occ.key))
        ev, key = occ.event[by], occ.key[by]
        k = len(ev)
        same_key = key[1:] == key[:-1]
        if np.any(same_key & (ev[1:] == ev[:-1])):
            return None
        idx = np.arange(k)
        first = np.ones(k, dtype=bool)
        first[1:] = ~same_key
        bind = occ.bind[by]
        is_start, is_stop = bind == START, bind == STOP
        return cls(
            ev,
            key,
            occ.pos[by],
            first,
            np.maximum.accumulate(np.where(first, idx, 0)),
            _next(np.append(np.where(first, idx, k)[1:], k)[:k]),
            is_start,
            is_stop,
            np.maximum.accumulate(np.where(is_start, idx, -1)),
            np.maximum.accumulate(np.where(is_stop, idx, -1)),
            carried.owner[key],
        )

    def edges(self, n: int) -> tuple[Ints, Ints]:
        """Each row that joins the interval open at it, and that interval's opener (an event,
        or ``n`` + a carried sub-graph)."""
        prev_stop = np.append(-1, self.stops[:-1])[: len(self.ev)]
        here = self.last_start >= self.group  # the interval open at a row was opened here
        live = np.where(
            here, prev_stop < self.last_start, (self.owner >= 0) & (prev_stop < self.group)
        )
        member = live & ~self.is_start
        anchor = np.where(here, self.ev[np.maximum(self.last_start, 0)], n + self.owner)
        return self.ev[member], anchor[member]

    def intervals(self, n: int) -> _Intervals:
        """One interval per START row (its end looked for after it) and per carried key (from
        its first row on)."""
        k = len(self.ev)
        idx = np.arange(k)
        carried_first = np.flatnonzero(self.first & (self.owner >= 0))
        start_rows = np.flatnonzero(self.is_start)
        rows = np.concatenate((start_rows, carried_first))
        after = np.concatenate((start_rows + 1, carried_first))
        anchor = np.concatenate((self.ev[start_rows], n + self.owner[carried_first]))
        big = np.int64(k)
        ends = self.group_end[rows]
        at = np.minimum(after, max(k - 1, 0))
        ns = np.where(after < ends, _next(np.where(self.is_start, idx, big))[at], big)
        nt = np.where(after < ends, _next(np.where(self.is_stop, idx, big))[at], big)
        ns = np.where(ns < ends, ns, big)
        nt = np.where(nt < ends, nt, big)
        by_stop = nt < ns
        end_row = np.minimum(ns, nt)
        closed = end_row < big
        end_at = np.minimum(end_row, max(k - 1, 0))
        end_ev = np.where(closed, self.ev[end_at], OPEN)
        end_pos = np.where(closed & ~by_stop, self.pos[end_at], -1)
        return _Intervals(anchor, end_ev, end_pos, by_stop)

    def key_anchor(self, n: int, keys: int) -> Ints:
        """Per key, the node owning its interval open at the end (-1: none): its last opener,
        unless stopped since."""
        out = np.full(keys, -1, dtype=np.int64)
        k = len(self.ev)
        if k:
            g0 = np.flatnonzero(self.first)
            last_rows = np.append(g0[1:], k) - 1
            ls, st = self.last_start[last_rows], self.stops[last_rows]
            open_in = (ls >= g0) & (st < ls)
            open_carried = (ls < g0) & (self.owner[g0] >= 0) & (st < g0)
            anchors = np.where(open_in, self.ev[np.maximum(ls, 0)], n + self.owner[g0])
            out[self.key[g0]] = np.where(open_in | open_carried, anchors, -1)
        return out


@dataclass(frozen=True)
class _Intervals:
    """A batch's intervals: the node that opened each, the event that ends it (:data:`OPEN`:
    none), the ending attribute's position when a START ends it (-1 otherwise)."""

    anchor: Ints
    end_ev: Ints
    end_pos: Ints
    by_stop: npt.NDArray[np.bool_]


def _emission(
    label: Ints, joined: npt.NDArray[np.bool_], iv: _Intervals, carried: Carried
) -> tuple[Ints, Ints]:
    """The components emitted in the batch, in order, and those still open: a component is
    emitted at the latest end of its intervals (after its own event when it has none)."""
    n = len(joined)
    comps = int(label.max()) + 1 if len(label) else 0
    emit = np.full(comps, -1, dtype=np.int64)
    events_at = np.flatnonzero(joined)
    np.maximum.at(emit, label[events_at], events_at)
    np.maximum.at(emit, label[iv.anchor], iv.end_ev)
    emit[label[n + np.flatnonzero(carried.elsewhere)]] = OPEN
    closer = np.full(comps, -1, dtype=np.int64)
    at_end = (iv.end_ev != OPEN) & (iv.end_ev == emit[label[iv.anchor]]) & ~iv.by_stop
    np.maximum.at(closer, label[iv.anchor[at_end]], iv.end_pos[at_end])
    real = emit >= 0  # a component of joined events or carried sub-graphs (each has an end)
    done = np.flatnonzero(real & (emit != OPEN))
    # at one event, the components its STARTs end go in the order of its attributes; one
    # emitted after its own event is never among them (a START keeps its own one open)
    order = np.lexsort((closer[done], emit[done]))
    return done[order], np.flatnonzero(real & (emit == OPEN))


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
    if not len(ts) or next_sweep > int(ts[-1]):
        return out
    i = int(np.searchsorted(ts, next_sweep, side="left"))
    while i < len(ts):
        out.append(i)
        after = int(ts[i]) + step_ns
        if after > int(ts[-1]):  # (and never past 64 bits)
            break
        i = int(np.searchsorted(ts, after, side="left"))
    return out
