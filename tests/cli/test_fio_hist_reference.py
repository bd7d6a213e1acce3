"""``iolens fio-hist --method flp`` against fio's own fiologparser_hist.py, byte for byte."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipeline.cli.main import main
from pipeline.records.fio_bins import GROUP_NR_US, fine_lower_edge, fine_width, plat_val_to_idx

REPO = Path(__file__).resolve().parents[2]
SHARED_FIO = REPO.parent / "shared" / "data" / "fio"
RUN_A = [f"randrw_clat_hist.{i}.log" for i in (1, 2, 3, 4)]

GOLDEN = {
    "flp_runA.csv": [],
    "flp_runA_i_100.csv": ["-i", "100"],
    "flp_runA_i_100_directions_rwm_percentiles_90_95_99_99.9.csv": [
        "-i",
        "100",
        "--directions",
        "rwm",
        "--percentiles",
        "90:95:99:99.9",
    ],
    "flp_runA_i_1000_directions_rwm_d_1000.csv": [
        "-i",
        "1000",
        "--directions",
        "rwm",
        "-d",
        "1000",
    ],
    "flp_runA_noweight.csv": ["--noweight"],
    "flp_runA_noweight_i_100_directions_rwm.csv": [
        "--noweight",
        "-i",
        "100",
        "--directions",
        "rwm",
    ],
}


def iolens_output(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["fio-hist", *args]) == 0
    return capsys.readouterr().out


def reference_output(script: Path, args: list[str]) -> str:
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return done.stdout


@pytest.fixture(scope="module")
def run_a(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Run A of the shared real fio 3.33 logs, decompressed (the golden outputs' inputs)."""
    d = tmp_path_factory.mktemp("runA")
    for name in RUN_A:
        (d / name).write_bytes(gzip.decompress((SHARED_FIO / f"{name}.gz").read_bytes()))
    return [str(d / n) for n in RUN_A]


@pytest.mark.parametrize("golden", sorted(GOLDEN))
def test_golden_outputs_of_the_reference(
    golden: str, run_a: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    expected = (SHARED_FIO / "expected" / golden).read_text()
    assert iolens_output([*GOLDEN[golden], *run_a], capsys) == expected


@pytest.mark.parametrize(
    "options",
    [
        [],
        ["-i", "250", "--directions", "rw", "--percentiles", "50:90:99:99.9"],
        ["-i", "100", "--directions", "rwm", "-d", "1000", "--decimals", "2"],
        ["--noweight", "-i", "500", "--directions", "m"],
    ],
)
def test_real_fio_logs_match_reference(
    options: list[str], fio_run: Path, reference_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [str(fio_run / f"xc_clat_hist.{i}.log") for i in (1, 2)]
    expected = reference_output(reference_script, [*options, *files])
    assert expected.count("\n") > 3
    assert iolens_output([*options, *files], capsys) == expected


def to_1216_bins(line: str) -> str:
    """Re-bin one 1856-bin (ns) record into fio 2.x's 1216 us buckets: every ns bucket's count
    goes to the us bucket of its lower edge (``plat_val_to_idx(edge // 1000, 19 groups)``)."""
    fields = [int(x) for x in line.split(",")]
    out = np.zeros(GROUP_NR_US * 64, dtype=np.int64)
    for i, c in enumerate(fields[3:]):
        if c:
            us = (fine_lower_edge(i) + fine_width(i) // 2) // 1000
            out[plat_val_to_idx(us, GROUP_NR_US)] += c
    return ", ".join(str(v) for v in [*fields[:3], *out.tolist()])


def test_1216_bin_log_matches_reference(
    fio_run: Path, reference_script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = []
    for i in (1, 2):
        src = (fio_run / f"xc_clat_hist.{i}.log").read_text().splitlines()
        dst = tmp_path / f"old_clat_hist.{i}.log"
        dst.write_text("".join(to_1216_bins(line) + "\n" for line in src))
        files.append(str(dst))
    assert len(Path(files[0]).read_text().splitlines()[0].split(",")) == 1216 + 3
    for options in (
        ["--group_nr", "19", "--usbin"],
        ["--group_nr", "19", "--usbin", "-i", "250", "--directions", "rw"],
    ):
        expected = reference_output(reference_script, [*options, *files])
        assert iolens_output([*options, *files], capsys) == expected


def test_coarse_log_matches_reference(
    fio_run: Path, reference_script: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``log_hist_coarseness=2`` (464 bins): fio sums runs of 4 buckets (fio.md 1.4)."""
    dst = tmp_path / "coarse_clat_hist.1.log"
    with dst.open("w") as out:
        for line in (fio_run / "xc_clat_hist.1.log").read_text().splitlines():
            f = np.array([int(x) for x in line.split(",")])
            bins = f[3:].reshape(-1, 4).sum(axis=1)
            out.write(", ".join(str(v) for v in [*f[:3].tolist(), *bins.tolist()]) + "\n")
    expected = reference_output(reference_script, ["--directions", "rwm", str(dst)])
    assert iolens_output(["--directions", "rwm", str(dst)], capsys) == expected


def test_1216_bin_log_is_refused_without_being_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "old_clat_hist.1.log"
    log.write_text(", ".join(["101", "0", "4096"] + ["0"] * 1216) + "\n")
    assert main(["fio-hist", str(log)]) == 2
    err = capsys.readouterr().err
    assert f"{log}:1: 1216 histogram bins per record match no fio layout" in err
    assert "--usbin" in err


def test_empty_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "empty_clat_hist.1.log"
    log.write_text("")
    assert main(["fio-hist", str(log)]) == 2
    assert f"{log}:1: empty file" in capsys.readouterr().err


def test_bad_line_names_file_and_line(
    tmp_path: Path, run_a: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    lines = Path(run_a[0]).read_text().splitlines(keepends=True)
    lines[4] = lines[4].replace(", 0, ", ", x, ", 1)
    bad = tmp_path / "bad_clat_hist.1.log"
    bad.write_text("".join(lines))
    assert main(["fio-hist", str(bad)]) == 2
    assert f"{bad}:5: not a histogram record" in capsys.readouterr().err


def test_job_file_sets_the_interval(
    fio_run: Path, reference_script: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--job-file``: the interval defaults to the job's ``log_hist_msec`` (100 here)."""
    files = [str(fio_run / f"xc_clat_hist.{i}.log") for i in (1, 2)]
    options = ["--job-file", str(fio_run / "xc.fio")]
    expected = reference_output(reference_script, [*options, *files])
    assert expected.splitlines()[1].startswith("100, ")
    assert iolens_output([*options, *files], capsys) == expected
