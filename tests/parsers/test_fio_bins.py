"""fio's bucket layout (stat.h / stat.c), checked against values fio itself prints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.records.fio_bins import (
    BinLayout,
    fine_lower_edge,
    fine_width,
    fio_midpoint,
    layout_for_bins,
    plat_val_to_idx,
)

SHARED_FIO = Path(__file__).resolve().parents[3] / "shared" / "data" / "fio"
NS = BinLayout(29, 0, "ns")


def test_documented_bucket_1000() -> None:
    """reference/fio.md 2.1: bucket 1000 is [1,703,936, 1,720,320) ns, fio's value 1,712,128,
    fiologparser's 1,720,320 (lower 1,703,936, upper 1,736,704)."""
    assert (fine_lower_edge(1000), fine_lower_edge(1000) + fine_width(1000)) == (1703936, 1720320)
    assert fio_midpoint(1000) == 1712128
    assert NS.flp_bin_values(0.5)[1000] == 1720320
    assert NS.flp_bin_values(0.0)[1000] == 1703936
    assert NS.flp_bin_values(1.0)[1000] == 1736704


def test_edges_are_contiguous_and_last_bucket_clips_at_2_to_34() -> None:
    e = NS.edges_ns
    assert e.shape == (1857,)
    assert np.all(np.diff(e) > 0)
    assert e[:129].tolist() == list(range(129))
    assert (e[1855], e[1856]) == (17045651456, 2**34)


def test_plat_val_to_idx_inverts_the_edges() -> None:
    for i in range(1856):
        lo, w = fine_lower_edge(i), fine_width(i)
        assert plat_val_to_idx(lo) == i and plat_val_to_idx(lo + w - 1) == i
    assert plat_val_to_idx(2**40) == 1855
    with pytest.raises(ValueError):
        plat_val_to_idx(-1)


def test_midpoints_are_the_keys_fio_prints_in_json_plus() -> None:
    """Every bucket key of fio 3.33's json+ ``bins`` is one of our midpoints."""
    text = (SHARED_FIO / "randrw_fio_output_normal_jsonplus.txt").read_text()
    doc, _ = json.JSONDecoder().raw_decode(text[text.index("\n{") + 1 :])
    keys = {
        int(k)
        for job in doc["jobs"]
        for ddir in ("read", "write")
        for k in job[ddir]["clat_ns"]["bins"]
    }
    assert len(keys) > 100
    assert keys <= set(NS.midpoints_ns.astype(np.int64).tolist())


@pytest.mark.parametrize(("nbins", "coarse"), [(1856, 0), (928, 1), (464, 2), (29, 6)])
def test_detects_ns_layouts(nbins: int, coarse: int) -> None:
    assert layout_for_bins(nbins) == BinLayout(29, coarse, "ns")


def test_1216_bins_need_to_be_told() -> None:
    with pytest.raises(ValueError, match=r"1216-bin layout of fio < 2\.99"):
        layout_for_bins(1216)
    lay = layout_for_bins(1216, unit="us")
    assert lay == BinLayout(19, 0, "us")
    assert lay.edges_ns[-1] == 2**24 * 1000  # the last us bucket ends at 2^24 us
    with pytest.raises(ValueError, match=r"expected one of \[1856, 928, 464, 232, 116, 58, 29\]"):
        layout_for_bins(15)  # fio < 3.42 wrote 15 overlapping bins for coarseness 7


def test_coarse_edges_sum_fine_buckets() -> None:
    c2 = BinLayout(29, 2, "ns")
    assert c2.nbins == 464
    assert c2.edges_ns.tolist() == NS.edges_ns[::4].tolist()
    assert np.all(np.diff(c2.midpoints_ns) > 0)
