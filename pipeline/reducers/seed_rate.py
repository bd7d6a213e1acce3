"""The seed's own service-rate method, as written (seed 003 §IV-A, §IV-B).

Selected by ``service_rate.method: seed``; :mod:`pipeline.reducers.service_rate` is the
adaptive method. The three steps:

1. Sampling period (§IV-A): ``T`` starts at the clock step ``t0_s`` and is lengthened by one
   step (the seed iterates over multiples of the timer latency) only when the last ``HISTORY``
   periods at this ``T`` were all unblocked and all within ``period_tol`` of ``T``. The first
   period that breaks either condition ends tuning: ``T`` goes back to the widest length that
   passed. If none passed (already at ``t0_s``) the method has *failed*: the seed concludes
   that it cannot monitor this end; the failure is reported and tuning starts again.
2. Statistic (§IV-B): the counts of the unblocked periods fill a sliding window of
   ``window``; each window is smoothed by the radius-2 Gaussian (no padding), and its normal
   ``q``-quantile ``mean + z_q * sd`` (Welford moments) is folded into a running mean. The
   rate is that running mean of quantiles over ``T``.
3. Convergence (§IV-B): a radius-1 Laplacian-of-Gaussian of the running mean; its responses
   are kept over a window of ``window`` and the estimate has converged when all of them are
   within ``tol`` of the running mean. It is reported and everything, ``T`` included, starts
   again.

Constants the seed's text does not keep (its numbers are lost) are RaftLib's 2015 monitor
(reference B.2): ``HISTORY`` 5 periods, period tolerance 0.5 %, window 16, LoG sigma 0.5,
tolerance 0.005. ``q`` is 0.9 as in the adaptive method. The seed has no longest period; a
never-blocked end would lengthen ``T`` forever, so ``T`` also stops at ``cap_s``.
"""

from __future__ import annotations

import math
from collections import deque
from statistics import NormalDist

from pipeline.reducers.queue_sampling import HISTORY
from pipeline.reducers.rate_filters import GAUSSIAN_TAPS, LOG_TAPS, Moments, smoothed_moments
from pipeline.reducers.service_rate import WINDOW, Estimate


class SeedPeriod:
    """The seed's sampling-period determination (§IV-A; module docstring, step 1).

    Args:
        t0_s: first period and step, s.
        cap_s: longest period, s.
        period_tol: a period is stable when its realised length is within this fraction of
            ``T``.

    Attributes:
        period_s: the current ``T``, s.
        frozen: tuning is over (periods are sampled).
        failed: tuning ended with no period length passing (the method failed).

    Raises:
        ValueError: ``t0_s <= 0``, ``cap_s < t0_s`` or a negative ``period_tol``.
    """

    def __init__(self, *, t0_s: float, cap_s: float, period_tol: float = 0.005) -> None:
        if not 0 < t0_s <= cap_s or period_tol < 0:
            raise ValueError(f"need 0 < t0_s <= cap_s, period_tol >= 0: {t0_s}, {cap_s}")
        self.t0_s, self.cap_s, self.period_tol = t0_s, cap_s, period_tol
        self.restart()

    def restart(self) -> None:
        """Tune again from ``t0_s``."""
        self.period_s = self.t0_s
        self.frozen = self.failed = False
        self._passed: float | None = None
        self._good = 0

    def observe(self, realised_s: float, blocked: bool) -> None:
        """Account one tuning period."""
        stable = abs(realised_s - self.period_s) <= self.period_tol * self.period_s
        if blocked or not stable:
            if self._passed is None:
                self.failed = True
            else:
                self.period_s, self.frozen = self._passed, True
            return
        self._good += 1
        if self._good < HISTORY:
            return
        self._passed, self._good = self.period_s, 0
        if self.period_s >= self.cap_s:
            self.frozen = True
        else:
            self.period_s = min(self.period_s + self.t0_s, self.cap_s)


