"""Canonical requests: synchronisation points, resource demands and a deterministic string
(seed 002, section 4 and 4.3; reference/magpie-servicerate.md A.5).

A request's events are laid out per thread (the schema's ``thread_attr``, ``tid``). Each
``sync`` triple ``[source, attribute, destination]`` of the schema links a *Signal* (the
source event, on one thread) to a *Resume* (the destination event with the same value of the
attribute, on the thread that waits or is woken). The attribute may be missing from the source
event: then the value the source's thread last carried for it is used (the seed's "transitively
shared through other joined events on the same thread").

Between consecutive tokens of a thread, its resource demands are summed into one *segment*:
the CPU of the context-switch slices charged to the request in that stretch (the application's
own ``cpu_ns`` when the request has no slices), and every other resource of its events. The
request is then scheduled as if on unlimited CPUs: a thread runs its segments back to back,
waits at a Resume until its Signal has happened, and starts at the Signal that resumes it; the
*critical path* is when the last thread ends. Disk and network transfers take no time in this
schedule (only their amounts are kept).

The serialisation walks the binary tree that the synchronisations overlay, depth first: the
seed's thread in time order, descending at each Signal into the thread that resumes on it
(when that thread is not being walked already), then any thread not reached that way, in order
of first event. Tokens are the seed, every Signal and Resume event, the root thread's last
event, and the non-empty segments (``Seg``), each with its resource vector::

    ReqStart Fork TaskStart Seg[cpu_ns=15.1ms] TaskEnd Seg[cpu_ns=15.1ms] Join ReqEnd
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.records.json import JsonObject
from pipeline.reducers.request_record import Request, hashable

NO_THREAD = -1
"""The thread of events that carry none (or one the request does not bind): the root's."""


@dataclass(frozen=True, slots=True)
class Token:
    """One token of a serialised request.

    Attributes:
        kind: the event type, or ``Seg`` for a segment of resource demands.
        tid: the thread it is on.
        resources: resource name -> amount (``cpu_ns``, ``disk_bytes``...; empty for events).
        start_ns: when it starts in the canonical schedule, ns from the request's start.
    """

    kind: str
    tid: int
    resources: Mapping[str, float]
    start_ns: int


@dataclass(frozen=True)
class Canonical:
    """A request in canonical form.

    Attributes:
        tokens: the deterministic serialisation.
        critical_path_ns: its length on unlimited CPUs.
        threads: threads it ran on.
        resources: its total demands (as in the tokens: canonical CPU in ``cpu_ns``).
    """

    tokens: tuple[Token, ...]
    critical_path_ns: int
    threads: int
    resources: Mapping[str, float]

    def text(self) -> str:
        """The serialisation as text: ``ReqStart Seg[cpu_ns=30.1ms] ReqEnd``."""
        return " ".join(_token_text(t) for t in self.tokens)

    def to_json(self) -> JsonObject:
        """Plain values (JSON): ``tokens`` as ``[kind, tid, resources, start_ns]`` lists."""
        return {
            "tokens": [[t.kind, t.tid, dict(t.resources), t.start_ns] for t in self.tokens],
            "critical_path_ns": self.critical_path_ns,
            "threads": self.threads,
            "resources": dict(self.resources),
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> Canonical:
        """The inverse of :meth:`to_json`.

        Raises:
            KeyError, TypeError, ValueError: ``data`` is not what :meth:`to_json` writes.
        """
        tokens = tuple(
            Token(str(kind), int(tid), {str(k): float(v) for k, v in res.items()}, int(start))
            for kind, tid, res, start in data["tokens"]
        )
        resources = {str(k): float(v) for k, v in data["resources"].items()}
        return cls(tokens, int(data["critical_path_ns"]), int(data["threads"]), resources)


def _token_text(t: Token) -> str:
    if t.kind != "Seg":
        return t.kind
    parts = []
    for name, v in t.resources.items():
        if name.endswith("_ns"):
            parts.append(f"{name}={v / 1e6:.1f}ms")
        elif name.endswith("_bytes"):
            parts.append(f"{name}={v / 1024:.1f}KiB")
        else:
            parts.append(f"{name}={v:g}")
    return f"Seg[{','.join(parts)}]"


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
