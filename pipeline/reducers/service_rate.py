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

The method fails knowingly: a stage that is mostly starved has few clean periods and those
favour slow service, so its estimate is too low and carries ``confidence="low"``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

WINDOW = 16
"""Accepted periods in the smoothing window (RaftLib ``WINDOW_SIZE``)."""

HISTORY = 5
"""Periods of blocking history the period tuner looks at (RaftLib ``NUMFRAMES``)."""


def gaussian_taps(radius: int = 2, sigma: float = 1.0) -> tuple[float, ...]:
    """Normalised Gaussian weights ``exp(-x^2 / (2 sigma^2))`` for ``x = -radius..radius``.

    Shape ``(2 * radius + 1,)``, summing to 1 (RaftLib's weights are not normalised and would
    bias every rate by -0.9 %; reference B.2, B.3 step 7).

    Raises:
        ValueError: ``radius < 0`` or ``sigma <= 0``.
    """
    if radius < 0 or sigma <= 0:
        raise ValueError(f"need radius >= 0 and sigma > 0, got {radius}, {sigma}")
    raw = [math.exp(-(x * x) / (2 * sigma * sigma)) for x in range(-radius, radius + 1)]
    total = math.fsum(raw)
    return tuple(w / total for w in raw)


def log_taps(radius: int = 1, sigma: float = 0.5) -> tuple[float, ...]:
    """Mean-centred Laplacian-of-Gaussian weights for ``x = -radius..radius``.

    The second derivative of the unit-area Gaussian, ``g(x) (x^2 - sigma^2) / sigma^4``, minus
    its mean so that a constant sequence gives 0. Radius 1, sigma 0.5 gives
    ``[1.49577, -2.99155, 1.49577]`` (RaftLib ``filter<double,1,LaplacianGaussian>(.5)``,
    reference B.2).

    Raises:
        ValueError: ``radius < 1`` or ``sigma <= 0``.
    """
    if radius < 1 or sigma <= 0:
        raise ValueError(f"need radius >= 1 and sigma > 0, got {radius}, {sigma}")
    s2 = sigma * sigma
    norm = 1.0 / (math.sqrt(2 * math.pi) * sigma)
    raw = [
        norm * math.exp(-(x * x) / (2 * s2)) * (x * x - s2) / (s2 * s2)
        for x in range(-radius, radius + 1)
    ]
    mean = math.fsum(raw) / len(raw)
    return tuple(w - mean for w in raw)


GAUSSIAN_TAPS = gaussian_taps()
"""The smoother: 0.054489, 0.244201, 0.402620, 0.244201, 0.054489."""

LOG_TAPS = log_taps()
"""The convergence test: 1.49577, -2.99155, 1.49577."""


@dataclass(frozen=True)
class Moments:
    """Count, mean and sum of squared deviations of a stream of values (Welford).

    Mergeable: the moments of two disjoint streams combine exactly (Chan, Golub and LeVeque;
    reference B.5), so per-thread or per-batch summaries can be kept and added up.

    Attributes:
        n: values seen.
        mean: their mean (0.0 when ``n == 0``).
        m2: sum of squared deviations from the mean.
    """

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values: Iterable[float]) -> Moments:
        """The moments of ``values`` (one Welford update per value)."""
        m = cls()
        for x in values:
            m = m.add(x)
        return m

    def add(self, x: float) -> Moments:
        """These moments with ``x`` added (Welford's update)."""
        n = self.n + 1
        delta = x - self.mean
        mean = self.mean + delta / n
        return Moments(n, mean, self.m2 + delta * (x - mean))

    def merge(self, other: Moments) -> Moments:
        """The moments of both streams (Chan et al.'s pairwise combination)."""
        n = self.n + other.n
        if n == 0:
            return Moments()
        delta = other.mean - self.mean
        mean = self.mean + delta * other.n / n
        return Moments(n, mean, self.m2 + other.m2 + delta * delta * self.n * other.n / n)

    @property
    def variance(self) -> float | None:
        """Sample variance (divisor ``n - 1``); None with fewer than 2 values."""
        return self.m2 / (self.n - 1) if self.n > 1 else None

    @property
    def sd(self) -> float | None:
        """Sample standard deviation; None with fewer than 2 values."""
        v = self.variance
        return None if v is None else math.sqrt(max(v, 0.0))


