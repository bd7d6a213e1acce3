"""Extracted requests as JSON-able rows for ``iolens requests extract --json`` (seed 002).

One row per request (:func:`request_dict`: times in ns and ms, its canonical form, and its
cluster with ``--cluster``); a stitched request adds its machines and clock offsets
(:func:`stitch_dict`); unattached fragments and the workload model get rows of their own.
These rows are JSON lines written whole (``JsonObject``); the clock offsets and endpoints in
them are typed rows (:class:`ClockOffsetRow`, :class:`EndpointRow`) the text report reads too.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypedDict

from pipeline.records.json import JsonObject
from pipeline.reducers.canonical import Canonical
from pipeline.reducers.clock_offset import ClockOffset
from pipeline.reducers.fragment_join import StitchedRequest
from pipeline.reducers.fragments import Endpoint
from pipeline.reducers.request_cluster import Assignment, Clusterer
from pipeline.reducers.request_record import Request
from pipeline.reducers.stitch import Unattached


def request_dict(
    r: Request, c: Canonical, n: int | None, assignment: Assignment | None, outlier: bool | None
) -> JsonObject:
    """One request as JSON-able values (times in ns and ms): ``request`` (its number ``n``;
    None: no such key, the number is given later), then its fields."""
    out: JsonObject = {
        "start_ns": r.start_ns,
        "end_ns": r.end_ns,
        "duration_ms": (r.end_ns - r.start_ns) / 1e6,
        "complete": r.complete,
        "attributes": {k: list(v) for k, v in r.attributes.items()},
        "resources": r.resources,
        "events": [{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in r.events],
        "canonical": c.text(),
        "critical_path_ms": c.critical_path_ns / 1e6,
        "threads": c.threads,
    }
    if assignment is not None:
        out |= {"cluster": assignment.cluster, "distance": assignment.distance, "outlier": outlier}
    return out if n is None else {"request": n, **out}


def model_dict(model: Clusterer, measured: dict[str, float]) -> JsonObject:
    """The workload model: its clusters (:meth:`Clusterer.summary`), the model error per
    resource against ``measured`` and the threshold."""
    return {
        "clusters": model.summary(),
        "model_error": model.model_error(measured),
        "threshold": model.threshold,
    }


class ClockOffsetRow(TypedDict):
    """A clock offset as JSON-able values: :class:`ClockOffset`'s fields (ns: ``offset_ns``,
    ``lower_ns`` and ``upper_ns``, None without messages that way; ``messages``), then
    ``consistent`` (False when the bounds cross)."""

    offset_ns: int
    lower_ns: int | None
    upper_ns: int | None
    messages: int
    consistent: bool


class EndpointRow(TypedDict):
    """An endpoint as JSON-able values: its ``machine``, its ``event`` type (the sender's or
    the receiver's), the ``attribute`` and ``value`` that pair it, ``sends`` (True for the
    sender) and ``ts`` (ns on its machine's clock)."""

    machine: str
    event: str
    attribute: str
    value: Hashable
    sends: bool
    ts: int


def offset_dict(c: ClockOffset) -> ClockOffsetRow:
    """A clock offset as JSON-able values (ns): its fields, then ``consistent``."""
    return {
        "offset_ns": c.offset_ns,
        "lower_ns": c.lower_ns,
        "upper_ns": c.upper_ns,
        "messages": c.messages,
        "consistent": c.consistent,
    }


def endpoint_dict(e: Endpoint) -> EndpointRow:
    """An endpoint as JSON-able values: its event, attribute and value, machine and time."""
    src, attr, dst = e.sync
    return {
        "machine": e.machine,
        "event": src if e.sends else dst,
        "attribute": attr,
        "value": e.value,
        "sends": e.sends,
        "ts": e.ts_ns,
    }


def stitch_dict(s: StitchedRequest) -> JsonObject:
    """What a stitched request adds to :func:`request_dict`: its seed's machine, the machines
    it spans, their clocks' offsets from the seed machine's, its fragments and unmatched
    endpoints."""
    return {
        "machine": s.machine,
        "machines": list(s.machines),
        "clock_offsets": {m: offset_dict(c) for m, c in s.offsets.items()},
        "fragments": s.fragments,
        "unmatched": [endpoint_dict(e) for e in s.unmatched],
    }


def unattached_dict(u: Unattached) -> JsonObject:
    """An unattached fragment as JSON-able values: ``{"unattached": {...}}``."""
    r = u.fragment.request
    return {
        "unattached": {
            "machine": u.fragment.machine,
            "reason": str(u.reason),
            "start_ns": r.start_ns,
            "end_ns": r.end_ns,
            "complete": r.complete,
            "resources": r.resources,
            "endpoints": [endpoint_dict(e) for e in u.fragment.endpoints],
            "events": [{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in r.events],
        }
    }
