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
from collections.abc import Callable, Iterable, Iterator

from pipeline.records.event_schema import Bind, EventSchema, EventType
from pipeline.records.events import Event
from pipeline.reducers.batch_join import BatchJoin
from pipeline.reducers.join_graph import ParserStats, SubGraph, began, by_time, magnitude
from pipeline.reducers.line_holds import LineHolds
from pipeline.reducers.request_record import SCALARS as _SCALARS
from pipeline.reducers.request_record import CpuSlice, Key, Request, hashable, join_attributes

__all__ = [
    "BATCH",
    "ParserStats",
    "RequestParser",
    "extract",
]


BATCH = 4096
"""Events :func:`extract` feeds at a time."""


class RequestParser(BatchJoin):
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
        self._live: dict[Key, SubGraph] = {}
        self._open: set[SubGraph] = set()
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

    def _rebind(self, root: SubGraph, starts: list[Key], stops: list[Key]) -> list[Request]:
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

    def _bindings(self, etype: EventType, e: Event) -> tuple[list[Key], list[Key], list[SubGraph]]:
        """The intervals ``e`` opens and stops, and the sub-graphs owning those it reaches."""
        starts: list[Key] = []
        stops: list[Key] = []
        owners: list[SubGraph] = []
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

    def _add(self, root: SubGraph, etype: EventType, e: Event) -> None:
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
                root.magnitude += magnitude(v)

    def _merge(self, owners: list[SubGraph]) -> SubGraph:
        if not owners:
            return SubGraph()
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

    def _finish(self, g: SubGraph, complete: bool, held: bool = True) -> list[Request]:
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
                self._on_garbage([ev for _t, _o, ev in sorted(g.events, key=by_time)])
            return []
        self.stats.requests += 1
        if not complete:
            self.stats.incomplete += 1
        return [self._request(g, complete)]

    def _request(self, g: SubGraph, complete: bool) -> Request:
        """The request of the seeded sub-graph ``g``."""
        events = tuple(ev for _t, _o, ev in sorted(g.events, key=by_time))
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
        for g in sorted((g for g in self._open if g.last_ns < cutoff), key=began):
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
        for g in sorted(self._open, key=began):
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
