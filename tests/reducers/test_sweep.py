"""The sweep line of seed 004 (Algorithm 2): critical files, exclusive times, weighted factors."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.reducers.sweep import covering_set, weighted_factor


def union_length(starts: list[float], ends: list[float]) -> float:
    """Length of a union of intervals by merging sorted intervals (independent of the sweep)."""
    total, cur_s, cur_e = 0.0, None, None
    for s, e in sorted((s, e) for s, e in zip(starts, ends, strict=True) if e > s):
        if cur_e is None or s > cur_e:
            if cur_e is not None and cur_s is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None and cur_s is not None:
        total += cur_e - cur_s
    return total


def test_the_seeds_figure_3() -> None:
    # File1 0-10, File3 4-8, File2 6-12, File4 16-18 give (File1, 0, 10), (File2, 10, 12) and
    # (File4, 16, 18)
    cs = covering_set([0, 4, 6, 16], [10, 8, 12, 18], ["File1", "File3", "File2", "File4"])
    assert [(s.label, s.start, s.end) for s in cs.segments] == [
        ("File1", 0, 10),
        ("File2", 10, 12),
        ("File4", 16, 18),
    ]
    assert cs.exclusive == {"File1": 10.0, "File2": 2.0, "File4": 2.0}
    assert cs.critical == ("File1", "File2", "File4")
    assert cs.union == 14.0
    assert cs.span == 18.0


def test_labels_shared_by_several_intervals_add_up() -> None:
    cs = covering_set([0, 5, 20], [5, 10, 30], ["a", "a", "b"])
    assert cs.exclusive == {"b": 10.0, "a": 10.0}
    assert cs.union == 20.0


def test_empty_nan_and_zero_length_intervals_are_ignored() -> None:
    assert covering_set([], []).union == 0.0
    cs = covering_set([1, 2, math.nan, 3], [1, 1, 5, 4])
    assert [(s.index, s.start, s.end) for s in cs.segments] == [(3, 3.0, 4.0)]
    assert cs.span == 1.0


def test_ties_go_to_the_earlier_interval() -> None:
    cs = covering_set([0, 0], [5, 5], ["first", "second"])
    assert cs.critical == ("first",)


def test_mismatched_lengths_are_an_error() -> None:
    with pytest.raises(ValueError, match="1-d of one length"):
        covering_set([0, 1], [2])
    with pytest.raises(ValueError, match="2 labels for 1 intervals"):
        covering_set([0], [1], ["a", "b"])


intervals = st.lists(
    st.tuples(st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=60)).map(
        lambda t: (t[0] / 4, (t[0] + t[1]) / 4)
    ),
    min_size=0,
    max_size=60,
)


@given(intervals)
@settings(max_examples=300, deadline=None)
def test_exclusive_times_tile_the_union(ivs: list[tuple[float, float]]) -> None:
    starts = [s for s, _ in ivs]
    ends = [e for _, e in ivs]
    cs = covering_set(starts, ends)
    assert math.isclose(sum(cs.exclusive.values()), union_length(starts, ends), abs_tol=1e-9)
    assert math.isclose(cs.union, union_length(starts, ends), abs_tol=1e-9)
    # segments are ordered, disjoint, and each lies inside the interval charged with it
    for a, b in itertools.pairwise(cs.segments):
        assert a.end <= b.start
    for seg in cs.segments:
        assert starts[seg.index] <= seg.start < seg.end <= ends[seg.index]
    # every point of every interval is covered by some segment
    for s, e in ivs:
        if e > s:
            covered = sum(max(0.0, min(e, g.end) - max(s, g.start)) for g in cs.segments)
            assert math.isclose(covered, e - s, abs_tol=1e-9)


@given(intervals.filter(lambda v: len(v) <= 7))
@settings(max_examples=200, deadline=None)
def test_the_critical_intervals_are_a_minimum_cover(ivs: list[tuple[float, float]]) -> None:
    starts = [s for s, _ in ivs]
    ends = [e for _, e in ivs]
    cs = covering_set(starts, ends)
    chosen = {seg.index for seg in cs.segments}
    total = union_length(starts, ends)
    for k in range(len(chosen)):
        for subset in itertools.combinations(range(len(ivs)), k):
            sub_s = [starts[i] for i in subset]
            sub_e = [ends[i] for i in subset]
            assert union_length(sub_s, sub_e) < total - 1e-9, "a smaller cover exists"


def test_a_million_intervals_sum_exactly() -> None:
    rng = np.random.default_rng(7)
    s = rng.uniform(0, 1e4, 1_000_000)
    e = s + rng.exponential(0.5, s.size)
    cs = covering_set(s, e)
    order = np.argsort(s)
    ss, ee = s[order], e[order]
    reach = np.maximum.accumulate(ee)
    gaps = np.clip(ss[1:] - reach[:-1], 0, None).sum()
    assert math.isclose(cs.union, (reach[-1] - ss[0]) - gaps, rel_tol=1e-12)


def test_weighted_factor_is_equation_2() -> None:
    excl = {"f1": 10.0, "f2": 2.0, "f4": 2.0}
    # P = (0.5*10 + 1.0*2 + 0*2) / 14; an undefined value drops out of both sums
    assert weighted_factor({"f1": 0.5, "f2": 1.0, "f4": 0.0}, excl) == pytest.approx(7 / 14)
    assert weighted_factor({"f1": 0.5, "f2": None, "f4": 0.0}, excl) == pytest.approx(5 / 12)
    assert weighted_factor({"f1": None}, excl) is None
