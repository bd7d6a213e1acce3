"""Reading documents back: paged search with ``search_after`` (ES search API, 8.x)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from elasticsearch import ApiError, Elasticsearch, NotFoundError, TransportError


class ClusterUnavailable(Exception):
    """The cluster could not answer a read or delete (connection failure, timeout, 429, 5xx).

    Scheduled jobs catch it and try again at their next tick.
    """


def _unavailable(err: Exception) -> bool:
    if isinstance(err, TransportError):
        return True
    return isinstance(err, ApiError) and (err.status_code == 429 or err.status_code >= 500)


def iter_hits(
    client: Elasticsearch,
    index: str,
    query: Mapping[str, Any],
    sort: Sequence[Mapping[str, Any]],
    *,
    source: Sequence[str] | None = None,
    page_size: int = 1000,
) -> Iterator[Mapping[str, Any]]:
    """Every hit of ``query`` in ``sort`` order, a page at a time.

    ``sort`` must end in a unique combination of fields (``search_after`` needs a total order).
    A missing index yields nothing.
    """
    after: list[Any] | None = None
    while True:
        try:
            resp = client.search(
                index=index,
                query=dict(query),
                sort=[dict(s) for s in sort],
                size=page_size,
                source_includes=list(source) if source is not None else None,
                search_after=after,
            )
        except NotFoundError:
            return
        except (ApiError, TransportError) as err:
            if _unavailable(err):
                raise ClusterUnavailable(f"search of {index} failed: {err}") from err
            raise
        hits = resp["hits"]["hits"]
        yield from hits
        if len(hits) < page_size:
            return
        after = list(hits[-1]["sort"])


def refresh(client: Elasticsearch, index: str) -> None:
    """Make recent writes searchable (ignores a missing index)."""
    try:
        client.indices.refresh(index=index)
    except NotFoundError:
        return
    except (ApiError, TransportError) as err:
        if _unavailable(err):
            raise ClusterUnavailable(f"refresh of {index} failed: {err}") from err
        raise


def delete_by_query(client: Elasticsearch, index: str, query: Mapping[str, Any]) -> int:
    """Delete the documents matching ``query`` (data streams allow it); returns how many."""
    try:
        resp = client.delete_by_query(
            index=index, query=dict(query), refresh=True, conflicts="proceed"
        )
    except NotFoundError:
        return 0
    except (ApiError, TransportError) as err:
        if _unavailable(err):
            raise ClusterUnavailable(f"delete in {index} failed: {err}") from err
        raise
    return int(resp.get("deleted", 0))
