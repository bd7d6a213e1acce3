"""Missing samples in the peer comparison (seed 001): windows use the samples present.

Inputs: the real two-server recording ``tests/data/sysstat/peer_restart_*`` (server A's sadc
stopped for 74 s; provenance in that directory's README) and the fault recording
``peer_fault_sadf_d.csv`` (no gap).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.jobs.peer_diagnosis import series
from pipeline.jobs.peer_recording import load, load_lines
from pipeline.reducers.peer_cdf import cdf_distances, window_distances
from pipeline.reducers.peer_flags import detect
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_stream import PeerDetector
from pipeline.reducers.peer_thresholds import train_threshold
from pipeline.reducers.peer_windows import moving_average
from pipeline.reducers.persistence import Persistence

DATA = Path(__file__).resolve().parents[1] / "data" / "sysstat"
RESTART = [DATA / f"peer_restart_{s}_sadf_d.csv" for s in ("srvA_1", "srvA_2", "srvB")]
GROUPS = {"srv*:loop*": "lun"}
PARAMS = PeerParams()


@pytest.fixture(scope="module")
def tps() -> PeerSeries:
    """tps of the six LUNs of both servers on the group's grid (A has a 74 s gap)."""
    (s,) = series(load(RESTART, 1.0), "tps", GROUPS)
    return s


def windows(s: PeerSeries) -> list[np.ndarray]:
    sm = moving_average(s.masked(), PARAMS.ma_width)
    n = (sm.shape[1] - PARAMS.win_size) // PARAMS.win_shift + 1
    return [sm[:, j * 30 : j * 30 + 60] for j in range(n)]


def test_a_window_without_gap_gives_the_distances_of_before(tps: PeerSeries) -> None:
    full = [w for w in windows(tps) if not np.isnan(w).any()]
    assert len(full) == 4  # windows 1, 2, 8, 9
    for w in full:
        dist, bins, present, compared = window_distances(w, PARAMS)
        ref, ref_bins = cdf_distances(w, PARAMS)
        assert np.array_equal(dist, ref) and bins == ref_bins
        assert present.tolist() == [60] * 6 and compared.all()


def test_a_window_with_gaps_compares_the_times_all_compared_luns_have(tps: PeerSeries) -> None:
    for w in windows(tps):
        dist, bins, present, compared = window_distances(w, PARAMS)
        assert present.tolist() == (~np.isnan(w)).sum(axis=1).tolist()
        if compared.sum() == 0:
            assert bins == 0 and np.isnan(dist).all()
            continue
        assert compared.tolist() == (present >= 30).tolist()
        keep = np.flatnonzero(compared)
        common = ~np.isnan(w[keep]).any(axis=0)
        ref, ref_bins = cdf_distances(w[np.ix_(keep, common)], PARAMS)
        assert bins == ref_bins
        assert np.array_equal(dist[np.ix_(keep, keep)], ref)
        assert np.isnan(dist[~compared]).all() and np.isnan(dist[:, ~compared]).all()


def test_too_few_luns_with_enough_samples_skip_the_window() -> None:
    w = np.tile(np.linspace(1.0, 2.0, 60), (4, 1))
    w[1:3, :40] = np.nan  # two of four LUNs keep 20 < 30 samples: 2 compared, fewer than 3
    dist, bins, present, compared = window_distances(w, PARAMS)
    assert present.tolist() == [60, 20, 20, 60]
    assert not compared.any() and bins == 0 and np.isnan(dist).all()
    w[1, :40] = 1.5  # three with enough samples (35 each), but only 10 times in common
    w[1, :25] = np.nan
    w[3, 35:] = np.nan
    dist, bins, present, compared = window_distances(w, PARAMS)
    assert present.tolist() == [60, 35, 20, 35]
    assert not compared.any() and bins == 0


def test_streaming_equals_batch_across_the_gap_and_its_state_is_json(tps: PeerSeries) -> None:
    batch = detect(tps, 2.0, PARAMS)
    assert [len(r.skipped) for r in batch] == [0, 0, 0, 0, 3, 3, 3, 0, 0, 0]
    det = PeerDetector(tps.group, tps.metric, tps.luns, 2.0, PARAMS)
    got = []
    assert tps.present is not None
    for a in range(0, tps.times_s.size, 37):  # blocks cutting the gap anywhere
        b = a + 37
        got += det.add(tps.times_s[a:b], tps.values[:, a:b], tps.present[:, a:b])
        state = json.loads(json.dumps(det.state(), allow_nan=False))
        det = PeerDetector.restore(tps.group, tps.metric, state)
    assert len(got) == len(batch)
    for g, r in zip(got, batch, strict=True):
        assert (g.index, g.end_s, g.bins, g.samples, g.skipped) == (
            r.index,
            r.end_s,
            r.bins,
            r.samples,
            r.skipped,
        )
        assert (g.anomalous, g.faulty, g.scores) == (r.anomalous, r.faulty, r.scores)
        assert np.array_equal(g.distances, r.distances, equal_nan=True)


def test_skipped_luns_keep_their_persistence_and_history(tps: PeerSeries) -> None:
    """With a threshold of 0 every compared LUN is anomalous in every window: the server-A LUNs
    gain nothing (and lose nothing) in the three windows that skip them."""
    results = detect(tps, 0.0, PARAMS)
    acc = Persistence()
    for r in results:
        acc.update(r)
        assert set(r.anomalous) == set(r.luns) - set(r.skipped)
        assert not set(r.faulty) & set(r.skipped)
        assert all(np.isnan(r.majority_distances[r.luns.index(x)]) for x in r.skipped)
    values = dict(acc.ranking())
    assert values == {f"lun:{x}": 10 - 3 * x.startswith("srvA") for x in tps.luns}


def test_the_per_line_path_gives_the_same_grid(tps: PeerSeries) -> None:
    (lines,) = series(load_lines(RESTART, 1.0), "tps", GROUPS)
    assert np.array_equal(lines.times_s, tps.times_s)
    assert lines.present is not None and tps.present is not None
    assert np.array_equal(lines.present, tps.present)
    assert np.allclose(lines.values, tps.values, rtol=1e-12, atol=0)


def test_training_counts_only_windows_with_three_luns_compared() -> None:
    values = np.tile(np.linspace(1.0, 2.0, 74), (3, 1))
    values[0, 10] = 7.0
    assert train_threshold(values, PARAMS).windows == 1
    missing = values.copy()
    missing[1, 5:45] = np.nan  # LUN 1 keeps no smoothed sample: 2 LUNs left, no window
    with pytest.raises(ValueError, match="no complete window"):
        train_threshold(missing, PARAMS)
    missing[1, 5:45] = values[1, 5:45]
    missing[1, 70] = np.nan  # 56 smoothed samples: compared on the 56 times all three have
    ok = ~np.isnan(moving_average(missing, 15)).any(axis=0)
    expected = cdf_distances(moving_average(values, 15)[:, ok], PARAMS)[0].max()
    assert train_threshold(missing, PARAMS).threshold == expected


def test_a_presence_mask_of_another_shape_is_refused(tps: PeerSeries) -> None:
    with pytest.raises(ValueError, match=r"present must have the shape of values \(6, 361\)"):
        PeerSeries(tps.group, tps.metric, tps.luns, tps.times_s, tps.values, tps.values[:2] > 0)
