"""The canonical form as it was first written, event by event with one record per item: the
reference the faster :func:`pipeline.reducers.canonical.canonical` is tested against
(``test_canonical_equivalence``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.reducers.canonical import NO_THREAD, Canonical, Token
from pipeline.reducers.request_record import Request, hashable


@dataclass
class _Item:
    event: Event | None  # None: a segment
    resources: dict[str, float]
    resume_key: tuple[str, Hashable] | None = None
    signal_keys: tuple[tuple[str, Hashable], ...] = ()


def canonical(request: Request, schema: EventSchema) -> Canonical:
    """The canonical form of ``request`` (see the module docstring)."""
    thread_attr = schema.parser.thread_attr
    threads = set(request.attributes.get(thread_attr, ()))
    root = _tid(request.seed, thread_attr, threads)
    by_thread: dict[int, list[Event]] = {}
    for e in request.events:
        tid = _tid(e, thread_attr, threads)
        by_thread.setdefault(root if tid == NO_THREAD else tid, []).append(e)
    sources = {src: (attr, dst) for src, attr, dst in schema.sync}
    dests = {dst: attr for _src, attr, dst in schema.sync}
    items: dict[int, list[_Item]] = {}
    resumes: dict[tuple[str, Hashable], int] = {}  # (dst event, value) -> thread resuming
    for tid, events in by_thread.items():
        items[tid] = _thread_items(tid, events, request, schema, sources, dests, resumes)
    if request.cpu:
        _add_slices(request, items, root)
    return _schedule(request, items, resumes, root)


def _thread_items(
    tid: int,
    events: list[Event],
    request: Request,
    schema: EventSchema,
    sources: Mapping[str, tuple[str, str]],
    dests: Mapping[str, str],
    resumes: dict[tuple[str, Hashable], int],
) -> list[_Item]:
    """One thread's tokens (the seed, Signals, Resumes, the request's last event) and the
    segments of resource demands between them; each Resume's key goes into ``resumes``."""
    use_slices, seed, last = bool(request.cpu), request.seed, request.events[-1]
    carried: dict[str, object] = {}
    seg: dict[str, float] = {}
    out: list[_Item] = []
    for e in events:
        carried.update(e.attrs)
        _add_demands(seg, e, schema, use_slices)
        src = sources.get(e.ev)
        dst_attr = dests.get(e.ev)
        if not (e is seed or src is not None or dst_attr is not None or e is last):
            continue
        if seg:
            out.append(_Item(None, seg))
            seg = {}
        out.append(_token_item(e, tid, carried, src, dst_attr, resumes))
    if seg:
        out.append(_Item(None, seg))
    return out


def _token_item(
    e: Event,
    tid: int,
    carried: Mapping[str, object],
    src: tuple[str, str] | None,
    dst_attr: str | None,
    resumes: dict[tuple[str, Hashable], int],
) -> _Item:
    """The token of ``e``: a Signal's key (``src``: its attribute and destination event), a
    Resume's key (``dst_attr``), valued with what its thread ``carried``."""
    item = _Item(e, {})
    if src is not None:
        attr, dst = src
        item.signal_keys = ((dst, hashable(carried.get(attr))),)
    if dst_attr is not None:
        item.resume_key = (e.ev, hashable(carried.get(dst_attr)))
        resumes.setdefault(item.resume_key, tid)
    return item


def _add_demands(seg: dict[str, float], e: Event, schema: EventSchema, use_slices: bool) -> None:
    """``e``'s resources added to the open segment: they were used before it (``cpu_ns``: since
    the thread's last event), the application's ``cpu_ns`` only when there are no CPU slices."""
    for attr_name, resource in schema.events[e.ev].resource_keys:
        v = e.attrs.get(attr_name)
        if resource == "cpu_ns" and use_slices:
            continue
        if isinstance(v, int | float) and not isinstance(v, bool):
            seg[resource] = seg.get(resource, 0.0) + v


def _tid(e: Event, thread_attr: str, threads: set[Any]) -> int:
    tid = e.attrs.get(thread_attr)
    return tid if isinstance(tid, int) and tid in threads else NO_THREAD


def _add_slices(request: Request, items: dict[int, list[_Item]], root: int) -> None:
    """Each CPU slice into the segment of its thread that holds its end (slices are split at
    the thread's events, so none straddles a token)."""
    for c in request.cpu:
        tid = c.tid if c.tid in items else root
        seq = items.get(tid)
        if seq is None:
            continue
        # the item after which the slice ends: the last token at or before its end
        at = 0
        for i, it in enumerate(seq):
            if it.event is not None and it.event.ts_ns < c.end_ns:
                at = i + 1
            elif it.event is not None:
                break
        if at < len(seq) and seq[at].event is None:
            target = seq[at]
        else:
            target = _Item(None, {})
            seq.insert(at, target)
        target.resources["cpu_ns"] = target.resources.get("cpu_ns", 0.0) + (c.end_ns - c.start_ns)


def _schedule(
    request: Request,
    items: dict[int, list[_Item]],
    resumes: dict[tuple[str, Hashable], int],
    root: int,
) -> Canonical:
    """Every thread's tokens timed on unlimited CPUs, walked from the root thread, then the
    threads no Signal reached in order of first event (see the module docstring)."""
    walk = _Walk(items, resumes)
    walk.thread(root, 0)
    for tid in sorted(
        (t for t in items if t not in walk.walked),
        key=lambda t: next((i.event.ts_ns for i in items[t] if i.event is not None), 0),
    ):
        first = next((i.event.ts_ns for i in items[tid] if i.event is not None), request.start_ns)
        walk.thread(tid, max(0, first - request.start_ns))
    totals: dict[str, float] = {}
    for t in walk.tokens:
        for k, v in t.resources.items():
            totals[k] = totals.get(k, 0.0) + v
    critical_path_ns = max(walk.ends, default=0)
    return Canonical(tuple(walk.tokens), critical_path_ns, len(items), dict(sorted(totals.items())))


class _Walk:
    """The depth-first walk of the serialisation: tokens in order, each with its start."""

    def __init__(
        self, items: dict[int, list[_Item]], resumes: dict[tuple[str, Hashable], int]
    ) -> None:
        self.items = items
        self.resumes = resumes
        self.signals: dict[tuple[str, Hashable], int] = {}  # resume key -> signal time
        self.tokens: list[Token] = []
        self.walked: set[int] = set()
        self.ends: list[int] = []

    def thread(self, tid: int, clock: int) -> None:
        """Walk thread ``tid`` from ``clock`` ns, descending at each Signal into the thread it
        resumes (when not walked already)."""
        self.walked.add(tid)
        for it in self.items[tid]:
            if it.event is None:
                if it.resources:
                    self.tokens.append(Token("Seg", tid, dict(sorted(it.resources.items())), clock))
                clock += int(it.resources.get("cpu_ns", 0.0))
                continue
            if it.resume_key is not None and it.resume_key in self.signals:
                clock = max(clock, self.signals[it.resume_key])
            self.tokens.append(Token(it.event.ev, tid, {}, clock))
            for key in it.signal_keys:
                self.signals[key] = clock
                child = self.resumes.get(key)
                if child is not None and child not in self.walked:
                    self.thread(child, clock)
        self.ends.append(clock)
