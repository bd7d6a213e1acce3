"""Peer comparison (seed 001 §4.2): FD bins, CDF distances, windows, k-of-(2k-1), thresholds,
streaming vs batch, and detection on generated and real sysstat data.

Oracles come from the parameters themselves (reference/sysstat.md §3.3), derived for this
module's edge handling (full trailing moving-average windows, so window ``j`` depends on raw
samples ``[30j, 30j + 73]`` with the seed's defaults: :func:`window_span`).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.reducers.peer_cdf import cdf_distances, cumulative_counts, fd_bin_count
from pipeline.reducers.peer_flags import WindowResult, detect, indicted, majority_distance
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_stream import PeerDetector
from pipeline.reducers.peer_thresholds import Thresholds, train_threshold, train_thresholds
from pipeline.reducers.peer_windows import moving_average, window_span
from pipeline.reducers.persistence import Persistence

SHARED = Path(__file__).resolve().parents[3] / "shared"
SYNTH = SHARED / "tools" / "synth_sadf.py"
FUSE_CSV = SHARED / "data" / "sysstat" / "fuse_delay_fault_sadf_d.csv"
LUNS6 = tuple(f"lun{i}" for i in range(6))


# --- bins and distances -------------------------------------------------------------------


def test_fd_bin_count_of_a_constructed_window() -> None:
    """48 pooled values with q25 = 2, q75 = 3 (IQR 1), range 10.5, n = win_size = 8.

    BinSize = 2 * 1 * 8^(-1/3) = 1, Bins = ceil(10.5 / 1) = 11. The pooled count (48) must not
    be used: 2 * 48^(-1/3) = 0.55 would give 20 bins.
    """
    pooled = np.array([0.0] * 11 + [2.0, 2.0] + [2.5] * 22 + [3.0, 3.0] + [10.5] * 11)
    assert pooled.size == 48
    assert np.percentile(pooled, [25, 75]).tolist() == [2.0, 3.0]
    assert fd_bin_count(pooled, win_size=8, bin_cap=1000) == 11
    assert fd_bin_count(pooled, win_size=8, bin_cap=5) == 5


def test_fd_fallbacks_for_zero_iqr_and_zero_range() -> None:
    idle = np.zeros((6, 60))
    assert fd_bin_count(idle, 60, 1000) == 1
    idle[2, 7] = 0.07  # one I/O in an idle window: IQR 0, range > 0
    assert fd_bin_count(idle, 60, 1000) == 1000
    assert fd_bin_count(idle, 60, 37) == 37


def test_distances_hand_computed() -> None:
    """A=[0,0,1,1], B=[0,1,1,1], C=[1,1,1,1]: pooled q25 = 0.75, q75 = 1, IQR 0.25,
    BinSize = 0.5 * 4^(-1/3) = 0.315, Bins = ceil(1 / 0.315) = 4 (edges 0, .25, .5, .75, 1).
    CDFs: A .5 .5 .5 1, B .25 .25 .25 1, C 0 0 0 1 -> d(A,B) = .75, d(A,C) = 1.5, d(B,C) = .75.
    """
    window = np.array([[0, 0, 1, 1], [0, 1, 1, 1], [1, 1, 1, 1]], dtype=np.float64)
    dist, bins = cdf_distances(window, PeerParams(win_size=4, win_shift=2))
    assert bins == 4
    assert cumulative_counts(window, 4).tolist() == [[2, 2, 2, 4], [1, 1, 1, 4], [0, 0, 0, 4]]
    assert dist.tolist() == [[0.0, 0.75, 1.5], [0.75, 0.0, 0.75], [1.5, 0.75, 0.0]]
    # 2 peers each: "more than half" means both, so the majority distance is the smaller one
    assert majority_distance(dist).tolist() == [0.75, 0.75, 0.75]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(3, 7),
    st.integers(2, 40),
    st.integers(1, 50),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_distance_invariants(n_luns: int, w: int, cap: int, seed: int, integer: bool) -> None:
    """Symmetric, zero diagonal, zero for identical CDFs, in [0, bins - 1]; the majority
    distance exceeds a threshold exactly when more than half of the peers do."""
    rng = np.random.default_rng(seed)
    x = rng.lognormal(0.0, 1.0, size=(n_luns, w))
    if integer:  # ties and IQR = 0 windows
        x = np.floor(x)
    x[1] = x[0][rng.permutation(w)]  # same values, other order: identical CDF
    p = PeerParams(win_size=w, win_shift=1, bin_cap=cap)
    dist, bins = cdf_distances(x, p)
    assert 1 <= bins <= cap
    assert np.array_equal(dist, dist.T)
    assert np.all(np.diag(dist) == 0.0)
    assert dist[0, 1] == 0.0
    assert dist.min() >= 0.0 and dist.max() <= bins - 1
    for tau in np.unique(dist):
        over = (dist > tau).sum(axis=1)  # the diagonal is 0, never > tau >= 0
        assert np.array_equal(2 * over > n_luns - 1, majority_distance(dist) > tau)


def test_moving_average_drops_the_partial_edge() -> None:
    x = np.arange(10, dtype=np.float64)[None, :]
    assert moving_average(x, 3).tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]
    assert moving_average(x, 1).tolist() == x.tolist()
    assert moving_average(x, 11).shape == (1, 0)


def test_parameters_and_series_are_validated() -> None:
    with pytest.raises(ValueError):
        PeerParams(win_shift=61)
    with pytest.raises(ValueError):
        PeerParams(k=0)
    with pytest.raises(ValueError, match=">= 3 distinct"):
        PeerSeries("g", "await", ("a", "b"), np.arange(3.0), np.zeros((2, 3)))
    with pytest.raises(ValueError, match="finite"):
        PeerSeries("g", "await", ("a", "b", "c"), np.arange(2.0), np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="increasing"):
        PeerSeries("g", "await", ("a", "b", "c"), np.array([1.0, 1.0]), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="no complete window"):
        train_threshold(np.zeros((3, 73)), PeerParams())


# --- window arithmetic and the k-of-(2k-1) oracles (sysstat.md §3.3) --------------------------


def fully_covered_flags(f: int, length: int, n_windows: int, p: PeerParams) -> list[bool]:
    """Window j anomalous iff its raw span lies entirely inside the fault [f, f + length)."""
    return [
        f <= window_span(j, p)[0] and window_span(j, p)[1] < f + length for j in range(n_windows)
    ]


def first_indictment(flags: list[bool], k: int) -> int | None:
    return next((j for j in range(len(flags)) if indicted(flags[: j + 1], k)), None)


def test_window_span_with_the_seed_parameters() -> None:
    p = PeerParams()
    assert window_span(0, p) == (0, 73)
    assert window_span(3, p) == (90, 163)
    assert window_span(3, PeerParams(ma_width=1)) == (90, 149)


@pytest.mark.parametrize("f", range(0, 181))
def test_fully_covered_fault_is_indicted_120_to_149_samples_after_onset(f: int) -> None:
    """The sysstat.md §3.3 oracle (ma_width = 1, W = 60, S = 30, k = 3): first anomalous
    window starts at ceil(f/30)*30; indictment at the end of the 3rd, 120-149 samples."""
    p = PeerParams(ma_width=1)
    flags = fully_covered_flags(f, 10_000, 40, p)
    first = flags.index(True)
    assert window_span(first, p)[0] == math.ceil(f / 30) * 30
    j = first_indictment(flags, p.k)
    assert j == first + 2
    latency = window_span(j, p)[1] - f + 1
    assert latency == 120 + (math.ceil(f / 30) * 30 - f)
    assert 120 <= latency <= 149
    # with the moving average the smoothed window reaches 14 samples further back
    p15 = PeerParams()
    flags15 = fully_covered_flags(f, 10_000, 40, p15)
    j15 = first_indictment(flags15, p15.k)
    assert j15 is not None
    assert 134 <= window_span(j15, p15)[1] - f + 1 <= 163


@pytest.mark.parametrize("f", range(0, 60, 7))
def test_faults_shorter_than_w_plus_2s_are_never_indicted(f: int) -> None:
    p = PeerParams(ma_width=1)
    for length in range(1, 120):
        assert first_indictment(fully_covered_flags(f, length, 40, p), p.k) is None
    aligned = 30 * math.ceil(f / 30)
    assert first_indictment(fully_covered_flags(aligned, 120, 40, p), p.k) is not None


def test_one_clean_window_in_the_middle_does_not_reset() -> None:
    assert not indicted([True, True], 3)
    assert indicted([True, True, False, True], 3)
    assert indicted([True, False, True, False, True], 3)
    assert not indicted([True, False, True, False, False, True], 3)  # only 2 in the last 5
    assert not indicted([True, True, False, False, False, True], 3)


# --- end to end on a constructed step fault ---------------------------------------------------


def step_fault(n: int, f: int, length: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Six LUNs of uniform [0, 1) noise; lun5 gets +10 000 on raw samples [f, f + length).

    Returns ``(clean, faulty)``. The step is so large that any window containing one affected
    smoothed sample (>= 10 000 / 15) hits the bin cap and puts lun5 ~16 bin-units from every
    peer, above anything the clean noise produces.
    """
    rng = np.random.default_rng(seed)
    clean = rng.random((6, n))
    faulty = clean.copy()
    faulty[5, f : f + length] += 10_000.0
    return clean, faulty


