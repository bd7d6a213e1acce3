"""Per-data-stream counters of what the sink did with its documents."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.records.core import Document


@dataclass(frozen=True)
class StreamStats:
    """Counters of one data stream (numbers of documents; ``retried`` counts re-sends)."""

    indexed: int = 0
    duplicate: int = 0
    dead_lettered: int = 0
    retried: int = 0
    spooled: int = 0
    unsent: int = 0
    """Let go unacknowledged at close because the spool was full (read again next run)."""


class StreamCounts:
    """The running counters behind :class:`StreamStats`, by data stream (not thread-safe: the
    sink's lock guards it)."""

    def __init__(self) -> None:
        self._counts: dict[str, Counter[str]] = {}

    def add(self, docs: Sequence[Document], what: str) -> None:
        """Count each of ``docs`` under its data stream as ``what`` (a :class:`StreamStats`
        field name)."""
        for doc in docs:
            self._counts.setdefault(doc.index, Counter())[what] += 1

    def snapshot(self) -> dict[str, StreamStats]:
        """The counters now, by data stream name (sorted)."""
        return {
            index: StreamStats(**{k: c[k] for k in StreamStats.__dataclass_fields__})
            for index, c in sorted(self._counts.items())
        }
