"""Per-OST LMT intervals: exact deltas of the real extracts, resets, gaps, resuming, properties.

Expected values were computed independently with sqlite3 window functions on the original
databases (the queries are in tests/data/lmt/README.md).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.formats.lmt.decode import LmtSample, parse_lmt_csv
from pipeline.formats.lmt.reduce import OstDeltaReducer, OstInterval
from pipeline.parsers.errors import ParseError

DATA = Path(__file__).resolve().parents[1] / "data" / "lmt"
OST = "snx11168-OST00ad"
T0 = 1524036915.0  # 2018-04-18 07:35:15, the first sample of lmtdb-reset (read as UTC)


def load(name: str) -> list[LmtSample]:
    path = DATA / name
    records = list(parse_lmt_csv(path.read_bytes().splitlines(), str(path)))
    assert not [r for r in records if isinstance(r, ParseError)]
    return [r for r in records if isinstance(r, LmtSample)]


def test_reset_extract_intervals() -> None:
    intervals = list(OstDeltaReducer().feed(load("lmtdb-reset.csv")))
    assert len(intervals) == 25
    assert [(iv.start_s - T0, iv.interval_s) for iv in intervals if iv.interval_s != 5.0] == [
        (30.0, 200.0)
    ]
    # 07:35:35 -> 07:35:40, the busiest step before the reboot
    assert intervals[4] == OstInterval(
        ost_name=OST,
        fs="snx11168",
        ost_index=173,
        start_s=T0 + 20,
        end_s=T0 + 25,
        read_bytes=4780032,
        write_bytes=563617704,
        read_bytes_per_s=4780032 / 5,
        write_bytes_per_s=563617704 / 5,
        reset=False,
        gap=False,
        pct_cpu=0.0,
    )
    assert [(iv.read_bytes, iv.write_bytes) for iv in intervals[:6]] == [
        (704512, 141832096),
        (577536, 150810584),
        (278528, 100827096),
        (258048, 150151120),
        (4780032, 563617704),
        (176128, 82370520),
    ]


def test_reset_extract_the_reboot_is_one_reset_and_gap_interval() -> None:
    intervals = list(OstDeltaReducer().feed(load("lmtdb-reset.csv")))
    flagged = [iv for iv in intervals if iv.reset or iv.gap]
    # 07:35:45 -> 07:39:05: both counters fell from 438210634514432 / 274820641179842 to 0
    assert [(iv.start_s, iv.end_s, iv.reset, iv.gap) for iv in flagged] == [
        (1524036945.0, 1524037145.0, True, True)
    ]
    assert (flagged[0].read_bytes, flagged[0].write_bytes) == (0, 0)
    # 07:40:15 -> 07:40:20: the first traffic after the reboot, counted from 0
    after = [iv for iv in intervals if iv.start_s == 1524037215.0]
    assert [(iv.read_bytes, iv.write_bytes, iv.reset) for iv in after] == [
        (62537728, 774221064, False)
    ]
    assert sum(iv.read_bytes for iv in intervals) == 6774784 + 62595072
    assert sum(iv.write_bytes for iv in intervals) == 1189609120 + 796777736


def test_a_longer_max_gap_keeps_the_reset_but_not_the_gap() -> None:
    intervals = list(OstDeltaReducer(max_gap_s=300).feed(load("lmtdb-reset.csv")))
    assert [(iv.reset, iv.gap) for iv in intervals if iv.reset or iv.gap] == [(True, False)]


def test_snx11025_totals_and_one_exact_delta() -> None:
    samples = load("snx11025_2018-01-28.csv")
    intervals = list(OstDeltaReducer().feed(samples))
    assert len(intervals) == 24 * 60
    assert not any(iv.reset or iv.gap for iv in intervals)
    assert sum(iv.read_bytes for iv in intervals) == 6347173888
    assert sum(iv.write_bytes for iv in intervals) == 119037925429  # 110.86 GiB
    start = 1517097600.0 + 150  # 2018-01-28 00:02:30
    [iv] = [i for i in intervals if i.ost_name == "snx11025-OST000a" and i.start_s == start]
    assert (iv.ost_index, iv.read_bytes, iv.write_bytes) == (10, 0, 15366)
    top = max(intervals, key=lambda i: i.write_bytes)
    assert (top.ost_name, top.start_s - 1517097600.0, top.write_bytes) == (
        "snx11025-OST0003",
        255.0,
        1916582485,
    )


def test_snx11025_every_interval_equals_a_pandas_diff() -> None:
    samples = load("snx11025_2018-01-28.csv")
    frame = pd.DataFrame(
        {
            "ost": [s.ost_name for s in samples],
            "ts": [s.ts_s for s in samples],
            "r": [s.read_bytes for s in samples],
            "w": [s.write_bytes for s in samples],
        }
    ).sort_values(["ost", "ts"])
    grouped = frame.groupby("ost")
    frame["start"] = grouped["ts"].shift()
    frame["dr"] = grouped["r"].diff()
    frame["dw"] = grouped["w"].diff()
    expected = {
        (row.ost, row.start, row.ts): (int(row.dr), int(row.dw))
        for row in frame.dropna().itertuples()
    }
    got = {
        (iv.ost_name, iv.start_s, iv.end_s): (iv.read_bytes, iv.write_bytes)
        for iv in OstDeltaReducer().feed(samples)
    }
    assert got == expected


def sample(ts: float, read: int, write: int, ost: str = OST) -> LmtSample:
    return LmtSample(ts, ost, ost.split("-OST")[0], int(ost.split("-OST")[1], 16), read, write)


def test_duplicates_and_out_of_order_samples_are_skipped_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reducer = OstDeltaReducer()
    got = list(
        reducer.feed(
            [
                sample(100, 0, 0),
                sample(105, 10, 20),
                sample(105, 99, 99),
                sample(102, 1, 1),
                sample(110, 15, 20),
            ]
        )
    )
    assert [(iv.start_s, iv.end_s, iv.read_bytes, iv.write_bytes) for iv in got] == [
        (100, 105, 10, 20),
        (105, 110, 5, 0),
    ]
    assert reducer.skipped == {"duplicate": 1, "out_of_order": 1}
    assert [r.getMessage() for r in caplog.records] == [
        f"LMT duplicate sample of {OST} at 105 skipped: the last one is at 105",
        f"LMT out_of_order sample of {OST} at 102 skipped: the last one is at 105",
    ]


def test_one_counter_falling_is_a_reset_of_both() -> None:
    got = list(OstDeltaReducer().feed([sample(0, 1000, 5000), sample(5, 1500, 10)]))
    assert [(iv.read_bytes, iv.write_bytes, iv.reset) for iv in got] == [(1500, 10, True)]


def test_state_is_json_and_resuming_gives_the_same_intervals() -> None:
    samples = load("lmtdb-reset.csv") + load("snx11025_2018-01-28.csv")
    whole = list(OstDeltaReducer().feed(samples))
    for cut in (1, 7, 8, 26, 27, 500):
        first = OstDeltaReducer()
        head = list(first.feed(samples[:cut]))
        saved = json.loads(json.dumps(first.state()))
        tail = list(OstDeltaReducer.from_state(saved).feed(samples[cut:]))
        assert head + tail == whole, cut
    reducer = OstDeltaReducer()
    list(reducer.feed(load("lmtdb-reset.csv")))
    assert reducer.state() == {
        "version": 1,
        "osts": {OST: {"ts_s": 1524037235.0, "read_bytes": 62595072, "write_bytes": 796777736}},
    }


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"version": 2, "osts": {}}, "LMT reducer state version 2, expected 1"),
        ({"version": 1}, "LMT reducer state without an 'osts' object"),
        ({"version": 1, "osts": {"bad": {}}}, "OST name 'bad' is not <fsname>-OST<hex index>"),
        ({"version": 1, "osts": {OST: {"ts_s": 1}}}, f"LMT reducer state of {OST}: not"),
        (
            {"version": 1, "osts": {OST: {"ts_s": 1, "read_bytes": -1, "write_bytes": 0}}},
            f"LMT reducer state of {OST}: bad values",
        ),
    ],
)
def test_from_state_refuses_what_state_does_not_make(
    state: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError) as info:
        OstDeltaReducer.from_state(state)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("max_gap_s", [0.0, -1.0, float("nan"), float("inf")])
def test_max_gap_must_be_positive_and_finite(max_gap_s: float) -> None:
    with pytest.raises(ValueError, match="max_gap_s must be a finite number > 0"):
        OstDeltaReducer(max_gap_s)


# -- properties ------------------------------------------------------------------------------

STEP = st.integers(min_value=1, max_value=200)
GROWTH = st.integers(min_value=0, max_value=10**12)


@st.composite
def series(draw: st.DrawFn, resets: bool) -> list[LmtSample]:
    """Samples of 1-3 OSTs, each in time order, interleaved; counters grow, or restart."""
    out: list[tuple[int, LmtSample]] = []
    for k in range(draw(st.integers(min_value=1, max_value=3))):
        ost = f"fs-OST{k:04x}"
        ts, read, write = draw(st.integers(0, 10**6)), draw(GROWTH), draw(GROWTH)
        for _ in range(draw(st.integers(min_value=1, max_value=30))):
            out.append((ts, sample(float(ts), read, write, ost)))
            ts += draw(STEP)
            if resets and draw(st.booleans()) and draw(st.booleans()):
                read, write = draw(GROWTH) // 1000, draw(GROWTH) // 1000
            else:
                read, write = read + draw(GROWTH), write + draw(GROWTH)
    return [s for _, s in sorted(out, key=lambda p: p[0])]


@settings(max_examples=200, deadline=None)
@given(series(resets=False))
def test_without_resets_deltas_sum_to_last_minus_first(samples: list[LmtSample]) -> None:
    intervals = list(OstDeltaReducer().feed(samples))
    for ost in {s.ost_name for s in samples}:
        mine = [s for s in samples if s.ost_name == ost]
        ivs = [iv for iv in intervals if iv.ost_name == ost]
        assert len(ivs) == len(mine) - 1
        assert sum(iv.read_bytes for iv in ivs) == mine[-1].read_bytes - mine[0].read_bytes
        assert sum(iv.write_bytes for iv in ivs) == mine[-1].write_bytes - mine[0].write_bytes
        assert not any(iv.reset for iv in ivs)


@settings(max_examples=200, deadline=None)
@given(series(resets=True), st.floats(min_value=1, max_value=300))
def test_intervals_tile_time_and_bytes_are_never_negative(
    samples: list[LmtSample], max_gap_s: float
) -> None:
    intervals = list(OstDeltaReducer(max_gap_s).feed(samples))
    for ost in {s.ost_name for s in samples}:
        ivs = [iv for iv in intervals if iv.ost_name == ost]
        times = [s.ts_s for s in samples if s.ost_name == ost]
        assert [(iv.start_s, iv.end_s) for iv in ivs] == list(itertools.pairwise(times))
    for iv in intervals:
        assert iv.read_bytes >= 0 and iv.write_bytes >= 0
        assert iv.end_s > iv.start_s
        assert iv.gap == (iv.interval_s > max_gap_s)
        assert iv.read_bytes_per_s == iv.read_bytes / iv.interval_s


@settings(max_examples=100, deadline=None)
@given(series(resets=True), st.data())
def test_resuming_anywhere_is_the_same_as_one_pass(
    samples: list[LmtSample], data: st.DataObject
) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(samples)))
    first = OstDeltaReducer()
    head = list(first.feed(samples[:cut]))
    resumed = OstDeltaReducer.from_state(json.loads(json.dumps(first.state())))
    assert head + list(resumed.feed(samples[cut:])) == list(OstDeltaReducer().feed(samples))
