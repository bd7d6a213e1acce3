"""Documents of extracted requests and of the workload model (seed 002).

One ``logs-iolens.request`` document per request: when it ran (``@timestamp`` is its first
event), the join attribute values it bound (``attributes``: ``name=value`` keywords, e.g.
``conn=10.0.0.1:50282>10.0.0.2:80``), its resource totals, its events, its canonical form and
critical path, and, when clustered, its cluster and outlier flag. One
``metrics-iolens.workload_model`` document per cluster of a model snapshot: its size and share,
its representative, diameter and separation, and the snapshot's model error.

Event timestamps are a machine's monotonic clock; ``wall_offset_ns`` (wall-clock ns minus
monotonic ns on that machine, see :func:`wall_offset`) turns them into dates. Document ids
come from the host and the seed event, so a request read again is a 409.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.events import Event
from pipeline.records.sources import (
    IolensRequestIolensRequest,
    IolensRequestSource,
    IolensWorkloadModelIolensWorkloadModel,
    IolensWorkloadModelSource,
)
from pipeline.reducers.canonical import Canonical
from pipeline.reducers.request_cluster import Assignment, Clusterer
from pipeline.reducers.request_record import Request
from pipeline.sink.documents import DocContext, iso_ms, stream_name

REQUEST_DATASET = "iolens.request"
MODEL_DATASET = "iolens.workload_model"
CLOCK_EVENT = "ClockSync"
"""An event type that pairs the monotonic ``ts`` with the wall clock (``wall_ns``)."""


def wall_offset(events: Iterable[Event]) -> int | None:
    """Wall-clock minus monotonic ns, from the first ``ClockSync`` event
    (``{"ts": <monotonic ns>, "ev": "ClockSync", "wall_ns": <time.time_ns()>}``); None
    without one."""
    for e in events:
        if e.ev == CLOCK_EVENT and isinstance(e.attrs.get("wall_ns"), int):
            return int(e.attrs["wall_ns"]) - e.ts_ns
    return None


def request_id(host: str, r: Request) -> str:
    """The request's id: its host and its first seed event (time, type, attributes)."""
    seed = r.seed
    return doc_id(REQUEST_DATASET, host, seed.ts_ns, seed.ev, sorted(seed.attrs.items()))


def request_document(
    ctx: DocContext,
    host: str,
    r: Request,
    c: Canonical,
    wall_offset_ns: int,
    refs: tuple[LineRef, ...],
    created_ms: float,
    assignment: Assignment | None = None,
    outlier: bool | None = None,
    model: str | None = None,
    rid: str | None = None,
) -> Document:
    """The ``logs-iolens.request`` document of one request (``model``: the name of the workload
    model its cluster belongs to; ``rid``: its :func:`request_id` when already known)."""
    start_ms = (r.start_ns + wall_offset_ns) / 1e6
    base = ctx.base("logs", REQUEST_DATASET, start_ms, created_ms)
    req = _request_fields(host, r, c, wall_offset_ns, rid, base["@timestamp"])
    if assignment is not None:
        req["cluster"] = assignment.cluster
        req["distance"] = assignment.distance
        req["outlier"] = bool(outlier)
    if model is not None:
        req["model"] = model
    source: IolensRequestSource = {
        **base,
        "event": {**base["event"], "kind": "event", "duration": r.end_ns - r.start_ns},
        "host": {"name": host},
        "iolens": {"request": req},
    }
    index = stream_name("logs", REQUEST_DATASET, ctx.namespace)
    return Document(index, req["id"], source, refs)


def _request_fields(
    host: str,
    r: Request,
    c: Canonical,
    wall_offset_ns: int,
    rid: str | None = None,
    start: str | None = None,
) -> IolensRequestIolensRequest:
    """The ``iolens.request.*`` fields of a request and its canonical form (no clustering;
    ``rid`` and ``start``: its id and start date when already known)."""
    return {
        "id": request_id(host, r) if rid is None else rid,
        "start": iso_ms((r.start_ns + wall_offset_ns) / 1e6) if start is None else start,
        "end": iso_ms((r.end_ns + wall_offset_ns) / 1e6),
        "duration_ms": (r.end_ns - r.start_ns) / 1e6,
        "complete": r.complete,
        "seeds": r.seeds,
        "attributes": sorted({f"{k}={v}" for k, vs in r.attributes.items() for v in vs}),
        "resources": dict(r.resources),
        "event_count": len(r.events),
        "event_types": sorted({e.ev for e in r.events}),
        "threads": c.threads,
        "canonical": c.text(),
        "critical_path_ms": c.critical_path_ns / 1e6,
    }


def model_documents(
    ctx: DocContext,
    host: str,
    model: Clusterer,
    measured: Mapping[str, float],
    when_ms: float,
    created_ms: float,
    name: str | None = None,
) -> Iterator[Document]:
    """One ``metrics-iolens.workload_model`` document per cluster of the model as it is at
    ``when_ms`` (the snapshot: host, model name and time)."""
    named = (host,) if name is None else (host, name)
    snapshot = doc_id(MODEL_DATASET, *named, round(when_ms))
    errors = {k: v for k, v in model.model_error(measured).items() if v is not None}
    requests = sum(cl.size for cl in model.clusters)
    index = stream_name("metrics", MODEL_DATASET, ctx.namespace)
    for cluster in model.summary():
        fields: IolensWorkloadModelIolensWorkloadModel = {
            "snapshot": snapshot,
            **({"model": name} if name is not None else {}),
            **cluster,
            "threshold": model.threshold,
            "requests": requests,
            "model_error": errors,
        }
        source: IolensWorkloadModelSource = {
            **ctx.base("metrics", MODEL_DATASET, when_ms, created_ms),
            "host": {"name": host},
            "iolens": {"workload_model": fields},
        }
        yield Document(index, doc_id(snapshot, cluster["cluster"]), source, ())
