"""Reading every hit of a query a page at a time: point-in-time + ``search_after``.

Elasticsearch's recommended deep-paging method (Elasticsearch 8 reference, "Paginate search
results"): open a point in time (PIT) on the index, page with ``search_after`` on
``[@timestamp, _shard_doc]``, close the PIT. A cluster without the PIT API (an API subset
answering 400/404/405/501 to ``POST /<index>/_pit``) is read with plain ``search_after`` through
:func:`pipeline.sink.search.iter_hits`, sorted on ``@timestamp`` and fields that identify a
document (a table's keys, resolved to their sortable ``keyword`` form with the field
capabilities API), then ``_doc``.

A missing index (404 ``index_not_found_exception``) reads as no hits. "Try later" failures
(no connection, timeout, 429, 5xx) raise :class:`~pipeline.sink.search.ClusterUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from elasticsearch import ApiError, Elasticsearch

from pipeline.sink.search import ClusterUnavailable, iter_hits, request_errors

log = logging.getLogger(__name__)

Hit = Mapping[str, Any]
FieldCaps = Mapping[str, Mapping[str, Mapping[str, Any]]]
"""``field_caps`` answer's ``fields``: path -> type name -> capabilities."""

_UNSUPPORTED = frozenset({400, 404, 405, 501})


def _index_missing(err: ApiError) -> bool:
    return err.status_code == 404 and "index_not_found" in str(err.error)


def field_caps(client: Elasticsearch, index: str) -> FieldCaps:
    """Every field of ``index`` (a name or pattern) with its types (``_field_caps``).

    A missing index gives ``{}``.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    with request_errors(f"field capabilities of {index}"):
        resp = client.field_caps(
            index=index, fields="*", ignore_unavailable=True, allow_no_indices=True
        )
    fields: FieldCaps = resp.get("fields", {})
    return fields


def data_fields(caps: FieldCaps) -> dict[str, set[str]]:
    """Document fields and their types: no metadata (``_id``...), objects or multi-fields."""
    out: dict[str, set[str]] = {}
    for path, by_type in caps.items():
        types = set(by_type)
        if path.startswith("_") or types <= {"object", "nested"}:
            continue
        parent = path.rsplit(".", 1)[0] if "." in path else ""
        if parent and parent in caps and not set(caps[parent]) <= {"object", "nested"}:
            continue  # a multi-field such as ``name.keyword``
        out[path] = types
    return out


def sortable(caps: FieldCaps, path: str) -> str | None:
    """``path`` if it is aggregatable (sortable, exact for ``terms``), else its ``.keyword``
    multi-field if that is, else None (e.g. absent from every document)."""
    for candidate in (path, f"{path}.keyword"):
        by_type = caps.get(candidate)
        if by_type and all(c.get("aggregatable", False) for c in by_type.values()):
            return candidate
    return None


def _batched(hits: Iterator[Hit], size: int) -> Iterator[list[Hit]]:
    page: list[Hit] = []
    for hit in hits:
        page.append(hit)
        if len(page) == size:
            yield page
            page = []
    if page:
        yield page


class _NoPit(Exception):
    """The cluster has no point-in-time API."""


def _open_pit(client: Elasticsearch, index: str, keep_alive: str, required: bool) -> str | None:
    """The PIT id; None when the index is missing.

    Raises:
        _NoPit: the cluster has no PIT API and ``required`` is False.
    """
    with request_errors(f"point in time on {index}"):
        try:
            resp = client.open_point_in_time(index=index, keep_alive=keep_alive)
        except ApiError as err:
            if _index_missing(err):
                return None
            if required or err.status_code not in _UNSUPPORTED:
                raise
            raise _NoPit(f"HTTP {err.status_code}: {err.error}") from None
    return str(resp["id"])


def _close_pit(client: Elasticsearch, pit_id: str) -> None:
    try:
        with request_errors("closing a point in time"):
            client.close_point_in_time(id=pit_id)
    except (ApiError, ClusterUnavailable) as err:
        # it expires after keep_alive anyway
        log.warning("could not close point in time (it expires by itself): %s", err)


def _pit_pages(
    client: Elasticsearch,
    pit_id: str,
    query: Mapping[str, Any],
    source: Sequence[str] | None,
    page_size: int,
    keep_alive: str,
) -> Iterator[list[Hit]]:
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


def iter_pages(
    client: Elasticsearch,
    index: str,
    query: Mapping[str, Any],
    *,
    keys: Sequence[str] = (),
    caps: FieldCaps | None = None,
    source: Sequence[str] | None = None,
    page_size: int = 5000,
    pit: bool | None = None,
    keep_alive: str = "2m",
) -> Iterator[list[Hit]]:
    """Every hit of ``query`` on ``index``, in pages of at most ``page_size`` hits.

    Hits come in ``@timestamp`` order. Stopping early (closing the generator) closes the PIT.

    Args:
        client: the cluster.
        index: index, data stream or pattern.
        query: the ``query`` clause.
        keys: fields identifying a document together with ``@timestamp``, for the plain
            ``search_after`` fallback (see the module docstring).
        caps: the index's field capabilities (:func:`field_caps`), used to sort the fallback
            on ``keyword`` fields; fetched when needed and not given.
        source: ``_source`` includes (field paths); None reads whole documents.
        page_size: hits per request (Elasticsearch caps a page at 10,000).
        pit: True: use a point in time or fail; False: never; None: use one when the cluster
            supports it.
        keep_alive: how long the PIT lives between two requests (Elasticsearch time unit).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
        elasticsearch.ApiError: the cluster rejected the query, or (``pit=True``) the PIT.
        ValueError: ``page_size`` outside 1..10,000.
    """
    if not 1 <= page_size <= 10_000:
        raise ValueError(f"page_size must be within 1..10000, not {page_size}")
    if pit is not False:
        try:
            pit_id = _open_pit(client, index, keep_alive, required=pit is True)
        except _NoPit as why:
            log.info("reading %s with plain search_after: no point-in-time API (%s)", index, why)
        else:
            if pit_id is not None:
                yield from _pit_pages(client, pit_id, query, source, page_size, keep_alive)
            return
    sort = _fallback_sort(field_caps(client, index) if caps is None else caps, keys)
    hits = iter_hits(client, index, query, sort, source=source, page_size=page_size)
    yield from _batched(hits, page_size)


def _fallback_sort(caps: FieldCaps, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The plain ``search_after`` order: ``@timestamp``, then the sortable ``keys``, then
    ``_doc``."""
    sort: list[dict[str, Any]] = [{"@timestamp": {"order": "asc"}}]
    for key in keys:
        field = sortable(caps, key)
        if field is not None:
            sort.append({field: {"order": "asc", "unmapped_type": "keyword"}})
    sort.append({"_doc": {"order": "asc"}})
    return sort
