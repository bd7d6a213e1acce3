"""Asked to stop, ``iolens run`` stops reading at the next chunk, delivers what it read, and
the next run reads the rest: nothing lost, nothing twice."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.settings import settings_from_mapping
from pipeline.shippers.registry import Registry
from pipeline.sink.search import refresh

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples" / "node01"
REPS = 15

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


class Slow:
    """A client whose bulk requests take 5 ms per document more: the backlog stays long."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def options(self, **kw: Any) -> Slow:
        return Slow(self._client.options(**kw))

    def bulk(self, *, operations: Any, **kw: Any) -> Any:
        time.sleep(bytes(operations).count(b"\n") // 2 * 0.005)
        return self._client.bulk(operations=operations, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_stop_leaves_the_rest_for_the_next_run(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    lines = (SAMPLE / "randrw_clat_hist.1.log").read_text().splitlines()
    drop = tmp_path / "drop"
    drop.mkdir()
    log = drop / "big_clat_hist.1.log"
    with log.open("w") as fh:
        for k in range(REPS):
            for line in lines:
                t, rest = line.split(",", 1)
                fh.write(f"{int(t) + k * 8000},{rest}\n")
    total = REPS * len(lines)
    ns = f"stop{uuid.uuid4().hex[:8]}"
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "fio-hist", "path": str(drop), "host": "node01"}],
            "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
            "sink": {"chunk_max_docs": 50, "queue_docs": 100},
            "shipper": {"read_chunk_bytes": 65536},
        }
    )
    stop = threading.Event()
    with MainJob(settings, Slow(client)) as job:  # type: ignore[arg-type]
        runner = threading.Thread(target=job.run_forever, args=(stop,))
        runner.start()
        time.sleep(1.0)
        stop.set()
        runner.join(timeout=300)  # a guard against a hang, not a measurement
        assert not runner.is_alive()
    reg = Registry(tmp_path / "state" / "registry.sqlite")
    [first] = reg.all()
    reg.close()
    assert 0 < first.line_no < total  # it stopped in the middle of the file
    index = f"metrics-fio.histogram-{ns}"
    refresh(client, index)
    assert client.count(index=index)["count"] >= first.line_no  # what it committed is there
    with MainJob(settings, client) as job:
        again = job.run_once()
    assert again.lines == total - first.line_no  # the rest, from the committed offset
    refresh(client, index)
    assert client.count(index=index)["count"] == total  # each record once
