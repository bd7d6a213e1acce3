"""The service-rate estimator: its filters, moments, period tuner and counters exactly, and its
accuracy against the exact queue simulation (reference B.6 tolerances)."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterator
from functools import partial
from statistics import NormalDist
from typing import Any

import numpy as np
import pytest

from pipeline.reducers.queue_sampling import PeriodTuner, QueueEnd
from pipeline.reducers.rate_filters import GAUSSIAN_TAPS, LOG_TAPS, Moments, gaussian_taps, log_taps
from pipeline.reducers.service_rate import Estimate, ServiceRateEstimator
from pipeline.reducers.service_rate_sim import (
    Scenario,
    Scored,
    SimResult,
    error_bound_det,
    queue_trace,
    simulate,
    summarise,
)

# --- filters -------------------------------------------------------------------------------


def test_gaussian_taps_are_raftlibs_normalised() -> None:
    raftlib = [0.053991, 0.241971, 0.398942, 0.241971, 0.053991]  # exp(-x²/2)/√(2π), x=-2..2
    taps = GAUSSIAN_TAPS
    assert taps == pytest.approx([w / sum(raftlib) for w in raftlib], abs=2e-6)
    assert taps == pytest.approx([0.054489, 0.244201, 0.402620, 0.244201, 0.054489], abs=1e-6)
    assert math.fsum(taps) == pytest.approx(1.0, abs=1e-15)


def test_log_taps_are_raftlibs() -> None:
    taps = LOG_TAPS
    assert taps == pytest.approx([1.49577, -2.99155, 1.49577], abs=1e-5)
    assert math.fsum(taps) == pytest.approx(0.0, abs=1e-15)
    # flat on constant and linear sequences: only curvature responds
    assert math.fsum(w * x for w, x in zip(LOG_TAPS, [7.0, 9.0, 11.0], strict=True)) == (
        pytest.approx(0.0, abs=1e-12)
    )
    assert math.fsum(w * x for w, x in zip(LOG_TAPS, [1.0, 0.0, 1.0], strict=True)) == (
        pytest.approx(2 * 1.49577, abs=1e-5)
    )


def test_taps_reject_bad_arguments() -> None:
    for bad in (partial(gaussian_taps, -1), partial(gaussian_taps, 2, 0.0)):
        with pytest.raises(ValueError):
            bad()
    for bad in (partial(log_taps, 0), partial(log_taps, 1, -0.5)):
        with pytest.raises(ValueError):
            bad()
    assert gaussian_taps(0) == (1.0,)
    assert log_taps(2, 0.5)[2] == min(log_taps(2, 0.5))  # the centre is the trough


# --- moments -------------------------------------------------------------------------------


@pytest.mark.parametrize(("offset", "rel"), [(0.0, 1e-12), (1e9, 1e-7)])
def test_welford_matches_numpy(offset: float, rel: float) -> None:
    rng = np.random.default_rng(3)
    x = offset + rng.lognormal(0.0, 1.0, 5000)
    m = Moments.of(x.tolist())
    assert m.n == 5000
    assert m.mean == pytest.approx(float(np.mean(x)), rel=1e-12)
    assert m.variance == pytest.approx(float(np.var(x, ddof=1)), rel=rel)
    assert m.sd == pytest.approx(float(np.std(x, ddof=1)), rel=rel)
    # the sums of values and squares that RaftLib kept cancel catastrophically here
    naive = (float(np.sum(x * x)) - float(np.sum(x)) ** 2 / 5000) / 4999
    assert (abs(naive / float(np.var(x, ddof=1)) - 1) > 0.5) == (offset > 0)


def test_chan_merge_equals_one_pass() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal(50.0, 7.0, 3001).tolist()
    whole = Moments.of(x)
    for cut in (0, 1, 17, 1500, 3000, 3001):
        a, b = Moments.of(x[:cut]), Moments.of(x[cut:])
        for merged in (a.merge(b), b.merge(a)):
            assert merged.n == whole.n
            assert merged.mean == pytest.approx(whole.mean, rel=1e-12)
            assert merged.m2 == pytest.approx(whole.m2, rel=1e-10)
    three = Moments.of(x[:10]).merge(Moments.of(x[10:20])).merge(Moments.of(x[20:]))
    assert three.variance == pytest.approx(float(np.var(x, ddof=1)), rel=1e-10)


def test_moments_of_too_few_values_have_no_spread() -> None:
    assert Moments().variance is None and Moments().sd is None
    assert Moments().merge(Moments()) == Moments()
    one = Moments().add(5.0)
    assert (one.n, one.mean, one.sd) == (1, 5.0, None)
    assert one.merge(Moments()) == one
    assert Moments.of([2.0, 4.0]).variance == 2.0


# --- period tuner --------------------------------------------------------------------------


def tune(tuner: PeriodTuner, blocked: Iterator[bool], miss: float = 0.0) -> list[float]:
    """Feed periods realised ``T * (1 + miss)`` until frozen; the period after each."""
    seen = []
    while not tuner.frozen:
        tuner.observe(tuner.period_s * (1 + miss), next(blocked))
        seen.append(tuner.period_s)
        assert len(seen) < 1000
    return seen


def cycle(pattern: list[bool]) -> Iterator[bool]:
    while True:
        yield from pattern


def test_period_doubles_without_blocking_up_to_the_cap() -> None:
    seen = tune(PeriodTuner(t0_s=0.001, cap_s=0.02), cycle([False]))
    assert seen == pytest.approx(
        [0.001] * 4 + [0.002] * 5 + [0.004] * 5 + [0.008] * 5 + [0.016] * 5 + [0.02]
    )


def test_period_grows_by_steps_with_growth_one() -> None:
    seen = tune(PeriodTuner(t0_s=0.001, cap_s=0.004, growth=1.0), cycle([False]))
    assert seen == pytest.approx([0.001] * 4 + [0.002] * 5 + [0.003] * 5 + [0.004])


def test_period_stays_when_blocking_is_frequent() -> None:
    tuner = PeriodTuner(t0_s=0.001, cap_s=0.02, freeze_after=10)
    assert tune(tuner, cycle([True, False, True, False, False])) == [0.001] * 10
    # one blocked period in five is rare: the period grows
    tuner.restart()
    assert not tuner.frozen and tuner.period_s == 0.001
    assert tune(tuner, cycle([True, False, False, False, False]))[-1] == 0.02


def test_period_grows_on_the_third_miss() -> None:
    tuner = PeriodTuner(t0_s=0.001, cap_s=0.004, freeze_after=10)
    assert tune(tuner, cycle([True]), miss=0.01) == pytest.approx(
        [0.001] * 2 + [0.002] * 3 + [0.004]
    )
    tuner = PeriodTuner(t0_s=0.001, cap_s=0.004, freeze_after=10)
    assert tune(tuner, cycle([True]), miss=0.004) == [0.001] * 10  # within 0.5 %: no miss


def test_band_and_arguments() -> None:
    tuner = PeriodTuner(t0_s=0.01, cap_s=0.01, band=0.05)
    assert tuner.frozen  # nothing to tune
    assert [tuner.in_band(r) for r in (0.0094, 0.0096, 0.01, 0.0104, 0.0106)] == [
        False,
        True,
        True,
        True,
        False,
    ]
    bads: list[dict[str, Any]] = [
        {"t0_s": 0.0, "cap_s": 0.01},
        {"t0_s": 0.02, "cap_s": 0.01},
        {"t0_s": 0.001, "cap_s": 0.01, "growth": 0.5},
        {"t0_s": 0.001, "cap_s": 0.01, "band": -0.1},
        {"t0_s": 0.001, "cap_s": 0.01, "freeze_after": 0},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            PeriodTuner(**bad)


# --- estimator on hand-made periods --------------------------------------------------------


def feed(est: ServiceRateEstimator, periods: list[tuple[int, bool, float]]) -> list[Estimate]:
    out = []
    for count, blocked, period_s in periods:
        e = est.observe(count, blocked, period_s)
        if e is not None:
            out.append(e)
    return out


def test_constant_rate_converges_after_window_plus_two() -> None:
    est = ServiceRateEstimator(t0_s=0.01, cap_s=0.01)
    assert est.period_s == 0.01
    for _ in range(15):
        assert est.observe(100, False, 0.01) is None
    assert est.current() is None
    assert est.observe(100, False, 0.01) is None
    progress = est.current()
    assert progress is not None and not progress.converged and progress.confidence == "low"
    assert est.observe(100, False, 0.01) is None
    e = est.observe(100, False, 0.01)
    assert e is not None
    assert e.rate_per_s == pytest.approx(10_000.0, rel=1e-12)
    assert (e.statistic, e.converged, e.confidence, e.samples, e.periods) == (
        "mean",
        True,
        "high",
        18,
        18,
    )
    assert e.quantile_per_s == pytest.approx(10_000.0, rel=1e-12)
    assert e.sd_per_s == pytest.approx(0.0, abs=1e-8)
    assert (e.usable_fraction, e.period_s) == (1.0, 0.01)
    assert e.span_s == pytest.approx(0.18)
    assert e.utilisation == pytest.approx(1.0)
    # restarted: the next estimate needs a full window again
    assert est.current() is None
    assert len(feed(est, [(50, False, 0.01)] * 17)) == 0
    assert feed(est, [(50, False, 0.01)])[0].rate_per_s == pytest.approx(5000.0)


def test_blocked_and_out_of_band_periods_are_left_out() -> None:
    est = ServiceRateEstimator(t0_s=0.01, cap_s=0.01, band=0.05)
    periods = []
    for _ in range(18):
        periods.append((100, False, 0.0104))  # in the band: 100 / 0.0104 per s
        periods.append((500, True, 0.01))  # blocked
        periods.append((100, False, 0.0200))  # out of the band
    [e] = feed(est, periods[:-2])
    assert e.rate_per_s == pytest.approx(100 / 0.0104, rel=1e-12)
    assert (e.samples, e.periods) == (18, 52)
    assert e.usable_fraction == pytest.approx(18 / 52)
    assert (e.statistic, e.confidence) == ("quantile", "high")
    assert e.utilisation == pytest.approx(
        (18 * 100 + 17 * 600) / (18 * 0.0104 + 17 * 0.03) / e.rate_per_s
    )


def test_rarely_clean_periods_give_low_confidence() -> None:
    est = ServiceRateEstimator(t0_s=0.01, cap_s=0.01)
    [e] = feed(est, ([(100, False, 0.01)] + [(30, True, 0.01)] * 9) * 18)
    assert e.usable_fraction == pytest.approx(18 / 171)
    assert (e.converged, e.statistic, e.confidence) == (True, "quantile", "low")


def test_noisy_rates_wait_for_a_small_standard_error() -> None:
    # rates 9000, 11000, 9000, ...: successive differences give variance 2e6 (items/s)², so
    # the standard error sqrt(2e6 / n) first falls to 3 % of 10000 at n = 23
    est = ServiceRateEstimator(t0_s=0.01, cap_s=0.01, q=0.9, max_stderr=0.03)
    out = feed(est, [(90 if i % 2 == 0 else 110, False, 0.01) for i in range(23)])
    [e] = out
    assert e.samples == 23
    assert e.stderr_per_s == pytest.approx(math.sqrt(2e6 / 23), rel=1e-9)
    assert e.rate_per_s == pytest.approx(10_000.0, rel=1e-12)  # the windows' means
    smoothed = 1000 * math.fsum(w * (-1) ** i for i, w in enumerate(GAUSSIAN_TAPS))
    assert e.sd_per_s == pytest.approx(abs(smoothed) * math.sqrt(12 / 11), rel=1e-9)
    z = NormalDist().inv_cdf(0.9)
    assert e.quantile_per_s == pytest.approx(e.mean_per_s + z * e.sd_per_s, rel=1e-12)


def test_few_items_a_period_need_many_periods() -> None:
    rng = np.random.default_rng(5)
    est = ServiceRateEstimator(t0_s=0.001, cap_s=0.001)
    counts = rng.poisson(4.0, 3000).tolist()  # rate 4000/s, but only 4 items a period
    out = feed(est, [(c, False, 0.001) for c in counts])
    assert out
    for e in out:
        assert e.samples >= 200  # sd/mean of a rate is 1/2: (0.5 / 0.03)² = 278 samples
        assert e.stderr_per_s <= 0.03 * e.mean_per_s
        assert abs(e.rate_per_s / 4000 - 1) <= 0.1


def test_period_is_tuned_again_after_a_report_unless_told_not_to() -> None:
    for retune, after in ((True, 0.001), (False, 0.004)):
        est = ServiceRateEstimator(t0_s=0.001, cap_s=0.004, retune=retune)
        tuning = [(10, False, 0.001)] * 5 + [(20, False, 0.002)] * 5
        assert feed(est, tuning) == []
        assert est.period_s == 0.004
        [e] = feed(est, [(40, False, 0.004)] * 18)
        assert e.period_s == 0.004
        assert e.rate_per_s == pytest.approx(10_000.0)
        assert est.period_s == after


@pytest.mark.parametrize(
    "kwargs",
    [
        {"q": 0.0},
        {"q": 1.0},
        {"window": 4},
        {"min_updates": 2},
        {"tol": -1.0},
        {"max_stderr": -0.1},
        {"t0_s": -1.0},
    ],
)
def test_estimator_rejects_bad_arguments(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ServiceRateEstimator(**kwargs)


def test_observe_rejects_bad_periods() -> None:
    est = ServiceRateEstimator()
    with pytest.raises(ValueError):
        est.observe(-1, False, 0.001)
    with pytest.raises(ValueError):
        est.observe(1, False, 0.0)
    with pytest.raises(ValueError):
        est.observe(1, False, math.nan)


# --- queue-end counters --------------------------------------------------------------------


def test_queue_end_take_returns_and_zeroes() -> None:
    end = QueueEnd()
    assert end.take() == (0, False)
    end.count += 3
    end.blocked += 1
    assert end.take() == (3, True)
    assert end.take() == (0, False)
    end.count += 2
    assert end.take() == (2, False)


def test_queue_end_take_loses_no_count_under_concurrent_increments() -> None:
    n_threads, n_items, block_every = 3, 60_000, 1000
    ends = [QueueEnd() for _ in range(n_threads)]
    done = threading.Event()

    def user(end: QueueEnd) -> None:
        for i in range(n_items):
            end.count += 1
            if i % block_every == 0:
                end.blocked += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter allows
    try:
        users = [threading.Thread(target=user, args=(e,)) for e in ends]
        taken = [0] * n_threads
        flagged = [0] * n_threads
        takes = 0

        def monitor() -> None:
            nonlocal takes
            while not done.is_set():
                for k, end in enumerate(ends):
                    count, blocked = end.take()
                    taken[k] += count
                    flagged[k] += blocked
                takes += 1

        mon = threading.Thread(target=monitor)
        mon.start()
        for t in users:
            t.start()
        for t in users:
            t.join(timeout=60)
        done.set()
        mon.join(timeout=60)
    finally:
        sys.setswitchinterval(old)
    assert takes > 10  # the monitor really ran alongside
    for k, end in enumerate(ends):
        count, blocked = end.take()
        assert taken[k] + count == n_items
        assert 1 <= flagged[k] + blocked <= n_items // block_every


# --- the simulation oracle -----------------------------------------------------------------


def runs(seeds: range, **kw: Any) -> list[SimResult]:
    return [simulate(Scenario(seed=s, **kw)) for s in seeds]


def errors(results: list[SimResult], attr: str = "rate_per_s") -> np.ndarray:
    return np.array(
        [
            getattr(s.estimate, attr) / s.true_per_s - 1
            for r in results
            for s in r.estimates
            if not s.mixed
        ]
    )


def test_queue_trace_is_consistent() -> None:
    busy = queue_trace(Scenario(service="det", rho=1.5, horizon_s=1.0))
    gaps = np.diff(busy.pops_s)
    assert len(busy.pops_s) == pytest.approx(10_000, abs=70)  # capacity-bound: mu = 10k/s
    assert np.all(gaps >= 0)
    assert np.allclose(gaps[100:], 1e-4)  # never starved once the FIFO has filled
    idle = queue_trace(Scenario(service="exp", rho=0.5, horizon_s=2.0, seed=1))
    assert len(idle.pops_s) / 2.0 == pytest.approx(5000, rel=0.05)  # arrival-bound
    starts, ends = np.array(idle.starved_from_s), np.array(idle.starved_to_s)
    assert np.all(ends > starts) and np.all(starts[1:] >= ends[:-1])  # disjoint, sorted
    assert 0.4 < np.sum(ends - starts) / idle.pops_s[-1] < 0.6  # idle about 1 - rho


def test_scenario_rejects_bad_values() -> None:
    bads: list[dict[str, Any]] = [
        {"service": "gamma"},
        {"rho": 0.0},
        {"capacity": 0},
        {"jitter": -1.0},
        {"change_at_s": 1.0},
    ]
    for bad in bads:
        with pytest.raises(ValueError):
            Scenario(**bad)
    sc = Scenario(change_at_s=2.0, mu2_per_s=5000.0)
    assert (sc.mu_at(1.999), sc.mu_at(2.0)) == (10_000.0, 5000.0)


def test_deterministic_service_is_exact_to_one_item_a_period() -> None:
    mu = 7300.0  # mu * T not an integer: a period holds floor or ceil of it
    results = [
        r for rho in (0.7, 0.95, 1.5) for r in runs(range(2), service="det", rho=rho, mu_per_s=mu)
    ]
    scored = [s for r in results for s in r.estimates]
    assert len(scored) >= 40
    for s in scored:
        assert abs(s.error) <= error_bound_det(mu, s.estimate.period_s) + 0.01


def test_exponential_service_at_high_utilisation_within_ten_percent() -> None:
    for rho in (0.95, 1.5):
        results = runs(range(4), service="exp", rho=rho)
        err = errors(results)
        assert len(err) >= 20
        assert np.mean(np.abs(err) <= 0.10) >= 0.90, rho
        assert abs(np.median(err)) <= 0.05


def test_exponential_service_at_rho_0_7_quantile_within_twenty_percent() -> None:
    results = runs(range(4), service="exp", rho=0.7)
    q_err, mean_err = errors(results, "quantile_per_s"), errors(results, "mean_per_s")
    assert len(q_err) >= 20
    assert np.mean(np.abs(q_err) <= 0.20) >= 0.75
    assert np.median(mean_err) < -0.10  # why the quantile: clean periods favour slow service
    assert np.mean(np.abs(errors(results)) <= 0.20) >= 0.75  # the reported rate picks it


def test_low_utilisation_is_flagged_low() -> None:
    results = runs(range(3), service="exp", rho=0.3)
    assert not [s for r in results for s in r.estimates if s.estimate.confidence == "high"]
    progress = [r.last for r in results if r.last is not None]
    assert len(progress) == 3
    assert all(s.estimate.confidence == "low" and s.error < -0.2 for s in progress)
    # let estimates converge regardless of their noise: the usable fraction still flags them
    loose = partial(ServiceRateEstimator, max_stderr=1.0)
    scored = [s for k in range(3) for s in simulate(Scenario(rho=0.3, seed=k), loose).estimates]
    assert len(scored) >= 3
    for s in scored:
        assert (s.estimate.converged, s.estimate.confidence) == (True, "low")
        assert s.estimate.usable_fraction < 0.15
        assert s.error < -0.2  # the knowing failure: clean periods favour slow service


def test_rate_change_is_followed() -> None:
    for r in runs(range(3), service="exp", rho=1.5, change_at_s=2.0, mu2_per_s=5000.0):
        before = [s for s in r.estimates if s.time_s < 2.0]
        after = [s for s in r.estimates if s.time_s >= 2.0 and not s.mixed]
        assert before and after
        assert all(abs(s.error) <= 0.2 for s in before + after)
        assert after[0].true_per_s == 5000.0
        assert after[0].time_s - 2.0 <= 1.0  # one estimate to finish, one to make
        assert sum(s.mixed for s in r.estimates) <= 1


def test_summarise_leaves_mixed_estimates_out() -> None:
    [r] = runs(range(1), service="det", rho=1.5, horizon_s=2.0)
    good = r.estimates[:3]
    assert len(good) == 3
    mixed = Scored(1.0, good[0].estimate, 1.0, 5.0, True)
    sm = summarise([*good, mixed])
    assert sm.estimates == 3
    assert sm.median_error == pytest.approx(float(np.median([s.error for s in good])))
    assert (sm.within_10, sm.within_20, sm.low_confidence) == (1.0, 1.0, 0)
    empty = summarise([mixed])
    assert (empty.estimates, empty.median_error, empty.within_10) == (0, None, None)


def test_jittery_monitor_lengthens_the_period() -> None:
    est = partial(ServiceRateEstimator, t0_s=0.001, cap_s=0.02)
    r = simulate(Scenario(service="exp", rho=1.5, jitter=0.05), est)
    assert len(r.estimates) >= 3
    for s in r.estimates:
        assert s.estimate.period_s == 0.02  # periods missed by > 0.5 %: T grew to the cap
        # |N(0, 5 %)| <= 5 % two times in three: the rest fell out of the band
        assert 0.4 <= s.estimate.usable_fraction <= 0.9
        assert abs(s.error) <= 0.1