class QueueEnd:
    """Lock-free counters of one thread's use of one end of a queue (seed §III; reference
    B.3 step 1).

    The queue's user (one thread per instance) adds to ``count`` for every item it pops or
    pushes and adds 1 to ``blocked`` whenever it had to wait (queue empty for a reader, full
    for a writer), e.g. around a :class:`queue.Queue`::

        try:
            item = q.get_nowait()
        except queue.Empty:
            end.blocked += 1
            item = q.get()
        end.count += 1

    The monitor thread calls :meth:`take` once per period.

    Why :meth:`take` is atomic under CPython: both fields only ever grow and each has a single
    writer, the user thread, so no increment can be overwritten. The monitor never writes
    them: it reads each (one attribute load of an immutable int, which is never seen half
    updated) and returns the difference from what it read last time, so "zeroing" is the
    monitor moving its own mark. An increment that lands between the two reads is returned by
    the next :meth:`take`; none is lost or counted twice. (Swapping in a fresh counter object
    instead can lose an increment made through a reference the user loaded just before the
    swap.) Several user threads need one instance each; only one thread may call
    :meth:`take`.

    Attributes:
        count: items moved since creation.
        blocked: waits since creation.
    """

    __slots__ = ("_seen_blocked", "_seen_count", "blocked", "count")

    def __init__(self) -> None:
        self.count = 0
        self.blocked = 0
        self._seen_count = 0
        self._seen_blocked = 0

    def take(self) -> tuple[int, bool]:
        """Items moved since the previous call, and whether any wait happened in between."""
        count, blocked = self.count, self.blocked
        moved, waited = count - self._seen_count, blocked != self._seen_blocked
        self._seen_count, self._seen_blocked = count, blocked
        return moved, waited


