"""The capped, equal-jitter exponential backoff schedule."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.sink.backoff import backoff_caps, backoff_delays

seconds = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False, allow_infinity=False)


def test_caps_double_then_stay_at_the_cap() -> None:
    assert backoff_caps(0.5, 30.0, 9) == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_rng_extremes_give_half_and_whole_ceiling() -> None:
    assert backoff_delays(0.5, 30.0, 8, lambda: 0.0) == [0.25, 0.5, 1, 2, 4, 8, 15, 15]
    assert backoff_delays(0.5, 30.0, 8, lambda: 1.0) == backoff_caps(0.5, 30.0, 8)


def test_cap_below_initial_caps_the_first_delay() -> None:
    assert backoff_caps(10.0, 3.0, 3) == [3.0, 3.0, 3.0]


def test_zero_retries_is_an_empty_schedule() -> None:
    assert backoff_delays(1.0, 2.0, 0, lambda: 0.5) == []


@pytest.mark.parametrize(
    ("initial", "cap", "retries"), [(0.0, 1.0, 1), (1.0, 0.0, 1), (-1.0, 1.0, 1), (1.0, 1.0, -1)]
)
def test_bad_arguments_raise(initial: float, cap: float, retries: int) -> None:
    with pytest.raises(ValueError):
        backoff_caps(initial, cap, retries)


def test_rng_outside_unit_interval_raises() -> None:
    with pytest.raises(ValueError, match="rng"):
        backoff_delays(1.0, 2.0, 1, lambda: 1.5)


@given(
    initial=seconds,
    cap=seconds,
    retries=st.integers(min_value=0, max_value=200),
    us=st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=200, max_size=200),
)
def test_delays_lie_in_half_to_whole_ceiling(
    initial: float, cap: float, retries: int, us: list[float]
) -> None:
    it = iter(us)
    delays = backoff_delays(initial, cap, retries, lambda: next(it))
    caps = backoff_caps(initial, cap, retries)
    assert len(delays) == len(caps) == retries
    for delay, ceiling in zip(delays, caps, strict=True):
        assert ceiling / 2 <= delay <= ceiling <= cap


@given(initial=seconds, cap=seconds, retries=st.integers(min_value=0, max_value=2000))
def test_caps_are_monotone_and_reach_the_cap(initial: float, cap: float, retries: int) -> None:
    caps = backoff_caps(initial, cap, retries)
    assert all(a <= b for a, b in itertools.pairwise(caps))
    assert all(c <= cap for c in caps)
    if caps:
        assert caps[0] == min(initial, cap)
    if retries >= 2000:
        assert caps[-1] == cap
