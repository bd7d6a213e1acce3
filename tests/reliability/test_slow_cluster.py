"""A slow, overloaded cluster (429s, long answers): memory stays bounded and every document is
still delivered exactly once."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pipeline.records.core import Document
from pipeline.settings import SinkSettings
from pipeline.sink.sender import AsyncSink

pytestmark = pytest.mark.reliability


class Overloaded:
    """Answers bulk requests slowly, and refuses about a third of the items with 429 (too many
    requests) the way Elasticsearch does under load; each document is stored on its first
    success."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.stored: Counter[str] = Counter()
        self.requests = 0
        self.lock = threading.Lock()

    def bulk(self, *, operations: Any, **_kw: Any) -> dict[str, Any]:
        lines = bytes(operations).split(b"\n")
        time.sleep(0.005)
        items = []
        with self.lock:
            self.requests += 1
            for action in lines[0::2]:
                if not action:
                    continue
                ident = json.loads(action)["create"]["_id"]
                if self.rng.random() < 0.35:
                    items.append(
                        {
                            "create": {
                                "_id": ident,
                                "status": 429,
                                "error": {
                                    "type": "es_rejected_execution_exception",
                                    "reason": "queue full",
                                },
                            }
                        }
                    )
                elif self.stored[ident]:
                    items.append(
                        {
                            "create": {
                                "_id": ident,
                                "status": 409,
                                "error": {
                                    "type": "version_conflict_engine_exception",
                                    "reason": "exists",
                                },
                            }
                        }
                    )
                else:
                    self.stored[ident] += 1
                    items.append({"create": {"_id": ident, "status": 201}})
        return {"errors": True, "items": items}


def test_memory_stays_bounded_and_everything_arrives_once(tmp_path: Path) -> None:
    acked: Counter[str] = Counter()

    def on_ack(docs: Sequence[Document]) -> None:
        acked.update(d.doc_id for d in docs)

    cluster = Overloaded(seed=3)
    settings = SinkSettings(
        chunk_max_docs=25,
        queue_docs=40,
        max_retries=30,
        backoff_initial_s=0.001,
        backoff_max_s=0.01,
    )
    sink = AsyncSink(cluster, settings, tmp_path, on_ack=on_ack)  # type: ignore[arg-type]
    most = 0
    n = 3000
    for i in range(n):
        sink.add(Document("metrics-x-default", f"d{i}", {"n": i, "pad": "x" * 200}, ()))
        most = max(most, len(sink.queue))
        if i % 100 == 0:
            sink.poll()
    sink.close()
    assert most <= 40  # what waits in memory is bounded by the queue
    assert len(acked) == n and set(acked.values()) == {1}  # each acknowledged once
    assert len(cluster.stored) == n and set(cluster.stored.values()) == {1}
    stats = sink.stats()["metrics-x-default"]
    assert stats.indexed == n and stats.retried > 0 and stats.spooled == 0
