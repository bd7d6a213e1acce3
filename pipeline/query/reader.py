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
The requests themselves are the sink's (:mod:`pipeline.sink.pit`, :mod:`pipeline.sink.search`);
this module chooses the reading method and the fallback's order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

from pipeline.records.json import Query, Response
from pipeline.sink.client import Client
from pipeline.sink.pit import NoPointInTime, open_pit, pit_pages
from pipeline.sink.search import FieldCaps, field_caps, iter_hits

log = logging.getLogger(__name__)

Hit = Response
"""One search hit (``_id``, ``_source``, ``sort``...)."""


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


def iter_pages(
    client: Client,
    index: str,
    query: Query,
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
        caps: the index's field capabilities (:func:`~pipeline.sink.search.field_caps`), used
            to sort the fallback on ``keyword`` fields; fetched when needed and not given.
        source: ``_source`` includes (field paths); None reads whole documents.
        page_size: hits per request (Elasticsearch caps a page at 10,000).
        pit: True: use a point in time or fail; False: never; None: use one when the cluster
            supports it.
        keep_alive: how long the PIT lives between two requests (Elasticsearch time unit).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
        RequestRejected: the cluster rejected the query, or (``pit=True``) the PIT.
        ValueError: ``page_size`` outside 1..10,000.
    """
    if not 1 <= page_size <= 10_000:
        raise ValueError(f"page_size must be within 1..10000, not {page_size}")
    if pit is not False:
        try:
            pit_id = open_pit(client, index, keep_alive, required=pit is True)
        except NoPointInTime as why:
            log.info("reading %s with plain search_after: no point-in-time API (%s)", index, why)
        else:
            if pit_id is not None:
                yield from pit_pages(
                    client,
                    pit_id,
                    query,
                    source=source,
                    page_size=page_size,
                    keep_alive=keep_alive,
                )
            return
    sort = _fallback_sort(field_caps(client, index) if caps is None else caps, keys)
    hits = iter_hits(client, index, query, sort, source=source, page_size=page_size)
    yield from _batched(hits, page_size)


def _fallback_sort(caps: FieldCaps, keys: Sequence[str]) -> list[Query]:
    """The plain ``search_after`` order: ``@timestamp``, then the sortable ``keys``, then
    ``_doc``."""
    sort: list[Query] = [{"@timestamp": {"order": "asc"}}]
    for key in keys:
        field = sortable(caps, key)
        if field is not None:
            sort.append({field: {"order": "asc", "unmapped_type": "keyword"}})
    sort.append({"_doc": {"order": "asc"}})
    return sort
