"""extract_perf_factors (seed 004 §II-D): bandwidth over the critical path, critical files,
exclusive-time weighted factors, on file tuples and on job x file tuples."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipeline.query import ColumnError, Tuples
from pipeline.query.perf import RESULT_COLUMNS


def file_row(job: str, name: str, start: float, end: float, **kw: Any) -> dict[str, Any]:
    """A darshan.file row writing between ``start`` and ``end`` (s from job start)."""
    row: dict[str, Any] = {
        "job_id": job,
        "log_id": f"log-{job}",
        "record_id": str(abs(hash(name))),
        "module": "POSIX",
        "name": name,
        "nprocs": 1,
        "bytes_read": 0,
        "bytes_written": 1_000_000_000,
        "reads": 0,
        "writes": 100,
        "small_reads": 0,
        "small_writes": 0,
        "small_1k_reads": 0,
        "small_1k_writes": 0,
        "consec_reads": 0,
        "consec_writes": 99,
        "coll_reads": 0,
        "coll_writes": 0,
        "start_s": start,
        "end_s": end,
        "read_start_s": 0.0,
        "read_end_s": 0.0,
        "write_start_s": start,
        "write_end_s": end,
        "stripe_count": 1,
        "osts": [0],
    }
    row.update(kw)
    return row


def figure3() -> list[dict[str, Any]]:
    """The seed's Figure 3: File1 0-10, File3 4-8, File2 6-12, File4 16-18."""
    return [
        file_row("7", "File1", 0, 10, small_writes=50, osts=[1, 2], stripe_count=2, nprocs=8),
        file_row("7", "File3", 4, 8, small_writes=100, osts=[3]),
        file_row("7", "File2", 6, 12, consec_writes=0, coll_writes=100, osts=[2]),
        file_row("7", "File4", 16, 18, small_1k_writes=100, small_writes=100, osts=[4]),
    ]


def test_figure3_critical_files_and_weighted_factors() -> None:
    out = Tuples(pd.DataFrame(figure3()), "darshan_file").extract_perf_factors("0", "1GB")
    assert out.columns == RESULT_COLUMNS
    assert len(out) == 1
    r = next(iter(out))
    assert r["job_id"] == "7"
    assert r["io_time_s"] == 14.0  # 0-12 and 16-18; Darshan's 18 s would count the gap
    assert r["bandwidth_bytes_per_s"] == pytest.approx(4e9 / 14, rel=1e-15)
    assert r["critical_files"] == [("File1", 10.0), ("File2", 2.0), ("File4", 2.0)]
    # File1: small 0.5, non-consec 0.01, coll 0, proc/OST 8/2; File2: 0, 1.0, 1, 1;
    # File4: small 1, small_1k 1, non-consec 0.01, coll 0, proc/OST 1; File3 is not critical
    assert r["small"] == pytest.approx((0.5 * 10 + 0 * 2 + 1 * 2) / 14, rel=1e-15)
    assert r["small_1k"] == pytest.approx(2 / 14, rel=1e-15)
    assert r["non_consec"] == pytest.approx((0.01 * 10 + 1.0 * 2 + 0.01 * 2) / 14, rel=1e-12)
    assert r["coll"] == pytest.approx(2 / 14, rel=1e-15)
    assert r["proc_per_ost"] == pytest.approx((4 * 10 + 1 * 2 + 1 * 2) / 14, rel=1e-15)
    assert r["ost_count"] == 4  # OSTs 1, 2, 3, 4 over all files, File3's included


def test_bandwidth_range_is_half_open() -> None:
    rows = [
        file_row("a", "f", 0, 10, bytes_written=10_000_000_000),  # exactly 1 GB/s
        file_row("b", "f", 0, 10, bytes_written=5_000_000_000),  # 0.5 GB/s
        file_row("c", "f", 0, 10, bytes_written=1_000_000_000),  # 0.1 GB/s
    ]
    t = Tuples(pd.DataFrame(rows))
    assert t.extract_perf_factors("0", "1GB", "write").df["job_id"].tolist() == ["b", "c"]
    assert t.extract_perf_factors("500MB", "1GB/s", "write").df["job_id"].tolist() == ["b"]
    assert t.extract_perf_factors(0.5e9, 2e9, "write").df["job_id"].tolist() == ["a", "b"]
    assert t.extract_perf_factors("1GB", "1GB", "write").df["job_id"].tolist() == []


def test_directions_use_their_intervals_and_bytes() -> None:
    rows = [
        file_row(
            "r",
            "in.dat",
            0,
            0,
            bytes_read=3_000_000,
            bytes_written=0,
            reads=30,
            writes=0,
            consec_reads=15,
            read_start_s=2.0,
            read_end_s=5.0,
            start_s=2.0,
            end_s=9.0,
        ),
        file_row("r", "out.dat", 7, 9, bytes_written=2_000_000),
    ]
    t = Tuples(pd.DataFrame(rows))
    read = next(iter(t.extract_perf_factors(0, "1TB", "read")))
    assert (read["io_time_s"], read["bandwidth_bytes_per_s"]) == (3.0, 1e6)
    assert read["critical_files"] == [("in.dat", 3.0)]
    assert read["non_consec"] == 0.5
    write = next(iter(t.extract_perf_factors(0, "1TB", "write")))
    assert (write["io_time_s"], write["bandwidth_bytes_per_s"]) == (2.0, 1e6)
    both = next(iter(t.extract_perf_factors(0, "1TB", "both")))
    # start_s/end_s: in.dat 2-9 covers out.dat 7-9
    assert (both["io_time_s"], both["bandwidth_bytes_per_s"]) == (7.0, 5e6 / 7)
    assert both["critical_files"] == [("in.dat", 7.0)]


