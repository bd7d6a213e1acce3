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
from typing import Any, NamedTuple

from pipeline.records.event_schema import EventSchema
from pipeline.records.events import Event
from pipeline.records.json import JsonObject
from pipeline.reducers.request_record import Request, hashable

NO_THREAD = -1
"""The thread of events that carry none (or one the request does not bind): the root's."""


class Token(NamedTuple):
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
        return " ".join([_token_text(t) for t in self.tokens])

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
    units = _UNITS
    for name, v in t.resources.items():
        unit = units.get(name)
        if unit is None:
            unit = units[name] = _unit(name)
        prefix, scale, suffix = unit
        parts.append(f"{prefix}{v / scale:.1f}{suffix}" if scale else f"{prefix}{v:g}")
    return f"Seg[{','.join(parts)}]"


def _unit(name: str) -> tuple[str, float, str]:
    """How an amount of resource ``name`` is written: ``name=``, its scale and unit (scale 0:
    as it is, ``%g``)."""
    if name.endswith("_ns"):
        return f"{name}=", 1e6, "ms"
    if name.endswith("_bytes"):
        return f"{name}=", 1024, "KiB"
    return f"{name}=", 0, ""


_UNITS: dict[str, tuple[str, float, str]] = {}
"""Resource name -> :func:`_unit`."""


Segment = dict[str, float]
"""A thread's resource demands between two of its tokens (resource name -> amount)."""


_Mark = tuple[Event, tuple[str, Hashable] | None, tuple[str, Hashable] | None]
"""A token event of a thread: the event, the key it resumes on and the key it signals
(``(destination event, value)``; None when it does neither)."""


Item = Segment | _Mark


class _Thread:
    """One thread's items as they are laid out: its tokens and segments, the open segment,
    what its events carried so far (attribute -> last value) and the keys it resumes on."""

    __slots__ = ("carried", "items", "resumes", "seg")

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.seg: Segment = {}
        self.carried: dict[str, object] = {}
        self.resumes: list[tuple[str, Hashable]] = []


def canonical(request: Request, schema: EventSchema) -> Canonical:
    """The canonical form of ``request`` (see the module docstring).

    One pass over the events lays out every thread's items (tokens and the segments between
    them); the threads' Resume keys are then registered in order of each thread's first event.

    Raises:
        KeyError: an event of a type the schema does not declare.
        IndexError: a request without events (the join emits none).
    """
    thread_attr = schema.parser.thread_attr
    threads = set(request.attributes.get(thread_attr, ()))
    seed, last = request.seed, request.events[-1]
    root = _tid(seed.attrs.get(thread_attr), threads)
    use_slices = bool(request.cpu)
    layout = schema.layout_roles
    laid: dict[int, _Thread] = {}
    for e in request.events:
        attrs = e.attrs
        tid = attrs.get(thread_attr)  # _tid(), inline: it is asked for every event
        if not isinstance(tid, int) or tid not in threads or tid == NO_THREAD:
            tid = root
        th = laid.get(tid)
        if th is None:
            th = laid[tid] = _Thread()
        th.carried.update(attrs)
        seg = th.seg
        resource_keys, src, dst_attr = layout[e.ev]
        for attr_name, resource in resource_keys:
            if use_slices and resource == "cpu_ns":
                continue
            v = attrs.get(attr_name)
            if isinstance(v, int | float) and not isinstance(v, bool):
                seg[resource] = seg.get(resource, 0.0) + v
        if not (e is seed or src is not None or dst_attr is not None or e is last):
            continue
        if seg:
            th.items.append(seg)
            th.seg = {}
        signal_key = resume_key = None
        if src is not None:
            signal_key = (src[1], hashable(th.carried.get(src[0])))
        if dst_attr is not None:
            resume_key = (e.ev, hashable(th.carried.get(dst_attr)))
            th.resumes.append(resume_key)
        th.items.append((e, resume_key, signal_key))
    resumes: dict[tuple[str, Hashable], int] = {}  # (dst event, value) -> thread resuming
    items: dict[int, list[Item]] = {}
    for tid, th in laid.items():
        if th.seg:
            th.items.append(th.seg)
        items[tid] = th.items
        for key in th.resumes:
            resumes.setdefault(key, tid)
    if request.cpu:
        _add_slices(request, items, root)
    return _schedule(request, items, resumes, root)


def _tid(tid: object, threads: set[Any]) -> int:
    """The thread an event is on: its thread attribute when the request bound it."""
    return tid if isinstance(tid, int) and tid in threads else NO_THREAD


def _add_slices(request: Request, items: dict[int, list[Item]], root: int) -> None:
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
            if isinstance(it, dict):
                continue
            if it[0].ts_ns < c.end_ns:
                at = i + 1
            else:
                break
        target = seq[at] if at < len(seq) else None
        if not isinstance(target, dict):
            target = {}
            seq.insert(at, target)
        target["cpu_ns"] = target.get("cpu_ns", 0.0) + (c.end_ns - c.start_ns)


def _first_ts(seq: list[Item], default: int) -> int:
    return next((it[0].ts_ns for it in seq if not isinstance(it, dict)), default)


def _schedule(
    request: Request,
    items: dict[int, list[Item]],
    resumes: dict[tuple[str, Hashable], int],
    root: int,
) -> Canonical:
    """Every thread's tokens timed on unlimited CPUs, walked from the root thread, then the
    threads no Signal reached in order of first event (see the module docstring)."""
    walk = _Walk(items, resumes)
    walk.thread(root, 0)
    if len(walk.walked) < len(items):
        for tid in sorted(
            (t for t in items if t not in walk.walked), key=lambda t: _first_ts(items[t], 0)
        ):
            first = _first_ts(items[tid], request.start_ns)
            walk.thread(tid, max(0, first - request.start_ns))
    totals = walk.totals
    critical_path_ns = max(walk.ends, default=0)
    return Canonical(tuple(walk.tokens), critical_path_ns, len(items), dict(sorted(totals.items())))


class _Walk:
    """The depth-first walk of the serialisation: tokens in order, each with its start."""

    def __init__(
        self, items: dict[int, list[Item]], resumes: dict[tuple[str, Hashable], int]
    ) -> None:
        self.items = items
        self.resumes = resumes
        self.signals: dict[tuple[str, Hashable], int] = {}  # resume key -> signal time
        self.tokens: list[Token] = []
        self.walked: set[int] = set()
        self.ends: list[int] = []
        self.totals: dict[str, float] = {}  # resource -> summed over the segments, in order

    def thread(self, tid: int, clock: int) -> None:
        """Walk thread ``tid`` from ``clock`` ns, descending at each Signal into the thread it
        resumes (when not walked already)."""
        self.walked.add(tid)
        tokens, signals, new, totals = self.tokens, self.signals, tuple.__new__, self.totals
        for it in self.items[tid]:
            if isinstance(it, dict):
                if it:
                    tokens.append(new(Token, ("Seg", tid, dict(sorted(it.items())), clock)))
                    for k, v in it.items():
                        totals[k] = totals.get(k, 0.0) + v
                clock += int(it.get("cpu_ns", 0.0))
                continue
            event, resume_key, key = it
            if resume_key is not None and resume_key in signals:
                clock = max(clock, signals[resume_key])
            tokens.append(new(Token, (event.ev, tid, {}, clock)))
            if key is not None:
                signals[key] = clock
                child = self.resumes.get(key)
                if child is not None and child not in self.walked:
                    self.thread(child, clock)
        self.ends.append(clock)