def run_step(n: int, f: int, length: int) -> tuple[list[bool], list[bool], list[WindowResult]]:
    p = PeerParams()
    clean, faulty = step_fault(n, f, length)
    tau = train_threshold(clean, p).threshold  # the same noise: clean windows never exceed it
    res = detect(PeerSeries("pg", "await", LUNS6, np.arange(n, dtype=np.float64), faulty), tau, p)
    for r in res:
        assert set(r.anomalous) <= {"lun5"} and set(r.faulty) <= {"lun5"}
    return ["lun5" in r.anomalous for r in res], ["lun5" in r.faulty for r in res], res


@pytest.mark.parametrize("f", [73, 80, 90, 102, 103, 150, 200, 233])
def test_step_fault_end_to_end_latency(f: int) -> None:
    """With this module's edge handling window j is anomalous iff its raw span [30j, 30j + 73]
    contains a faulty sample (the moving average smears the step 14 samples back), so the
    first anomalous window is j0 = ceil((f - 73) / 30) and the indictment comes at the end of
    window j0 + 2: latency = 30*j0 + 134 - f, i.e. 61-90 samples (15.25-22.5 min at 15 s)."""
    anom, faulty, _ = run_step(600, f, 10_000)
    j0 = max(0, math.ceil((f - 73) / 30))
    assert anom.index(True) == j0
    assert all(anom[j0:])
    j = faulty.index(True)
    assert j == j0 + 2
    latency = window_span(j, PeerParams())[1] - f + 1
    assert latency == 30 * j0 + 134 - f
    assert 61 <= latency <= 90


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 300), st.integers(1, 200))
def test_step_fault_windows_follow_the_span_oracle(f: int, length: int) -> None:
    """Exactly the windows whose raw span meets the fault are anomalous; faulty follows the
    k-of-(2k-1) rule on those flags; the persistence accumulator counts them up and down."""
    p = PeerParams()
    anom, faulty, res = run_step(600, f, length)
    spans = [window_span(j, p) for j in range(len(anom))]
    expect = [a <= f + length - 1 and b >= f for a, b in spans]
    assert anom == expect
    assert faulty == [indicted(expect[: j + 1], p.k) for j in range(len(expect))]
    acc = Persistence()
    value = 0
    for r, a in zip(res, expect, strict=True):
        acc.update(r)
        value = value + 1 if a else max(0, value - 1)
        assert acc.values["pg:lun5"] == value
        assert acc.values["pg:lun0"] == 0


