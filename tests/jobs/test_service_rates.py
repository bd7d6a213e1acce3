"""Service rates of the running pipeline (seed 003): a slowed sink is found to be the bottleneck,
at its rate."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.jobs.service_monitor import read_state
from pipeline.settings import settings_from_mapping
from pipeline.sink.embedded import EmbeddedServer, free_port
from pipeline.sink.search import iter_hits, refresh

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples" / "node01"

pytestmark = pytest.mark.integration
BATCH_REPS = 15
"""Repetitions of the log appended at a time: 1,185 lines, about 6 s of the throttled sink."""
DEADLINE_S = 180.0
"""How long the sink is kept busy, at most, for its service rate to converge."""


class Throttled:
    """An Elasticsearch client whose bulk requests take ``1 / docs_per_s`` per document more:
    a sink that can take no more than that rate."""

    def __init__(self, client: Any, docs_per_s: float, spent: list[float] | None = None) -> None:
        self._client, self.docs_per_s = client, docs_per_s
        self.spent = spent if spent is not None else [0.0, 0.0]  # documents, seconds in bulk

    def options(self, **kw: Any) -> Throttled:
        return Throttled(self._client.options(**kw), self.docs_per_s, self.spent)

    def bulk(self, *, operations: Any, **kw: Any) -> Any:
        start = time.perf_counter()
        n = bytes(operations).count(b"\n") // 2
        time.sleep(n / self.docs_per_s)
        try:
            return self._client.bulk(operations=operations, **kw)
        finally:
            self.spent[0] += n
            self.spent[1] += time.perf_counter() - start

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[str]:
    """A server of this test's own: the session's, holding every other test's data, answers
    with a latency that varies more than the throttle this test measures."""
    server = EmbeddedServer(tmp_path / "db", free_port())
    server.start(timeout_s=30.0)
    try:
        yield server.url
    finally:
        server.stop()


def append_reps(path: Path, lines: list[str], first: int, count: int) -> None:
    """Append repetitions ``first`` .. ``first + count - 1`` of the fio log ``lines``, each
    shifted 8 s later than the one before, so the times keep increasing."""
    with open(path, "a") as fh:
        for k in range(first, first + count):
            for line in lines:
                t, rest = line.split(",", 1)
                fh.write(f"{int(t) + k * 8000},{rest}\n")


def sink_rate_converged(state_dir: Path) -> bool:
    """The monitor has written a converged, confident estimate of the sink's rate (the
    state file ``iolens status`` reads)."""
    state = read_state(state_dir)
    estimate = None if state is None else state["stages"]["sink"]["estimate"]
    return estimate is not None and estimate["confidence"] == "high"


def test_a_slowed_sink_is_named_the_bottleneck_at_its_rate(own_server: str, tmp_path: Path) -> None:
    es_url = own_server
    client = Elasticsearch(es_url)
    # a real fio histogram log repeated (time shifted), one document a line, appended a batch
    # at a time while the sink's rate has not converged: the sink stays busy (the queue full)
    # for as long as the monitor needs, however slow this machine is today
    lines = (SAMPLE / "randrw_clat_hist.1.log").read_text().splitlines()
    drop = tmp_path / "drop"
    drop.mkdir()
    log_path = drop / "long_clat_hist.1.log"
    ns = f"sr{uuid.uuid4().hex[:8]}"
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            # bulk requests of 20 documents, 100 ms each at the throttle: a 0.5 s period
            # spans 5
            "sink": {"chunk_max_docs": 20, "queue_docs": 200},
            "service_rate": {"t0_s": 0.05, "cap_s": 0.5},
        }
    )
    throttle = 200.0
    throttled = Throttled(client, throttle)
    reps = 0
    with MainJob(settings, throttled) as job:  # type: ignore[arg-type]
        deadline = time.monotonic() + DEADLINE_S
        # read the log (no finish: its merged percentiles are not what is measured here);
        # each batch is appended while the queue still holds about 1 s of the sink's work
        while not sink_rate_converged(tmp_path / "state"):
            assert time.monotonic() < deadline, f"no sink rate after {reps} repetitions"
            append_reps(log_path, lines, reps, BATCH_REPS)
            reps += BATCH_REPS
            job.ingest([(log_path, settings.drops[0])])
        job.sink.flush()
        summary = job.snapshot()
    assert summary.docs[f"metrics-fio.histogram-{ns}"]["indexed"] == reps * len(lines)
    index = f"metrics-iolens.service_rate-{ns}"
    refresh(client, index)
    rates = [
        h["_source"]["iolens"]["service_rate"]
        for h in iter_hits(client, index, {"match_all": {}}, [{"@timestamp": "asc"}])
    ]
    sink = [r for r in rates if r["stage"] == "sink"]
    confident = [r for r in sink if r["confidence"] == "high"]
    assert confident, rates
    # while the log was read the queue was full: the sink limited the pipeline, and its
    # non-blocking rate is the throttle, less what Elasticsearch itself takes
    first = confident[0]
    assert first["bottleneck"] is True
    assert first["blocked_share"] < 0.5  # the queue was rarely empty
    # what the sink could really do: the throttle and Elasticsearch's own time per document
    capacity = throttled.spent[0] / throttled.spent[1]
    assert capacity < throttle
    for r in confident:
        assert 0.8 * throttle <= r["rate_per_s"] <= throttle, r
        assert r["rate_per_s"] == pytest.approx(capacity, rel=0.1)
    # the rates the running pipeline kept for `iolens status`
    state = read_state(tmp_path / "state")
    assert state is not None
    assert state["stages"]["sink"]["estimate"]["rate_per_s"] == pytest.approx(
        sink[-1]["rate_per_s"]
    )
    assert state["bottleneck"] == "sink"
    # reading and parsing, inside the main thread, measured by their working time: each far
    # faster than the sink it waited for
    for part in ("read", "parse"):
        measured = state["stages"][part]["estimate"]
        assert measured["confidence"] == "exact" and measured["rate_per_s"] > 5 * throttle
    client.close()
