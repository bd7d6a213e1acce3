"""``logs-iolens.incident`` documents, written once and updated in place while they change.

One document per incident (:class:`pipeline.reducers.incident.Incident`), ``_id`` = the
incident's deterministic id. Data streams take only ``create`` through the stream's name, so a
later revision is written to the backing index that holds the document, with ``if_seq_no`` /
``if_primary_term`` (Elasticsearch's documented way of updating a document in a data stream:
"Update or delete documents in a backing index"); an unchanged incident is not written again,
and a conflict (another instance wrote first) leaves it for the next run.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from elasticsearch import ConflictError, Elasticsearch, NotFoundError

from pipeline.records.json import Response, Source
from pipeline.records.sources import IolensIncidentIolensIncident, IolensIncidentSource
from pipeline.reducers.incident import INCIDENT_DATASET, Incident
from pipeline.sink.documents import DocContext, iso_ms, stream_name
from pipeline.sink.fenced import generation_of
from pipeline.sink.lease import LeaseLost, LeaseStamp
from pipeline.sink.search import request_errors

log = logging.getLogger(__name__)

VOLATILE = ("updated",)
"""Fields of ``iolens.incident`` that change on every write and do not make a revision."""
NOT_COMPARED = ("event", "iolens", "agent")
"""Top-level fields an incident's revisions are not compared on: ``event`` (its ``created``
changes on every write; its start and end are in ``iolens.incident`` too), ``iolens`` (compared
apart, without :data:`VOLATILE`) and ``agent`` (which instance wrote it: another instance taking
over the job does not make a revision)."""


def incident_source(
    ctx: DocContext, inc: Incident, sla: tuple[float, float], created_ms: float
) -> IolensIncidentSource:
    """The document body of one incident; ``@timestamp`` is its start.

    Args:
        ctx: document context.
        inc: the incident.
        sla: ``(percentile, limit in ms)`` of the fio SLA breaches were counted against.
        created_ms: now, Unix ms (``event.created`` and ``iolens.incident.updated``).
    """
    s = inc.span
    start = iso_ms(s.start_s * 1000)
    end = iso_ms(s.last_s * 1000) if s.closed else None
    base = ctx.base("logs", INCIDENT_DATASET, s.start_s * 1000, created_ms)
    host, _ = s.lun.split("/", 1)
    return {
        **base,
        "event": {
            **base["event"],
            "kind": "alert",
            "module": "iolens",
            "start": start,
            **({} if end is None else {"end": end}),
        },
        "host": {"name": host},
        "message": inc.summary,
        "iolens": {"incident": _incident_fields(inc, start, end, sla, created_ms)},
    }


def _incident_fields(
    inc: Incident, start: str, end: str | None, sla: tuple[float, float], created_ms: float
) -> IolensIncidentIolensIncident:
    """The ``iolens.incident`` object of :func:`incident_source`."""
    s = inc.span
    _, device = s.lun.split("/", 1)
    rank, value = inc.persistence if inc.persistence is not None else (None, None)
    return {
        "id": s.id,
        "status": "closed" if s.closed else "open",
        "start": start,
        "end": end,
        "duration_s": round(s.last_s - s.start_s, 3) if s.closed else None,
        "updated": iso_ms(created_ms),
        "lun": s.lun,
        "device": device,
        "peer_group": s.group,
        "metric": s.metric,
        "mount_point": inc.mount_point,
        "windows": s.windows,
        "max_score": s.max_score,
        "persistence_rank": rank,
        "persistence_value": value,
        "jobs": list(inc.jobs),
        "critical_files": list(inc.critical_files),
        "fio_breaches": inc.fio_breaches,
        "fio_jobs": list(inc.fio_jobs),
        "sla": {"percentile": sla[0], "under_ms": sla[1]},
        "summary": inc.summary,
    }


def _comparable(source: Source) -> dict[str, object]:
    """What two revisions of an incident are compared on (:data:`NOT_COMPARED`, :data:`VOLATILE`
    left out)."""
    inc = {k: v for k, v in source["iolens"]["incident"].items() if k not in VOLATILE}
    return {**{k: v for k, v in source.items() if k not in NOT_COMPARED}, "inc": inc}


def write_incidents(
    client: Elasticsearch,
    namespace: str,
    docs: Sequence[tuple[str, IolensIncidentSource]],
    stamp: LeaseStamp | None = None,
) -> int:
    """Create new incidents and update changed ones in place; returns documents written.

    With ``stamp`` (the incident lease's :meth:`~pipeline.sink.lease.Lease.stamp`) each document
    carries it as ``iolens.lease``, and a stored incident of a higher generation is never
    overwritten: its writer holds the job now.

    Args:
        client: the cluster.
        namespace: data stream namespace.
        docs: ``(id, source)`` of every incident of this run.
        stamp: ``{"generation", "holder"}`` of the lease the writes are made under.

    Raises:
        LeaseLost: a stored incident was written by a later generation of the lease.
        ClusterUnavailable: the cluster cannot answer now (the run is repeated later).
    """
    if not docs:
        return 0
    stream = stream_name("logs", INCIDENT_DATASET, namespace)
    existing = _existing(client, stream, [ident for ident, _ in docs])
    written = 0
    for ident, source in docs:
        if stamp is not None:
            _check_generation(ident, existing.get(ident), int(stamp["generation"]))
            source["iolens"]["lease"] = {
                "generation": stamp["generation"],
                "holder": stamp["holder"],
            }
        try:
            with request_errors(f"write of incident {ident}"):
                written += _write(client, stream, ident, source, existing.get(ident))
        except ConflictError:
            log.info("incident %s was written by another instance; it is looked at again", ident)
    return written


def _check_generation(ident: str, hit: Response | None, generation: int) -> None:
    """Raise LeaseLost when the stored incident ``hit`` has a later generation than ours."""
    stored = generation_of(hit["_source"]) if hit else 0
    if stored > generation:
        raise LeaseLost(f"incident {ident} was written by generation {stored}")


def _write(
    client: Elasticsearch, stream: str, ident: str, source: Source, hit: Response | None
) -> int:
    """Create the incident, or update it in place when it changed (``hit``: the stored one);
    returns documents written (0 or 1)."""
    if hit is None:
        client.create(index=stream, id=ident, document=source, refresh=True)
    elif _comparable(hit["_source"]) != _comparable(source):
        client.index(
            index=hit["_index"],
            id=ident,
            document=source,
            if_seq_no=hit["_seq_no"],
            if_primary_term=hit["_primary_term"],
            refresh=True,
        )
    else:
        return 0
    return 1


def _existing(client: Elasticsearch, stream: str, ids: list[str]) -> dict[str, Response]:
    """The stored documents of ``ids`` with their backing index and sequence numbers."""
    try:
        with request_errors(f"search of {stream}"):
            resp = client.search(
                index=stream,
                query={"ids": {"values": ids}},
                seq_no_primary_term=True,
                size=len(ids),
            )
    except NotFoundError:
        return {}
    return {h["_id"]: h for h in resp["hits"]["hits"]}
