"""The callables a sink is given instead of reaching for them itself: where acknowledgements
go, the clock, sleeping and randomness (real ones by default, fakes in tests).

:class:`~pipeline.sink.bulk.BulkSink` and :class:`~pipeline.sink.sender.AsyncSink` take them as
keyword arguments typed by :class:`SinkHooks`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

from pipeline.records.core import Document
from pipeline.sink.disk import DiskWatch


class SinkHooks(TypedDict, total=False):
    """Keyword arguments of a sink; each may be left out.

    Attributes:
        on_ack: called with the documents that became settled (default: nothing).
        clock: monotonic seconds (default ``time.monotonic``).
        sleep: blocks for a backoff delay in seconds (default ``time.sleep``).
        rng: uniform [0, 1] for the backoff jitter (default ``random.random``).
        disk: says when the state directory's disk is full (default: a watch of the sink's
            own state directory).
    """

    on_ack: Callable[[Sequence[Document]], None]
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    rng: Callable[[], float]
    disk: DiskWatch


def ignore_acks(docs: Sequence[Document]) -> None:
    """The default ``on_ack``: acknowledgements go nowhere."""
    del docs
