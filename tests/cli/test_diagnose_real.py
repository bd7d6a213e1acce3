"""``iolens train`` / ``iolens diagnose`` on real recordings of a slowed LUN among peers.

The data (``tests/data/sysstat/``, made by ``record_peer_fault.sh``, see its README): six loop
devices on six files of the delaying FUSE file system under the same open-loop fio load;
``peer_clean`` is fault-free (360 one-second samples), in ``peer_fault`` (540 samples) loop3
(``lun3.img``) waits 12 ms per FUSE read/write from 180 s to 420 s after the start of sadc.
Everything runs with ``--downsample-s 1`` and the seed's window parameters (moving average 15,
windows of 60 shifted by 30, 3 of the last 5).

Expected latency, from the parameters alone: window ``j`` depends on raw samples
``[30j, 30j + 73]`` (60 smoothed samples, each the mean of 15 raw ones), so a step fault at
raw sample ``f`` is first seen by window ``j0 = ceil((f - 73) / 30)``; if that window and the two
after it are anomalous, the LUN is indicted at window ``j0 + 2``, whose last raw sample is
``30 j0 + 133``, 60 to 89 samples after ``f``.
"""

from __future__ import annotations

import json
import math
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.jobs.peer_recording import read_samples
from pipeline.records.core import DiskSample

DATA = Path(__file__).resolve().parents[1] / "data" / "sysstat"
FAULT = DATA / "peer_fault_sadf_d.csv"
FAULT_EPOCH = DATA / "peer_fault_sadf_d_U.csv"
FAULT_BINARY = DATA / "peer_fault.sa"
CLEAN = DATA / "peer_clean_sadf_d.csv"
EVENTS = DATA / "peer_fault.events"
PEERS = [f"loop{i}" for i in range(6)]
SLOW = "lun:vm/loop3"
SEED_PARAMS = [
    "--downsample-s",
    "1",
    "--ma-width",
    "15",
    "--win-size",
    "60",
    "--win-shift",
    "30",
    "--k",
    "3",
]
MA, WIN, SHIFT = 15, 60, 30


def event_time(marker: str) -> float:
    """Unix time of the line of ``peer_fault.events`` containing ``marker`` (the script's log)."""
    for line in EVENTS.read_text().splitlines():
        if marker in line:
            return datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp()
    raise AssertionError(f"no {marker!r} in {EVENTS}")


