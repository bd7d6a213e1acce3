"""Seed 004's Algorithm 1 (examples/iominer_algorithm1.py) on the indexed IOMiner data set.

The data set and what each job does are in this directory's conftest.py; the expected values
below follow from it by hand (the comments show the arithmetic).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.query import IOMiner

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "iominer_algorithm1.py"


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("iominer_algorithm1", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


example = _load_example()


@pytest.fixture(scope="module")
def client(session_client: Elasticsearch) -> Elasticsearch:
    """The session's client, for the module-scoped results."""
    return session_client


@pytest.fixture(scope="module")
def results(client: Elasticsearch, iominer_ns: str, iominer_period: tuple[str, str]) -> Any:
    return example.algorithm1(client, iominer_ns, *iominer_period)


def test_line14_jobs_writing_less_than_1gb(results: Any) -> None:
    # 1GB is 10^9 bytes: job 1002 writes exactly that, so it is not below it
    assert results.selected_tuples.columns == ("job_id", "bytes_written")
    assert list(results.selected_tuples) == [{"job_id": "1001", "bytes_written": 500_000_000}]


def test_line15_workload_bins(results: Any) -> None:
    binned = results.binned_tuples
    assert binned.columns[-1] == "workload"
    assert "nprocs" in binned.columns  # every job column is kept
    assert dict(zip(binned.df["job_id"], binned.df["workload"], strict=True)) == {
        "1001": 0,  # 0.5 GB
        "1002": 1,  # 1 GB
        "1003": 2,  # 20 GB
        "1004": 2,  # 64 GB
        "1005": 2,  # 12 GB
    }


def test_line17_ost_count_per_job(results: Any) -> None:
    assert list(results.grouped_tuples) == [
        {"job_id": "1001", "calculate_ost_count": 2},  # OSTs 3, 4
        {"job_id": "1002", "calculate_ost_count": 4},  # 0-3
        {"job_id": "1003", "calculate_ost_count": 4},  # 2, 5, 7, 9
        {"job_id": "1004", "calculate_ost_count": 16},  # 8-15, 16-23
        {"job_id": "1005", "calculate_ost_count": 8},  # 0-7 for each file
    ]


def test_line19_percentiles_of_bytes_written(results: Any) -> None:
    p = results.percents
    assert p.columns == ("q", "bytes_written")
    assert p.df["q"].tolist() == [k / 100 for k in range(101)]
    at = dict(zip(p.df["q"], p.df["bytes_written"], strict=True))
    # sorted: 0.5, 1, 12, 20, 64 GB; q sits at rank 4q, interpolated linearly
    assert at[0.0] == 5e8
    assert at[0.1] == pytest.approx(7e8, rel=1e-12)  # 0.5 + 0.4 * (1 - 0.5) GB
    assert at[0.25] == 1e9
    assert at[0.5] == 1.2e10
    assert at[0.75] == 2e10
    assert at[0.9] == pytest.approx(4.64e10, rel=1e-12)  # 20 + 0.6 * (64 - 20) GB
    assert at[1.0] == 6.4e10


def test_line21_node_counts_joined_from_slurm(results: Any) -> None:
    assert list(results.joined_tuples) == [
        {"job_id": "1001", "node_count": 1, "bytes_read": 2_000_000_000, "bytes_written": 5e8},
        {"job_id": "1002", "node_count": 1, "bytes_read": 0, "bytes_written": 1e9},
        {"job_id": "1003", "node_count": 32, "bytes_read": 1_000_000, "bytes_written": 2e10},
        {"job_id": "1004", "node_count": 64, "bytes_read": 0, "bytes_written": 6.4e10},
        {"job_id": "1005", "node_count": 4, "bytes_read": 0, "bytes_written": 1.2e10},
    ]


def test_slurm_steps_share_the_job_id(
    client: Elasticsearch, iominer_ns: str, iominer_period: tuple[str, str]
) -> None:
    """Why line 21 keeps the allocation records: steps would repeat jobs 1003 and 1004."""
    miner = IOMiner(client, iominer_ns)
    miner.init_stores(*iominer_period)
    jobs, slurm = miner.load("darshan job"), miner.load("slurm")
    every = jobs.join(slurm, "job id").project("job id", "slurm id", "node count")
    assert list(every.df.itertuples(index=False, name=None)) == [
        ("1001", "1001", 1),
        ("1002", "1002", 1),
        ("1003", "1003", 32),
        ("1003", "1003.batch", 1),
        ("1003", "1003.0", 32),
        ("1004", "1004", 64),
        ("1004", "1004.extern", 64),
        ("1005", "1005", 4),
    ]


def test_line23_big_writers_joined_with_their_files(results: Any) -> None:
    low = results.low_bw_tuples
    assert low.df["job_id"].value_counts().to_dict() == {"1003": 4, "1005": 3, "1004": 2}
    assert {"bytes_written", "bytes_written_file", "nprocs_file", "log_id_file"} <= set(low.columns)
    assert sorted(low.filter("job id == 1004").df["bytes_written_file"]) == [3.2e10, 3.2e10]