def test_short_spike_is_smeared_into_three_windows() -> None:
    """A consequence of the moving average worth knowing: a single huge raw sample affects 15
    smoothed samples and can fall into 3 windows, so it is indicted although far shorter than
    W + 2S (the §3.3 bound holds for faults that must fill a window to be seen)."""
    _, faulty, _ = run_step(600, 73, 1)
    assert faulty.index(True) == 2
    _, faulty, _ = run_step(600, 80, 1)
    assert not any(faulty)


# --- streaming equals batch ---------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
# a block shorter than ma_width - 1 once dropped raw samples the next block needed:
@example(n_luns=3, n=6, ma=5, w=2, shift_frac=1.0, k=1, seed=0, cuts=[3], tau_q=0.0)
@given(
    n_luns=st.integers(3, 6),
    n=st.integers(0, 160),
    ma=st.integers(1, 6),
    w=st.integers(2, 12),
    shift_frac=st.floats(0.01, 1.0),
    k=st.integers(1, 3),
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 160), max_size=8),
    tau_q=st.floats(0.0, 1.0),
)
def test_streaming_equals_batch(
    n_luns: int,
    n: int,
    ma: int,
    w: int,
    shift_frac: float,
    k: int,
    seed: int,
    cuts: list[int],
    tau_q: float,
) -> None:
    p = PeerParams(ma_width=ma, win_size=w, win_shift=max(1, round(w * shift_frac)), k=k)
    rng = np.random.default_rng(seed)
    values = np.round(rng.lognormal(0.0, 1.0, size=(n_luns, n)), 1)
    times = 1_700_000_000.0 + 15.0 * np.arange(n, dtype=np.float64)
    luns = tuple(f"l{i}" for i in range(n_luns))
    tau = float(np.quantile(values, tau_q)) if n else 1.0
    batch = detect(PeerSeries("g", "await", luns, times, values), tau, p)
    det = PeerDetector("g", "await", luns, tau, p)
    streamed = []
    bounds = [0, *sorted(c for c in cuts if c <= n), n]
    for a, b in itertools.pairwise(bounds):
        streamed += det.add(times[a:b], values[:, a:b])
        raw_held, smoothed_held = det.held_samples
        assert raw_held <= p.ma_width - 1 and smoothed_held < p.win_size
    assert len(streamed) == len(batch)
    for s, r in zip(streamed, batch, strict=True):
        assert (s.index, s.start_s, s.end_s, s.bins) == (r.index, r.start_s, r.end_s, r.bins)
        assert np.array_equal(s.distances, r.distances)
        assert (s.scores, s.anomalous, s.faulty) == (r.scores, r.anomalous, r.faulty)


