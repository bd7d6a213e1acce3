"""The monitor's bookkeeping: busy-time rates of the main thread's stages and the bottleneck."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.service_monitor import ServiceMonitor
from pipeline.reducers.service_rate import Estimate
from pipeline.settings import ServiceRateSettings
from pipeline.sink.capabilities import Capabilities
from pipeline.sink.stage_queue import StageQueue

NO_ILM = Capabilities("8.15.3", ilm=False, data_stream_admin=False, percentiles_agg=False)


def monitor() -> ServiceMonitor:
    q: StageQueue[int] = StageQueue(10)
    clock = iter(float(t) for t in range(1000))
    return ServiceMonitor(
        [("produce", "sink", q, "tail"), ("sink", "sink", q, "head")],
        ServiceRateSettings(),
        clock=lambda: next(clock),
    )


def estimate(rate: float) -> Estimate:
    return Estimate(
        rate_per_s=rate,
        statistic="mean",
        mean_per_s=rate,
        quantile_per_s=rate,
        sd_per_s=0.0,
        q=0.9,
        converged=True,
        usable_fraction=1.0,
        confidence="high",
        period_s=1.0,
        samples=16,
        periods=16,
        span_s=16.0,
        stderr_per_s=0.0,
        utilisation=None,
    )


def test_main_thread_stages_are_rated_by_their_working_time() -> None:
    m = monitor()
    m.busy("read", 100, 0.5)
    m.busy("parse", 100, 0.25)
    m.busy("read", 300, 0.5)
    snap = m.snapshot()
    assert snap["stages"]["read"]["estimate"] == {"rate_per_s": 400.0, "confidence": "exact"}
    assert snap["stages"]["parse"]["estimate"] == {"rate_per_s": 400.0, "confidence": "exact"}
    assert snap["stages"]["read"]["busy_s"] == 1.0
    assert m.limiting_part() == "read"  # it took most of the main thread's working time
    for _ in range(20):  # work older than the window is forgotten
        m.busy("parse", 10, 1.0)
    assert m.snapshot()["stages"]["parse"]["estimate"]["rate_per_s"] == 10.0
    assert m.limiting_part() == "parse"


def test_the_bottleneck_follows_the_queue_then_the_utilisation() -> None:
    m = monitor()
    assert m.bottleneck() is None
    produce, sink = m.stages["produce"], m.stages["sink"]
    # the queue full in most periods: the producer waits on the sink
    produce.samples.extend([(1.0, 10, True)] * 3 + [(1.0, 10, False)])
    sink.samples.extend([(1.0, 10, False)] * 4)
    assert m.bottleneck() == "sink"
    # empty in most periods: the sink waits on the producer
    produce.samples.clear()
    produce.samples.extend([(1.0, 10, False)] * 4)
    sink.samples.clear()
    sink.samples.extend([(1.0, 10, True)] * 3 + [(1.0, 10, False)])
    assert m.bottleneck() == "produce"
    # neither: the higher utilisation (throughput over the estimated rate)
    sink.samples.clear()
    sink.samples.extend([(1.0, 10, False)] * 4)
    produce.estimate, sink.estimate = estimate(20.0), estimate(12.5)
    assert (produce.utilisation(), sink.utilisation()) == (0.5, 0.8)
    assert m.bottleneck() == "sink"


def test_the_method_setting_picks_the_estimator() -> None:
    from pipeline.jobs.service_monitor import make_estimator
    from pipeline.reducers.seed_rate import SeedRateEstimator
    from pipeline.reducers.service_rate import ServiceRateEstimator

    assert type(make_estimator(ServiceRateSettings())) is ServiceRateEstimator
    assert type(make_estimator(ServiceRateSettings(method="seed"))) is SeedRateEstimator


def test_a_failure_of_the_seed_method_is_reported_once_and_the_last_rate_kept() -> None:
    from dataclasses import replace

    outcomes: list[tuple[str, bool]] = []
    q: StageQueue[int] = StageQueue(10)
    m = ServiceMonitor(
        [("sink", "sink", q, "head")],
        ServiceRateSettings(method="seed"),
        on_estimate=lambda st, e: outcomes.append((st.stage, e.method_failed)),
    )
    st = m.stages["sink"]
    failure = replace(estimate(20.0), converged=False, method_failed=True, estimator="seed")
    m._outcome(st, estimate(20.0))
    m._outcome(st, failure)
    m._outcome(st, failure)  # a starved end fails again every few periods: said once
    row = m.snapshot()["stages"]["sink"]
    assert (row["failures"], row["method_failed"], row["estimates"]) == (2, True, 1)
    assert row["estimate"]["rate_per_s"] == 20.0  # the last converged rate is kept
    assert outcomes == [("sink", False), ("sink", True)]
    m._outcome(st, estimate(30.0))
    row = m.snapshot()["stages"]["sink"]
    assert (row["failures"], row["method_failed"], row["estimates"]) == (2, False, 2)


def test_a_failure_document_says_so_and_has_no_rate() -> None:
    from dataclasses import replace

    from pipeline.jobs.health import outcome_values

    m = monitor()
    st = m.stages["sink"]
    st.samples.extend([(1.0, 10, True)] * 4)
    failure = replace(estimate(20.0), converged=False, method_failed=True, estimator="seed")
    values = outcome_values(st, failure, None)
    assert values == {
        "queue": "sink",
        "end": "head",
        "method": "online_estimate",
        "estimator": "seed",
        "method_failed": True,
        "converged": False,
        "throughput_per_s": 10.0,
        "blocked_share": 1.0,
        "bottleneck": False,
    }
    done = outcome_values(st, estimate(20.0), "sink")
    assert (done["estimator"], done["method_failed"], done["rate_per_s"]) == (
        "adaptive",
        False,
        20.0,
    )
    assert done["bottleneck"] is True


@pytest.mark.integration
def test_the_stream_mapping_takes_both_outcomes(es_client: Elasticsearch) -> None:
    from dataclasses import replace

    from pipeline.jobs.health import outcome_values
    from pipeline.sink.documents import DocContext
    from pipeline.sink.rate_documents import service_rate_document
    from pipeline.sink.templates import install, load_templates

    install(es_client, load_templates(), NO_ILM)
    ctx = DocContext(namespace="seedfail")
    st = monitor().stages["sink"]
    seed = replace(estimate(20.0), estimator="seed")
    failure = replace(seed, converged=False, method_failed=True)
    docs = [
        service_rate_document(ctx, "h", "sink", outcome_values(st, e, None), t, t)
        for e, t in ((seed, 1.7e12), (failure, 1.7e12 + 1000))
    ]
    ops: list[Mapping[str, Any]] = []
    for d in docs:
        ops += [{"create": {"_index": d.index, "_id": d.doc_id}}, d.source]
    resp = es_client.bulk(operations=ops, refresh=True)
    assert [i["create"]["status"] for i in resp["items"]] == [201, 201]
    hits = es_client.search(index=docs[0].index, sort=["@timestamp"])["hits"]["hits"]
    got = [h["_source"]["iolens"]["service_rate"] for h in hits]
    assert [(g["estimator"], g["method_failed"], "rate_per_s" in g) for g in got] == [
        ("seed", False, True),
        ("seed", True, False),
    ]
