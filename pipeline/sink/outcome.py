"""Classification of one bulk item (or of a whole failed request) into what the sink does next.

The table follows elastic.md §6.3 (the ES bulk API's per-item results) and the Elasticsearch
output of Logstash (§6.2): 2xx is acknowledged, 409 on ``create`` means the document is already
there, 429 and 5xx are back-pressure or transient and are retried, every other 4xx is permanent
and goes to the dead-letter queue. A status of 0 (or ``None``) stands for a transport failure
(connection refused, timeout): no response arrived, so the item is retried.
"""

from __future__ import annotations

import enum


class Outcome(enum.Enum):
    """What happens to one document after Elasticsearch answered (or did not)."""

    OK = "ok"
    """Indexed (2xx); acknowledge it."""
    DUPLICATE = "duplicate"
    """409 on ``create``: the ``_id`` exists already, so it was indexed before; acknowledge it."""
    RETRY = "retry"
    """429, 5xx or no response: send it again after a backoff delay (then spool)."""
    DEAD_LETTER = "dead_letter"
    """Any other status (400 mapping errors, 404, ...): permanent; keep it with its error."""


def classify(status: int | None, error_type: str | None = None) -> Outcome:
    """Classify one bulk item by its HTTP status.

    Args:
        status: the item's ``status`` (100-599), or 0 / ``None`` when the request never got an
            answer (transport failure).
        error_type: the item's ``error.type`` when present. It does not change the outcome
            today (the status decides, elastic.md §6.3); it is accepted so that callers pass
            what they have and a future exception type can be special-cased here.

    Returns:
        The :class:`Outcome`. Statuses outside 100-599 (other than 0) count as retryable
        transport trouble; 1xx and 3xx never appear in bulk items and are dead-lettered so
        that they are seen rather than retried forever.
    """
    del error_type  # the status alone decides (documented above)
    if not status:
        return Outcome.RETRY
    if 200 <= status < 300:
        return Outcome.OK
    if status == 409:
        return Outcome.DUPLICATE
    if status == 429 or 500 <= status < 600:
        return Outcome.RETRY
    if 100 <= status < 500:
        return Outcome.DEAD_LETTER
    return Outcome.RETRY
