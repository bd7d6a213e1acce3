"""Downsampling sysstat disk samples: real recordings, sysstat's formulas, and properties.

Real inputs are in ``../shared/data/sysstat/`` (reference/sysstat.md 5.2): two sadc processes
recorded the same 240 s of random load at 1 s (``exp_ds2_1s_sadf_d.csv``) and at 15 s
(``exp_ds2_15s_sadf_d.csv``), and ``sa_test`` holds 29 one-second records whose raw kernel
counters ``sadf -r`` prints.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DISK_METRICS, DiskSample, RestartMark
from pipeline.reducers.downsample import DiskAmounts, Downsampler, downsample

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "sysstat"
METRICS = DISK_METRICS
T0 = 1795320855.0  # 2026-11-22 04:14:15 UTC, on the 15 s grid


def records(name: str) -> list[DiskSample | RestartMark]:
    out = list(parse_sadf_csv((DATA / name).read_bytes().splitlines(), name, 1))
    assert not [r for r in out if isinstance(r, ParseError)]
    return [r for r in out if not isinstance(r, ParseError)]


def disk(records_: Sequence[DiskSample | RestartMark]) -> list[DiskSample]:
    return [r for r in records_ if isinstance(r, DiskSample)]


def sample(
    end_s: float, dt: float = 1.0, device: str = "vda", host: str = "vm", **kw: float
) -> DiskSample:
    values = dict.fromkeys(METRICS, 0.0) | kw
    return DiskSample(host, device, end_s, dt, **values)


# -- real data -------------------------------------------------------------------------------

# reference/sysstat.md 5.2 table B (96 windows): median and max absolute error per metric, as
# printed there; the bound is that value plus half a unit of its last printed digit.
CROSS_FILE_ABS = {
    "tps": (0.15, 0.005, 281, 0.5),
    "read_kb_per_s": (1.07, 0.005, 411, 0.5),
    "write_kb_per_s": (0.40, 0.005, 2177, 0.5),
    "areq_sz_kb": (0.0007, 0.00005, 7.5, 0.05),
    "aqu_sz": (0.0027, 0.00005, 0.024, 0.0005),
    "await_ms": (0.003, 0.0005, 0.47, 0.005),
    "util_pct": (0.004, 0.0005, 0.30, 0.005),
}


def test_1s_downsampled_matches_the_real_15s_recording() -> None:
    fine = records("exp_ds2_1s_sadf_d.csv")
    ref = {(r.device, r.end_s): r for r in disk(records("exp_ds2_15s_sadf_d.csv"))}
    # the 15 s sadc ended its intervals at hh:mm:08/23/38/53, 8 s after the epoch grid
    got = {(r.device, r.end_s): r for r in downsample(fine, 15.0, offset_s=8.0)}
    assert got.keys() == ref.keys()
    assert len(got) == 96
    assert {r.interval_s for r in got.values()} == {15.0}
    keys = sorted(ref)
    for name, (median, median_slack, worst, worst_slack) in CROSS_FILE_ABS.items():
        a = np.array([getattr(got[k], name) for k in keys])
        b = np.array([getattr(ref[k], name) for k in keys])
        err = np.abs(a - b)
        assert np.median(err) <= median + median_slack, name
        assert err.max() <= worst + worst_slack, name
        big = b >= 1.0  # 5.3 item 3: medians of the relative error within 1 %
        if big.sum() >= 10:
            assert np.median(err[big] / b[big]) <= 0.01, name
        # totals over the run agree: the errors are I/O shifted between adjacent intervals
        weight = np.array([ref[k].tps if name in ("await_ms", "areq_sz_kb") else 1.0 for k in keys])
        total_ref = float((b * weight).sum())
        assert abs(float((a * weight).sum()) - total_ref) <= 0.005 * total_ref, name


def test_await_as_a_time_mean_would_be_far_off() -> None:
    fine = disk(records("exp_ds2_1s_sadf_d.csv"))
    ref = {(r.device, r.end_s): r.await_ms for r in disk(records("exp_ds2_15s_sadf_d.csv"))}
    bins: dict[tuple[str, float], list[float]] = {}
    for r in fine:
        bins.setdefault((r.device, 8.0 + 15.0 * math.ceil((r.end_s - 8.0) / 15.0)), []).append(
            r.await_ms
        )
    worst = max(abs(float(np.mean(v)) - ref[k]) for k, v in bins.items())
    assert worst > 10.0  # reference/sysstat.md 5.2: 19.9 ms; I/O weighting stays below 0.475 ms


def raw_increments(sadf: str) -> list[dict[str, int]]:
    """Counter increments per record of ``sadf -r sa_test -- -d`` (label; prev; curr ...)."""
    out = subprocess.run(
        [sadf, "-r", str(DATA / "sa_test"), "--", "-d"], capture_output=True, text=True, check=True
    ).stdout
    rows = []
    for line in out.splitlines():
        f = [x.strip() for x in line.split(";")]
        rows.append({f[i]: int(f[i + 2]) - int(f[i + 1]) for i in range(7, len(f) - 2, 3)})
    return rows


def test_same_file_against_sysstat_formulas_on_the_raw_counters() -> None:
    sadf = shutil.which("sadf")
    if sadf is None:
        pytest.fail("sadf not found: run `make test` (installs sysstat) or apt-get install sysstat")
    inc = raw_increments(sadf)
    assert len(inc) == 29
    # records end at 04:14:22 ... 04:14:50; grid ends at :36 and :51 -> 15 and 14 records
    out = downsample(records("sadf_d_U_d.csv"), 15.0, offset_s=6.0)
    assert [(r.end_s, r.interval_s) for r in out] == [(T0 + 21, 15.0), (T0 + 35, 14.0)]
    for got, part in zip(out, (inc[:15], inc[15:]), strict=True):
        t = float(len(part))
        total = {k: sum(x[k] for x in part) for k in part[0]}
        n = total["tps"]
        sectors = total["rkB/s"] + total["wkB/s"] + total["dkB/s"]
        want = {
            "tps": n / t,
            "read_kb_per_s": total["rkB/s"] / 2 / t,
            "write_kb_per_s": total["wkB/s"] / 2 / t,
            "discard_kb_per_s": total["dkB/s"] / 2 / t,
            "areq_sz_kb": sectors / 2 / n,
            "aqu_sz": total["aqu-sz"] / (t * 1000),
            "await_ms": (total["rd_ticks"] + total["wr_ticks"] + total["dc_ticks"]) / n,
            "util_pct": total["tot_ticks"] / (t * 1000) * 100,
        }
        # reference/sysstat.md 5.3 item 1: rel <= 1 % where ref >= 1; await <= 0.05 ms; aqu <= 0.01
        for name, ref in want.items():
            value = getattr(got, name)
            if name == "await_ms":
                assert value == pytest.approx(ref, abs=0.05)
            elif name == "aqu_sz":
                assert value == pytest.approx(ref, abs=0.01)
            else:
                assert value == pytest.approx(ref, rel=0.01, abs=0.0 if ref >= 1 else 0.01), name
        assert got.await_ms == pytest.approx(want["await_ms"], abs=0.002)  # observed 0.001


def test_restart_splits_the_interval() -> None:
    recs = records("sadf_d_restart_comment.csv")  # :48 :49 | restart at :49 | :50 :51
    out = downsample(recs, 15.0)
    assert [(r.end_s, r.interval_s) for r in out] == [(1795321729.0, 2.0), (1795321731.0, 2.0)]
    before, after = out
    assert before.tps == pytest.approx((29 + 1167) / 2, rel=1e-12)
    assert before.await_ms == pytest.approx((29 * 0.14 + 1167 * 0.56) / 1196, rel=1e-12)
    assert after.read_kb_per_s == pytest.approx((3104 + 1548) / 2, rel=1e-12)
    assert after.util_pct == pytest.approx(0.8, rel=1e-12)
    # without the restart the four seconds are one (flushed, so partial) interval
    (joined,) = downsample(disk(recs), 15.0)
    assert (joined.end_s, joined.interval_s) == (1795321731.0, 4.0)


def test_device_mapper_devices_are_separate_streams() -> None:
    # no real dm recording exists (the recording kernel has no device-mapper): sadf names
    fine = [
        sample(T0 + i, device=dev, host="fs002", tps=10.0 * (j + 1), await_ms=float(j + 1))
        for i in range(1, 16)
        for j, dev in enumerate(("dm-3", "mpathc", "dev253-0"))
    ]
    out = downsample(fine, 15.0)
    assert [(r.device, r.end_s, r.tps, r.await_ms) for r in out] == [
        ("dm-3", T0 + 15, 10.0, 1.0),
        ("mpathc", T0 + 15, 20.0, 2.0),
        ("dev253-0", T0 + 15, 30.0, 3.0),
    ]


# -- rules -----------------------------------------------------------------------------------


def test_one_busy_second_gives_its_await_not_a_fifteenth() -> None:
    fine = [sample(T0 + i) for i in range(1, 16)]
    fine[6] = sample(
        T0 + 7, tps=40, read_kb_per_s=160, areq_sz_kb=4, aqu_sz=0.4, await_ms=10, util_pct=30
    )
    (out,) = downsample(fine, 15.0)
    assert out == DiskSample(
        "vm", "vda", T0 + 15, 15.0, 40 / 15, 160 / 15, 0, 0, 4.0, 0.4 / 15, 10.0, 2.0
    )


def test_no_io_gives_await_and_areq_zero() -> None:
    (out,) = downsample([sample(T0 + i, aqu_sz=0.01) for i in range(1, 16)], 15.0)
    assert (out.tps, out.await_ms, out.areq_sz_kb) == (0.0, 0.0, 0.0)
    assert out.aqu_sz == pytest.approx(0.01, rel=1e-12)


def test_skipped_and_duplicated_labels_are_weighted_by_the_interval_column() -> None:
    # sadc drift: labels ...:59 -> :01 with interval 1 (reference/sysstat.md 5.2); not a gap
    ends = [T0 + i for i in range(1, 15)] + [T0 + 16, T0 + 16] + [T0 + i for i in range(17, 31)]
    out = downsample([sample(t, tps=1.0) for t in ends], 15.0)
    assert [(r.end_s, r.interval_s, r.tps) for r in out] == [
        (T0 + 15, 14.0, 1.0),
        (T0 + 30, 16.0, 1.0),
    ]


def test_a_gap_closes_the_interval_early() -> None:
    fine = [sample(T0 + i, tps=2.0) for i in (1, 2, 3, 4)] + [
        sample(T0 + i, tps=4.0) for i in (8, 9)
    ]
    out = downsample(fine, 15.0)  # 3 s missing after :04 > 2 intervals
    assert [(r.end_s, r.interval_s, r.tps) for r in out] == [(T0 + 4, 4.0, 2.0), (T0 + 9, 2.0, 4.0)]
    # 2 s missing is tolerated (max_gap_intervals=2): one interval, holding the 6 s of data
    fine = [sample(T0 + i, tps=3.0) for i in (1, 2, 3, 4, 7, 8)]
    (one,) = downsample(fine, 15.0)
    assert (one.end_s, one.interval_s, one.tps) == (T0 + 8, 6.0, 3.0)


def test_a_device_that_stops_is_closed_when_its_host_moves_on() -> None:
    ds = Downsampler(15.0)
    assert ds.add(sample(T0 + 1, device="loop9", tps=5.0)) == []
    assert ds.add(sample(T0 + 1)) == []
    assert ds.add(sample(T0 + 2)) == []
    assert ds.add(sample(T0 + 3)) == []
    (closed,) = ds.add(sample(T0 + 5))
    assert (closed.device, closed.end_s, closed.interval_s, closed.tps) == (
        "loop9",
        T0 + 1,
        1.0,
        5.0,
    )


def test_restart_mark_only_closes_its_host() -> None:
    ds = Downsampler(15.0)
    ds.add(sample(T0 + 1, host="a"))
    ds.add(sample(T0 + 1, host="b"))
    assert [(r.host, r.end_s) for r in ds.add(RestartMark("a", T0 + 1))] == [("a", T0 + 1)]
    assert [(r.host, r.end_s) for r in ds.flush()] == [("b", T0 + 1)]
    assert ds.flush() == []


def test_coarser_samples_pass_through() -> None:
    coarse = sample(T0 + 60, dt=60.0, tps=7.0)
    out = downsample([sample(T0 + 1, tps=1.0), coarse], 15.0)
    assert [(r.end_s, r.interval_s) for r in out] == [(T0 + 1, 1.0), (T0 + 60, 60.0)]
    assert out[1] is coarse


def test_clock_stepping_back_starts_over() -> None:
    out = downsample([sample(T0 + 10, tps=1.0), sample(T0 + 4, tps=2.0)], 15.0)
    assert [(r.end_s, r.tps) for r in out] == [(T0 + 10, 1.0), (T0 + 4, 2.0)]


def test_grid_and_arguments() -> None:
    ds = Downsampler(15.0, offset_s=8.0)
    assert [ds.grid_end(T0 + x) for x in (0, 8, 9, 23, 24)] == [
        T0 + 8,
        T0 + 8,
        T0 + 23,
        T0 + 23,
        T0 + 38,
    ]
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        Downsampler(0.0)
    with pytest.raises(ValueError, match="max_gap_intervals"):
        Downsampler(15.0, max_gap_intervals=-1.0)
    with pytest.raises(ValueError, match="no covered time"):
        DiskAmounts().sample("vm", "vda", T0)


# -- properties ------------------------------------------------------------------------------

value = st.floats(0.0, 1e5, allow_nan=False).map(lambda x: round(x, 2))


@st.composite
def streams(draw: st.DrawFn) -> list[DiskSample | RestartMark]:
    """Samples of two hosts x two devices with drifting labels, gaps, restarts, varying sets."""
    out: list[DiskSample | RestartMark] = []
    for host in ("h1", "h2"):
        t = T0 + draw(st.integers(0, 20))
        for _ in range(draw(st.integers(0, 40))):
            dt = draw(st.sampled_from([1.0, 1.0, 1.0, 2.0, 5.0]))
            t += dt + draw(st.sampled_from([0, 0, 0, 0, 1, 7]))
            if draw(st.integers(0, 30)) == 0:
                out.append(RestartMark(host, t))
            for dev in draw(st.sets(st.sampled_from(["sda", "dm-0"]), min_size=1)):
                values = {m: draw(value) for m in METRICS}
                out.append(DiskSample(host, dev, t, dt, **values))
    return out


def amounts(samples: Sequence[DiskSample]) -> DiskAmounts:
    total = DiskAmounts()
    for s in samples:
        total = total.merge(DiskAmounts.of(s))
    return total


@settings(max_examples=100, deadline=None)
@given(streams(), st.sampled_from([5.0, 10.0, 15.0, 60.0]))
def test_amounts_are_conserved(records_: list[DiskSample | RestartMark], interval_s: float) -> None:
    out = downsample(records_, interval_s)
    for host in ("h1", "h2"):
        for dev in ("sda", "dm-0"):
            pick = [r for r in disk(records_) if (r.host, r.device) == (host, dev)]
            got = amounts([r for r in out if (r.host, r.device) == (host, dev)])
            want = amounts(pick)
            for name in (
                "seconds",
                "ios",
                "read_kb",
                "write_kb",
                "discard_kb",
                "queue_s",
                "busy_s",
            ):
                assert getattr(got, name) == pytest.approx(getattr(want, name), rel=1e-9, abs=1e-6)
            # await and areq-sz are conserved over the intervals with I/O
            assert got.wait_ms == pytest.approx(
                sum(r.await_ms * r.tps * r.interval_s for r in pick if r.tps > 0),
                rel=1e-9,
                abs=1e-6,
            )


@settings(max_examples=50, deadline=None)
@given(streams())
def test_outputs_are_ordered_non_overlapping_and_never_longer_than_their_data(
    records_: list[DiskSample | RestartMark],
) -> None:
    out = downsample(records_, 15.0)
    for host in ("h1", "h2"):
        for dev in ("sda", "dm-0"):
            ends = [r.end_s for r in out if (r.host, r.device) == (host, dev)]
            assert ends == sorted(ends) and len(set(ends)) == len(ends)
            assert all(r.interval_s <= 15.0 + 5.0 for r in out if r.host == host)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(*[value] * len(METRICS)), min_size=1, max_size=20), st.integers(0, 1000))
def test_identity_when_the_target_is_the_source_interval(
    rows: list[tuple[float, ...]], k: int
) -> None:
    fine = [
        DiskSample("vm", "sda", T0 + 15.0 * (k + i), 15.0, **dict(zip(METRICS, row, strict=True)))
        for i, row in enumerate(rows)
    ]
    out = downsample(fine, 15.0)
    assert len(out) == len(fine)
    for got, src in zip(out, fine, strict=True):
        assert (got.host, got.device, got.end_s, got.interval_s) == (
            src.host,
            src.device,
            src.end_s,
            15.0,
        )
        for name in METRICS:
            want = (
                0.0 if name in ("await_ms", "areq_sz_kb") and src.tps == 0 else getattr(src, name)
            )
            assert getattr(got, name) == pytest.approx(want, rel=1e-12, abs=1e-12), name


counters = st.tuples(
    st.integers(0, 3000),  # completed I/Os
    st.integers(0, 2000),  # sectors per I/O x 1/8 (read / write / discard split below)
    st.integers(0, 2),  # which direction
    st.integers(0, 50_000),  # ticks (ms of I/O wait)
    st.integers(0, 1000),  # io_ticks (ms busy)
    st.integers(0, 100_000),  # rq_ticks
)


def from_counters(
    end_s: float, dt: float, c: Sequence[tuple[int, int, int, int, int, int]], decimals: int | None
) -> DiskSample:
    """sysstat's formulas (reference/sysstat.md 1.3) on summed counter increments."""
    n = sum(x[0] for x in c)
    sect = [0, 0, 0]
    for ios, per_io, direction, *_ in c:
        sect[direction] += ios * per_io * 8
    # the kernel adds an I/O's wait to the ticks when it completes: no completion, no ticks
    ticks = sum(x[3] for x in c if x[0] > 0)
    io_ticks, rq_ticks = (sum(x[i] for x in c) for i in (4, 5))
    values = {
        "tps": n / dt,
        "read_kb_per_s": sect[0] / 2 / dt,
        "write_kb_per_s": sect[1] / 2 / dt,
        "discard_kb_per_s": sect[2] / 2 / dt,
        "areq_sz_kb": sum(sect) / 2 / n if n else 0.0,
        "aqu_sz": rq_ticks / (dt * 1000),
        "await_ms": ticks / n if n else 0.0,
        "util_pct": io_ticks / (dt * 1000) * 100,
    }
    if decimals is not None:
        values = {k: round(v, decimals) for k, v in values.items()}
    return DiskSample("vm", "sda", end_s, dt, **values)


