"""Paging through a point in time (PIT): open it, read pages with ``search_after``, close it.

Elasticsearch's recommended deep-paging method (Elasticsearch 8 reference, "Paginate search
results"): ``POST /<index>/_pit?keep_alive=2m`` answers ``{"id": "..."}``; each search names the
PIT instead of an index, sorts on ``[@timestamp, _shard_doc]`` and passes the last hit's
``sort`` values as ``search_after``; every answer may carry a newer ``pit_id``;
``DELETE /_pit`` closes it. A cluster without the API (an API subset answering 400/404/405/501)
raises :class:`NoPointInTime` so that the caller can page another way
(:func:`pipeline.sink.search.iter_hits`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from elasticsearch import ApiError, Elasticsearch

from pipeline.records.json import Query, Response
from pipeline.sink.search import ClusterUnavailable, request_errors

log = logging.getLogger(__name__)

Hit = Response
"""One search hit (``_id``, ``_source``, ``sort``...)."""

_UNSUPPORTED = frozenset({400, 404, 405, 501})
"""HTTP statuses with which a cluster lacking the PIT API answers ``POST /<index>/_pit``."""


class NoPointInTime(Exception):
    """The cluster has no point-in-time API (its answer is the message)."""


def _index_missing(err: ApiError) -> bool:
    return err.status_code == 404 and "index_not_found" in str(err.error)


def open_pit(client: Elasticsearch, index: str, keep_alive: str, *, required: bool) -> str | None:
    """Open a point in time on ``index`` (name, data stream or pattern); its id, or None when
    the index does not exist.

    Args:
        keep_alive: how long the PIT lives between two requests (Elasticsearch time unit,
            e.g. ``"2m"``).
        required: True turns a missing PIT API into :data:`~pipeline.sink.search.RequestRejected`
            instead of :class:`NoPointInTime`.

    Raises:
        NoPointInTime: the cluster has no PIT API and ``required`` is False.
        ClusterUnavailable: the cluster cannot answer now.
        RequestRejected: the cluster refused the request.
    """
    with request_errors(f"point in time on {index}"):
        try:
            resp = client.open_point_in_time(index=index, keep_alive=keep_alive)
        except ApiError as err:
            if _index_missing(err):
                return None
            if required or err.status_code not in _UNSUPPORTED:
                raise
            raise NoPointInTime(f"HTTP {err.status_code}: {err.error}") from None
    return str(resp["id"])


def _close_pit(client: Elasticsearch, pit_id: str) -> None:
    try:
        with request_errors("closing a point in time"):
            client.close_point_in_time(id=pit_id)
    except (ApiError, ClusterUnavailable) as err:
        # it expires after keep_alive anyway
        log.warning("could not close point in time (it expires by itself): %s", err)


def pit_pages(
    client: Elasticsearch,
    pit_id: str,
    query: Query,
    *,
    source: Sequence[str] | None,
    page_size: int,
    keep_alive: str,
) -> Iterator[list[Hit]]:
    """Every hit of ``query`` in the point in time ``pit_id`` (from :func:`open_pit`), in
    ``@timestamp`` order, in non-empty pages of at most ``page_size`` hits.

    The PIT is closed when the pages end, fail or the generator is closed early (a failure to
    close it is logged: it expires after ``keep_alive`` anyway).

    Args:
        source: ``_source`` includes (field paths); None reads whole documents.
        page_size: hits per request (Elasticsearch caps a page at 10,000).
        keep_alive: how long the PIT lives between two requests (Elasticsearch time unit).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
        RequestRejected: the cluster refused the query.
    """
    after: list[Any] | None = None
    try:
        while True:
            with request_errors("point-in-time search"):
                resp = client.search(
                    pit={"id": pit_id, "keep_alive": keep_alive},
                    query=dict(query),
                    sort=[{"@timestamp": "asc"}, {"_shard_doc": "asc"}],
                    size=page_size,
                    source_includes=list(source) if source is not None else None,
                    search_after=after,
                    track_total_hits=False,
                )
            pit_id = str(resp.get("pit_id", pit_id))
            hits: list[Hit] = resp["hits"]["hits"]
            if hits:
                yield hits
            if len(hits) < page_size:
                return
            after = list(hits[-1]["sort"])
    finally:
        _close_pit(client, pit_id)
