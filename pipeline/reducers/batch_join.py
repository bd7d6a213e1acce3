"""The request join over a batch of events as array operations (seed 002, section 3), the
part of :class:`~pipeline.reducers.request_join.RequestParser` that
:meth:`~pipeline.reducers.request_join.RequestParser.feed_many` uses: a batch's join
attributes read into columns, planned by :func:`~pipeline.reducers.interval_join.plan`, and the
plan applied to the parser's sub-graphs (requests emitted, sub-graphs carried over, the
intervals left open re-pointed), with what feeding the events one by one would give.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.records.event_schema import Bind, EventSchema, EventType
from pipeline.records.events import Event
from pipeline.reducers import interval_join
from pipeline.reducers.join_graph import EXACT, ParserStats, SubGraph, began, magnitude
from pipeline.reducers.line_holds import LineHolds
from pipeline.reducers.request_record import SCALARS as _SCALARS
from pipeline.reducers.request_record import Key, Request, hashable, join_attributes

BATCH_MIN = 512
"""Stretches shorter than this are fed event by event (the arrays would cost more)."""
_BIND_CODE = {
    Bind.START: interval_join.START,
    Bind.BASIC: interval_join.BASIC,
    Bind.STOP: interval_join.STOP,
}


class BatchJoin:
    """The batch join, mixed into :class:`~pipeline.reducers.request_join.RequestParser`:
    :meth:`feed_many`. It shares the parser's state (declared here) and uses its
    :meth:`feed`, :meth:`_sweep`, :meth:`_merge` and :meth:`_finish`."""

    schema: EventSchema
    stats: ParserStats
    _on_garbage: Callable[[list[Event]], None] | None
    _holds: LineHolds | None
    _live: dict[Key, SubGraph]
    _open: set[SubGraph]
    _order: Iterator[int]
    _resources: tuple[str, ...]
    _joins: dict[str, tuple[tuple[str, str, Bind], ...]]
    _kernel_seen: bool
    _timeout_ns: int
    _next_sweep: int

    def feed(self, e: Event) -> list[Request]:
        raise NotImplementedError

    def _sweep(self, now_ns: int) -> list[Request]:
        raise NotImplementedError

    def _merge(self, owners: list[SubGraph]) -> SubGraph:
        raise NotImplementedError

    def _finish(self, g: SubGraph, complete: bool, held: bool = True) -> list[Request]:
        raise NotImplementedError

    def feed_many(self, events: Sequence[Event]) -> list[Request]:
        """Process ``events`` (in timestamp order) as :meth:`feed` does one at a time: the
        requests they completed, in the same order, and the parser in the same state after.

        The events are cut where the parser sweeps for idle sub-graphs (it sweeps there as
        :meth:`feed` would); each stretch of at least :data:`BATCH_MIN` events is joined as
        array operations over its intervals (:mod:`pipeline.reducers.interval_join`). Events
        are fed one by one from a kernel event on (CPU accounting follows the bindings event
        by event), when their timestamps go back or do not fit 64 bits, when a resource amount
        is not an integer or the amounts that may be summed together reach 2**53 (float sums
        would then depend on their order), or when
        :func:`~pipeline.reducers.interval_join.plan` refuses a stretch.

        With line holds, the lines of the events joined and emitted within a stretch are
        released (:meth:`LineHolds.passed`) as feeding them one by one would release them,
        unless the caller holds them.
        """
        n = len(events)
        if n < BATCH_MIN or self._kernel_seen:
            return self._feed_each(events)
        try:
            ts = np.fromiter((e.ts_ns for e in events), dtype=np.int64, count=n)
        except OverflowError:
            return self._feed_each(events)
        if np.any(ts[1:] < ts[:-1]):
            return self._feed_each(events)
        cuts = interval_join.sweeps(ts, max(self._timeout_ns // 4, 1), self._next_sweep)
        swept = set(cuts)
        out: list[Request] = []
        for lo, hi in itertools.pairwise(sorted({0, *cuts, n})):
            if lo in swept:  # as feed() does before the event
                out += self._sweep(int(ts[lo]))
            stretch = events[lo:hi]
            batch = hi - lo >= BATCH_MIN and not self._kernel_seen
            done = self._feed_batch(stretch) if batch else None
            out += self._feed_each(stretch) if done is None else done
        return out

    def _feed_each(self, events: Sequence[Event]) -> list[Request]:
        out: list[Request] = []
        for e in events:
            out += self.feed(e)
        return out

    def _init_slots(self) -> None:
        """What :meth:`_columns` looks up per event type: its join attributes as (name,
        domain number, slot, False) and its resource attributes as (name, 0, 0, True), a slot
        being one (type, attribute) with its binding and position."""
        self._domains = tuple(dict.fromkeys(d for j in self._joins.values() for _n, d, _b in j))
        number = {d: i for i, d in enumerate(self._domains)}
        binds: list[int] = []
        positions: list[int] = []
        self._slots: dict[str, tuple[tuple[str, int, int, bool], ...]] = {}
        self._kernel_types = frozenset(
            ev for ev, t in self.schema.events.items() if t.kernel == "cpu_accounting"
        )
        for ev, joins in self._joins.items():
            if ev in self._kernel_types:
                continue
            row: list[tuple[str, int, int, bool]] = []
            for p, (name, domain, bind) in enumerate(joins):
                row.append((name, number[domain], len(binds), False))
                binds.append(_BIND_CODE[bind])
                positions.append(p)
            row += [(name, 0, 0, True) for name, _r in self.schema.events[ev].resource_keys]
            self._slots[ev] = tuple(row)
        self._slot_count = max(len(binds), 1)
        self._slot_bind = np.asarray(binds or [0], dtype=np.int64)
        self._slot_pos = np.asarray(positions or [0], dtype=np.int64)

    def _columns(self, events: Sequence[Event]) -> _Columns | None:
        """The batch's join attributes as interned keys (None: a kernel event, or amounts that
        would sum differently in another order)."""
        slots, kernel, names = self._slots, self._kernel_types, self._domains
        interned: list[dict[Hashable, int]] = [{} for _ in names]
        cols = _Columns([self.schema.events.get(e.ev) for e in events], [], [], [])
        width = self._slot_count
        amounts = sum(g.magnitude for g in self._open)  # their share of EXACT
        for i, e in enumerate(events):
            row_slots = slots.get(e.ev)
            if row_slots is None:
                if e.ev in kernel:
                    return None
                continue
            attrs = e.attrs
            for name, d, slot, checked in row_slots:
                if name in attrs:
                    v = attrs[name]
                    if checked:
                        if isinstance(v, int | float) and not isinstance(v, bool):
                            amounts += magnitude(v)
                        continue
                    if type(v) not in _SCALARS:
                        v = hashable(v)
                    seen = interned[d]
                    kid = seen.get(v)
                    if kid is None:
                        kid = seen[v] = len(cols.keys)
                        cols.keys.append((names[d], v))
                    cols.key.append(kid)
                    cols.row.append(i * width + slot)
        return cols if amounts < EXACT else None

    def _feed_batch(self, events: Sequence[Event]) -> list[Request] | None:
        """:meth:`feed_many` over arrays, for events none of which is swept before (None:
        not possible, nothing changed)."""
        cols = self._columns(events)
        if cols is None:
            return None
        graphs = list(self._open)
        at = {id(g): j for j, g in enumerate(graphs)}
        owner = np.full(len(cols.keys), -1, dtype=np.int64)
        live = self._live
        for kid, key in enumerate(cols.keys):
            g = live.get(key)
            if g is not None:
                owner[kid] = at[id(g)]
        keys = set(cols.keys)
        rows = np.asarray(cols.row, dtype=np.int64)
        at_slot = rows % self._slot_count
        plan = interval_join.plan(
            np.fromiter((k is not None for k in cols.kinds), dtype=bool, count=len(events)),
            interval_join.Occurrences(
                rows // self._slot_count,
                np.asarray(cols.key, dtype=np.int64),
                self._slot_bind[at_slot],
                self._slot_pos[at_slot],
            ),
            interval_join.Carried(
                owner,
                np.asarray([any(k not in keys for k in g.open) for g in graphs], dtype=bool),
            ),
        )
        if plan is None:
            return None
        return self._apply(plan, _Stretch(events, cols.kinds, 0), cols.keys, graphs)

    def _apply(
        self, plan: interval_join.Plan, batch: _Stretch, key_list: list[Key], graphs: list[SubGraph]
    ) -> list[Request]:
        """Emit and carry over the components of ``plan`` (see :meth:`_feed_batch`)."""
        n = len(batch.events)
        joined = [i for i, k in enumerate(batch.kinds) if k is not None]
        self.stats.events += n
        self.stats.unknown += n - len(joined)
        base = next(self._order)
        self._order = itertools.count(base + n)
        batch = _Stretch(batch.events, batch.kinds, base)
        members = _members(plan.label, joined, n, len(graphs))
        out: list[Request] = []
        passed: list[int] = []  # the batch's events emitted in it
        for c in plan.emitted.tolist():
            ids = members(c)
            if ids[-1] < n:
                out += self._emit_new(ids, batch)
                passed += ids
            else:
                new = [i for i in ids if i < n]
                out += self._emit([graphs[i - n] for i in ids if i >= n], new, batch)
                passed += new
        keys = set(key_list)
        roots: dict[int, SubGraph] = {}
        for c in plan.open_components.tolist():
            ids = members(c)
            new = [i for i in ids if i < n]
            roots[c] = self._carry([graphs[i - n] for i in ids if i >= n], new, batch, keys)
        live = self._live
        for kid, a in enumerate(plan.key_anchor.tolist()):
            key = key_list[kid]
            if a < 0:
                live.pop(key, None)
            else:
                root = roots[int(plan.label[a])]
                live[key] = root
                root.open.add(key)
        if self._holds is not None:
            self._holds.passed(batch.events[i].line_no for i in sorted(passed))
        return out

    def _emit_new(self, ids: list[int], batch: _Stretch) -> list[Request]:
        """The request (or garbage) of a component of the batch's events ``ids`` alone
        (ascending: in time order), finished in the batch."""
        events, kinds = batch.events, batch.kinds
        evs = tuple(events[i] for i in ids)
        seeds = 0
        seed: Event | None = None
        resources = dict.fromkeys(self._resources, 0.0)
        for i in ids:
            etype = kinds[i]
            assert etype is not None
            if etype.seed:
                seeds += 1
                if seed is None:
                    seed = events[i]
            for attr_name, resource in etype.resource_keys:
                v = events[i].attrs.get(attr_name)
                if isinstance(v, int | float) and not isinstance(v, bool):
                    resources[resource] += v
        if seed is None:
            self.stats.garbage_graphs += 1
            self.stats.garbage_events += len(evs)
            if self._on_garbage is not None:
                self._on_garbage(list(evs))
            return []
        self.stats.requests += 1
        attributes = join_attributes(evs, self.schema)
        return [
            Request(
                evs, evs[0].ts_ns, evs[-1].ts_ns, attributes, resources, (), True, seeds, seed, ()
            )
        ]

    def _emit(self, carried: list[SubGraph], ids: list[int], batch: _Stretch) -> list[Request]:
        """The request (or garbage) of a component finished in a batch: the sub-graphs
        ``carried`` into it and the batch's events ``ids`` (ascending)."""
        g = SubGraph()
        for old in sorted(carried, key=began):  # (no kernel lines: see feed_many)
            self._open.discard(old)
            if self._holds is not None:
                for _t, _o, ev in old.events:
                    self._holds.drop(ev.line_no)
            g.absorb(old)
        g.open.clear()
        _add_batch(g, ids, batch)
        return self._finish(g, complete=True, held=False)

    def _carry(
        self, carried: list[SubGraph], ids: list[int], batch: _Stretch, keys: set[Key]
    ) -> SubGraph:
        """The sub-graph of a component still open after a batch: the sub-graphs ``carried``
        into it (the largest absorbing the others) and the batch's events ``ids``; its open
        intervals of keys the batch did not bind are kept (those it did are set by the
        caller)."""
        root = self._merge(carried)  # the batch's keys it re-points are set by the caller
        root.open = {key for key in root.open if key not in keys}
        _add_batch(root, ids, batch)
        if self._holds is not None:
            for i in ids:
                self._holds.take(batch.events[i].line_no)
        self._open.add(root)
        return root


