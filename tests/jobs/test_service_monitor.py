"""The monitor's bookkeeping: busy-time rates of the main thread's stages and the bottleneck."""

from __future__ import annotations

from pipeline.jobs.service_monitor import ServiceMonitor
from pipeline.reducers.service_rate import Estimate
from pipeline.settings import ServiceRateSettings
from pipeline.sink.stage_queue import StageQueue


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