def grid(path: Path) -> list[float]:
    """The peer group's time grid: sorted end times of the six loop devices' samples."""
    good, bad = read_samples(path)
    assert not bad
    return sorted({r.end_s for r in good if isinstance(r, DiskSample) and r.device in PEERS})


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The peer-group file and thresholds trained on the fault-free recording."""
    root = tmp_path_factory.mktemp("real")
    groups = root / "groups.yaml"
    groups.write_text('"vm:loop[0-5]": lun\n')  # vda (and any other device) stays out
    thresholds = root / "thr.json"
    args = ["train", "--groups", str(groups), "-o", str(thresholds), *SEED_PARAMS, str(CLEAN)]
    assert main(args) == 0
    return {"groups": groups, "thresholds": thresholds}


def diagnose(
    capsys: pytest.CaptureFixture[str], setup: dict[str, Path], path: Path, *extra: str
) -> list[dict[str, Any]]:
    """``iolens diagnose --json`` with the trained thresholds: one object per window."""
    capsys.readouterr()
    args = [
        "diagnose",
        "--groups",
        str(setup["groups"]),
        "--thresholds",
        str(setup["thresholds"]),
        *SEED_PARAMS,
        *extra,
        str(path),
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines()] if "--json" in extra else [out]


def test_trained_on_the_fault_free_recording(setup: dict[str, Path]) -> None:
    stored = json.loads(setup["thresholds"].read_text())
    (entry,) = stored["thresholds"]
    assert (entry["group"], entry["metric"]) == ("lun", "await")
    # 360 samples -> 346 smoothed -> 10 windows
    assert entry["windows"] == (len(grid(CLEAN)) - MA + 1 - WIN) // SHIFT + 1 == 10


def test_slowed_lun_is_the_only_one_indicted_after_the_derived_latency(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    times = grid(FAULT)
    onset, offset = event_time("fault ON"), event_time("fault OFF")
    windows = diagnose(capsys, setup, FAULT, "--json")
    assert len(windows) == (len(times) - MA + 1 - WIN) // SHIFT + 1
    assert {w["group"] for w in windows} == {"lun"}

    # the slowed LUN and nothing else is ever indicted, and only after the onset
    faulty = [j for j, w in enumerate(windows) if w["faulty"]]
    assert {lun for w in windows for lun in w["faulty"]} == {SLOW}
    assert all(windows[j]["window_end"] > onset for j in faulty)
    # Before the fault the recording is a held-out fault-free one. It holds a real transient:
    # at 06:33:44 (raw sample 59) all six LUNs waited 10-39 ms for one second, so windows 0 and 1
    # (the only ones holding it) see spurious anomalies; the 3-of-5 filter indicts none of them.
    before = [w for w in windows if w["window_end"] < onset]
    assert len(before) == 4
    assert [len(w["anomalous"]) for w in before] == [6, 2, 0, 0]
    assert not [w for w in before if w["faulty"]]

    # latency: first raw sample covering the onset f, first window seeing it j0, indicted j0+2
    f = next(i for i, t in enumerate(times) if t > onset)
    j0 = math.ceil((f - (MA - 1 + WIN - 1)) / SHIFT)
    assert SLOW in windows[j0]["anomalous"]
    assert SLOW not in windows[j0 - 1]["anomalous"]
    assert faulty[0] == j0 + 2
    last_raw = times.index(windows[faulty[0]]["window_end"])
    assert last_raw == SHIFT * (j0 + 2) + MA - 1 + WIN - 1
    assert 60 <= last_raw - f <= 89
    # measured: onset in raw sample 180, first seen by window 4, indicted at window 6 whose last
    # raw sample is 253: 73 samples (73.3 s) after the onset
    assert (f, j0, faulty[0], last_raw - f) == (180, 4, 6, 73)
    assert 73 <= windows[faulty[0]]["window_end"] - onset < 74

    # indicted in every window entirely inside the fault
    inside = [
        j
        for j, w in enumerate(windows)
        if times[SHIFT * j] > onset and w["window_end"] <= offset and j >= j0 + 2
    ]
    assert inside
    assert all(SLOW in windows[j]["faulty"] for j in inside)

    # persistence: from the indictment on, the slowed LUN leads the ranking
    for w in windows[faulty[0] :]:
        ranking = list(w["accumulator"].items())
        assert ranking[0][0] == SLOW
        assert all(v < ranking[0][1] for _, v in ranking[1:])


def test_hourly_ranking_puts_the_slowed_lun_first(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    (out,) = diagnose(capsys, setup, FAULT)
    rows = out.splitlines()
    assert rows[0] == "# await: Date.Hour: Value PG:LUN ..."
    assert rows[-1].split()[2] == SLOW


def test_epoch_timestamps_give_the_same_windows(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """``sadf -d -U`` (Unix seconds) and ``sadf -d`` (UTC text) of the same file."""
    assert diagnose(capsys, setup, FAULT_EPOCH, "--json") == diagnose(
        capsys, setup, FAULT, "--json"
    )


def test_sadc_binary_gives_the_same_windows(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The binary file converted by ``sadf`` on this host: loop devices have the fixed major 7,
    so their names resolve the same on any Linux host (reference/sysstat.md 1.2)."""
    if shutil.which("sadf") is None:
        pytest.fail("sadf is not installed; `make test` installs Debian's sysstat package")
    assert diagnose(capsys, setup, FAULT_BINARY, "--json") == diagnose(
        capsys, setup, FAULT, "--json"
    )


def test_fault_free_recording_indicts_nothing(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """The training recording itself (held-out fault-free data: the first 180 s of the fault
    recording, checked above)."""
    windows = diagnose(capsys, setup, CLEAN, "--json")
    assert len(windows) == 10
    assert not [w for w in windows if w["faulty"] or w["anomalous"]]
