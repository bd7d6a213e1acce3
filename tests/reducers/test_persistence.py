"""Persistence ordering (seed 001 §4.3, Figure 5) and its oracles (reference/sysstat.md §3.3)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.reducers.peer_flags import WindowResult
from pipeline.reducers.persistence import HourRow, Persistence, hour_of, hourly_rows

LUNS = ("a", "b", "c", "d")
T0 = datetime(2011, 4, 17, tzinfo=UTC).timestamp()


def window(
    end_s: float, anomalous: tuple[str, ...], group: str = "2", metric: str = "await"
) -> WindowResult:
    n = len(LUNS)
    return WindowResult(
        group=group,
        metric=metric,
        index=0,
        start_s=end_s - 885.0,
        end_s=end_s,
        luns=LUNS,
        distances=np.zeros((n, n)),
        threshold=1.0,
        bins=1,
        scores=tuple(100.0 if lun in anomalous else 0.0 for lun in LUNS),
        majority_distances=(0.0,) * n,
        anomalous=anomalous,
        faulty=(),
    )


@pytest.mark.parametrize("a", [1, 2, 5, 17])
def test_a_anomalous_windows_take_a_clean_windows_to_clear(a: int) -> None:
    acc = Persistence()
    for i in range(a):
        acc.update(window(T0 + 450 * i, ("b",)))
    assert acc.values["2:b"] == a
    for i in range(a):
        acc.update(window(T0 + 450 * (a + i), ()))
        assert acc.values["2:b"] == a - i - 1
    acc.update(window(T0 + 450 * 2 * a, ()))
    assert acc.values["2:b"] == 0  # never below zero
    assert acc.ranking() == []


@given(st.lists(st.booleans(), max_size=60))
def test_accumulator_is_a_floored_walk(flags: list[bool]) -> None:
    acc = Persistence()
    expect = 0
    for i, f in enumerate(flags):
        acc.update(window(T0 + 450 * i, ("a",) if f else ()))
        expect = expect + 1 if f else max(0, expect - 1)
        assert acc.values["2:a"] == expect >= 0
        assert acc.values["2:a"] <= sum(flags[: i + 1])


def test_ranking_by_value_then_name_and_top_n() -> None:
    acc = Persistence()
    for anomalous in [("c", "b", "d"), ("c", "b"), ("c", "a"), ("b",)]:
        acc.update(window(T0, anomalous))
    # c: 1 2 3 2 ; b: 1 2 1 2 ; d: 1 0 0 0 ; a: 0 0 1 0
    assert acc.ranking() == [("2:b", 2), ("2:c", 2)]
    assert acc.ranking(1) == [("2:b", 2)]
    assert acc.ranking(0) == []
    with pytest.raises(ValueError):
        acc.ranking(-1)


def test_groups_are_kept_apart_and_metrics_not_mixed() -> None:
    acc = Persistence()
    acc.update(window(T0, ("a",), group="1"))
    acc.update(window(T0, ("a", "b"), group="2"))
    assert acc.ranking() == [("1:a", 1), ("2:a", 1), ("2:b", 1)]
    with pytest.raises(ValueError, match="tps"):
        acc.update(window(T0, (), metric="tps"))


def test_hour_of_follows_the_interval_end_convention() -> None:
    assert hour_of(T0 + 3600) == T0  # a window ending at 01:00:00 belongs to hour 00
    assert hour_of(T0 + 3600.5) == T0 + 3600
    assert hour_of(T0 + 1) == T0


def test_hourly_rows_like_figure_5() -> None:
    """Windows every 30 min ending at :15 and :45; b anomalous in the first 3, c from the 3rd
    on; hour 02 has no windows and repeats hour 01."""
    results = [
        window(T0 + 900, ("b",)),  # 00:15  b1
        window(T0 + 2700, ("b",)),  # 00:45  b2
        window(T0 + 4500, ("b", "c")),  # 01:15  b3 c1
        window(T0 + 6300, ("c",)),  # 01:45  b2 c2
        window(T0 + 3 * 3600 + 900, ("c", "a")),  # 03:15  b1 c3 a1
    ]
    rows = list(hourly_rows(results))
    assert [r.hour_start_s - T0 for r in rows] == [0, 3600, 7200, 10800]
    assert [r.ranking for r in rows] == [
        (("2:b", 2),),
        (("2:b", 2), ("2:c", 2)),
        (("2:b", 2), ("2:c", 2)),
        (("2:c", 3), ("2:a", 1), ("2:b", 1)),
    ]
    assert [r.format() for r in rows] == [
        "20110417.00: 2 2:b",
        "20110417.01: 2 2:b 2 2:c",
        "20110417.02: 2 2:b 2 2:c",
        "20110417.03: 3 2:c 1 2:a 1 2:b",
    ]
    assert [r.format() for r in hourly_rows(results, top_n=1)][-1] == "20110417.03: 3 2:c"
    assert HourRow(int(T0), ()).format() == "20110417.00:"
    assert list(hourly_rows([])) == []


def test_hourly_rows_refuse_a_window_of_a_closed_hour() -> None:
    with pytest.raises(ValueError, match="closed"):
        list(hourly_rows([window(T0 + 4500, ()), window(T0 + 900, ())]))