def test_detector_rejects_time_going_back() -> None:
    det = PeerDetector(
        "g", "await", ("a", "b", "c"), 1.0, PeerParams(ma_width=1, win_size=2, win_shift=1)
    )
    det.add([10.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="not after"):
        det.add([10.0], [1.0, 2.0, 3.0])


def test_window_times_and_scores() -> None:
    p = PeerParams(ma_width=3, win_size=4, win_shift=2, k=1)
    values = np.zeros((4, 9))
    values[3] = np.arange(9) * 100.0  # the odd one out
    times = 100.0 + 15.0 * np.arange(9, dtype=np.float64)
    res = detect(PeerSeries("g", "m", ("a", "b", "c", "d"), times, values), 0.5, p)
    assert [(r.start_s, r.end_s) for r in res] == [(130.0, 175.0), (160.0, 205.0)]
    assert res[0].scores == (100 / 3, 100 / 3, 100 / 3, 100.0)
    assert res[0].anomalous == ("d",) and res[0].faulty == ("d",)


# --- thresholds ----------------------------------------------------------------------------------


def test_thresholds_round_trip_through_json() -> None:
    p = PeerParams(ma_width=2, win_size=5, win_shift=2)
    rng = np.random.default_rng(1)
    series = [
        PeerSeries(g, m, LUNS6, 60.0 * np.arange(40, dtype=np.float64), rng.random((6, 40)))
        for g, m in (("pg1", "await"), ("pg1", "tps"), ("pg2", "await"))
    ]
    th = train_thresholds(series, p)
    assert (th.trained_from_s, th.trained_until_s) == (0.0, 60.0 * 39)
    assert [e.windows for e in th.entries] == [18, 18, 18]
    again = Thresholds.from_dict(json.loads(json.dumps(th.to_dict())))
    assert again == th
    assert again.get("pg1", "tps") == train_threshold(series[1].values, p).threshold
    with pytest.raises(KeyError, match="pg3"):
        th.get("pg3", "await")
    bad = th.to_dict() | {"version": 99}
    with pytest.raises(ValueError, match="version"):
        Thresholds.from_dict(bad)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 6))
def test_training_data_itself_is_never_anomalous(seed: int, n_luns: int) -> None:
    """The max rule with a strict > (seed 001 §4.2.1): no window of the training data flags."""
    p = PeerParams(ma_width=3, win_size=10, win_shift=5)
    rng = np.random.default_rng(seed)
    values = rng.gamma(2.0, 1.0, size=(n_luns, 120))
    tau = train_threshold(values, p).threshold
    luns = tuple(f"l{i}" for i in range(n_luns))
    res = detect(PeerSeries("g", "m", luns, np.arange(120.0), values), tau, p)
    assert len(res) == 22
    assert all(r.anomalous == () for r in res)


# --- data from the synthetic generator (reference/sysstat.md §2.5) ----------------------------


@dataclass(frozen=True)
class Synth:
    truth: dict[str, object]
    rows: dict[tuple[str, float], dict[str, float]]  # (host/dev, t) -> metrics
    times: np.ndarray


