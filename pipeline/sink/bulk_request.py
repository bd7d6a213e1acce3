"""The middle stage of the bulk path: send one chunk and read what came back.

One ``client.bulk(operations=..., filter_path=...)`` call (elasticsearch-py
``helpers/actions.py`` ``_process_bulk_chunk``, elastic.md §6.4), with errors returned, not
raised: the caller gets the paired items (:mod:`pipeline.sink.responses`) or ``None`` when
there is no usable answer, and owns the retry loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, cast

from elasticsearch import ApiError, Elasticsearch, TransportError

from pipeline.records.core import Document
from pipeline.records.json import Query
from pipeline.sink.actions import ndjson
from pipeline.sink.responses import BulkItem, pair_items, spread_failure

log = logging.getLogger(__name__)

FILTER_PATH = "errors,items.*.status,items.*.error.type,items.*.error.reason"
"""Only what the pairing stage reads from a bulk response (elastic.md §6.3)."""

_SPOOL_NOT_DLQ = frozenset({401, 403})
"""Whole-request statuses that mean "fix the credentials", not "this document is bad"."""


def send_chunk(client: Elasticsearch, docs: Sequence[Document]) -> list[BulkItem] | None:
    """Send one chunk. ``None`` = no answer (transport failure, refused credentials, unusable
    response): the chunk is to be spooled; else the paired items.

    A whole-request error status is spread over the chunk's items (:func:`spread_failure`).
    The documents must have passed :func:`~pipeline.sink.actions.expand` (so they serialise).
    """
    payload = ndjson(docs)
    try:
        # The body goes as encoded NDJSON bytes (elastic-transport's NDJSON serializer
        # forwards bytes as they are): each source is encoded once, by orjson.
        response = client.bulk(operations=cast("Sequence[Query]", payload), filter_path=FILTER_PATH)
    except ApiError as err:
        return _request_failed(docs, int(err.status_code or 0), str(err.message))
    except TransportError as err:
        log.warning("bulk request of %s documents got no answer: %s", len(docs), err)
        return None
    body: Any = getattr(response, "body", response)
    try:
        return pair_items(docs, body)
    except ValueError as err:
        log.error("unusable bulk response (%s); spooling the chunk", err)
        return None


def _request_failed(docs: Sequence[Document], status: int, reason: str) -> list[BulkItem] | None:
    """The items of a request refused as a whole, or ``None`` for refused credentials."""
    log.warning("bulk request of %s documents failed: %s %s", len(docs), status, reason)
    if status in _SPOOL_NOT_DLQ:
        log.error(
            "Elasticsearch refused the credentials (%s): spooling until it accepts them; "
            "check elasticsearch.api_key / username / password",
            status,
        )
        return None
    return spread_failure(docs, status, reason)