def test_job_without_busy_time_has_no_bandwidth_and_is_left_out() -> None:
    rows = [file_row("idle", "f", 0, 0), file_row("busy", "f", 0, 100)]
    out = Tuples(pd.DataFrame(rows)).extract_perf_factors(0, "1TB")
    assert out.df["job_id"].tolist() == ["busy"]


def test_rows_of_one_file_are_one_file_and_undefined_factors_are_nan() -> None:
    # two per-rank rows of one shared file: counters add, nprocs/stripe_count take the maximum
    rows = [
        file_row("j", "shared", 0, 6, writes=10, small_writes=10, nprocs=4, stripe_count=None),
        file_row("j", "shared", 4, 10, writes=30, small_writes=0, nprocs=4, stripe_count=None),
    ]
    r = next(iter(Tuples(pd.DataFrame(rows)).extract_perf_factors(0, "1TB")))
    assert r["critical_files"] == [("shared", 10.0)]
    assert r["small"] == 0.25
    assert math.isnan(r["proc_per_ost"])  # no stripe count: not on Lustre


def test_job_by_file_join_uses_the_file_columns_and_drops_pairs_of_other_logs() -> None:
    jobs = Tuples(
        pd.DataFrame(
            {
                "job_id": ["7", "7"],  # one job, two Darshan logs: the join repeats file rows
                "log_id": ["log-7", "log-7b"],
                "bytes_written": [1.0, 1.0],  # the job's, not used
                "nprocs": [512, 512],
                "name": ["vpic", "vpic"],
            }
        ),
        "darshan_job",
    )
    files = Tuples(pd.DataFrame(figure3()), "darshan_file")
    joined = jobs.join(files, "job id")
    assert {"bytes_written_file", "nprocs_file", "name_file", "log_id_file"} <= set(joined.columns)
    assert len(joined) == 8
    r = next(iter(joined.extract_perf_factors("0", "1GB", "write")))
    assert r["bandwidth_bytes_per_s"] == pytest.approx(4e9 / 14, rel=1e-15)
    assert r["critical_files"] == [("File1", 10.0), ("File2", 2.0), ("File4", 2.0)]
    assert r["proc_per_ost"] == pytest.approx(44 / 14, rel=1e-15)
    reverse = files.join(jobs, "job id")  # the job's clashing columns get _job
    assert {"log_id_job", "nprocs_job", "name_job"} <= set(reverse.columns)
    assert reverse.extract_perf_factors("0", "1GB").df.equals(
        joined.extract_perf_factors("0", "1GB").df
    )


def test_files_of_several_logs_in_one_job_are_reported(caplog: pytest.LogCaptureFixture) -> None:
    rows = [file_row("9", "a", 0, 1), file_row("9", "b", 0, 1, log_id="log-9b")]
    with caplog.at_level("WARNING", logger="pipeline.query.perf"):
        out = Tuples(pd.DataFrame(rows)).extract_perf_factors(0, "1TB")
    assert out.df["io_time_s"].tolist() == [1.0]
    assert [r.getMessage() for r in caplog.records] == [
        "job 9: files from 2 Darshan logs share one time axis here, but their times are "
        "relative to each log's start; filter on log_id to analyse them apart"
    ]


def test_osts_as_arrays_scalars_or_missing() -> None:
    rows = [
        file_row("j", "a", 0, 1, osts=np.array([5, 6])),
        file_row("j", "b", 0, 1, osts=7),
        file_row("j", "c", 0, 1, osts=None),
        file_row("j", "d", 0, 1, osts=[6, 8]),
    ]
    r = next(iter(Tuples(pd.DataFrame(rows)).extract_perf_factors(0, "1TB")))
    assert r["ost_count"] == 4


def test_empty_result_has_the_columns_and_types() -> None:
    out = Tuples(pd.DataFrame(figure3())).extract_perf_factors("1TB", "2TB")
    assert (len(out), out.columns) == (0, RESULT_COLUMNS)
    assert str(out.df["ost_count"].dtype) == "int64"
    assert str(out.df["small"].dtype) == "float64"


def test_errors() -> None:
    t = Tuples(pd.DataFrame(figure3()))
    with pytest.raises(ValueError, match="direction must be read, write or both"):
        t.extract_perf_factors(0, 1, "sideways")
    with pytest.raises(ValueError, match="low <= high"):
        t.extract_perf_factors("1GB", "0")
    with pytest.raises(ValueError, match="unknown unit"):
        t.extract_perf_factors("0", "1 Gbit")
    with pytest.raises(ColumnError, match="unknown column 'write_end_s'") as info:
        t.project("job id", "name", "write start s").extract_perf_factors(0, 1)
    assert info.value.available == ("job_id", "name", "write_start_s")
    with pytest.raises(ColumnError, match="unknown column 'job_id'"):
        t.project("name").extract_perf_factors(0, 1)