def load_sadf_dir(outdir: Path) -> Synth:
    """Tiny ``sadf -d`` CSV loader for these tests (the real parser lives elsewhere)."""
    rows: dict[tuple[str, float], dict[str, float]] = {}
    for path in sorted(outdir.glob("*.csv")):
        cols: list[str] = []
        for line in path.read_text().splitlines():
            if line.startswith("# "):
                cols = line[2:].split(";")
                continue
            f = dict(zip(cols, line.split(";"), strict=True))
            t = datetime.strptime(f["timestamp"], "%Y-%m-%d %H:%M:%S UTC")
            ts = t.replace(tzinfo=UTC).timestamp()
            rows[(f"{f['hostname']}/{f['DEV']}", ts)] = {c: float(f[c]) for c in cols[4:]}
    truth = json.loads((outdir / "truth.json").read_text())
    return Synth(truth, rows, np.array(sorted({t for _, t in rows})))


def synth_series(s: Synth, group: str, metric: str) -> PeerSeries:
    groups = s.truth["peer_groups"]
    assert isinstance(groups, dict)
    luns = tuple(groups[group])
    v = np.array([[s.rows[(lun, t)][metric] for t in s.times] for lun in luns])
    return PeerSeries(group, metric, luns, s.times, v)


def run_synth(outdir: Path, *args: str) -> Synth:
    common = ["--hosts", "4", "--luns", "3", "--luns-per-group", "6", "--interval", "15"]
    subprocess.run(["/usr/bin/python3", str(SYNTH), str(outdir), *common, *args], check=True)
    return load_sadf_dir(outdir)


FAULTS = ("fs001:dm-2:1.0:2.5:5:await", "fs002:dm-0:3.0:4.0:3:await", "fs003:dm-1:4.5:5.5:0.3:tput")


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Synth, Synth]:
    """A fault-free 12 h training day and a 6 h test period with three injected faults."""
    if not SYNTH.exists():
        pytest.fail(f"{SYNTH} is missing: the tests need ../shared beside the repository")
    base = tmp_path_factory.mktemp("synth")
    train = run_synth(base / "train", "--hours", "12", "--seed", "11")
    fault_args = [a for f in FAULTS for a in ("--fault", f)]
    test = run_synth(
        base / "test", "--hours", "6", "--seed", "12", "--start", "2026-01-06T00:00:00",
        *fault_args,
    )  # fmt: skip
    return train, test


def test_generated_await_faults_are_indicted_and_nothing_else(synth: tuple[Synth, Synth]) -> None:
    """Both await faults (x5 for 1.5 h, x3 for 1 h) are indicted, no other LUN ever is, and
    the faulty LUN tops its group's persistence ranking. A x3-x5 await step behaves like the
    constructed step fault: indicted at window j0 + 2, 75 samples (18.75 min) after onset.
    Seeds 21, 31, 41, 51 gave the same indicted LUNs when this test was written."""
    train, test = synth
    p = PeerParams()
    th = train_thresholds([synth_series(train, g, "await") for g in ("0", "1")], p)
    start_s = float(test.times[0]) - 15.0
    expected = {"0": ("fs001/dm-2", 1.0, 2.5), "1": ("fs002/dm-0", 3.0, 4.0)}
    for g, (lun, start_h, end_h) in expected.items():
        res = detect(synth_series(test, g, "await"), th.get(g, "await"), p)
        assert {x for r in res for x in r.faulty} == {lun}
        onset, end = start_s + 3600 * start_h, start_s + 3600 * end_h
        f = int(np.searchsorted(test.times, onset))  # first slowed sample (stamped at its end)
        assert test.times[f] == onset
        first = next(r for r in res if r.faulty)
        j0 = math.ceil((f - 73) / 30)
        assert first.index == j0 + 2  # exactly the step-fault oracle
        assert window_span(first.index, p)[1] - f + 1 == 30 * j0 + 134 - f == 75
        last = max(r.end_s for r in res if r.faulty)
        assert last <= end + 15.0 * (2 * p.win_shift + p.win_size + p.ma_width)
        acc = Persistence()
        for r in res:
            if r.end_s <= end:
                acc.update(r)
        assert acc.ranking(1)[0][0] == f"{g}:{lun}"


