"""The filters of the service-rate estimator: the Gaussian smoother of a window of rates, the
Laplacian-of-Gaussian convergence test, and mergeable Welford moments (seed 003 §IV-B;
reference B.2, B.3 steps 7-9, B.5).

Pure functions and frozen values: :mod:`pipeline.reducers.service_rate` applies them to the
clean-period rates it samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


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


def smoothed_moments(values: Sequence[float]) -> Moments:
    """The moments of ``values`` smoothed by :data:`GAUSSIAN_TAPS` without padding (seed 003,
    section IV-B): one smoothed value per full placement of the filter, so
    ``len(values) - 4`` of them."""
    taps = len(GAUSSIAN_TAPS)
    return Moments.of(
        math.fsum(w * v for w, v in zip(GAUSSIAN_TAPS, values[i : i + taps], strict=True))
        for i in range(len(values) - taps + 1)
    )


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
