"""Online estimate of a queue user's non-blocking service rate (seed 003 §IV).

A monitor thread samples a queue end every period ``T``: how many items the end moved and
whether it had to wait (an empty queue for the reading end, a full one for the writing end).
Only periods without waiting show what the stage can do when it is neither starved nor
back-pressured (seed §III). Their rates ``count / R`` (``R`` the realised period) fill a
sliding window of 16; each window is smoothed by a normalised 5-tap Gaussian and summarised
by its mean and standard deviation (Welford), giving the window's mean and its normal
``q``-quantile ``mean + z_q * sd``. Successive window values are averaged online, and the
average has converged when a Laplacian-of-Gaussian over its last three values is within
``tol`` of it. It is then reported and the estimator starts again, period tuning included,
so that a later change of rate is seen (seed §IV-B; reference B.3 steps 1-10).

The constants are those of RaftLib's 2015 monitor (reference B.2): period tolerance 0.5 %,
lengthening on the third miss, a blocking history of 5 periods, window 16, Gaussian radius 2
(sigma 1), LoG radius 1 with sigma 0.5, tolerance 0.005. The rest (``q``, the cap on ``T``,
the growth factor, when to report the mean rather than the quantile, when to call an
estimate low-confidence) were chosen with the simulation in
:mod:`pipeline.reducers.service_rate_sim` (reference B.6).

When the monitor also measures how long the end waited in each period (``waited_s``), a
period in which it waited at most ``max_wait`` (80 %) of the time is usable too, its rate taken
over the time the stage worked. This is not in the seed: periods without any wait are rare at
low utilisation and favour slow service (clean periods are those in which the queue did not
drain), which biased estimates by about -20 % at utilisation 0.5 and kept them from converging
again after the rate rose (bench/service_rate_methods.py).

Without waits, the method fails knowingly: a stage that is mostly starved has few clean
periods and those favour slow service, so its estimate is too low and carries
``confidence="low"``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal, Protocol

from pipeline.reducers.queue_sampling import PeriodTuner
from pipeline.reducers.rate_filters import (
    GAUSSIAN_TAPS,
    LOG_TAPS,
    Moments,
    smoothed_moments,
)

__all__ = [
    "WINDOW",
    "Confidence",
    "Estimate",
    "RateEstimator",
    "ServiceRateEstimator",
]

WINDOW = 16
"""Accepted periods in the smoothing window (RaftLib ``WINDOW_SIZE``)."""

Confidence = Literal["high", "low"]


@dataclass(frozen=True)
class Estimate:
    """A service-rate estimate (items per second of the monitored queue end).

    Attributes:
        rate_per_s: the reported rate: ``mean_per_s`` when at least ``mean_min_usable`` of
            the periods were usable (the stage is rarely starved, so clean periods are not
            biased), else ``quantile_per_s`` (reference B.4, B.6).
        statistic: which of the two ``rate_per_s`` is, ``"mean"`` or ``"quantile"``.
        mean_per_s: online mean of the successive windows' means of smoothed clean-period
            rates.
        quantile_per_s: online mean of the successive windows' ``mean + z_q * sd`` (normal
            quantile ``q`` of the smoothed rates).
        sd_per_s: online mean of the windows' standard deviations of smoothed rates.
        q: the quantile, in (0, 1).
        converged: the LoG test passed (False for :meth:`ServiceRateEstimator.current`).
        usable_fraction: share of the periods at the tuned ``T`` since the last restart that
            were usable (not blocked, realised length in the band); in [0, 1].
        confidence: ``"low"`` when not converged (not enough clean periods yet) or when
            ``usable_fraction`` is below ``min_usable`` (the stage was mostly starved, and the
            few clean periods favour slow service, so the rate is likely too low); ``"high"``
            otherwise.
        period_s: the tuned sampling period, s.
        samples: usable periods that went into the estimate (at least ``window + 2``
            when converged).
        periods: periods at the tuned ``T`` since the last restart.
        span_s: time from the start of the first usable period to the end of the last
            period, s (what the estimate summarises).
        stderr_per_s: standard error of the mean clean-period rate, ``sd / sqrt(samples)``
            with the variance taken from successive differences (von Neumann's estimator).
        utilisation: items moved per second over all periods at the tuned ``T`` (blocked
            ones included) divided by ``rate_per_s``: about the stage's utilisation, too
            high when the rate is underestimated; None when the rate is 0.
        estimator: which method made it: ``"adaptive"`` (:class:`ServiceRateEstimator`) or
            ``"seed"`` (:class:`pipeline.reducers.seed_rate.SeedRateEstimator`).
        method_failed: the seed method concluded it cannot monitor this end (no sampling
            period passed its test, seed §IV-A); ``rate_per_s`` is then the last converged
            rate (0.0 without one) and ``converged`` is False.
    """

    rate_per_s: float
    statistic: Literal["mean", "quantile"]
    mean_per_s: float
    quantile_per_s: float
    sd_per_s: float
    q: float
    converged: bool
    usable_fraction: float
    confidence: Confidence
    period_s: float
    samples: int
    periods: int
    span_s: float
    stderr_per_s: float
    utilisation: float | None
    estimator: Literal["adaptive", "seed"] = "adaptive"
    method_failed: bool = False


class RateEstimator(Protocol):
    """What a monitor needs of an estimator (the adaptive and the seed method)."""

    @property
    def period_s(self) -> float:
        """How long to wait before the next :meth:`observe`, s."""
        ...

    def observe(
        self, count: int, blocked: bool, period_s: float, waited_s: float | None = None
    ) -> Estimate | None:
        """Account one period; an estimate when there is one to report."""
        ...

    def current(self) -> Estimate | None:
        """The estimate in progress."""
        ...


class ServiceRateEstimator:
    """Online non-blocking service rate of one queue end (seed §IV-B; reference B.3).

    The caller, a monitor thread, waits :attr:`period_s`, measures how long it actually
    waited and calls :meth:`observe` with what the end did meanwhile, in a loop::

        start = clock()
        while running:
            sleep(est.period_s)
            now = clock()
            count, blocked = end.take()  # a QueueEnd
            estimate = est.observe(count, blocked, now - start)
            start = now

    An estimate comes once ``window + 2`` usable periods have been seen, the LoG test has
    passed and the mean's standard error is small enough; :meth:`current` gives the one in
    progress. Not thread-safe: one monitor per estimator.

    Args:
        t0_s: first sampling period and smallest growth step, s. Aim for about 10 items per
            period at the rate expected: shorter periods give noisy samples.
        cap_s: longest sampling period, s. A never-starved stage's period reaches it, and
            each estimate then takes about ``25 * cap_s`` (tuning again, then ``window + 2``
            periods).
        growth: the period tuner's growth factor, see :class:`PeriodTuner`.
        window: usable periods before the first estimate (RaftLib 16).
        q: quantile of the smoothed rates reported beside the mean, in (0, 1).
        tol: convergence when ``|LoG response| <= tol * |estimate|`` (RaftLib's 0.005).
        min_updates: window updates before convergence may be declared (at least 3).
        mean_min_usable: report the mean from this usable fraction up, else the quantile.
        min_usable: usable fractions below this give ``confidence="low"``.
        max_stderr: converge only once the standard error of the mean clean-period rate is
            at most this fraction of it (so short periods with few items wait for more).
        miss_tol, band, min_blocked, freeze_after: the period tuner's, see
            :class:`PeriodTuner`.
        retune: tune the period again after each report (else keep the first tuned ``T``).
        max_wait: with measured waits (``observe(waited_s=...)``), a period is usable when the
            end waited at most this fraction of it (0.8; 0 keeps only periods without waiting).

    Raises:
        ValueError: ``q`` outside (0, 1), ``window`` shorter than the smoother,
            ``min_updates < 3``, a negative ``tol`` or ``max_stderr``, or bad tuner
            arguments.
    """

    def __init__(
        self,
        *,
        t0_s: float = 0.001,
        cap_s: float = 0.01,
        growth: float = 2.0,
        window: int = WINDOW,
        q: float = 0.9,
        tol: float = 0.005,
        min_updates: int = 3,
        mean_min_usable: float = 0.5,
        min_usable: float = 0.15,
        max_stderr: float = 0.03,
        miss_tol: float = 0.005,
        band: float = 0.05,
        min_blocked: int = 2,
        freeze_after: int = 10,
        retune: bool = True,
        max_wait: float = 0.8,
    ) -> None:
        _check(q, window, min_updates, tol, max_stderr)
        self.tuner = PeriodTuner(
            t0_s=t0_s,
            cap_s=cap_s,
            growth=growth,
            miss_tol=miss_tol,
            band=band,
            min_blocked=min_blocked,
            freeze_after=freeze_after,
        )
        self.window, self.q, self.tol, self.min_updates = window, q, tol, min_updates
        self.mean_min_usable, self.min_usable, self.retune = mean_min_usable, min_usable, retune
        self.max_stderr, self._z = max_stderr, NormalDist().inv_cdf(q)
        self.max_wait = max_wait
        self._rates: deque[float] = deque(maxlen=window)
        self._estimates: deque[float] = deque(maxlen=len(LOG_TAPS))
        self._forget()

    def _forget(self) -> None:
        self._rates.clear()
        self._estimates.clear()
        self._means = Moments()  # of the windows' means of smoothed rates
        self._sds = Moments()  # of their standard deviations
        self._quantiles = Moments()  # of their q-quantiles
        self._ssd = 0.0  # sum of squared successive differences of clean-period rates
        self._updates = 0
        self._samples = 0
        self._periods = 0
        self._elapsed_s = 0.0
        self._moved = 0
        self._first_s: float | None = None

    @property
    def period_s(self) -> float:
        """How long the monitor should wait before the next :meth:`observe`, s."""
        return self.tuner.period_s

    def restart(self) -> None:
        """Forget the statistics (and re-tune the period when ``retune``)."""
        self._forget()
        if self.retune:
            self.tuner.restart()

    def observe(
        self, count: int, blocked: bool, period_s: float, waited_s: float | None = None
    ) -> Estimate | None:
        """Account one period; the estimate when it converges (then restart), else None.

        Args:
            count: items the end moved in the period just ended.
            blocked: whether the end had to wait in that period (queue empty on a read, full
                on a write).
            period_s: the realised length of the period, s.
            waited_s: how long the end waited in the period, s, when it was measured. A
                period in which it waited at most ``max_wait`` of its length is then usable,
                its rate taken over the time it worked (``count / (period_s - waited_s)``);
                None: only periods without waiting are usable.

        Raises:
            ValueError: ``count < 0``, ``period_s <= 0`` or ``waited_s`` outside
                ``[0, period_s]``.
        """
        if count < 0 or not period_s > 0:
            raise ValueError(f"need count >= 0 and period_s > 0, got {count}, {period_s}")
        busy_s = period_s
        if waited_s is not None:
            if not 0 <= waited_s <= period_s:
                raise ValueError(f"need 0 <= waited_s <= period_s, got {waited_s}, {period_s}")
            blocked, busy_s = waited_s > self.max_wait * period_s, period_s - waited_s
        if not self.tuner.frozen:
            self.tuner.observe(period_s, blocked)
            return None
        if not self._sample(count, blocked, period_s, busy_s) or len(self._rates) < self.window:
            return None
        self._update()
        if not self._converged():
            return None
        done = self._estimate(converged=True)
        self.restart()
        return done

    def _sample(self, count: int, blocked: bool, period_s: float, busy_s: float) -> bool:
        """Account a period at the tuned ``T``; whether its rate (over ``busy_s``) was usable
        (and kept)."""
        start_s = self._elapsed_s
        self._elapsed_s += period_s
        self._moved += count
        self._periods += 1
        if blocked or not self.tuner.in_band(period_s):
            return False
        if self._first_s is None:
            self._first_s = start_s
        self._samples += 1
        rate = count / busy_s
        self._rates.append(rate)
        if self._samples > 1:
            self._ssd += (rate - self._rates[-2]) ** 2
        return True

    def _converged(self) -> bool:
        """Enough window updates, the LoG response within ``tol`` of the estimate, and the
        standard error of the mean small enough."""
        if self._updates < self.min_updates:
            return False
        response = math.fsum(w * e for w, e in zip(LOG_TAPS, self._estimates, strict=True))
        if abs(response) > self.tol * abs(self._estimates[-1]):
            return False
        return not self._stderr() > self.max_stderr * abs(self._means.mean)

    def current(self) -> Estimate | None:
        """The estimate so far, not converged; None before the window first fills."""
        return self._estimate(converged=False) if self._updates else None

    def _update(self) -> None:
        """Summarise the window and fold its mean, sd and quantile into the running means."""
        smoothed = smoothed_moments(list(self._rates))
        sd = smoothed.sd or 0.0
        self._means = self._means.add(smoothed.mean)
        self._sds = self._sds.add(sd)
        self._quantiles = self._quantiles.add(smoothed.mean + self._z * sd)
        self._updates += 1
        self._estimates.append(self._reported()[0])

    def _stderr(self) -> float:
        """Standard error of the mean clean-period rate, the variance estimated from successive
        differences (von Neumann) so that a change of rate within the estimate inflates it
        once, not for every sample."""
        n = self._samples
        return math.sqrt(self._ssd / (2 * (n - 1)) / n) if n > 1 else math.inf

    def _usable_fraction(self) -> float:
        return self._samples / self._periods if self._periods else 0.0

    def _reported(self) -> tuple[float, Literal["mean", "quantile"]]:
        """The reported rate and which statistic it is."""
        if self._usable_fraction() >= self.mean_min_usable:
            return self._means.mean, "mean"
        return self._quantiles.mean, "quantile"

    def _estimate(self, *, converged: bool) -> Estimate:
        rate, statistic = self._reported()
        usable = self._usable_fraction()
        stderr = self._stderr()
        high = converged and usable >= self.min_usable
        return Estimate(
            rate_per_s=rate,
            statistic=statistic,
            mean_per_s=self._means.mean,
            quantile_per_s=self._quantiles.mean,
            sd_per_s=self._sds.mean,
            q=self.q,
            converged=converged,
            usable_fraction=usable,
            confidence="high" if high else "low",
            period_s=self.tuner.period_s,
            samples=self._samples,
            periods=self._periods,
            span_s=self._elapsed_s - (self._first_s or 0.0),
            stderr_per_s=stderr,
            utilisation=self._moved / self._elapsed_s / rate if rate > 0 else None,
        )


def _check(q: float, window: int, min_updates: int, tol: float, max_stderr: float) -> None:
    """Raise ValueError on the estimator arguments :class:`ServiceRateEstimator` refuses."""
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    if window < len(GAUSSIAN_TAPS) or min_updates < 3 or tol < 0 or max_stderr < 0:
        raise ValueError(
            f"bad window {window}, min_updates {min_updates}, tol {tol} or max_stderr {max_stderr}"
        )