def test_line25_perf_factors(results: Any) -> None:
    perf = results.perf_factors
    assert perf.columns == (
        "job_id",
        "bandwidth_bytes_per_s",
        "io_time_s",
        "small",
        "small_1k",
        "non_consec",
        "coll",
        "ost_count",
        "proc_per_ost",
        "critical_files",
    )
    j1003, j1005 = list(perf)
    # 1003: writes 0-12 (run.log), 10-44 (checkpoint), 40-50 (stats): 50 s for 20 GB
    assert j1003["job_id"] == "1003"
    assert j1003["bandwidth_bytes_per_s"] == 4e8
    assert j1003["io_time_s"] == 50.0
    assert j1003["critical_files"] == [
        ("/scratch/cid/flash/ckpt_0001.h5", 32.0),
        ("/scratch/cid/flash/run.log", 12.0),
        ("/scratch/cid/flash/stats.dat", 6.0),
    ]
    # weights 32, 12, 6 s: every write is small (<= 1 MiB); only run.log's are < 1 KiB
    assert j1003["small"] == 1.0
    assert j1003["small_1k"] == pytest.approx(12 / 50, rel=1e-12)
    # non-consecutive: checkpoint 1024/20480, run.log 1/8000, stats 12/12
    assert j1003["non_consec"] == pytest.approx((0.05 * 32 + 12 / 8000 + 1.0 * 6) / 50, rel=1e-12)
    assert j1003["non_consec"] == pytest.approx(0.15203, rel=1e-12)
    assert j1003["coll"] == 0.0
    # 1024 ranks on the checkpoint's single OST dominate: (1024 * 32 + 1 * 12 + 12 * 6) / 50
    assert j1003["proc_per_ost"] == pytest.approx(657.04, rel=1e-12)
    assert j1003["ost_count"] == 4
    # 1005: three 10 s writes 90 s apart: 12 GB in 30 s of I/O
    assert j1005["job_id"] == "1005"
    assert j1005["bandwidth_bytes_per_s"] == 4e8
    assert j1005["io_time_s"] == 30.0
    assert j1005["critical_files"] == [
        (f"/scratch/eve/climate/out_{k:03d}.nc", 10.0) for k in range(3)
    ]
    assert (j1005["small"], j1005["small_1k"], j1005["coll"]) == (0.0, 0.0, 1.0)
    assert j1005["non_consec"] == pytest.approx(0.064, rel=1e-12)  # 64 first accesses / 1000
    assert (j1005["ost_count"], j1005["proc_per_ost"]) == (8, 8.0)


def test_line25_critical_path_keeps_the_bursty_fast_job_out(results: Any) -> None:
    """Job 1004 writes 64 GB in two 16 s phases 84 s apart: over the critical path it runs at
    2 GB/s, though bytes / (last end - first start), Equation 1, says 0.55 GB/s."""
    all_bw = results.low_bw_tuples.extract_perf_factors(0, float("inf"), "write")
    assert all_bw.df["job_id"].tolist() == ["1003", "1004", "1005"]
    j1004 = all_bw.filter("job id == 1004")
    assert j1004.df["bandwidth_bytes_per_s"].tolist() == [2e9]
    naive = results.low_bw_tuples.filter("job id == 1004").df["naive_bytes_per_s"]
    assert naive.tolist() == [pytest.approx(6.4e10 / 116, rel=1e-12)] * 2
    assert "1004" not in results.perf_factors.df["job_id"].tolist()


def test_lmt_rows_of_the_period(results: Any) -> None:
    lmt = results.lmt_tuples
    assert len(lmt) == 12  # 3 OSTs x 4 intervals; the one of the evening before is left out
    totals = lmt.group("ost name", lambda g: int(g["write_bytes"].sum()), "write_bytes")
    assert list(totals) == [
        {"ost_name": "scratch-OST0005", "write_bytes": 22_000_000},  # (1 + 4 + 7 + 10) MB
        {"ost_name": "scratch-OST0007", "write_bytes": 11_600_000_000},
        {"ost_name": "scratch-OST0009", "write_bytes": 30_000_000},  # (3 + 6 + 9 + 12) MB
    ]


def test_udfs() -> None:
    assert [example.classify_workload(b) for b in (0, 999_999_999, 1e9, 9.99e9, 1e10)] == [
        0,
        0,
        1,
        1,
        2,
    ]
    assert example.classify_workload(float("nan")) is None


def test_script_prints_each_result(
    es_url: str, iominer_ns: str, iominer_period: tuple[str, str]
) -> None:
    start, end = iominer_period
    run = subprocess.run(
        [
            sys.executable,
            str(EXAMPLE),
            "--es",
            es_url,
            "--namespace",
            iominer_ns,
            "--start",
            start,
            "--end",
            end,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    out = run.stdout
    titles = [line for line in out.splitlines() if line.startswith("== ")]
    assert titles == [
        "== line 14: jobs that write less than 1 GB (1 rows)",
        "== line 15: workload bins by bytes written ([0,1) GB: 0, [1,10) GB: 1, else 2) (5 rows)",
        "== line 17: distinct OSTs per job (5 rows)",
        "== line 19: percentiles of bytes written (every 10th of the list) (101 rows)",
        "== line 21: node count (Slurm) and bytes read/written (Darshan) per job (5 rows)",
        "== line 23: jobs writing more than 10 GB, joined with their files (9 rows)",
        "== line 25: jobs writing at [0, 1 GB/s) and their contributing factors (2 rows)",
        "== line 12: LMT rows loaded (bytes written per OST shown) (12 rows)",
    ]
    assert "(/scratch/cid/flash/ckpt_0001.h5, 32.0)" in out
    assert "scratch-OST0007  11600000000" in out