def test_generated_throughput_fault_indicts_no_bystander(synth: tuple[Synth, Synth]) -> None:
    """tps: no LUN other than the throttled one is ever indicted. Whether the throttled LUN
    itself is indicted depends on the training day: idle-to-busy transitions give windows with
    a tiny pooled IQR and a huge range (1000 bins), which inflate the max-rule threshold; with
    seeds 11, 21, 41, 51 the x0.3 fault was missed, with 31 indicted, so it is not asserted."""
    train, test = synth
    p = PeerParams()
    for g in ("0", "1"):
        tau = train_threshold(synth_series(train, g, "tps").values, p).threshold
        res = detect(synth_series(test, g, "tps"), tau, p)
        assert {x for r in res for x in r.faulty} <= {"fs003/dm-1"}


# --- the real recording (reference/sysstat.md §2.2) --------------------------------------------


def load_fuse_await() -> PeerSeries:
    """loop0-2 (plain-file peers) and loop4 (FUSE-backed, +10 ms per I/O from 04:17:07)."""
    rows = [ln.split(";") for ln in FUSE_CSV.read_text().splitlines() if not ln.startswith("#")]
    luns = ("loop0", "loop1", "loop2", "loop4")
    stamps = sorted({r[2] for r in rows})
    await_ms = {(r[3], r[2]): float(r[10]) for r in rows}
    times = np.array(
        [
            datetime.strptime(s, "%Y-%m-%d %H:%M:%S UTC").replace(tzinfo=UTC).timestamp()
            for s in stamps
        ]
    )
    v = np.array([[await_ms[(lun, s)] for s in stamps] for lun in luns])
    return PeerSeries("vm", "await", luns, times, v)


def test_real_slow_lun_recording() -> None:
    """15 one-second samples; loop4's await jumps from ~0.4 ms to ~10.6 ms at 04:17:07 (index
    7, 5.61 ms, a partial second). Far too short for the seed's 60-sample windows, so the
    parameters are scaled down with the seed's ratios kept (S = W/2, k = 3): no moving
    average, W = 4, S = 2. The threshold is trained on the fault-free prefix (indices 0-6, two
    windows). Caveat (sysstat.md §2.2): loop4 is FUSE-backed and already 2-3x slower than its
    peers before the fault, so the prefix threshold (2.0) is a fully separated pair's distance;
    after onset loop4 is separated by more bins (29, 56, then 4 when 25 % of the pooled values
    sit at 10 ms and the IQR jumps, distance 3) and still exceeds it."""
    if not FUSE_CSV.exists():
        pytest.fail(f"{FUSE_CSV} is missing: the tests need ../shared beside the repository")
    s = load_fuse_await()
    p = PeerParams(ma_width=1, win_size=4, win_shift=2, k=3)
    onset = 7
    assert s.values[3, onset - 1] < 1.0 < s.values[3, onset]
    tau = train_threshold(s.values[:, :onset], p)
    assert (tau.threshold, tau.windows) == (2.0, 2)
    res = detect(s, tau.threshold, p)
    assert [r.anomalous for r in res] == [(), (), ("loop4",), ("loop4",), ("loop4",), ("loop4",)]
    assert [r.faulty for r in res] == [(), (), (), (), ("loop4",), ("loop4",)]
    assert [r.bins for r in res] == [2, 3, 29, 56, 4, 4]
    first = next(r for r in res if r.faulty)
    assert first.end_s - s.times_s[onset] == 4.0  # indicted 5 samples after onset (7..11)
    acc = Persistence()
    for r in res:
        acc.update(r)
    assert acc.ranking() == [("vm:loop4", 4)]


def test_detector_state_round_trip_continues_identically() -> None:
    """A detector restored from :meth:`PeerDetector.state` (JSON) gives the same windows."""
    import json as _json

    rng = np.random.default_rng(5)
    luns = ("a", "b", "c", "d")
    values = rng.gamma(2.0, 1.0, size=(4, 400))
    values[2, 200:] *= 6
    times = np.arange(400, dtype=np.float64) * 15
    params = PeerParams()
    whole = PeerDetector("g", "await", luns, 3.0, params)
    expected = whole.add(times, values)
    first = PeerDetector("g", "await", luns, 3.0, params)
    got = first.add(times[:173], values[:, :173])
    state = _json.loads(_json.dumps(first.state()))
    second = PeerDetector.restore("g", "await", state)
    got += second.add(times[173:], values[:, 173:])
    assert [(r.index, r.end_s, r.anomalous, r.faulty) for r in got] == [
        (r.index, r.end_s, r.anomalous, r.faulty) for r in expected
    ]
