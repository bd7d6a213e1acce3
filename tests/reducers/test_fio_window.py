"""Placing records in completion windows and merging them per interval (the window method)."""

from __future__ import annotations

import numpy as np

from pipeline.formats.fio.window import IntervalMerger, WindowTracker, percentile_key
from pipeline.records.core import FioHistRow
from pipeline.records.fio_bins import BinLayout

NS = BinLayout(29, 0, "ns")


def row(t: int, ddir: int, counts: dict[int, int]) -> FioHistRow:
    idx = np.array(sorted(counts), dtype=np.int64)
    return FioHistRow(t, ddir, 4096, idx, np.array([counts[i] for i in idx], dtype=np.int64))


def test_windows_follow_each_direction_and_go_to_the_midpoint_interval() -> None:
    tr = WindowTracker(interval_ms=1000, origin_ms=5_000, epoch=False)
    p1 = tr.place(row(101, 0, {700: 3}))
    p2 = tr.place(row(102, 1, {700: 1}))
    p3 = tr.place(row(1001, 0, {700: 1}))  # window (101, 1001]: midpoint 551 -> [0, 1000)
    p4 = tr.place(row(1101, 0, {700: 1}))  # window (1001, 1101] -> [1000, 2000)
    assert (p1.start_ms, p1.end_ms, p1.interval_start_ms) == (5_000, 5_101, 5_000)
    assert (p2.start_ms, p2.end_ms) == (5_000, 5_102)
    assert (p3.start_ms, p3.end_ms, p3.interval_end_ms) == (5_101, 6_001, 6_000)
    assert (p4.start_ms, p4.interval_start_ms) == (6_001, 6_000)


def test_burst_after_a_stall_keeps_every_record() -> None:
    """fio writes records with the same timestamp after a stall; they are real deltas."""
    tr = WindowTracker(interval_ms=100, origin_ms=0, epoch=False)
    merger = IntervalMerger(NS)
    for t, n in ((101, 1591), (885, 1410), (885, 1), (885, 1), (901, 237)):
        merger.add(tr.place(row(t, 0, {650: n})), "h", "1")
    total = sum(
        int(h.sum()) for (s, v, d, _), h in merger.hists.items() if s == "cluster" and d == "read"
    )
    assert total == 1591 + 1410 + 1 + 1 + 237
    # (0, 101] -> [0, 100); the 784-ms stall window (101, 885] -> its midpoint 493; the
    # zero-length windows at 885 and (885, 901] -> [800, 900)
    by_start = {
        k[3]: int(h.sum()) for k, h in merger.hists.items() if k[:3] == ("cluster", "", "read")
    }
    assert by_start == {0: 1591, 400: 1410, 800: 239}


def test_epoch_logs_open_with_a_zero_length_window() -> None:
    tr = WindowTracker(interval_ms=1000, origin_ms=250, epoch=True)
    p = tr.place(row(1795321597152, 0, {600: 1}))
    assert p.start_ms == p.end_ms == 1795321597402
    assert p.interval_start_ms == 1795321597000


def test_cursor_round_trip_resumes_the_same_windows() -> None:
    tr = WindowTracker(interval_ms=1000, origin_ms=7, epoch=False)
    tr.place(row(101, 0, {1: 1}))
    tr.place(row(150, 1, {1: 1}))
    again = WindowTracker.resume(1000, tr.cursor())
    assert again == tr
    assert again.place(row(201, 0, {1: 1})).start_ms == 108


def test_merge_across_scopes_and_mixed() -> None:
    merger = IntervalMerger(NS)
    tr_a = WindowTracker(1000, 0, False)
    tr_b = WindowTracker(1000, 0, False)
    merger.add(tr_a.place(row(500, 0, {10: 2})), "node01", "1")
    merger.add(tr_b.place(row(600, 1, {20: 3})), "node02", "1")
    assert merger.hists[("cluster", "", "mixed", 0)][[10, 20]].tolist() == [2, 3]
    assert merger.hists[("host", "node02", "write", 0)][20] == 3
    assert ("job", "node01/1", "read", 0) in merger.hists
    assert merger.records[("cluster", "", "mixed", 0)] == 2


def test_percentile_field_names() -> None:
    assert [percentile_key(p) for p in (50, 99, 99.9, 99.99)] == ["p50", "p99", "p99_9", "p99_99"]