@dataclass(frozen=True, slots=True)
class _Columns:
    """A batch's join attributes: per event its type (None: not declared), the interned keys,
    and per occurrence its key and ``event * slots + slot``."""

    kinds: list[EventType | None]
    keys: list[Key]
    key: list[int]
    row: list[int]


@dataclass(frozen=True, slots=True)
class _Stretch:
    """A batch's events, their types and the arrival number of its first event."""

    events: Sequence[Event]
    kinds: list[EventType | None]
    base: int


def _members(
    label: npt.NDArray[np.int64], joined: list[int], n: int, graphs: int
) -> Callable[[int], list[int]]:
    """Per component, its nodes in order: the batch's joined events (0 .. n - 1), then the
    carried sub-graphs (n + g)."""
    nodes = np.concatenate((np.asarray(joined, dtype=np.int64), n + np.arange(graphs)))
    lab = label[nodes]
    by = np.argsort(lab, kind="stable")
    nodes, lab = nodes[by], lab[by]
    cut = np.flatnonzero(np.concatenate(([True], lab[1:] != lab[:-1])))[: len(lab)]
    comps = int(label.max()) + 1 if len(label) else 0
    begin = np.zeros(comps, dtype=np.int64)
    end = np.zeros(comps, dtype=np.int64)
    begin[lab[cut]] = cut
    end[lab[cut]] = np.append(cut[1:], len(lab))
    order, begins, ends = nodes.tolist(), begin.tolist(), end.tolist()
    return lambda c: order[begins[c] : ends[c]]


def _add_batch(g: SubGraph, ids: list[int], batch: _Stretch) -> None:
    """Events ``ids`` of a batch joined to ``g`` (as the parser's ``_add``, without holds)."""
    resources = g.resources
    for i in ids:
        e = batch.events[i]
        etype = batch.kinds[i]
        assert etype is not None
        g.events.append((e.ts_ns, batch.base + i, e))
        if e.ts_ns > g.last_ns:
            g.last_ns = e.ts_ns
        if etype.seed:
            g.seeds += 1
        for attr_name, resource in etype.resource_keys:
            v = e.attrs.get(attr_name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                resources[resource] = resources.get(resource, 0.0) + v
                g.magnitude += magnitude(v)
