"""Exact simulation of a producer -> bounded FIFO -> consumer, to test service-rate estimates.

The oracle of reference B.6: in virtual time (nothing sleeps), a Poisson producer at rate
``lambda = rho * mu`` pushes into a FIFO of ``capacity`` items (it waits while the FIFO is
full), and a consumer pops one item at a time and serves it for a deterministic ``1 / mu`` or
an exponential time of mean ``1 / mu``; ``mu`` may change to ``mu2`` at ``change_at_s`` (for
items whose service starts then or later). The consumer's service rate is known, so every
estimate can be scored.

A monitor, like a real one, wakes every ``period_s`` of the estimator and reports the reads of
that period (counted at the pop) and whether the consumer was starved in it (a period is
read-blocked when any interval in which the consumer waited on an empty FIFO overlaps it).
``jitter`` makes the monitor oversleep like a Python thread: each realised period is
``T * (1 + |N(0, jitter)|)``.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from pipeline.reducers.service_rate import Estimate, RateEstimator, ServiceRateEstimator

Service = Literal["det", "exp"]

_BLOCK = 65_536
"""Random variates drawn at a time."""


@dataclass(frozen=True)
class Scenario:
    """What to simulate.

    Attributes:
        service: ``"det"`` (every item takes ``1 / mu``) or ``"exp"`` (exponential times).
        mu_per_s: the consumer's service rate, items/s.
        rho: offered load; the producer's Poisson rate is ``rho * mu_per_s`` throughout.
        horizon_s: simulated time, s.
        change_at_s: when the service rate becomes ``mu2_per_s`` (None: never).
        mu2_per_s: the service rate after ``change_at_s``.
        capacity: FIFO capacity, items.
        seed: of the random generator.
        jitter: relative standard deviation of the monitor's oversleep (0: exact periods).
    """

    service: Service = "exp"
    mu_per_s: float = 10_000.0
    rho: float = 0.95
    horizon_s: float = 4.0
    change_at_s: float | None = None
    mu2_per_s: float | None = None
    capacity: int = 64
    seed: int = 0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        """Raises ValueError on a non-positive rate, load, horizon or capacity, an unknown
        service, a negative jitter, or ``change_at_s`` without ``mu2_per_s``."""
        if self.service not in ("det", "exp"):
            raise ValueError(f"service must be 'det' or 'exp', got {self.service!r}")
        if min(self.mu_per_s, self.rho, self.horizon_s) <= 0 or self.capacity < 1:
            raise ValueError("mu_per_s, rho, horizon_s and capacity must be positive")
        if self.jitter < 0:
            raise ValueError(f"jitter must be >= 0, got {self.jitter}")
        if self.change_at_s is not None and (self.mu2_per_s is None or self.mu2_per_s <= 0):
            raise ValueError("change_at_s needs a positive mu2_per_s")

    def mu_at(self, t_s: float) -> float:
        """The true service rate at time ``t_s``, items/s."""
        if self.change_at_s is not None and self.mu2_per_s is not None and t_s >= self.change_at_s:
            return self.mu2_per_s
        return self.mu_per_s


@dataclass(frozen=True)
class Trace:
    """What the consumer did: its pop times and the intervals it was starved, all sorted.

    Attributes:
        pops_s: time of each pop, s (nondecreasing).
        starved_from_s: start of each wait on an empty FIFO, s.
        starved_to_s: its end (the push that ended it), s; intervals are disjoint.
    """

    pops_s: list[float]
    starved_from_s: list[float]
    starved_to_s: list[float]


def queue_trace(sc: Scenario) -> Trace:
    """Simulate the queue up to the first pop at or after ``sc.horizon_s``.

    Item ``i`` is ready ``X_i ~ Exp(lambda)`` after the producer pushed item ``i - 1`` and is
    pushed once item ``i - capacity`` has been popped; it is popped when pushed and the
    consumer has finished item ``i - 1``, whichever is later. One Python step per item: about
    ``max(lambda, mu) * horizon_s`` steps, some 40 000 for the defaults.
    """
    rng = np.random.default_rng(sc.seed)
    lam = sc.rho * sc.mu_per_s
    k = sc.capacity
    pops: list[float] = []
    starved_from: list[float] = []
    starved_to: list[float] = []
    push = done = 0.0
    draws = _draws(sc, lam, rng)
    while not pops or pops[-1] < sc.horizon_s:
        gap, work = next(draws)
        push += gap
        if len(pops) >= k and pops[-k] > push:
            push = pops[-k]
        if push > done:
            starved_from.append(done)
            starved_to.append(push)
            pop = push
        else:
            pop = done
        done = pop + work / sc.mu_at(pop)
        pops.append(pop)
    return Trace(pops, starved_from, starved_to)


def _draws(sc: Scenario, lam: float, rng: np.random.Generator) -> Iterator[tuple[float, float]]:
    """Each item's ``(gap before it is ready, s; work in units of 1 / mu)``, drawn in blocks of
    ``_BLOCK``: the gaps, then (exponential service) the work."""
    while True:
        gaps = rng.exponential(1.0 / lam, _BLOCK).tolist()
        work = rng.exponential(1.0, _BLOCK).tolist() if sc.service == "exp" else [1.0] * _BLOCK
        yield from zip(gaps, work, strict=True)


@dataclass(frozen=True)
class Scored:
    """An estimate and the truth at the time it was reported.

    Attributes:
        time_s: when the estimate was reported (end of its last period), s.
        estimate: the estimate.
        true_per_s: the service rate at ``time_s``.
        error: ``rate_per_s / true_per_s - 1``.
        mixed: the estimate spans the rate change, so no single truth applies.
    """

    time_s: float
    estimate: Estimate
    true_per_s: float
    error: float
    mixed: bool


@dataclass(frozen=True)
class SimResult:
    """The estimates of one run.

    Attributes:
        scenario: what was simulated.
        estimates: the converged estimates in time order.
        last: the unconverged estimate at the end of the horizon (None: none in progress).
        periods: periods the monitor observed.
        failures: times the seed method concluded it failed (``method_failed``; these are
            not in ``estimates``).
        failed_at_s: when each failure was concluded, s.
    """

    scenario: Scenario
    estimates: list[Scored]
    last: Scored | None
    periods: int
    failures: int = 0
    failed_at_s: tuple[float, ...] = ()


def _scored(sc: Scenario, t_s: float, e: Estimate) -> Scored:
    truth = sc.mu_at(t_s)
    start_s = t_s - e.span_s
    mixed = sc.change_at_s is not None and start_s < sc.change_at_s <= t_s
    return Scored(t_s, e, truth, e.rate_per_s / truth - 1.0, mixed)


def simulate(
    sc: Scenario,
    estimator: Callable[[], RateEstimator] = ServiceRateEstimator,
    *,
    waits: bool = False,
) -> SimResult:
    """Run the monitor and a fresh ``estimator()`` on the reading end of ``sc``'s queue.

    With ``waits`` the monitor also reports how long the consumer waited in each period
    (``observe(waited_s=...)``, as :class:`pipeline.sink.stage_queue.StageQueue` measures it).

    Each converged estimate is scored against the service rate at the end of its last period;
    one whose clean periods started before ``change_at_s`` and ended after it is ``mixed``.

    Raises:
        ValueError: from the estimator's constructor.
    """
    trace = queue_trace(sc)
    est = estimator()
    rng = np.random.default_rng([sc.seed, 1])
    pops = trace.pops_s
    t, first, periods = 0.0, 0, 0
    scored: list[Scored] = []
    failed: list[float] = []
    while True:
        real = _realised(est.period_s, sc.jitter, rng)
        end = t + real
        if end > sc.horizon_s:
            break
        last = bisect_left(pops, end, lo=first)
        blocked = _starved_within(trace, t, end)
        periods += 1
        waited = min(_waited_within(trace, t, end), real) if waits else None
        e = est.observe(last - first, blocked, real, waited)
        if e is not None and e.method_failed:
            failed.append(end)
        elif e is not None:
            scored.append(_scored(sc, end, e))
        t, first = end, last
    cur = est.current()
    last_scored = None if cur is None else _scored(sc, t, cur)
    return SimResult(sc, scored, last_scored, periods, len(failed), tuple(failed))


def _realised(want_s: float, jitter: float, rng: np.random.Generator) -> float:
    """How long a sleep of ``want_s`` lasts: longer by ``|N(0, jitter)|`` of it (0: exact)."""
    return want_s * (1.0 + abs(float(rng.normal(0.0, jitter)))) if jitter else want_s


def _starved_within(trace: Trace, t: float, end: float) -> bool:
    """Whether the consumer waited on an empty FIFO during ``[t, end)``."""
    k = bisect_right(trace.starved_to_s, t)
    return k < len(trace.starved_from_s) and trace.starved_from_s[k] < end


def _waited_within(trace: Trace, t: float, end: float) -> float:
    """How long the consumer waited on an empty FIFO during ``[t, end)``, s."""
    k = bisect_right(trace.starved_to_s, t)
    waited = 0.0
    while k < len(trace.starved_from_s) and trace.starved_from_s[k] < end:
        waited += min(end, trace.starved_to_s[k]) - max(t, trace.starved_from_s[k])
        k += 1
    return waited


@dataclass(frozen=True)
class Summary:
    """How close a set of estimates came (mixed ones left out).

    Attributes:
        estimates: estimates scored.
        median_error: median of ``error`` (None when there is none).
        median_abs_error: median of ``|error|``.
        within_10: share with ``|error| <= 0.10``.
        within_20: share with ``|error| <= 0.20``.
        usable_fraction: median usable fraction.
        low_confidence: estimates flagged low.
    """

    estimates: int
    median_error: float | None
    median_abs_error: float | None
    within_10: float | None
    within_20: float | None
    usable_fraction: float | None
    low_confidence: int


def summarise(scored: list[Scored]) -> Summary:
    """The :class:`Summary` of the unmixed ``scored`` estimates."""
    kept = [s for s in scored if not s.mixed]
    if not kept:
        return Summary(0, None, None, None, None, None, 0)
    err = np.array([s.error for s in kept])
    return Summary(
        estimates=len(kept),
        median_error=float(np.median(err)),
        median_abs_error=float(np.median(np.abs(err))),
        within_10=float(np.mean(np.abs(err) <= 0.10)),
        within_20=float(np.mean(np.abs(err) <= 0.20)),
        usable_fraction=float(np.median([s.estimate.usable_fraction for s in kept])),
        low_confidence=sum(s.estimate.confidence == "low" for s in kept),
    )


def error_bound_det(mu_per_s: float, period_s: float) -> float:
    """Largest relative error of a clean period's rate under deterministic service: one item
    more or fewer than ``mu * T``, ``1 / (mu T)``."""
    return 1.0 / (mu_per_s * period_s) if period_s > 0 else math.inf