class PeriodTuner:
    """The sampling period ``T`` and which periods are usable (seed §IV-A; reference B.3
    steps 3-4).

    ``T`` starts at ``t0_s`` and is lengthened (i) on the third period since the last change
    whose realised length missed ``T`` by more than ``miss_tol`` (the clock cannot keep
    ``T``), or (ii) while fewer than ``min_blocked`` of the last ``HISTORY`` periods at this
    ``T`` were blocked (longer periods hold more items, so each sample is less noisy, as long
    as enough of them stay clean). Each lengthening sets ``T`` to
    ``min(cap_s, max(T + t0_s, growth * T))``: ``growth=1`` is RaftLib's step of one clock
    resolution; the default doubling reaches a 20x cap in 5 steps instead of 20, which matters
    because the period is tuned again after every report. ``T`` is frozen after
    ``freeze_after`` periods without growth, or when it reaches the cap; only frozen periods
    are sampled.

    Args:
        t0_s: first period and smallest step, s (the clock's resolution in RaftLib).
        cap_s: longest period, s.
        growth: factor of each lengthening (>= 1).
        miss_tol: relative miss of the realised period that counts towards (i); RaftLib's
            0.005 suits a busy-waiting monitor, a sleeping Python thread misses it often
            (reference B.7) and will see ``T`` grow to the cap.
        band: a frozen-period sample is usable only if its realised length is within
            ``T * (1 +- band)`` (RaftLib 0.01; wider here since rates divide by the realised
            length, reference B.7).
        min_blocked: lengthen while fewer than this many of the last ``HISTORY`` periods
            were blocked (2).
        freeze_after: periods without growth before ``T`` is frozen.

    Attributes:
        period_s: the current ``T``, s.
        frozen: whether ``T`` is tuned (periods are then sampled, not used for tuning).

    Raises:
        ValueError: ``t0_s <= 0``, ``cap_s < t0_s``, ``growth < 1``, a negative ``miss_tol``
            or ``band``, ``freeze_after < 1``.
    """

    def __init__(
        self,
        *,
        t0_s: float,
        cap_s: float,
        growth: float = 2.0,
        miss_tol: float = 0.005,
        band: float = 0.05,
        min_blocked: int = 2,
        freeze_after: int = 10,
    ) -> None:
        if not 0 < t0_s <= cap_s or growth < 1:
            raise ValueError(f"need 0 < t0_s <= cap_s, growth >= 1: {t0_s}, {cap_s}, {growth}")
        if miss_tol < 0 or band < 0 or freeze_after < 1:
            raise ValueError(f"bad miss_tol {miss_tol}, band {band} or freeze_after {freeze_after}")
        self.t0_s, self.cap_s, self.growth = t0_s, cap_s, growth
        self.miss_tol, self.band = miss_tol, band
        self.min_blocked, self.freeze_after = min_blocked, freeze_after
        self._history: deque[bool] = deque(maxlen=HISTORY)
        self.restart()

    def restart(self) -> None:
        """Tune again from ``t0_s`` (frozen at once when ``t0_s == cap_s``)."""
        self.period_s = self.t0_s
        self.frozen = self.period_s >= self.cap_s
        self._misses = 0
        self._quiet = 0
        self._history.clear()

    def in_band(self, realised_s: float) -> bool:
        """Whether a period that lasted ``realised_s`` is close enough to ``T`` to use."""
        return abs(realised_s - self.period_s) <= self.band * self.period_s

    def observe(self, realised_s: float, blocked: bool) -> None:
        """Account one period of the tuning phase (nothing once frozen)."""
        if self.frozen:
            return
        self._quiet += 1
        self._history.append(blocked)
        if abs(realised_s - self.period_s) > self.miss_tol * self.period_s:
            self._misses += 1
        rare = len(self._history) == HISTORY and sum(self._history) < self.min_blocked
        if self._misses >= 3 or rare:
            longer = max(self.period_s + self.t0_s, self.period_s * self.growth)
            self.period_s = min(longer, self.cap_s)
            self._misses = 0
            self._quiet = 0
            self._history.clear()
        if self.period_s >= self.cap_s or self._quiet >= self.freeze_after:
            self.frozen = True


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
    ) -> None:
        if not 0 < q < 1:
            raise ValueError(f"q must be in (0, 1), got {q}")
        if window < len(GAUSSIAN_TAPS) or min_updates < 3 or tol < 0 or max_stderr < 0:
            raise ValueError(
                f"bad window {window}, min_updates {min_updates}, tol {tol} or max_stderr "
                f"{max_stderr}"
            )
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
        self.max_stderr = max_stderr
        self._z = NormalDist().inv_cdf(q)
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

    def observe(self, count: int, blocked: bool, period_s: float) -> Estimate | None:
        """Account one period; the estimate when it converges (then restart), else None.

        Args:
            count: items the end moved in the period just ended.
            blocked: whether the end had to wait in that period (queue empty on a read, full
                on a write).
            period_s: the realised length of the period, s.

        Raises:
            ValueError: ``count < 0`` or ``period_s <= 0``.
        """
        if count < 0 or not period_s > 0:
            raise ValueError(f"need count >= 0 and period_s > 0, got {count}, {period_s}")
        if not self.tuner.frozen:
            self.tuner.observe(period_s, blocked)
            return None
        start_s = self._elapsed_s
        self._elapsed_s += period_s
        self._moved += count
        self._periods += 1
        if blocked or not self.tuner.in_band(period_s):
            return None
        if self._first_s is None:
            self._first_s = start_s
        self._samples += 1
        rate = count / period_s
        self._rates.append(rate)
        if self._samples > 1:
            self._ssd += (rate - self._rates[-2]) ** 2
        if len(self._rates) < self.window:
            return None
        self._update()
        if self._updates < self.min_updates:
            return None
        response = math.fsum(w * e for w, e in zip(LOG_TAPS, self._estimates, strict=True))
        if abs(response) > self.tol * abs(self._estimates[-1]):
            return None
        if self._stderr() > self.max_stderr * abs(self._means.mean):
            return None
        done = self._estimate(converged=True)
        self.restart()
        return done

    def current(self) -> Estimate | None:
        """The estimate so far, not converged; None before the window first fills."""
        return self._estimate(converged=False) if self._updates else None

    def _update(self) -> None:
        """Summarise the window and fold its mean, sd and quantile into the running means."""
        taps = len(GAUSSIAN_TAPS)
        rates = list(self._rates)
        smoothed = Moments.of(
            math.fsum(w * r for w, r in zip(GAUSSIAN_TAPS, rates[i : i + taps], strict=True))
            for i in range(len(rates) - taps + 1)
        )
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
