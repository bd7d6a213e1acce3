"""IOMiner's job row, file rows, critical path and factors on real Darshan logs.

Expected values are documented per log in ``tests/data/darshan/README.md``; they were checked
against pydarshan (bytes, Darshan's own ``agg_perf_by_slowest``) and against the research notes
of reference/darshan-iominer.md (2.4: the busy-model union and the critical files).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipeline.formats.darshan.read import read_darshan
from pipeline.parsers.errors import ParseError
from pipeline.reducers.darshan.summary import size_class
from pipeline.reducers.darshan.times import busy_intervals
from pipeline.reducers.darshan_job import JobAnalysis, analyze
from pipeline.reducers.io_diagnosis import Thresholds, diagnose

GiB = 2**30
MiB = 2**20


def run(path: Path) -> JobAnalysis:
    return analyze(read_darshan(path))


STD_STREAMS = ("<STDIN>", "<STDOUT>", "<STDERR>")


def busy_reference(path: Path) -> tuple[float, float]:
    """``(critical path s, bytes moved)`` of a log, computed here from Darshan's own counters
    as pydarshan reads them (darshan-util's library), independently of the analysis tested.

    The critical path is the union of IOMiner's busy intervals (reference/darshan-iominer.md
    2.3): a record of one rank is busy from its open (its first read or write when the open
    was not timed) for ``F_READ_TIME + F_WRITE_TIME + F_META_TIME``, a record reduced over all
    ranks (rank -1) for ``F_SLOWEST_RANK_TIME``; one rank's records are laid end to end in
    order of start (IOMiner's ``AdjustTiming``); ends stop at the run time. Records are those
    of POSIX and STDIO without the standard streams, and so are the bytes (read + written).
    """
    import darshan

    shared: list[tuple[float, float]] = []
    per_rank: dict[int, list[tuple[float, float]]] = {}
    moved = 0.0
    with darshan.DarshanReport(str(path), read_all=False) as r:
        run_time = float(r.metadata["job"]["run_time"])
        for mod in ("POSIX", "STDIO"):
            if mod not in r.modules:
                continue
            r.mod_read_all_records(mod, dtype="numpy", warnings=False)
            frames = r.records[mod].to_df()
            counters = frames["counters"].to_dict("records")
            for c, f in zip(counters, frames["fcounters"].to_dict("records"), strict=True):
                if r.name_records.get(c["id"]) in STD_STREAMS:
                    continue
                moved += c[f"{mod}_BYTES_READ"] + c[f"{mod}_BYTES_WRITTEN"]
                t = {k.removeprefix(f"{mod}_F_"): max(v, 0.0) for k, v in f.items()}
                timed = [v for v in (t["READ_START_TIMESTAMP"], t["WRITE_START_TIMESTAMP"]) if v]
                start = t["OPEN_START_TIMESTAMP"] or min(timed, default=0.0)
                if f["rank"] < 0:
                    shared.append((start, t["SLOWEST_RANK_TIME"]))
                else:
                    length = t["READ_TIME"] + t["WRITE_TIME"] + t["META_TIME"]
                    per_rank.setdefault(int(f["rank"]), []).append((start, length))
    intervals = [(s, s + n) for s, n in shared]
    for records in per_rank.values():
        free = 0.0  # when the rank is done with its previous record
        for s, n in sorted(r for r in records if r[1] > 0):
            s = max(s, free)
            free = s + n
            intervals.append((s, free))
    covered, reach = 0.0, -math.inf
    for s, e in sorted((min(s, run_time), min(e, run_time)) for s, e in intervals):
        if e > s and e > reach:
            covered += e - max(s, reach)
            reach = e
    return covered, moved


def test_sample_badost_is_n_n_posix_with_one_file_on_slow_ost_14_on_the_critical_path(
    darshan_inputs: Path,
) -> None:
    a = run(darshan_inputs / "sample-badost.darshan")
    j = a.job
    assert (j["id"], j["nprocs"], j["run_time_s"]) == ("6265799", 2048, 780.0)
    assert (j["bytes_written"], j["bytes_read"]) == (549755813888, 1654784)
    assert (j["writes"], j["reads"]) == (131072, 34816)
    assert (j["pattern"], j["interface"], j["interfaces"]) == ("N-N", "POSIX", ["POSIX", "STDIO"])
    assert (j["file_count"], j["ost_count"], j["size_class"]) == (2049, 24, "Medium")
    assert j["seq_ratio"] == j["consec_ratio"] == 0.984375
    assert j["small_ratio"] == 0.0
    # the critical path and its bandwidth, against the busy model computed from the counters
    path_s, moved = busy_reference(darshan_inputs / "sample-badost.darshan")
    assert moved == j["bytes_written"] + j["bytes_read"]
    assert j["io_time_s"] == pytest.approx(path_s, rel=1e-12)
    assert j["critical_bytes_per_s"] == pytest.approx(moved / path_s, rel=1e-12)
    assert j["darshan_bytes_per_s"] / MiB == pytest.approx(673.4641, abs=1e-4)
    assert [(c.name.rsplit("/", 1)[-1], round(c.exclusive_s, 3), c.osts) for c in a.critical] == [
        ("ior-posix.out.00001507", 769.082, (14,)),
        ("ior-posix.out.00001992", 9.414, (15,)),
        ("posix1m2.in", 0.201, ()),
    ]
    f = a.factors
    assert (f["small"], f["coll"], f["ost_count"], f["proc_per_ost"]) == (0.0, 0.0, 24.0, 1.0)
    assert f["non_consec"] == pytest.approx(0.015625, abs=1e-6)
    slow = [o for o in a.osts if o.slow]
    assert [(o.ost, o.files) for o in slow] == [(14, 85)]
    assert slow[0].median_bytes_per_s / MiB == pytest.approx(0.50, abs=0.01)
    assert slow[0].last_end_s == pytest.approx(778.979, abs=1e-3)
    d = diagnose(a)
    assert d.low == ("write",)
    assert [(c.kind, c.ost, c.source) for c in d.causes] == [
        ("slow_ost", 14, "darshan"),
        ("dominant_file", 14, "darshan"),
    ]


def test_sample_is_vpic_io_n_1_collective_through_hdf5(darshan_inputs: Path) -> None:
    a = run(darshan_inputs / "sample.darshan")
    j = a.job
    assert (j["id"], j["nprocs"], j["bytes_written"], j["bytes_read"]) == (
        "4478544",
        2048,
        2199023259968,
        0,
    )
    assert (j["pattern"], j["interface"], j["collective"]) == ("N-1", "MPI-IO collective", True)
    assert j["collective_ratio"] == pytest.approx(16384 / 16402)  # 18 independent writes
    assert j["critical_bytes_per_s"] == j["darshan_bytes_per_s"] == j["naive_bytes_per_s"]
    assert j["darshan_bytes_per_s"] / MiB == pytest.approx(24535.2819, abs=1e-4)
    [cf] = a.critical
    assert cf.name.endswith("/vpicio.hdf5")
    assert (cf.nprocs, cf.stripe_count, len(cf.osts)) == (2048, 24, 24)
    # the only critical file holds the whole critical path, computed from the counters
    path_s, _moved = busy_reference(darshan_inputs / "sample.darshan")
    assert cf.exclusive_s == pytest.approx(path_s, rel=1e-12)
    assert a.factors["proc_per_ost"] == pytest.approx(2048 / 24)
    assert (a.factors["coll"], a.factors["non_consec"]) == (1.0, 1.0)
    assert [c.kind for c in diagnose(a).causes] == ["contention", "dominant_file"]


def test_mpi_io_test_release_3_5_is_independent_mpi_io(shared_darshan_logs: Path) -> None:
    a = run(shared_darshan_logs / "release_logs" / "mpi-io-test-x86_64-3.5.0.darshan")
    j = a.job
    assert a.log.version == "3.41"
    assert (j["nprocs"], j["bytes_read"], j["bytes_written"]) == (4, 64 * MiB, 64 * MiB)
    assert (j["reads"], j["writes"], j["read_ratio"], j["seq_ratio"]) == (4, 4, 0.5, 0.75)
    assert (j["pattern"], j["interface"], j["collective"]) == ("N-1", "MPI-IO independent", False)
    [cf] = a.critical
    assert (cf.name.rsplit("/", 1)[-1], cf.osts, cf.nprocs) == ("mpi-io-test.tmp.dat", (1,), 4)
    assert a.factors["proc_per_ost"] == 4.0
    # bytes over the critical path, both from the counters (busy_reference)
    path_s, moved = busy_reference(
        shared_darshan_logs / "release_logs" / "mpi-io-test-x86_64-3.5.0.darshan"
    )
    assert moved == 128 * MiB
    assert j["critical_bytes_per_s"] == pytest.approx(moved / path_s, rel=1e-12)


def test_sample_dxt_simple_keeps_per_rank_records_of_the_shared_file(darshan_inputs: Path) -> None:
    a = run(darshan_inputs / "sample-dxt-simple.darshan")
    j = a.job
    assert {"DXT_POSIX", "DXT_MPIIO"} <= set(a.log.modules)
    assert (j["nprocs"], j["bytes_written"], j["writes"], j["file_count"]) == (16, 4040, 2, 18)
    # DARSHAN_DISABLE_SHARED_REDUCTION: 16 per-rank records of test.out, counted as 16 processes
    [shared] = [f for f in a.files if f["name"].endswith("/test.out")]
    assert (shared["nprocs"], shared["shared"]) == (16, True)
    assert (j["pattern"], j["interface"]) == ("N-1", "MPI-IO independent")
    assert len(a.critical) == 4
    assert a.critical[0].name.endswith("test.out.locktest.13")
    assert (a.factors["small"], a.factors["non_consec"]) == (1.0, 1.0)
    assert [c.kind for c in diagnose(a).causes] == ["small_noncontiguous"]


def test_noposix_is_an_anonymized_stdio_only_job(darshan_inputs: Path) -> None:
    a = run(darshan_inputs / "noposix.darshan")
    j = a.job
    assert (j["id"], j["nprocs"], j["run_time_s"]) == ("83017637", 512, 39213.0)
    assert (j["bytes_read"], j["reads"], j["read_ratio"]) == (1812408359, 199687, 1.0)
    assert (j["interfaces"], j["interface"], j["pattern"]) == (["STDIO"], "STDIO", "N-1")
    # STDIO has no size bins nor CONSEC counters: the shares are undefined, not 0 or 1
    assert j["seq_ratio"] is j["small_ratio"] is j["darshan_bytes_per_s"] is None
    [cf] = a.critical
    name = "/global/cscratch1/4028781608"  # the file name is a hash; the mount point is not
    assert (cf.name, cf.osts, cf.nprocs) == (name, (62,), 512)
    assert a.factors["proc_per_ost"] == 512.0
    assert a.factors["small"] is None
    # the hashed standard streams are recognised by their record ids and left out
    assert [f["name"] for f in a.files] == [name]


def test_skew_app_is_65536_ranks_on_one_ost(shared_darshan_logs: Path) -> None:
    a = run(shared_darshan_logs / "skew_io" / "skew-app.darshan")
    j = a.job
    assert (j["nprocs"], j["size_class"], j["pattern"]) == (65536, "Large", "N-1")
    assert j["darshan_bytes_per_s"] / MiB == pytest.approx(157.49, abs=0.01)
    assert j["critical_bytes_per_s"] == j["darshan_bytes_per_s"]
    assert a.factors["proc_per_ost"] == 65536.0
    assert a.critical[0].osts == (10,)


def test_empty_log_is_a_job_without_io(shared_darshan_logs: Path) -> None:
    a = run(shared_darshan_logs / "empty_log" / "empty_log.darshan")
    j = a.job
    assert (j["no_io"], j["file_count"], j["pattern"], j["interface"]) == (True, 0, None, None)
    assert a.critical == ()
    assert j["critical_bytes_per_s"] is None
    assert diagnose(a).causes == ()


def accumulate(path: Path) -> tuple[float, int] | None:
    """pydarshan's own (agg_perf_by_slowest MiB/s, total bytes) of the POSIX module."""
    import darshan
    from darshan.backend.cffi_backend import accumulate_records

    with darshan.DarshanReport(str(path), read_all=False) as r:
        if "POSIX" not in r.modules:
            return None
        r.mod_read_all_records("POSIX", dtype="numpy", warnings=False)
        df = r.records["POSIX"].to_df()
        if not len(df["counters"]):
            return None
        dm = accumulate_records(df, "POSIX", r.metadata["job"]["nprocs"]).derived_metrics
        return float(dm.agg_perf_by_slowest), int(dm.total_bytes)


def test_every_bundled_and_shared_log_is_analysed_or_rejected(darshan_log: Path) -> None:
    try:
        log = read_darshan(darshan_log)
    except ParseError as err:
        assert err.path == str(darshan_log) and err.reason
        return
    a = analyze(log)
    j: dict[str, Any] = a.job
    # invariants: the file rows add up to the job, the critical path tiles the union
    assert sum(f["bytes_read"] for f in a.files) == j["bytes_read"]
    assert sum(f["bytes_written"] for f in a.files) == j["bytes_written"]
    assert math.isclose(sum(c.exclusive_s for c in a.critical), a.cover.union, abs_tol=1e-9)
    assert j["io_time_s"] <= j["run_time_s"] + 1e-9
    assert j["file_count"] == len(a.files)
    for f in a.files:
        assert 0 <= f["start_s"] <= f["end_s"] <= max(j["run_time_s"], f["start_s"])
    acc = accumulate(darshan_log)
    if acc is not None and acc[1] > 0:
        perf, _ = acc
        assert j["darshan_bytes_per_s"] / MiB == pytest.approx(perf, rel=1e-6)


def test_a_rank_does_one_thing_at_a_time() -> None:
    # rank 0 opens two files at 1 s, each busy 2 s: they are laid end to end (1-3, 3-5);
    # the record reduced over all ranks lasts its slowest rank's time; ends stop at run time
    ranks = np.array([0, 0, -1, 1])
    z = np.zeros(4)
    cols = {
        "open_start_s": np.array([1.0, 1.0, 2.0, 9.0]),
        "read_start_s": z,
        "write_start_s": z,
        "read_time_s": np.array([2.0, 1.0, 50.0, 5.0]),
        "write_time_s": np.array([0.0, 1.0, 50.0, 0.0]),
        "meta_time_s": z,
        "slowest_rank_time_s": np.array([0.0, 0.0, 4.0, 0.0]),
    }
    start, end = busy_intervals(ranks, cols, run_time_s=12.0)
    assert start.tolist() == [1.0, 3.0, 2.0, 9.0]
    assert end.tolist() == [3.0, 5.0, 6.0, 12.0]


@pytest.mark.parametrize(
    ("nprocs", "cls"),
    [
        (1, "One"),
        (2, "Small"),
        (1024, "Small"),
        (1025, "Medium"),
        (8192, "Medium"),
        (8193, "Large"),
    ],
)
def test_size_classes_of_the_seed(nprocs: int, cls: str) -> None:
    assert size_class(nprocs) == cls


def test_thresholds_select_low_bandwidth_directions(darshan_inputs: Path) -> None:
    a = run(darshan_inputs / "sample-badost.darshan")
    assert diagnose(a, Thresholds(max_bytes_per_s=600 * MiB)).low == ()
    assert diagnose(a, Thresholds(min_nprocs=2048)).low == ()
    assert diagnose(a, Thresholds(min_bytes_per_proc=257 * MiB)).low == ()
    assert diagnose(a, Thresholds(min_nprocs=0, min_bytes_per_proc=0)).low == ("read", "write")


def test_a_file_that_is_not_a_darshan_log_is_a_parse_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.darshan"
    bad.write_bytes(b"not a darshan log\n" * 20)
    with pytest.raises(ParseError, match="not a readable Darshan log") as info:
        read_darshan(bad)
    assert (info.value.path, info.value.line_no) == (str(bad), 0)


@pytest.mark.parametrize("direction", ["read", "write", "both"])
def test_vectorised_factors_equal_the_per_file_ones(
    shared_darshan_logs: Path, darshan_inputs: Path, direction: str
) -> None:
    from pipeline.reducers.factors import COUNT_COLUMNS, factor_arrays, file_factors

    for path in (
        shared_darshan_logs / "imbalanced_io" / "imbalanced-io.darshan",
        darshan_inputs / "noposix.darshan",
        darshan_inputs / "sample-dxt-simple.darshan",
    ):
        rows = analyze(read_darshan(path)).files
        cols = {
            k: np.array([r.get(k, np.nan) for r in rows], dtype=np.float64) for k in COUNT_COLUMNS
        }
        counted = np.array([r["module"] == "POSIX" for r in rows])
        nprocs = np.array([r["nprocs"] for r in rows])
        stripes = np.array([r.get("stripe_count") or 0 for r in rows])
        arrays = factor_arrays(cols, counted, nprocs, stripes, direction)  # type: ignore[arg-type]
        for i, r in enumerate(rows):
            one = file_factors(r, direction)  # type: ignore[arg-type]
            for name in ("small", "small_1k", "non_consec", "coll", "proc_per_ost"):
                got = arrays[name][i]
                want = getattr(one, name)
                assert (want is None and np.isnan(got)) or got == pytest.approx(want), name
