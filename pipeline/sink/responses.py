"""The last stage of the bulk path: pair each response item with its document and classify it.

The bulk API answers in request order, one item per action (elastic.md §6.3), so item ``i``
belongs to document ``i``. A response filtered by
:data:`~pipeline.sink.bulk_request.FILTER_PATH` looks like::

    {"errors": true, "items": [{"create": {"status": 201}},
                               {"create": {"status": 409, "error": {"type":
                                "version_conflict_engine_exception", "reason": "..."}}}]}

Each item's status is classified by :func:`~pipeline.sink.outcome.classify`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeline.records.core import Document
from pipeline.records.json import Response
from pipeline.sink.outcome import Outcome, classify


@dataclass(frozen=True)
class BulkItem:
    """One response item paired with its document.

    Attributes:
        doc: the document sent.
        outcome: what the sink does with it next.
        status: the item's HTTP status (0 when there was none).
        error_type, reason: the item's ``error.type`` and ``error.reason``, when present.
    """

    doc: Document
    outcome: Outcome
    status: int
    error_type: str | None
    reason: str | None


def _error_of(item: Response) -> tuple[str | None, str | None]:
    error = item.get("error")
    if isinstance(error, Mapping):
        return error.get("type"), error.get("reason")
    if error is None:
        return None, None
    return None, str(error)


def pair_items(docs: Sequence[Document], response: Response) -> list[BulkItem]:
    """Pair each bulk response item with the document at the same position and classify it.

    Raises:
        ValueError: the response does not hold one item per document.
    """
    items = response.get("items")
    if not isinstance(items, list) or len(items) != len(docs):
        got = len(items) if isinstance(items, list) else "no"
        raise ValueError(f"bulk response has {got} items for {len(docs)} documents")
    paired: list[BulkItem] = []
    for doc, raw in zip(docs, items, strict=True):
        item = next(iter(raw.values())) if isinstance(raw, Mapping) and raw else {}
        status = int(item.get("status") or 0)
        error_type, reason = _error_of(item)
        paired.append(BulkItem(doc, classify(status, error_type), status, error_type, reason))
    return paired


def spread_failure(docs: Sequence[Document], status: int, reason: str) -> list[BulkItem]:
    """The items of a whole request that failed with ``status``: each document gets it, with
    the error type ``request_error``."""
    outcome = classify(status, "request_error")
    return [BulkItem(d, outcome, status, "request_error", reason) for d in docs]
