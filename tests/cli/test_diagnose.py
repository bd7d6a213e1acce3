"""``iolens train`` / ``iolens diagnose`` on generated and real sysstat recordings (seed 001)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main

SHARED = Path(__file__).resolve().parents[3] / "shared"
FUSE_FAULT = SHARED / "data" / "sysstat" / "fuse_delay_fault_sadf_d.csv"


@pytest.fixture
def synth(synth_sysstat: dict[str, Any]) -> dict[str, Any]:
    """The generated recordings (tests/conftest.py)."""
    return synth_sysstat


def trained(synth: dict[str, Any], tmp_path: Path) -> Path:
    """Thresholds (await) trained on the fault-free ``train`` recording."""
    out = tmp_path / "thr.json"
    files = sorted((synth["root"] / "train").glob("*.csv"))
    assert main(["train", "--groups", str(synth["groups"]), "-o", str(out), *map(str, files)]) == 0
    return out


def diagnosed(
    capsys: pytest.CaptureFixture[str], synth: dict[str, Any], thresholds: Path, part: str
) -> list[dict[str, Any]]:
    """``iolens diagnose --json`` of one generated recording (train, faulty or clean)."""
    files = sorted((synth["root"] / part).glob("*.csv"))
    args = ["diagnose", "--groups", str(synth["groups"]), "--thresholds", str(thresholds)]
    return run_json(capsys, [*args, *map(str, files)])


def run_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main([*args, "--json"]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_generated_await_faults_are_indicted_and_nothing_else(
    synth: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = trained(synth, tmp_path)
    stored = json.loads(thresholds.read_text())
    assert (stored["format"], stored["version"]) == ("iolens.peer_thresholds", 1)

    windows = diagnosed(capsys, synth, thresholds, "faulty")
    first: dict[str, float] = {}
    for w in windows:
        assert set(w) == {
            "metric",
            "group",
            "window_start",
            "window_end",
            "anomalous",
            "faulty",
            "accumulator",
        }
        for lun in w["faulty"]:
            first.setdefault(lun, w["window_end"])
    start = datetime.fromisoformat(synth["truth"]["start"]).timestamp()
    expected = {}
    for f in synth["truth"]["faults"]:
        group = next(
            g
            for g, luns in synth["truth"]["peer_groups"].items()
            if f"{f['host']}/{f['device']}" in luns
        )
        expected[f"{group}:{f['host']}/{f['device']}"] = start + f["start_h"] * 3600
    assert set(first) == set(expected)  # every injected fault, no other LUN
    for lun, onset in expected.items():
        # 15-sample moving average, windows of 60 shifted by 30, 3 of 5: 61-90 samples
        latency = (first[lun] - onset) / 15
        assert 61 <= latency <= 90, (lun, latency)


def test_fault_free_recording_indicts_nothing(
    synth: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    thresholds = trained(synth, tmp_path)
    windows = diagnosed(capsys, synth, thresholds, "clean")
    assert len(windows) > 40
    assert not [w for w in windows if w["faulty"]]


def test_hourly_ranking_like_figure_5(
    synth: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """Training on the first hour of the faulty recording itself (``--train-until``)."""
    root, groups = synth["root"], str(synth["groups"])
    capsys.readouterr()
    assert (
        main(
            [
                "diagnose",
                "--groups",
                groups,
                "--train-until",
                "2026-01-05T01:00:00Z",
                *map(str, sorted((root / "faulty").glob("*.csv"))),
            ]
        )
        == 0
    )
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "# await: Date.Hour: Value PG:LUN ..."
    by_hour = {r.split(":", 1)[0]: r for r in rows[1:]}
    assert by_hour["20260105.02"].split()[2] == "0:fs001/dm-3"  # top of the list in hour 2
    # the fs001 fault ended at 03:00 and its accumulator ran down; fs002's (until 04:30) leads
    assert by_hour["20260105.05"].split()[2] == "1:fs002/dm-0"
    assert "0:fs001/dm-3" not in by_hour["20260105.05"]


def test_real_slowed_loop_device_is_the_only_one_indicted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The real recording: loop4 (FUSE-backed, 10 ms per I/O from 04:17:07) among loop0-2.

    It holds 15 one-second samples, so the window parameters are scaled down (no moving
    average, windows of 4 shifted by 2, 3 of 5) and thresholds are trained on its fault-free
    first 6 s.
    """
    onset = datetime(2026, 11, 22, 4, 17, 7, tzinfo=UTC).timestamp()
    args = [
        "diagnose",
        "--downsample-s",
        "1",
        "--ma-width",
        "1",
        "--win-size",
        "4",
        "--win-shift",
        "2",
        "--k",
        "3",
        "--train-until",
        "2026-11-22T04:17:06Z",
        str(FUSE_FAULT),
    ]
    windows = run_json(capsys, args)
    flagged = {lun for w in windows for lun in w["anomalous"] + w["faulty"]}
    assert flagged == {"vm:vm/loop4"}
    assert all(w["window_end"] >= onset for w in windows if w["faulty"])
    assert [w for w in windows if w["faulty"]]
    assert next(iter(windows[-1]["accumulator"])) == "vm:vm/loop4"


