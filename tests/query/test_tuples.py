"""Tuples operators: project, filter, sort, bin and group UDFs, join suffixes, percentile."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipeline.query import ColumnError, FilterSyntaxError, Tuples
from pipeline.query.tuples import DEFAULT_Q


@pytest.fixture
def jobs() -> Tuples:
    return Tuples(
        pd.DataFrame(
            {
                "job_id": ["1003", "1001", "1002", "1004", "1005"],
                "bytes_written": [2e10, 5e8, 1e9, None, 1.2e10],
                "nprocs": [1024, 1, 16, 64, 64],
                "user": ["ann", "bob", "ann", "cid", "bob"],
            },
            index=[10, 11, 12, 13, 14],
        ),
        table="darshan_job",
    )


def test_basics(jobs: Tuples) -> None:
    assert len(jobs) == 5
    assert jobs.columns == ("job_id", "bytes_written", "nprocs", "user")
    assert jobs.table == "darshan_job"
    assert list(jobs.df.index) == [0, 1, 2, 3, 4]
    first = next(iter(jobs))
    assert first == {"job_id": "1003", "bytes_written": 2e10, "nprocs": 1024, "user": "ann"}
    copy = jobs.to_pandas()
    copy.loc[0, "nprocs"] = 0
    assert jobs.df.loc[0, "nprocs"] == 1024
    assert repr(jobs) == (
        "Tuples(table='darshan_job', rows=5, columns=[job_id, bytes_written, nprocs, user])"
    )


def test_project(jobs: Tuples) -> None:
    p = jobs.project("Bytes Written", "job id")
    assert p.columns == ("bytes_written", "job_id")
    assert p.table == "darshan_job"
    assert jobs.project(["user", "nprocs"], "user").columns == ("user", "nprocs")
    assert jobs.columns == ("job_id", "bytes_written", "nprocs", "user")  # input untouched


def test_project_unknown_column(jobs: Tuples) -> None:
    with pytest.raises(KeyError) as info:
        jobs.project("job id", "node count")
    assert isinstance(info.value, ColumnError)
    assert str(info.value) == (
        "unknown column 'node count' (project); available: job_id, bytes_written, nprocs, user"
    )
    with pytest.raises(ValueError, match="at least one column"):
        jobs.project()


def test_filter_string_and_callable(jobs: Tuples) -> None:
    small = jobs.filter("bytes written < 1GB")
    assert [r["job_id"] for r in small] == ["1001"]
    assert list(small.df.index) == [0]
    anns = jobs.filter(lambda row: row["user"] == "ann" and row["nprocs"] > 100)
    assert [r["job_id"] for r in anns] == ["1003"]
    assert len(jobs.filter(lambda row: False)) == 0
    with pytest.raises(FilterSyntaxError, match="unknown column 'node_count'"):
        jobs.filter("node count > 1")


def test_sort(jobs: Tuples) -> None:
    assert [r["job_id"] for r in jobs.sort("bytes written")] == [
        "1001",
        "1002",
        "1005",
        "1003",
        "1004",  # missing last
    ]
    assert [r["job_id"] for r in jobs.sort("bytes_written", ascending=False)] == [
        "1003",
        "1005",
        "1002",
        "1001",
        "1004",
    ]
    # stable: equal nprocs keep their order (1004 before 1005)
    assert [r["job_id"] for r in jobs.sort("nprocs")] == ["1001", "1002", "1004", "1005", "1003"]
    assert [r["job_id"] for r in jobs.sort(["user", "nprocs"], ascending=[True, False])] == [
        "1003",
        "1002",
        "1005",
        "1001",
        "1004",
    ]
    with pytest.raises(ColumnError):
        jobs.sort("runtime")


def classify_workload(bytes_written: float) -> int | None:
    if math.isnan(bytes_written):
        return None
    if bytes_written < 1e9:
        return 0
    return 1 if bytes_written < 1e10 else 2


def test_bin_tags_each_row(jobs: Tuples) -> None:
    seen: list[Any] = []

    def spy(v: float) -> int | None:
        seen.append(v)
        return classify_workload(v)

    binned = jobs.bin("Workload", spy, "bytes written")
    assert binned.columns == ("job_id", "bytes_written", "nprocs", "user", "workload")
    assert binned.df["workload"].tolist()[:3] == [2, 0, 1]
    assert binned.df["workload"].tolist()[4] == 2
    assert binned.df["workload"].isna().tolist() == [False, False, False, True, False]
    assert len(seen) == 5 and math.isnan(seen[3])  # the UDF sees missing values as NaN
    assert "workload" not in jobs.columns
    with pytest.raises(ValueError, match="bin column 'user' exists already"):
        jobs.bin("user", str, "nprocs")
    with pytest.raises(ColumnError):
        jobs.bin("w", str, "bytes read")


def total_nprocs(group: pd.DataFrame) -> int:
    return int(group["nprocs"].sum())


def test_group_scalar_udf_named_by_the_function(jobs: Tuples) -> None:
    groups: list[list[str]] = []

    def spy(g: pd.DataFrame) -> int:
        groups.append(g["job_id"].tolist())
        assert list(g.index) == list(range(len(g)))
        return total_nprocs(g)

    g = jobs.group("user", total_nprocs)
    assert g.columns == ("user", "total_nprocs")
    assert g.df.to_dict(orient="list") == {
        "user": ["ann", "bob", "cid"],
        "total_nprocs": [1040, 65, 64],
    }
    jobs.group("user", spy)
    assert groups == [["1003", "1002"], ["1001", "1005"], ["1004"]]
    assert jobs.group("user", lambda g: len(g)).columns == ("user", "value")
    assert jobs.group("user", lambda g: len(g), name="Job Count").columns == ("user", "job_count")


def test_group_dict_and_series_results(jobs: Tuples) -> None:
    g = jobs.group(
        "user", lambda d: {"jobs": len(d), "Max Procs": int(d["nprocs"].max())}
    ).df.to_dict(orient="list")
    assert g == {"user": ["ann", "bob", "cid"], "jobs": [2, 2, 1], "max_procs": [1024, 64, 64]}
    s = jobs.group("user", lambda d: pd.Series({"n": len(d)})).df.to_dict(orient="list")
    assert s == {"user": ["ann", "bob", "cid"], "n": [2, 2, 1]}


def test_group_several_keys_missing_keys_and_no_rows(jobs: Tuples) -> None:
    t = Tuples(pd.DataFrame({"a": ["x", "x", None, "y"], "b": [1, 1, 2, 2], "v": [1, 2, 3, 4]}))
    g = t.group(["a", "b"], lambda d: int(d["v"].sum()), name="s")
    assert g.df.to_dict(orient="list") == {"a": ["x", "y"], "b": [1, 2], "s": [3, 4]}
    empty = jobs.filter("nprocs > 1M").group("user", total_nprocs)
    assert (len(empty), empty.columns) == (0, ("user", "total_nprocs"))
    with pytest.raises(ValueError, match="overwrite key columns"):
        jobs.group("user", lambda d: {"user": 1})


@pytest.fixture
def slurm() -> Tuples:
    return Tuples(
        pd.DataFrame(
            {
                "job_id": ["1001", "1002", "1003", "1009"],
                "user": ["bob", "ann", "ann", "dan"],
                "node_count": [1, 1, 32, 2],
            }
        ),
        table="slurm",
    )


def test_join_default_suffix_names_the_right_table(jobs: Tuples, slurm: Tuples) -> None:
    j = jobs.join(slurm, "job id")
    assert j.columns == ("job_id", "bytes_written", "nprocs", "user", "user_slurm", "node_count")
    assert j.table == "darshan_job"
    assert j.project("job id", "node count").df.to_dict(orient="list") == {
        "job_id": ["1003", "1001", "1002"],
        "node_count": [32, 1, 1],
    }
    other = Tuples(slurm.df, table=None)
    assert "user_right" in jobs.join(other, "job_id").columns


def test_join_custom_suffixes_and_how(jobs: Tuples, slurm: Tuples) -> None:
    j = jobs.join(slurm, ["job id"], how="left", suffixes=("_darshan", "_sched"))
    assert j.columns == (
        "job_id",
        "bytes_written",
        "nprocs",
        "user_darshan",
        "user_sched",
        "node_count",
    )
    assert j.df["job_id"].tolist() == ["1003", "1001", "1002", "1004", "1005"]
    assert j.df["node_count"].isna().tolist() == [False, False, False, True, True]
    outer = jobs.join(slurm, "job_id", how="outer")
    assert sorted(outer.df["job_id"]) == ["1001", "1002", "1003", "1004", "1005", "1009"]
    with pytest.raises(ValueError, match="how must be one of inner, left, right, outer"):
        jobs.join(slurm, "job_id", how="cross")
    with pytest.raises(ValueError, match="duplicate columns"):
        jobs.join(slurm, "job_id", suffixes=("_x", "_x"))


def test_join_keys_of_different_kinds_compare_as_text(slurm: Tuples) -> None:
    numeric = Tuples(pd.DataFrame({"job_id": [1003, 1001], "x": [1, 2]}))
    j = numeric.join(slurm, "job id")
    assert j.df[["job_id", "x", "node_count"]].to_dict(orient="list") == {
        "job_id": ["1003", "1001"],
        "x": [1, 2],
        "node_count": [32, 1],
    }


def test_join_missing_key(jobs: Tuples) -> None:
    with pytest.raises(ColumnError, match=r"\(join, right side\)"):
        jobs.join(Tuples(pd.DataFrame({"id": [1]})), "job id")
    with pytest.raises(ColumnError, match=r"\(join, left side\)"):
        jobs.join(Tuples(pd.DataFrame({"id": [1]})), "id")


def test_percentile_default_list(jobs: Tuples) -> None:
    p = jobs.percentile("bytes written")
    assert p.columns == ("q", "bytes_written")
    assert len(p) == 101
    assert p.df["q"].tolist() == list(DEFAULT_Q)
    assert DEFAULT_Q[:3] == (0.0, 0.01, 0.02) and DEFAULT_Q[-1] == 1.0
    by_q = dict(zip(p.df["q"], p.df["bytes_written"], strict=True))
    # the four values 5e8, 1e9, 1.2e10, 2e10 (the missing one left out), linear interpolation
    assert by_q[0.0] == 5e8
    assert by_q[1.0] == 2e10
    assert by_q[0.5] == pytest.approx(6.5e9, rel=1e-15)
    assert by_q[0.25] == pytest.approx(8.75e8, rel=1e-15)
    assert by_q[0.75] == pytest.approx(1.4e10, rel=1e-15)


def test_percentile_given_quantiles_methods_and_errors(jobs: Tuples) -> None:
    p = jobs.percentile("nprocs", q=[0.5, 0.9])
    assert p.df["q"].tolist() == [0.5, 0.9]
    # sorted 1, 16, 64, 64, 1024: q=0.9 sits at rank 3.6, 64 + 0.6 * 960
    assert p.df["nprocs"].tolist() == pytest.approx([64.0, 640.0], rel=1e-15)
    lower = jobs.percentile("nprocs", q=[0.9], method="lower")
    assert lower.df["nprocs"].tolist() == [64.0]
    empty = jobs.filter("nprocs > 1M").percentile("nprocs", q=[0, 1])
    assert np.isnan(empty.df["nprocs"]).all() and len(empty) == 2
    with pytest.raises(ValueError, match="within \\[0, 1\\]"):
        jobs.percentile("nprocs", q=[50])
    with pytest.raises(ValueError, match="within \\[0, 1\\]"):
        jobs.percentile("nprocs", q=[])
    with pytest.raises(ValueError, match="column 'user' is not numeric"):
        jobs.percentile("user")
    with pytest.raises(ColumnError):
        jobs.percentile("bytes read")


def test_operators_compose(jobs: Tuples, slurm: Tuples) -> None:
    out = (
        jobs.filter("bytes written >= 1GB")
        .join(slurm, "job id")
        .bin("workload", classify_workload, "bytes written")
        .sort("node count", ascending=False)
        .project("job id", "node count", "workload")
    )
    assert list(out) == [
        {"job_id": "1003", "node_count": 32, "workload": 2},
        {"job_id": "1002", "node_count": 1, "workload": 1},
    ]
