"""Magpie's request parser: events joined into requests by temporal joins (seed 002, section 3).

Events are taken in timestamp order (:func:`reorder`, :func:`merge_streams`: a reorder queue
per source, then a merge of the sources). Each event is looked up in the event schema
(:mod:`pipeline.records.event_schema`) and added to the sub-graphs its join attributes reach:

* a *valid-interval* per ``(domain, value)`` is kept in a hash table (the "live sectors" of
  the seed's Figure 7) and points at the sub-graph that owns it;
* ``BIND_BASIC`` and ``BIND_STOP`` join the event to the owner of an open interval (two owners
  reached by one event are merged: the smaller into the larger, re-pointing its intervals);
  ``BIND_STOP`` then closes the interval; ``BIND_START`` opens a new one (an interval of the same
  pair still open is closed in its old owner first, reference/magpie-servicerate.md A.2);
* a sub-graph with no open interval left is *emitted* as a request when it holds a seed event,
  and garbage-collected otherwise; one that saw no event for ``timeout_s`` is flushed the same
  way (an incomplete request when seeded), which bounds memory.

CPU comes from context switches (the schema's ``kernel: cpu_accounting`` event): the time a
thread ran is charged to the sub-graph that owns the thread's interval while it ran. The
running slice is split at every event the thread posts, before the event changes any binding,
so that CPU used just before a ``BIND_STOP`` goes to the request being stopped
(reference/magpie-servicerate.md A.4, step 3.2). Resource attributes of joined events
(``cpu_ns``, ``bytes:disk``...) are summed per request.

The parser works the same online (events fed as they are tailed) and offline; it never reads
files or clocks: events in, :class:`Request` values out. Online, :class:`LineHolds` counts which
input lines the parser still needs (an event of an open sub-graph, a context switch whose slice
is running or was charged to an open sub-graph), so a shipper commits a file's offset only past
lines whose requests are delivered (DESIGN.md, delivery promise).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.records.event_schema import Bind, EventSchema, EventType
from pipeline.records.events import Event
from pipeline.reducers import interval_join
from pipeline.reducers.line_holds import LineHolds
from pipeline.reducers.request_record import SCALARS as _SCALARS
from pipeline.reducers.request_record import CpuSlice, Key, Request, hashable, join_attributes

__all__ = [
    "BATCH",
    "BATCH_MIN",
    "ParserStats",
    "RequestParser",
    "extract",
]


BATCH_MIN = 512
"""Batches shorter than this are fed event by event (the arrays would cost more)."""
BATCH = 4096
"""Events :func:`extract` feeds at a time."""
_BIND_CODE = {
    Bind.START: interval_join.START,
    Bind.BASIC: interval_join.BASIC,
    Bind.STOP: interval_join.STOP,
}
_EXACT = float(2**53)
"""Integer resource amounts sum to the same float in any order while the sum of their absolute
values stays below this: every partial sum is then an integer a float holds exactly (the batch
join adds them in another order than event by event)."""


@dataclass(eq=False, slots=True)
class _Graph:
    events: list[tuple[int, int, Event]] = field(default_factory=list)  # (ts, order, event)
    open: set[Key] = field(default_factory=set)
    seeds: int = 0
    last_ns: int = 0
    resources: dict[str, float] = field(default_factory=dict)
    cpu: list[CpuSlice] = field(default_factory=list)
    kernel_lines: set[int] = field(default_factory=set)
    magnitude: float = 0.0  # the sum of the absolute resource amounts summed in resources

    def absorb(self, other: _Graph) -> None:
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


class RequestParser:
    """The temporal join over one machine's event stream (see the module docstring).

    Feed events in timestamp order with :meth:`feed`; each call returns the requests it
    completed. :meth:`close` flushes what is still open at the end of the input.

    Args:
        schema: the event schema.
        on_garbage: called with the events of each garbage-collected sub-graph (for
            diagnostics; default: dropped).
        holds: when given, the parser holds the line (``Event.line_no``) of every event of a
            sub-graph until the sub-graph is emitted or collected, and of every context switch
            while its slice runs and until each sub-graph it was charged to is finished.
    """

    def __init__(
        self,
        schema: EventSchema,
        on_garbage: Callable[[list[Event]], None] | None = None,
        holds: LineHolds | None = None,
    ) -> None:
        self.schema = schema
        self.stats = ParserStats()
        self._on_garbage = on_garbage
        self._holds = holds
        self._live: dict[Key, _Graph] = {}
        self._open: set[_Graph] = set()
        self._order = itertools.count()
        opts = schema.parser
        self._timeout_ns = int(opts.timeout_s * 1e9)
        self._next_sweep = 0
        self._thread_attr = opts.thread_attr
        self._thread_domain = _thread_domain(schema)
        self._running: dict[int, tuple[int, int, int]] = {}  # cpu -> (tid, since ns, line)
        self._on_cpu: dict[int, int] = {}  # tid -> cpu
        # tid -> (since ns, line): a thread seen running by its own event, its switch-in unseen
        self._inferred: dict[int, tuple[int, int]] = {}
        self._kernel_seen = False
        self._resources = schema.resource_names
        # per event type: its join attributes as (name, domain, binding), looked up once
        self._joins = {
            ev: tuple((name, a.domain, a.bind) for name, a in t.attrs.items())
            for ev, t in schema.events.items()
        }
        self._init_slots()

    def _init_slots(self) -> None:
        """What :meth:`_feed_batch` looks up per event type: its join attributes as (name,
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

    # -- CPU accounting ------------------------------------------------------------------

    def _charge(self, tid: int, start: int, end: int, line_no: int) -> None:
        if end <= start:
            return
        owner = self._live.get((self._thread_domain, tid))
        if owner is not None:
            owner.resources["sched_cpu_ns"] = owner.resources.get("sched_cpu_ns", 0.0) + (
                end - start
            )
            owner.cpu.append(CpuSlice(tid, start, end))
            if line_no not in owner.kernel_lines:
                owner.kernel_lines.add(line_no)
                if self._holds is not None:
                    self._holds.take(line_no)

    def _switch(self, e: Event) -> None:
        try:
            cpu, prev, nxt = int(e.attrs["cpu"]), int(e.attrs["prev_tid"]), int(e.attrs["next_tid"])
        except (KeyError, TypeError, ValueError):
            self.stats.unknown += 1
            return
        self._kernel_seen = True
        running = self._running.get(cpu)
        if running is not None and running[0] == prev:
            self._charge(prev, running[1], e.ts_ns, running[2])
        elif prev in self._inferred:
            since, line_no = self._inferred.pop(prev)
            self._charge(prev, since, e.ts_ns, line_no)
            if self._holds is not None:
                self._holds.drop(line_no)
        if nxt in self._inferred:
            _since, line_no = self._inferred.pop(nxt)
            if self._holds is not None:
                self._holds.drop(line_no)
        if self._on_cpu.get(prev) == cpu:
            del self._on_cpu[prev]
        if self._holds is not None:
            self._holds.take(e.line_no)
            if running is not None:
                self._holds.drop(running[2])
        self._running[cpu] = (nxt, e.ts_ns, e.line_no)
        self._on_cpu[nxt] = cpu

    def _checkpoint(self, e: Event) -> None:
        tid = e.attrs.get(self._thread_attr)
        if not isinstance(tid, int):
            return
        cpu = self._on_cpu.get(tid)
        if cpu is None:
            if self._kernel_seen:
                self._infer_running(tid, e)
            return
        _tid, since, line_no = self._running[cpu]
        self._charge(tid, since, e.ts_ns, line_no)
        self._running[cpu] = (tid, max(since, e.ts_ns), line_no)

    def _infer_running(self, tid: int, e: Event) -> None:
        """A thread posting an event runs, though no context switch put it on a CPU (perf
        lost the switch, or the thread ran before recording began): it is taken to run from
        this event on, charged at its next events and up to the switch that takes it off."""
        inferred = self._inferred.get(tid)
        if inferred is None:
            self._inferred[tid] = (e.ts_ns, e.line_no)
            if self._holds is not None:
                self._holds.take(e.line_no)
            return
        since, line_no = inferred
        self._charge(tid, since, e.ts_ns, line_no)
        self._inferred[tid] = (max(since, e.ts_ns), line_no)

    # -- the join ------------------------------------------------------------------------

    def feed(self, e: Event) -> list[Request]:
        """Process one event (in timestamp order); the requests it completed."""
        self.stats.events += 1
        out: list[Request] = []
        if e.ts_ns >= self._next_sweep:
            out += self._sweep(e.ts_ns)
        etype = self.schema.events.get(e.ev)
        if etype is None:
            self.stats.unknown += 1
            return out
        if etype.kernel == "cpu_accounting":
            self._switch(e)
            return out
        self._checkpoint(e)
        starts, stops, owners = self._bindings(etype, e)
        root = self._merge(owners)
        self._add(root, etype, e)
        return out + self._rebind(root, starts, stops)

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

    def _feed_batch(self, events: Sequence[Event]) -> list[Request] | None:
        """:meth:`feed_many` over arrays, for events none of which is swept before (None:
        not possible, nothing changed)."""
        slots, kernel = self._slots, self._kernel_types
        names = self._domains
        interned: list[dict[Hashable, int]] = [{} for _ in names]
        key_list: list[Key] = []
        o_key: list[int] = []
        o_row: list[int] = []
        width = self._slot_count
        types = self.schema.events
        kinds = [types.get(e.ev) for e in events]
        magnitude = 0.0
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
                            magnitude += _magnitude(v)
                        continue
                    if type(v) not in _SCALARS:
                        v = hashable(v)
                    seen = interned[d]
                    kid = seen.get(v)
                    if kid is None:
                        kid = seen[v] = len(key_list)
                        key_list.append((names[d], v))
                    o_key.append(kid)
                    o_row.append(i * width + slot)
        graphs = list(self._open)
        if magnitude + sum(g.magnitude for g in graphs) >= _EXACT:
            return None
        at = {id(g): j for j, g in enumerate(graphs)}
        owner = np.full(len(key_list), -1, dtype=np.int64)
        live = self._live
        for kid, key in enumerate(key_list):
            g = live.get(key)
            if g is not None:
                owner[kid] = at[id(g)]
        keys = set(key_list)
        rows = np.asarray(o_row, dtype=np.int64)
        at_slot = rows % width
        plan = interval_join.plan(
            np.fromiter((k is not None for k in kinds), dtype=bool, count=len(events)),
            interval_join.Occurrences(
                rows // width,
                np.asarray(o_key, dtype=np.int64),
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
        return self._apply(plan, events, kinds, key_list, keys, graphs)

    def _apply(
        self,
        plan: interval_join.Plan,
        events: Sequence[Event],
        kinds: list[EventType | None],
        key_list: list[Key],
        keys: set[Key],
        graphs: list[_Graph],
    ) -> list[Request]:
        """Emit and carry over the components of ``plan`` (see :meth:`_feed_batch`)."""
        n = len(events)
        joined = [i for i, k in enumerate(kinds) if k is not None]
        self.stats.events += n
        self.stats.unknown += n - len(joined)
        base = next(self._order)
        self._order = itertools.count(base + n)
        label = plan.label
        nodes = np.concatenate((np.asarray(joined, dtype=np.int64), n + np.arange(len(graphs))))
        lab = label[nodes]
        by = np.argsort(lab, kind="stable")
        nodes, lab = nodes[by], lab[by]
        cut = np.flatnonzero(np.concatenate(([True], lab[1:] != lab[:-1])))[: len(lab)]
        comps = int(label.max()) + 1 if len(label) else 0
        begin = np.zeros(comps, dtype=np.int64)
        end = np.zeros(comps, dtype=np.int64)
        begin[lab[cut]] = cut
        end[lab[cut]] = np.append(cut[1:], len(lab))
        order = nodes.tolist()
        begins, ends = begin.tolist(), end.tolist()
        out: list[Request] = []
        passed: list[int] = []  # the batch's events emitted in it
        for c in plan.emitted.tolist():
            ids = order[begins[c] : ends[c]]
            if ids[-1] < n:
                out += self._emit_new(ids, events, kinds)
                passed += ids
            else:
                new = [i for i in ids if i < n]
                out += self._emit([graphs[i - n] for i in ids if i >= n], new, events, kinds, base)
                passed += new
        roots: dict[int, _Graph] = {}
        for c in plan.open_components.tolist():
            ids = order[begins[c] : ends[c]]
            new = [i for i in ids if i < n]
            carried = [graphs[i - n] for i in ids if i >= n]
            roots[c] = self._carry(carried, new, events, kinds, base, keys)
        live = self._live
        for kid, a in enumerate(plan.key_anchor.tolist()):
            key = key_list[kid]
            if a < 0:
                live.pop(key, None)
            else:
                root = roots[int(label[a])]
                live[key] = root
                root.open.add(key)
        if self._holds is not None:
            self._holds.passed(events[i].line_no for i in sorted(passed))
        return out

    def _emit_new(
        self, ids: list[int], events: Sequence[Event], kinds: list[EventType | None]
    ) -> list[Request]:
        """The request (or garbage) of a component of the batch's events ``ids`` alone
        (ascending: in time order), finished in the batch."""
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

    def _emit(
        self,
        carried: list[_Graph],
        ids: list[int],
        events: Sequence[Event],
        kinds: list[EventType | None],
        base: int,
    ) -> list[Request]:
        """The request (or garbage) of a component finished in a batch: the sub-graphs
        ``carried`` into it and the batch's events ``ids`` (ascending)."""
        g = _Graph()
        for old in sorted(carried, key=_first):  # (no kernel lines: see feed_many)
            self._open.discard(old)
            if self._holds is not None:
                for _t, _o, ev in old.events:
                    self._holds.drop(ev.line_no)
            g.absorb(old)
        g.open.clear()
        self._add_batch(g, ids, events, kinds, base)
        return self._finish(g, complete=True, held=False)

    def _carry(
        self,
        carried: list[_Graph],
        ids: list[int],
        events: Sequence[Event],
        kinds: list[EventType | None],
        base: int,
        keys: set[Key],
    ) -> _Graph:
        """The sub-graph of a component still open after a batch: the sub-graphs ``carried``
        into it (the largest absorbing the others) and the batch's events ``ids``; its open
        intervals of keys the batch did not bind are kept (those it did are set by the
        caller)."""
        root = self._merge(carried)  # the batch's keys it re-points are set by the caller
        root.open = {key for key in root.open if key not in keys}
        self._add_batch(root, ids, events, kinds, base)
        if self._holds is not None:
            for i in ids:
                self._holds.take(events[i].line_no)
        self._open.add(root)
        return root

    def _add_batch(
        self,
        g: _Graph,
        ids: list[int],
        events: Sequence[Event],
        kinds: list[EventType | None],
        base: int,
    ) -> None:
        """Events ``ids`` of a batch joined to ``g`` (as :meth:`_add`, without holds)."""
        resources = g.resources
        for i in ids:
            e = events[i]
            etype = kinds[i]
            assert etype is not None
            g.events.append((e.ts_ns, base + i, e))
            if e.ts_ns > g.last_ns:
                g.last_ns = e.ts_ns
            if etype.seed:
                g.seeds += 1
            for attr_name, resource in etype.resource_keys:
                v = e.attrs.get(attr_name)
                if isinstance(v, int | float) and not isinstance(v, bool):
                    resources[resource] = resources.get(resource, 0.0) + v
                    g.magnitude += _magnitude(v)

    def _rebind(self, root: _Graph, starts: list[Key], stops: list[Key]) -> list[Request]:
        """Open ``starts`` in ``root`` (closing each in its old owner) and close ``stops``; the
        requests that completed."""
        out: list[Request] = []
        for key in starts:
            old = self._live.get(key)
            if old is not None and old is not root:
                old.open.discard(key)
                if not old.open:
                    out += self._finish(old, complete=True)
            self._live[key] = root
            root.open.add(key)
        for key in stops:
            if self._live.get(key) is root:
                del self._live[key]
                root.open.discard(key)
        if root.open:
            self._open.add(root)
        else:
            out += self._finish(root, complete=True)
        return out

    def _bindings(self, etype: EventType, e: Event) -> tuple[list[Key], list[Key], list[_Graph]]:
        """The intervals ``e`` opens and stops, and the sub-graphs owning those it reaches."""
        starts: list[Key] = []
        stops: list[Key] = []
        owners: list[_Graph] = []
        attrs, live = e.attrs, self._live
        for name, domain, bind in self._joins[e.ev]:
            if name not in attrs:
                continue
            v = attrs[name]
            key = (domain, v if type(v) in _SCALARS else hashable(v))
            if bind is Bind.START:
                starts.append(key)
                continue
            owner = live.get(key)
            if owner is not None and owner not in owners:
                owners.append(owner)
            if bind is Bind.STOP:
                stops.append(key)
        return starts, stops, owners

    def _add(self, root: _Graph, etype: EventType, e: Event) -> None:
        """``e`` joined to ``root``: held, counted as a seed, its resources summed."""
        root.events.append((e.ts_ns, next(self._order), e))
        if self._holds is not None:
            self._holds.take(e.line_no)
        if e.ts_ns > root.last_ns:
            root.last_ns = e.ts_ns
        if etype.seed:
            root.seeds += 1
        for attr_name, resource in etype.resource_keys:
            v = e.attrs.get(attr_name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                root.resources[resource] = root.resources.get(resource, 0.0) + v
                root.magnitude += _magnitude(v)

    def _merge(self, owners: list[_Graph]) -> _Graph:
        if not owners:
            return _Graph()
        root = max(owners, key=lambda g: len(g.events))
        for g in owners:
            if g is root:
                continue
            if self._holds is not None:
                for line_no in g.kernel_lines & root.kernel_lines:
                    self._holds.drop(line_no)
            root.absorb(g)
            for key in g.open:
                self._live[key] = root
            self._open.discard(g)
        return root

    def _finish(self, g: _Graph, complete: bool, held: bool = True) -> list[Request]:
        """Emit ``g`` (a request when seeded, garbage otherwise); ``held``: its lines are
        held by the parser (not those of a batch's events, :meth:`_emit`)."""
        self._open.discard(g)
        for key in g.open:
            if self._live.get(key) is g:
                del self._live[key]
        if self._holds is not None and held:
            for _t, _o, ev in g.events:
                self._holds.drop(ev.line_no)
            for line_no in g.kernel_lines:
                self._holds.drop(line_no)
        if not g.seeds:
            self.stats.garbage_graphs += 1
            self.stats.garbage_events += len(g.events)
            if self._on_garbage is not None:
                self._on_garbage([ev for _t, _o, ev in sorted(g.events, key=_by_time)])
            return []
        self.stats.requests += 1
        if not complete:
            self.stats.incomplete += 1
        return [self._request(g, complete)]

    def _request(self, g: _Graph, complete: bool) -> Request:
        """The request of the seeded sub-graph ``g``."""
        events = tuple(ev for _t, _o, ev in sorted(g.events, key=_by_time))
        return Request(
            events,
            events[0].ts_ns,
            events[-1].ts_ns,
            join_attributes(events, self.schema),
            {r: g.resources.get(r, 0.0) for r in self._resources},
            tuple(sorted(g.cpu, key=lambda c: c.start_ns)),
            complete,
            g.seeds,
            next(ev for ev in events if self.schema.events[ev.ev].seed),
            tuple(sorted(g.kernel_lines)),
        )

    def _sweep(self, now_ns: int) -> list[Request]:
        """Flush sub-graphs idle for longer than the timeout."""
        self._next_sweep = now_ns + max(self._timeout_ns // 4, 1)
        cutoff = now_ns - self._timeout_ns
        out: list[Request] = []
        for g in sorted((g for g in self._open if g.last_ns < cutoff), key=_first):
            out += self._finish(g, complete=False)
        for tid, (since, line_no) in list(self._inferred.items()):
            if since < cutoff:  # neither seen since nor switched out: no longer known to run
                del self._inferred[tid]
                if self._holds is not None:
                    self._holds.drop(line_no)
        return out

    def close(self) -> list[Request]:
        """End of input: every open sub-graph is flushed (seeded ones as incomplete requests)."""
        out: list[Request] = []
        for g in sorted(self._open, key=_first):
            out += self._finish(g, complete=False)
        if self._holds is not None:
            for _tid, _since, line_no in self._running.values():
                self._holds.drop(line_no)
            for _since, line_no in self._inferred.values():
                self._holds.drop(line_no)
        self._running.clear()
        self._on_cpu.clear()
        self._inferred.clear()
        return out

    def sweep(self, now_ns: int) -> list[Request]:
        """Flush the sub-graphs idle for longer than the timeout at time ``now_ns`` (on the
        events' clock): what a source that went quiet still holds."""
        return self._sweep(now_ns)


def _magnitude(v: float) -> float:
    """A resource amount's share of :data:`_EXACT`: its absolute value when it is an integer
    (or a float that is one), infinite otherwise (its sums depend on their order)."""
    if type(v) is int:
        return float(abs(v)) if abs(v) < _EXACT else math.inf
    if type(v) is float and v.is_integer():
        return abs(v)
    return math.inf


def _first(g: _Graph) -> tuple[int, int]:
    """When ``g`` began: its first event's (timestamp, arrival); sub-graphs flushed at once
    come out in this order."""
    return min((t, o) for t, o, _e in g.events)


def _by_time(item: tuple[int, int, Event]) -> tuple[int, int]:
    return item[0], item[1]


def extract(
    events: Iterable[Event], schema: EventSchema, parser: RequestParser | None = None
) -> Iterator[Request]:
    """Every request of a time-ordered event stream (offline), in completion order: the events
    fed :data:`BATCH` at a time (:meth:`RequestParser.feed_many`) to ``parser`` (default: a new
    one), then closed."""
    parser = RequestParser(schema) if parser is None else parser
    it = iter(events)
    while batch := list(itertools.islice(it, BATCH)):
        yield from parser.feed_many(batch)
    yield from parser.close()


def _thread_domain(schema: EventSchema) -> str:
    """The domain of the schema's thread attribute (``Thread`` when no event type binds it)."""
    return next(
        (
            a.domain
            for t in schema.events.values()
            for name, a in t.attrs.items()
            if name == schema.parser.thread_attr
        ),
        "Thread",
    )