@settings(max_examples=200, deadline=None)
@given(st.lists(counters, min_size=15, max_size=15), st.booleans())
def test_reproduces_what_sadc_prints_at_15s(
    c: list[tuple[int, int, int, int, int, int]], rounded: bool
) -> None:
    decimals = 2 if rounded else None
    fine = [from_counters(T0 + i + 1, 1.0, [x], decimals) for i, x in enumerate(c)]
    (got,) = downsample(fine, 15.0)
    want = from_counters(T0 + 15, 15.0, c, decimals)
    assert (got.end_s, got.interval_s) == (want.end_s, 15.0)
    for name in METRICS:
        tol = 0.01 + 1e-9 if rounded else 1e-9 * max(1.0, abs(getattr(want, name)))
        assert abs(getattr(got, name) - getattr(want, name)) <= tol, name


@settings(max_examples=50, deadline=None)
@given(streams())
def test_hosts_are_independent(records_: list[DiskSample | RestartMark]) -> None:
    together = downsample(records_, 15.0)
    apart = [
        r
        for host in ("h1", "h2")
        for r in downsample([x for x in records_ if x.host == host], 15.0)
    ]
    key = lambda r: (r.host, r.device, r.end_s)  # noqa: E731
    assert sorted(together, key=key) == sorted(apart, key=key)


def test_flush_complete_gives_what_the_next_sample_would_and_keeps_the_rest_open() -> None:
    """At the end of a run: an interval whose last sample ends on the grid is closed as the
    device's next sample would close it; one that later samples may still add to stays open."""
    full = [sample(t, tps=float(t % 7)) for t in range(1, 16)]  # (0, 15]: ends on the grid
    part = [sample(t, device="sdb", tps=2.0) for t in range(1, 11)]  # (0, 10] of (0, 15]
    ds = Downsampler(15)
    assert [out for s in full + part for out in ds.add(s)] == []
    (done,) = ds.flush_complete()
    ahead = Downsampler(15)
    for s in [*full, sample(16.0)]:
        closed = ahead.add(s)
    assert closed == [done]
    assert (done.device, done.end_s, done.interval_s) == ("vda", 15.0, 15.0)
    assert ds.flush_complete() == []  # sdb's interval may still grow
    (rest,) = ds.flush()
    assert (rest.device, rest.end_s, rest.interval_s) == ("sdb", 10.0, 10.0)
