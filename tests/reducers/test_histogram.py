"""LatencyHistogram: merge laws, percentile invariants (property tests) and exact values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.records.fio_bins import BinLayout
from pipeline.reducers.histogram import LatencyHistogram

NS = BinLayout(29, 0, "ns")


@st.composite
def histograms(draw: st.DrawFn, layout: BinLayout = NS) -> LatencyHistogram:
    k = draw(st.integers(0, 20))
    idx = draw(st.lists(st.integers(0, layout.nbins - 1), min_size=k, max_size=k, unique=True))
    counts = draw(st.lists(st.integers(1, 10**6), min_size=k, max_size=k))
    return LatencyHistogram.from_sparse(
        layout, np.array(sorted(idx), dtype=np.int64), np.array(counts, dtype=np.int64)
    )


@given(histograms(), histograms(), histograms())
def test_merge_is_associative_commutative_and_conserves_counts(
    a: LatencyHistogram, b: LatencyHistogram, c: LatencyHistogram
) -> None:
    left = a.merge(b).merge(c)
    right = a.merge(b.merge(c))
    assert left.counts.tolist() == right.counts.tolist()
    assert a.merge(b).counts.tolist() == b.merge(a).counts.tolist()
    assert left.samples == a.samples + b.samples + c.samples


@settings(max_examples=200)
@given(histograms(), st.lists(st.floats(0, 1), min_size=1, max_size=10))
def test_quantiles_are_monotone_and_within_the_occupied_buckets(
    h: LatencyHistogram, qs: list[float]
) -> None:
    values = h.quantiles_ns(sorted(qs))
    if h.samples == 0:
        assert values == [None] * len(qs)
        assert (h.min_ns(), h.max_ns(), h.mean_ns()) == (None, None, None)
        return
    assert all(v is not None for v in values)
    floats = [float(v) for v in values if v is not None]
    assert floats == sorted(floats)
    lo, hi = h.min_ns(), h.max_ns()
    assert lo is not None and hi is not None
    assert all(lo <= v <= hi for v in floats)


def test_interpolates_inside_the_bucket() -> None:
    # 100 samples in bucket 1000 = [1703936, 1720320): the median sits halfway.
    h = LatencyHistogram.from_sparse(NS, np.array([1000]), np.array([100]))
    assert h.quantiles_ns([0.5, 1.0]) == [1703936 + 8192, 1720320]
    assert (h.min_ns(), h.max_ns(), h.mean_ns()) == (1703936, 1720320, 1712128)


def test_exact_values_for_exact_buckets() -> None:
    # buckets below 128 hold one integer each: 10 x 5 ns and 10 x 7 ns
    h = LatencyHistogram.from_sparse(NS, np.array([5, 7]), np.array([10, 10]))
    assert h.quantiles_ns([0.25, 0.5, 0.75]) == [5.5, 6.0, 7.5]
    assert h.nonempty() == ([5.0, 7.0], [10, 10])


def test_merge_refuses_other_layouts() -> None:
    with pytest.raises(ValueError, match="cannot merge"):
        LatencyHistogram.empty(NS).merge(LatencyHistogram.empty(BinLayout(29, 1, "ns")))


def test_quantile_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        LatencyHistogram.empty(NS).quantiles_ns([1.5])