def test_missing_thresholds_is_a_clear_error(
    synth: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "diagnose",
                "--thresholds",
                str(tmp_path / "none.json"),
                str(next((synth["root"] / "clean").glob("*.csv"))),
            ]
        )
        == 2
    )
    assert "no thresholds at" in capsys.readouterr().err


def test_throughput_fault_is_indicted_on_read_throughput(
    synth: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A LUN serving 30% of its peers' throughput with normal latency (the generator's ``tput``
    fault) shows in rkB/s (the seed's rd_sec), not in await: seed 001 compares one metric at a
    time, and the metrics that indict a LUN tell the kind of problem."""
    import subprocess
    import sys

    out = tmp_path / "tput"
    subprocess.run(
        [
            sys.executable,
            str(SHARED / "tools" / "synth_sadf.py"),
            str(out),
            "--hosts",
            "4",
            "--luns",
            "6",
            "--luns-per-group",
            "12",
            "--interval",
            "15",
            "--hours",
            "6",
            "--seed",
            "31",
            "--fault",
            "fs001:dm-3:1.0:3.0:0.3:tput",
            "--fault",
            "fs002:dm-0:2.0:4.5:3:await",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    groups, thresholds = str(synth["groups"]), tmp_path / "thr.json"
    metrics = ["--metric", "await", "--metric", "rkB/s"]
    assert (
        main(
            [
                "train",
                "--groups",
                groups,
                *metrics,
                "-o",
                str(thresholds),
                *map(str, sorted((synth["root"] / "train").glob("*.csv"))),
            ]
        )
        == 0
    )
    windows = run_json(
        capsys,
        [
            "diagnose",
            "--groups",
            groups,
            *metrics,
            "--thresholds",
            str(thresholds),
            *map(str, sorted(out.glob("*.csv"))),
        ],
    )
    indicted: dict[str, dict[str, float]] = {"await": {}, "rkB/s": {}}
    for w in windows:
        for lun in w["faulty"]:
            indicted[w["metric"]].setdefault(lun, w["window_end"])
    assert set(indicted["await"]) == {"1:fs002/dm-0"}
    assert set(indicted["rkB/s"]) == {"0:fs001/dm-3"}
    # Not earlier than the parameters allow (61 samples), and while the fault lasts. A 70% drop
    # of a bursty throughput is not a clean step: the windows that only partly cover the fault
    # do not stand out, so this takes 164 samples (41 min) here, the three fully covered
    # windows of the seed's oracle (reference/sysstat.md 3.3).
    onset = datetime(2026, 1, 5, 1, 0, tzinfo=UTC).timestamp()
    first = indicted["rkB/s"]["0:fs001/dm-3"]
    assert (first - onset) / 15 >= 61 and first < onset + 2 * 3600
