"""A gap in one server's sysstat data is missing data, not an idle LUN (seed 001).

The data (``tests/data/sysstat/peer_restart_*``, made by ``record_peer_restart.sh``, see its
README): the six loop devices of the fault recordings under the same load, no fault ever; two
sadc processes stand for two servers, ``srvA`` keeping loop0-2 and ``srvB`` loop3-5. Server A's
sadc records 150 samples (``srvA_1``), stops, and a new one starts 75 s later (``srvA_2``): A
has no sample for the 74 seconds 02:55:35 .. 02:56:48 UTC, B records on. One peer group spans
both servers; thresholds come from the fault-free recording of the same set-up
(``peer_clean``), everything with the seed's parameters at 1 s.

The group's grid is the union of the six LUNs' sample times: 361 one-second times. Server A
misses grid time 0 (its sadc started a second after B's), 151-224 (the 74 s) and 227 (a label
its second sadc skipped: sadc stamps whole seconds and drifts); server B misses time 11. A
smoothed sample needs its 15 raw samples; window ``j`` holds smoothed samples
``[30j, 30j + 60)``, and a LUN is compared in it with at least 30 of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.cli.main import main
from pipeline.jobs.peer_diagnosis import series
from pipeline.jobs.peer_recording import load
from pipeline.reducers.peer_flags import detect
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_thresholds import Thresholds

DATA = Path(__file__).resolve().parents[1] / "data" / "sysstat"
CLEAN = DATA / "peer_clean_sadf_d.csv"
RESTART = [DATA / f"peer_restart_{s}_sadf_d.csv" for s in ("srvA_1", "srvA_2", "srvB")]
RESTART_EPOCH = [DATA / f"peer_restart_{s}_sadf_d_U.csv" for s in ("srvA_1", "srvA_2", "srvB")]
SEED_PARAMS = ["--downsample-s", "1", "--ma-width", "15", "--win-size", "60"]
SEED_PARAMS += ["--win-shift", "30", "--k", "3"]
METRICS = ["await", "aqu-sz", "tps", "wkB/s"]
SERVER_A = [f"lun:srvA/loop{i}" for i in range(3)]
GROUPS = {"srv*:loop*": "lun"}


A_SAMPLES = [59, 60, 60, 47, 17, 0, 12, 42, 60, 60]
"""Smoothed samples of each server-A LUN per window (measured; derived in the last test)."""
B_SAMPLES = [48] + [60] * 9


def smoothed_counts(present: np.ndarray, ma: int, win: int, shift: int) -> list[int]:
    """Per window, the smoothed samples of one LUN whose ``ma`` raw samples are all present
    (counted directly from the presence of the raw samples)."""
    ok = [all(present[i : i + ma]) for i in range(len(present) - ma + 1)]
    return [sum(ok[j : j + win]) for j in range(0, len(ok) - win + 1, shift)]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Thresholds trained on ``peer_clean`` (group ``lun``) and the two-server groups file."""
    root = tmp_path_factory.mktemp("gaps")
    train_groups, groups = root / "train.yaml", root / "groups.yaml"
    train_groups.write_text('"vm:loop[0-5]": lun\n')
    groups.write_text('"srv*:loop*": lun\n')
    thresholds = root / "thr.json"
    metrics = [x for m in METRICS for x in ("--metric", m)]
    args = ["train", "--groups", str(train_groups), "-o", str(thresholds), *metrics]
    assert main([*args, *SEED_PARAMS, str(CLEAN)]) == 0
    return {"groups": groups, "thresholds": thresholds}


def diagnose(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], paths: list[Path]
) -> list[dict[str, Any]]:
    capsys.readouterr()
    metrics = [x for m in METRICS for x in ("--metric", m)]
    args = ["diagnose", "--groups", str(files["groups"]), "--thresholds", str(files["thresholds"])]
    assert main([*args, *metrics, *SEED_PARAMS, "--json", *map(str, paths)]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_restarted_sadc_indicts_nothing(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    windows = diagnose(capsys, files, RESTART)
    assert len(windows) == 10 * len(METRICS)  # 360 grid times -> 346 smoothed -> 10 windows
    assert not [w for w in windows if w["anomalous"] or w["faulty"]]
    for metric in METRICS:
        mine = [w for w in windows if w["metric"] == metric]
        skipped = [j for j, w in enumerate(mine) if "skipped" in w]
        # the windows where server A has fewer than half a window (30) of smoothed samples
        assert skipped == [j for j in range(10) if A_SAMPLES[j] < 30] == [4, 5, 6]
        assert all(mine[j]["skipped"] == SERVER_A for j in skipped)
        assert all(not w["accumulator"] for w in mine)


def test_epoch_timestamps_give_the_same_windows(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert diagnose(capsys, files, RESTART_EPOCH) == diagnose(capsys, files, RESTART)


def test_samples_present_per_window_and_zero_filling_would_indict(files: dict[str, Path]) -> None:
    """The windows' sample counts follow from the gap; the same grid with the missing samples
    taken as 0 (idle), as before, makes every LUN anomalous -- a 3-3 split where each LUN
    differs from the other server's three -- and indicts all six."""
    params = PeerParams()
    stored = Thresholds.from_dict(json.loads(files["thresholds"].read_text()))
    rec = load(RESTART, 1.0)
    (tps,) = series(rec, "tps", GROUPS)
    assert tps.luns == (
        "srvA/loop0",
        "srvA/loop1",
        "srvA/loop2",
        "srvB/loop3",
        "srvB/loop4",
        "srvB/loop5",
    )
    assert tps.times_s.size == 361
    assert tps.present is not None
    assert tps.present.sum(axis=1).tolist() == [285, 285, 285, 360, 360, 360]
    missing_a = [0, *range(151, 225), 227]
    assert all(np.flatnonzero(~tps.present[i]).tolist() == missing_a for i in range(3))
    assert all(np.flatnonzero(~tps.present[i]).tolist() == [11] for i in range(3, 6))
    assert smoothed_counts(tps.present[0], 15, 60, 30) == A_SAMPLES
    assert smoothed_counts(tps.present[3], 15, 60, 30) == B_SAMPLES
    threshold = stored.get("lun", "tps")
    results = detect(tps, threshold, params)
    assert [r.samples for r in results] == [
        (a,) * 3 + (b,) * 3 for a, b in zip(A_SAMPLES, B_SAMPLES, strict=True)
    ]
    assert [r.skipped for r in results] == [()] * 4 + [tps.luns[:3]] * 3 + [()] * 3
    assert not [r for r in results if r.anomalous or r.faulty]

    # the missing samples as zeros: what iolens did before
    assert np.array_equal(tps.values[~tps.present], np.zeros(3 * 76 + 3))
    zeros = PeerSeries(tps.group, tps.metric, tps.luns, tps.times_s, tps.values)
    before = detect(zeros, threshold, params)
    assert [len(r.anomalous) for r in before] == [0, 0, 0, 6, 6, 6, 6, 6, 0, 0]
    assert [len(r.faulty) for r in before] == [0, 0, 0, 0, 0, 6, 6, 6, 6, 6]
    assert not [r for r in before if r.skipped]
