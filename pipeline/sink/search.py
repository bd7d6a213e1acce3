"""Reading documents back and removing superseded ones (ES search / delete-by-query APIs, 8.x).

The one door every reader outside the sink uses: code elsewhere holds a
:data:`pipeline.sink.client.Client` and calls these functions (and
:mod:`pipeline.sink.pit` for point-in-time paging), never the ``elasticsearch`` package.

A missing index reads as empty. Failures that say "try later" (no connection, timeout, 429,
5xx) become :class:`ClusterUnavailable`; other errors (a bad query) propagate as
:data:`RequestRejected`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from elasticsearch import ApiError, Elasticsearch, NotFoundError, TransportError

from pipeline.records.json import Query, Response

log = logging.getLogger(__name__)

FieldCaps = Mapping[str, Mapping[str, Response]]
"""``field_caps`` answer's ``fields``: path -> type name -> capabilities."""

RequestRejected = ApiError
"""The cluster answered a request with an error status (``elasticsearch.ApiError``, named here
so that callers need not import the client package): a bad query, a mapping conflict, a refused
write. ``status_code`` (int, HTTP) and ``error`` (str, the error type) say which. Inside
:func:`request_errors`, 429 and 5xx answers become :class:`ClusterUnavailable` instead.
"""


class ClusterUnavailable(Exception):
    """The cluster could not answer a read or delete (connection failure, timeout, 429, 5xx).

    Scheduled jobs catch it and try again at their next tick.
    """


class _Missing(Exception):
    pass


@contextmanager
def request_errors(what: str) -> Iterator[None]:
    """Turn "try later" failures of the requests inside into :class:`ClusterUnavailable`."""
    try:
        yield
    except TransportError as err:
        raise ClusterUnavailable(f"{what} failed: {err}") from err
    except ApiError as err:
        if err.status_code == 429 or err.status_code >= 500:
            raise ClusterUnavailable(f"{what} failed: {err}") from err
        raise


@contextmanager
def _request(what: str) -> Iterator[None]:
    try:
        with request_errors(what):
            yield
    except NotFoundError:
        raise _Missing from None


def iter_hits(
    client: Elasticsearch,
    index: str,
    query: Query,
    sort: Sequence[Query],
    *,
    source: Sequence[str] | None = None,
    page_size: int = 1000,
) -> Iterator[Response]:
    """Every hit of ``query`` in ``sort`` order, a page at a time.

    ``sort`` must end in a unique combination of fields (``search_after`` needs a total order).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    after: list[Any] | None = None
    while True:
        try:
            with _request(f"search of {index}"):
                hits = _page(client, index, query, sort, source, page_size, after)
        except _Missing:
            return
        yield from hits
        if len(hits) < page_size:
            return
        after = list(hits[-1]["sort"])


def _page(
    client: Elasticsearch,
    index: str,
    query: Query,
    sort: Sequence[Query],
    source: Sequence[str] | None,
    page_size: int,
    after: list[Any] | None,
) -> list[Response]:
    """One page of hits: at most ``page_size``, those after the sort values ``after``."""
    resp = client.search(
        index=index,
        query=dict(query),
        sort=[dict(s) for s in sort],
        size=page_size,
        source_includes=list(source) if source is not None else None,
        search_after=after,
    )
    hits: list[Response] = resp["hits"]["hits"]
    return hits


def search(client: Elasticsearch, index: str, **body: Any) -> Response | None:
    """One search request's answer (the ``_search`` response body: ``hits``, ``aggregations``);
    None when ``index`` does not exist (nothing was indexed yet).

    Args:
        client: the cluster.
        index: index, data stream or pattern.
        body: the request's keyword arguments (``query``, ``aggs``, ``size``, ``sort``...).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
        RequestRejected: the cluster refused the request (e.g. a bad query).
    """
    try:
        with _request(f"search of {index}"):
            resp: Response = client.search(index=index, **body).body
    except _Missing:
        return None
    return resp


def field_caps(client: Elasticsearch, index: str) -> FieldCaps:
    """Every field of ``index`` (a name or pattern) with its types (``_field_caps``).

    A missing index gives ``{}``.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
        RequestRejected: the cluster refused the request.
    """
    with request_errors(f"field capabilities of {index}"):
        resp = client.field_caps(
            index=index, fields="*", ignore_unavailable=True, allow_no_indices=True
        )
    fields: FieldCaps = resp.get("fields", {})
    return fields


def refresh(client: Elasticsearch, index: str) -> None:
    """Make recent writes searchable.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    try:
        with _request(f"refresh of {index}"):
            client.indices.refresh(index=index)
    except _Missing:
        return


def newest(client: Elasticsearch, index: str, field: str = "@timestamp") -> Any:
    """The largest value of ``field`` in ``index`` (None when it holds no document); a date
    as its sort value, epoch ms.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    return _first(client, index, field, "desc")


def oldest(client: Elasticsearch, index: str, field: str = "@timestamp") -> Any:
    """The smallest value of ``field`` in ``index`` (None when it holds no document); a date
    as its sort value, epoch ms.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    return _first(client, index, field, "asc")


def _first(client: Elasticsearch, index: str, field: str, order: str) -> Any:
    """The first sort value of ``field`` in ``index`` in ``order`` (None: no document)."""
    try:
        with _request(f"search of {index}"):
            hits = _page(client, index, {"match_all": {}}, [{field: order}], [field], 1, None)
    except _Missing:
        return None
    return hits[0]["sort"][0] if hits else None


def latest_per(client: Elasticsearch, index: str, field: str, since_s: float) -> dict[str, float]:
    """Each value of the keyword ``field`` -> the ``@timestamp`` (Unix s) of its latest document
    in ``index`` after ``since_s``: one ``terms`` aggregation with a ``top_hits`` of one per
    value. Empty for a missing index, or a cluster that refuses the aggregation (said).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    newest = {"size": 1, "sort": [{"@timestamp": "desc"}], "_source": ["@timestamp"]}
    aggs = {
        "by": {"terms": {"field": field, "size": 10000}, "aggs": {"last": {"top_hits": newest}}}
    }
    query = {"range": {"@timestamp": {"gt": int(since_s * 1000), "format": "epoch_millis"}}}
    try:
        with _request(f"search of {index}"):
            resp = client.search(index=index, query=query, aggs=aggs, size=0)
    except _Missing:
        return {}
    except ApiError as err:
        log.warning("%s: the latest document per %s is not known (%s)", index, field, err)
        return {}
    out: dict[str, float] = {}
    for bucket in resp["aggregations"]["by"]["buckets"]:
        [hit] = bucket["last"]["hits"]["hits"]
        iso = str(hit["_source"]["@timestamp"]).replace("Z", "+00:00")
        out[str(bucket["key"])] = datetime.fromisoformat(iso).timestamp()
    return out


def count(client: Elasticsearch, index: str, query: Query) -> int:
    """Number of documents of ``index`` matching ``query`` (0 when it does not exist yet).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    try:
        with _request(f"count in {index}"):
            resp = client.count(index=index, query=dict(query))
    except _Missing:
        return 0
    return int(resp["count"])


def delete_by_query(client: Elasticsearch, index: str, query: Query) -> int:
    """Delete the documents matching ``query`` (data streams allow it); returns how many.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    try:
        with _request(f"delete in {index}"):
            resp = client.delete_by_query(
                index=index, query=dict(query), refresh=True, conflicts="proceed"
            )
    except _Missing:
        return 0
    return int(resp.get("deleted", 0))