class SeedRateEstimator:
    """The seed's method (module docstring); same interface as
    :class:`pipeline.reducers.service_rate.ServiceRateEstimator`.

    Args:
        t0_s: first sampling period and step, s.
        cap_s: longest sampling period, s.
        window: unblocked periods in the window (RaftLib 16).
        q: the quantile, in (0, 1).
        tol: convergence when every LoG response of the window is within ``tol`` times the
            running mean.
        period_tol: see :class:`SeedPeriod`.

    Raises:
        ValueError: ``q`` outside (0, 1), ``window`` shorter than the smoother, a negative
            ``tol``, or bad period arguments.
    """

    def __init__(
        self,
        *,
        t0_s: float = 0.001,
        cap_s: float = 0.01,
        window: int = WINDOW,
        q: float = 0.9,
        tol: float = 0.005,
        period_tol: float = 0.005,
    ) -> None:
        if not 0 < q < 1 or window < len(GAUSSIAN_TAPS) or tol < 0:
            raise ValueError(f"bad q {q}, window {window} or tol {tol}")
        self.tuner = SeedPeriod(t0_s=t0_s, cap_s=cap_s, period_tol=period_tol)
        self.window, self.q, self.tol = window, q, tol
        self._z = NormalDist().inv_cdf(q)
        self._counts: deque[int] = deque(maxlen=window)
        self._averaged: deque[float] = deque(maxlen=len(LOG_TAPS))
        self._responses: deque[float] = deque(maxlen=window)
        self.last_rate_per_s = 0.0
        self._forget()

    def _forget(self) -> None:
        self._counts.clear()
        self._averaged.clear()
        self._responses.clear()
        self._quantiles = Moments()  # of the windows' q-quantiles of smoothed counts
        self._means = Moments()  # of the windows' means
        self._sds = Moments()  # of their standard deviations
        self._samples = self._periods = self._moved = 0
        self._first_s: float | None = None
        self._elapsed_s = 0.0

    def restart(self) -> None:
        """Forget the statistics and tune the period again."""
        self._forget()
        self.tuner.restart()

    @property
    def period_s(self) -> float:
        """The sampling period ``T`` the monitor waits between calls, s."""
        return self.tuner.period_s

    def observe(
        self, count: int, blocked: bool, period_s: float, waited_s: float | None = None
    ) -> Estimate | None:
        """Account one period; a converged estimate (then restart), a failure (an estimate
        with ``method_failed``; then tuning starts again), or None.

        Args:
            count: items the end moved in the period.
            blocked: whether the end waited in it.
            period_s: its realised length, s.
            waited_s: ignored: the seed uses only periods without waiting.

        Raises:
            ValueError: ``count < 0`` or ``period_s <= 0``.
        """
        if count < 0 or not period_s > 0:
            raise ValueError(f"need count >= 0 and period_s > 0, got {count}, {period_s}")
        if not self.tuner.frozen:
            self.tuner.observe(period_s, blocked)
            if not self.tuner.failed:
                return None
            failed = self._estimate(converged=False, failed=True)
            self.restart()
            return failed
        self._periods += 1
        self._moved += count
        start_s, self._elapsed_s = self._elapsed_s, self._elapsed_s + period_s
        if blocked:
            return None
        if self._first_s is None:
            self._first_s = start_s
        self._samples += 1
        self._counts.append(count)
        if len(self._counts) < self.window or not self._update():
            return None
        done = self._estimate(converged=True, failed=False)
        self.last_rate_per_s = done.rate_per_s
        self.restart()
        return done

    def _update(self) -> bool:
        """Fold the window's smoothed quantile into the running mean; whether it converged."""
        smoothed = smoothed_moments(list(self._counts))
        sd = smoothed.sd or 0.0
        self._quantiles = self._quantiles.add(smoothed.mean + self._z * sd)
        self._means = self._means.add(smoothed.mean)
        self._sds = self._sds.add(sd)
        self._averaged.append(self._quantiles.mean)
        if len(self._averaged) < len(LOG_TAPS):
            return False
        self._responses.append(
            math.fsum(w * d for w, d in zip(LOG_TAPS, self._averaged, strict=True))
        )
        if len(self._responses) < self.window:
            return False
        return max(abs(r) for r in self._responses) <= self.tol * abs(self._quantiles.mean)

    def current(self) -> Estimate | None:
        """The estimate so far, not converged; None before the window first fills."""
        return self._estimate(converged=False, failed=False) if self._quantiles.n else None

    def _estimate(self, *, converged: bool, failed: bool) -> Estimate:
        t = self.tuner.period_s
        rate = self.last_rate_per_s if failed else self._quantiles.mean / t
        usable = self._samples / self._periods if self._periods else 0.0
        return Estimate(
            rate_per_s=rate,
            statistic="quantile",
            mean_per_s=self._means.mean / t,
            quantile_per_s=self._quantiles.mean / t,
            sd_per_s=self._sds.mean / t,
            q=self.q,
            converged=converged,
            usable_fraction=usable,
            confidence="high" if converged else "low",
            period_s=t,
            samples=self._samples,
            periods=self._periods,
            span_s=self._elapsed_s - (self._first_s or 0.0),
            stderr_per_s=self._sds.mean / t / math.sqrt(self._samples) if self._samples else 0.0,
            utilisation=self._moved / self._elapsed_s / rate
            if rate > 0 < self._elapsed_s
            else None,
            estimator="seed",
            method_failed=failed,
        )
