"""Capped exponential backoff with "equal jitter", as a pure schedule.

For retry ``i`` (0-based) the ceiling is ``c_i = min(cap_s, initial_s * 2**i)`` and the delay is
``c_i / 2 + u_i * c_i / 2`` with ``u_i = rng()`` in [0, 1]. This is the "equal jitter" variant of
M. Brooker, "Exponential Backoff and Jitter" (AWS Architecture Blog, 2015): unlike "full jitter"
(``u_i * c_i``) it never waits less than half the ceiling, which is what a cluster answering 429
needs, while still spreading the retries of many shippers apart. The unjittered ceilings match
``elasticsearch.helpers.streaming_bulk`` (``min(max_backoff, initial_backoff * 2**(attempt-1))``,
elastic.md §6.4).
"""

from __future__ import annotations

from collections.abc import Callable


def backoff_caps(initial_s: float, cap_s: float, retries: int) -> list[float]:
    """The unjittered ceilings ``min(cap_s, initial_s * 2**i)`` for ``i`` in ``range(retries)``.

    Returns:
        ``retries`` non-decreasing values in seconds, each in ``[min(initial_s, cap_s), cap_s]``.

    Raises:
        ValueError: ``initial_s`` or ``cap_s`` is not positive, or ``retries`` is negative.
    """
    if not initial_s > 0 or not cap_s > 0:
        raise ValueError(f"initial_s and cap_s must be > 0, got {initial_s!r}, {cap_s!r}")
    if retries < 0:
        raise ValueError(f"retries must be >= 0, got {retries!r}")
    caps: list[float] = []
    ceiling = initial_s
    for _ in range(retries):
        caps.append(min(cap_s, ceiling))
        ceiling = min(cap_s, ceiling * 2)  # stays finite for any number of retries
    return caps


def backoff_delays(
    initial_s: float, cap_s: float, retries: int, rng: Callable[[], float]
) -> list[float]:
    """Jittered delays (seconds) to sleep before retry 1..``retries``.

    Args:
        initial_s: ceiling of the first delay (seconds, > 0).
        cap_s: largest ceiling (seconds, > 0); every delay is <= ``cap_s``.
        retries: number of delays wanted (>= 0).
        rng: returns a uniform number in [0, 1] (``random.random`` in production).

    Returns:
        ``retries`` delays; delay ``i`` lies in ``[c_i / 2, c_i]`` with
        ``c_i = min(cap_s, initial_s * 2**i)`` (equal jitter, see the module docstring).

    Raises:
        ValueError: bad arguments (see :func:`backoff_caps`) or ``rng`` returned a value
            outside [0, 1].
    """
    delays: list[float] = []
    for ceiling in backoff_caps(initial_s, cap_s, retries):
        u = rng()
        if not 0.0 <= u <= 1.0:
            raise ValueError(f"rng must return a number in [0, 1], got {u!r}")
        delays.append(ceiling / 2 + u * ceiling / 2)
    return delays
