"""``iolens diagnose`` / ``train`` on real variants of the fault recording that sites produce.

The variants are made here from ``tests/data/sysstat/peer_fault.sa`` (sysstat 12.6.1) with the
Debian sadf, and, where this host's sadf cannot write the variant, by the one documented
difference:

* ``sadf -j`` of sysstat 12.7.1 and later prints ``"tz": "UTC"`` where older versions print
  ``"utc": 1`` (sysstat's sadf_misc.c; ``../shared/data/sysstat-corpus/sim-data-long.sadf128.json``
  is real 12.8.0 output);
* a file sadc started at boot (``sa1 --boot``) begins with a restart record, which sadf prints
  before the first header: ``vm;-1;<time>;LINUX-RESTART\\t(2 CPU)`` (made with
  ``sadc -F -L -S DISK FILE`` then ``sadc -S DISK 1 4 FILE`` on this host's sysstat, see
  test_parsers' ``test_restart_row_before_the_first_header``);
* ``sadf -d FILE 60`` prints 60 s samples, as ``sa1`` files hold 600 s ones.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data" / "sysstat"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "sysstat-corpus"
BINARY = DATA / "peer_fault.sa"
FAULT = DATA / "peer_fault_sadf_d.csv"
CLEAN = DATA / "peer_clean_sadf_d.csv"
SEED_PARAMS = ["--downsample-s", "1", "--ma-width", "15", "--win-size", "60"]
SEED_PARAMS += ["--win-shift", "30", "--k", "3"]
INFO = ["--log-level", "INFO"]
SADC_START = "2026-11-22 06:32:44 UTC"  # peer_fault.events: sadc started 06:32:44.663Z


def sadf(*args: str) -> bytes:
    """Debian's sadf, in UTC and the C locale."""
    if shutil.which("sadf") is None:
        pytest.fail("sadf is not installed; `make test` installs Debian's sysstat package")
    env = {"TZ": "UTC", "LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["sadf", *args], check=True, capture_output=True, env=env).stdout


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Thresholds trained on the fault-free recording, and the variants of the fault one."""
    root = tmp_path_factory.mktemp("variants")
    groups = root / "groups.yaml"
    groups.write_text('"vm:loop[0-5]": lun\n')
    thresholds = root / "thr.json"
    args = ["train", "--groups", str(groups), "-o", str(thresholds), *SEED_PARAMS, str(CLEAN)]
    assert main(args) == 0
    json126 = sadf("-j", str(BINARY), "--", "-d")
    assert json126.count(b'"utc": 1') == 540
    (root / "fault_126.json").write_bytes(json126)
    (root / "fault_128.json").write_bytes(json126.replace(b'"utc": 1', b'"tz": "UTC"'))
    restart = f"vm;-1;{SADC_START};LINUX-RESTART\t(2 CPU)\n".encode()
    (root / "fault_restart.csv").write_bytes(restart + FAULT.read_bytes())
    (root / "fault_60.csv").write_bytes(sadf("-d", "-U", str(BINARY), "60", "--", "-d", "-p"))
    return {"groups": groups, "thresholds": thresholds, "root": root}


def diagnose(
    capsys: pytest.CaptureFixture[str], setup: dict[str, Path], path: Path, *extra: str
) -> Any:
    """The windows of ``iolens diagnose --json`` (stderr is kept for :func:`messages`)."""
    capsys.readouterr()
    args = ["diagnose", "--groups", str(setup["groups"]), "--thresholds", str(setup["thresholds"])]
    assert main([*extra, *args, *SEED_PARAMS, "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    sys.stderr.write(err)
    return [json.loads(line) for line in out.splitlines()]


def test_sadf_12_8_json_indicts_what_the_12_6_csv_does(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    csv = diagnose(capsys, setup, FAULT)
    assert {lun for w in csv for lun in w["faulty"]} == {"lun:vm/loop3"}
    assert diagnose(capsys, setup, setup["root"] / "fault_128.json") == csv
    assert diagnose(capsys, setup, setup["root"] / "fault_126.json") == csv


def test_restart_record_first_reads_as_the_plain_file(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    plain = diagnose(capsys, setup, FAULT)
    assert diagnose(capsys, setup, setup["root"] / "fault_restart.csv", *INFO) == plain
    # neither a bad row nor the fallback to the per-line reader; vda is alone in its group
    assert messages(capsys) == [
        "peer group vm has 1 LUN(s) (vm/vda); at least 3 are needed: not compared"
    ]


def messages(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The CLI's log messages (stderr), without time stamp, level and logger."""
    return [line.split(": ", 1)[1] for line in capsys.readouterr().err.splitlines()]


def test_60s_recording_is_compared_at_60s_and_says_what_a_window_needs(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = setup["root"] / "fault_60.csv"
    capsys.readouterr()
    assert main(["train", "-o", str(setup["root"] / "t60.json"), str(path)]) == 2
    said = messages(capsys)
    assert (
        "vm: samples every 60 s are coarser than the downsampling interval (peer.downsample_s "
        "= 15 s): its LUNs are compared at 60 s" in said
    )
    # 540 s of data: 9 samples of 60 s per LUN, one peer group (host vm, 7 LUNs)
    assert said[-1] == (
        "cannot train thresholds: no complete window in the training data; 1 peer group(s) of "
        "at least 3 LUNs, with at most 9 full sample(s) of 60 s per LUN; a window needs 74 in a "
        "row (peer.ma_width - 1 + peer.win_size = 15 - 1 + 60)"
    )
    assert not [m for m in said if "no peer group" in m]


def test_60s_recording_with_short_windows_gives_windows_on_the_60s_grid(
    tmp_path: Path, setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = setup["root"] / "fault_60.csv"
    short = ["--ma-width", "1", "--win-size", "4", "--win-shift", "1", "--k", "1"]
    assert main(["diagnose", *short, "--train-until", "1795329420", "--json", str(path)]) == 0
    windows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # 9 samples ending 06:33:44 .. 06:41:44 (Unix 1795329224 + 60 k), each on the 60 s UTC grid
    # interval that holds its end (06:34:00 .. 06:42:00); training takes the first 4 (up to
    # 06:37:00), diagnosis the 5 after: 2 windows of 4, from each one's first sample end
    assert [(w["window_start"], w["window_end"]) for w in windows] == [
        (1795329480.0, 1795329660.0),
        (1795329540.0, 1795329720.0),
    ]


def test_no_peer_group_names_the_luns_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = FAULT.read_text().splitlines(keepends=True)
    two = tmp_path / "two.csv"  # loop0 and loop1, and 7 s of loop2 (no full interval)
    two.write_text(lines[0] + "".join(x for x in lines[1:] if ";loop0;" in x or ";loop1;" in x))
    two.write_text(two.read_text() + "".join(x for x in lines[1:50] if ";loop2;" in x))
    groups = tmp_path / "g.yaml"
    groups.write_text('"vm:loop*": lun\n"vm:vda": disk\n')
    assert main(["train", "--groups", str(groups), "-o", str(tmp_path / "t.json"), str(two)]) == 2
    assert messages(capsys)[-1] == (
        "cannot train thresholds: no peer group of at least 3 LUNs: 3 LUN(s) read, 2 with a "
        "full 15 s interval, by group lun: 2 (peer.groups assigns LUNs to groups)"
    )


def test_empty_and_restart_only_files_say_nothing_was_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    only = tmp_path / "restart_only.csv"
    only.write_text(f"vm;-1;{SADC_START};LINUX-RESTART\t(2 CPU)\n")
    assert main(["train", "-o", str(tmp_path / "t.json"), str(only)]) == 2
    assert messages(capsys)[-1] == (
        "cannot train thresholds: no disk samples read (0 line(s) or part(s) rejected): "
        "nothing to compare"
    )


def test_sadf_12_8_json_of_sysstats_test_suite_reads_every_disk_object() -> None:
    from pipeline.jobs.peer_recording import read_samples
    from pipeline.records.core import DiskSample

    path = CORPUS / "sim-data-long.sadf128.json"
    doc = json.loads(path.read_bytes())
    stats = doc["sysstat"]["hosts"][0]["statistics"]
    disks = [d for s in stats for d in s.get("disk", [])]
    good, bad = read_samples(path)
    assert bad == []
    samples = [r for r in good if isinstance(r, DiskSample)]
    assert len(samples) == len(disks) > 0
    first = stats[0]["disk"][1]  # dev8-1 at 2019-04-18 13:20:19 UTC, interval 31
    s = samples[1]
    assert (s.host, s.device, s.end_s, s.interval_s) == ("SYSSTAT.TEST", "dev8-1", 1555593619.0, 31)
    assert (s.tps, s.read_kb_per_s, s.await_ms) == (first["tps"], first["rkB"], first["await"])


def test_empty_csv_is_not_handed_to_sadf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    capsys.readouterr()
    assert main(["train", "-o", str(tmp_path / "t.json"), str(empty)]) == 2
    assert messages(capsys) == [
        "cannot train thresholds: no disk samples read (0 line(s) or part(s) rejected): "
        "nothing to compare"
    ]
