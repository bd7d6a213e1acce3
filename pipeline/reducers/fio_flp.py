"""Seed 000's time-weighted merge, exactly as fio's ``tools/hist/fiologparser_hist.py`` does it.

For output interval ``[start, end]`` of width I, every record (end time t) is modelled as I/Os
that started at ``(t - I/2) - latency`` and ended at t; each bin's count is weighted by the
fraction of that span inside the interval, summed over all files (threads, hosts), and
percentiles come from ``np.interp`` over the mid-point CDF of fiologparser's bin values
(seed 000 "Histogram Merging Algorithm"; the script's rules are pinned down in
reference/fio.md sections 2.1-2.8). ``noweight`` is the script's unweighted alternative.

Unlike the script, this streams: files are merged lazily (heap merge by time, ties by file
order, like its ``get_min``), only the look-ahead window (``max_latency`` seconds) is kept, and
rows keep only their non-empty bins. Float operations, their order and the output format are the
script's, so the printed output is byte-identical (tests compare against the real script).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline.records.core import FioHistRow
from pipeline.records.fio_bins import BinLayout

F64 = npt.NDArray[np.float64]
Counts = dict[str, npt.NDArray[np.int64]]
"""Bin counts per direction code of one interval (unweighted mode)."""
DIR_CODES = "rwt"  # fiologparser's dir_map: ddir 0, 1, 2


@dataclass(frozen=True)
class FlpOptions:
    """fiologparser_hist.py's options, with its defaults.

    Attributes:
        interval_ms: ``-i/--interval``; also the assumed record span (I/2 before the record).
        percentiles: ``--percentiles``, split on ``,`` or ``:``; 50 is always computed first.
        directions: ``--directions`` (any of ``rwtm``) or None for mixed only without a dir column.
        divisor: ``-d/--divisor``: divides min/avg/percentiles/max and switches number format.
        decimals: ``--decimals``.
        usbin: ``--usbin``: bins are us (changes only the time model's ns->ms divisor).
        max_latency_s: ``--max_latency``: look-ahead in seconds.
        noweight: ``--noweight``: unweighted per-interval sums.
    """

    interval_ms: int = 1000
    percentiles: str = "90:95:99"
    directions: str | None = None
    divisor: int = 1
    decimals: int = 3
    usbin: bool = False
    max_latency_s: float = 20.0
    noweight: bool = False

    @property
    def labels(self) -> list[str]:
        """The user's percentile strings, as the header shows them."""
        return re.split("[,:]", self.percentiles)

    @property
    def percs(self) -> list[float]:
        """``[50.0] + percentiles`` as floats, the order the columns are printed in."""
        return [50.0, *map(float, self.labels)]

    @property
    def printdirs(self) -> list[str]:
        """Direction codes to report, sorted as the script prints them (m, r, t, w)."""
        d = (self.directions or "").lower()
        dirs = {"m"} if not d or "m" in d else set()
        dirs |= {c for c in "rwt" if c in d}
        return sorted(dirs)


@dataclass(frozen=True)
class FlpStats:
    """One output row: interval end, direction and statistics in the log's bin unit.

    ``samples`` is fiologparser's unweighted count of considered bins (about 1.5-2x the real
    I/O count in weighted mode; reference/fio.md 2.3). ``pcts`` follows ``FlpOptions.percs``.
    """

    end: float
    ddir: str
    samples: int
    min: float
    avg: float
    pcts: tuple[float, ...]
    max: float


def header(opts: FlpOptions) -> str:
    """The header line, e.g. ``end-time, samples, min, avg, median, 90%, 95%, 99%, max``."""
    cols = ["end-time", "dir"] if opts.directions else ["end-time"]
    cols += ["samples", "min", "avg", "median", *[x + "%" for x in opts.labels], "max"]
    return ", ".join(cols)


def format_row(st: FlpStats, opts: FlpOptions) -> str:
    """Format a row the way the script's ``print_all_stats`` does (``%d`` truncation included)."""
    values = [st.min, st.avg, *st.pcts, st.max]
    row: list[object] = [st.end, st.ddir, st.samples] if opts.directions else [st.end, st.samples]
    fmt = "%d, %s, %d, " if opts.directions else "%d, %d, "
    row += [float(x) / opts.divisor for x in values]
    flt = f"%.{opts.decimals}f"
    if opts.divisor > 1:
        fmt += ", ".join([flt] * (len(values)))
    else:
        fmt += "%d, " + ", ".join([flt] * (len(values) - 2)) + ", %d"
    return fmt % tuple(row)


class _BinVals:
    """The script's three bin-value arrays and its time divisor for one layout."""

    def __init__(self, layout: BinLayout, opts: FlpOptions) -> None:
        self.vals: F64 = layout.flp_bin_values(0.5)
        self.lower: F64 = layout.flp_bin_values(0.0)
        self.upper: F64 = layout.flp_bin_values(1.0)
        self.time_divisor = 1000.0 if opts.usbin else 1000000.0
        self.vals_ms: F64 = self.vals / self.time_divisor
        self.n = layout.nbins


def _stats(
    bv: _BinVals,
    opts: FlpOptions,
    end: float,
    ddir: str,
    hist: npt.NDArray[Any],
    samples: int,
    mn: float,
    mx: float,
) -> FlpStats:
    # weighted_percentile and weighted_average of the script, same arrays, same operations.
    vs, ws = bv.vals, hist
    idx = np.argsort(vs)
    vs, ws = vs[idx], ws[idx]
    cdf = 100 * (ws.cumsum() - ws / 2.0) / ws.sum()
    ps = np.interp(opts.percs, cdf, vs)
    avg = np.sum(bv.vals * hist) / np.sum(hist)
    return FlpStats(end, ddir, samples, mn, float(avg), tuple(float(p) for p in ps), mx)


@dataclass
class _Row:
    t: int
    ddir: int
    nz: npt.NDArray[np.int64]
    cnt: npt.NDArray[np.int64]
    s_min: float  # start time of the highest non-empty bin: contributes iff s_min < end


def _merge(streams: Sequence[Iterable[FioHistRow]]) -> Iterator[FioHistRow]:
    # Heap merge by time; equal times go to the earlier file (the script's min() over files).
    keyed = [((r.time_ms, i, r) for r in s) for i, s in enumerate(streams)]
    for _t, _i, row in heapq.merge(*keyed, key=lambda x: (x[0], x[1])):
        yield row


def _held(r: FioHistRow, bv: _BinVals, half: float) -> _Row:
    """A record as the weighted mode holds it, with the start time of its highest bin."""
    s_min = (r.time_ms - half) - bv.vals_ms[r.bin_idx[-1]] if r.bin_idx.size else np.inf
    return _Row(r.time_ms, r.ddir, r.bin_idx, r.counts, float(s_min))


def _read_ahead(
    gen: Iterator[FioHistRow], rows: list[_Row], bv: _BinVals, half: float, until: float
) -> bool:
    """Hold records from ``gen`` until one ends at or after ``until`` (the look-ahead);
    False when ``gen`` ran out first."""
    while not rows or rows[-1].t < until:
        r = next(gen, None)
        if r is None:
            return False
        rows.append(_held(r, bv, half))
    return True


def weighted_intervals(
    streams: Sequence[Iterable[FioHistRow]], layout: BinLayout, opts: FlpOptions
) -> Iterator[FlpStats]:
    """The script's default (time-weighted) mode, one :class:`FlpStats` per printed row.

    Args:
        streams: one row iterable per log file, in command-line order (the order fixes ties and
            the floating-point summation order).
        layout: the bin layout detected from the first file's first line.
        opts: the script's options.
    """
    bv = _BinVals(layout, opts)
    interval = opts.interval_ms
    lookahead = opts.max_latency_s * 1000
    gen = _merge(streams)
    rows: list[_Row] = []
    start: float = 0
    end: float = interval
    more = True
    while more or rows:
        more = _read_ahead(gen, rows, bv, 0.5 * interval, lookahead + end) and more
        if rows:
            if start == 0 and rows[0].t - opts.max_latency_s > end:
                start = rows[0].t - opts.max_latency_s
                start = start - (start % interval)
                end = start + interval
            yield from _weighted_interval(bv, opts, rows, start, end)
            rows = [r for r in rows if r.t > end]
        start += interval
        end = start + interval


@dataclass
class _DirSums:
    """One direction's share of an interval in the weighted mode, row by row."""

    bins: list[npt.NDArray[np.int64]] = field(default_factory=list)
    contrib: list[F64] = field(default_factory=list)
    samples: int = 0
    mn: float | None = None
    mx: float | None = None

    def add(self, nz: npt.NDArray[np.int64], ws: F64, n: int, mn: float, mx: float) -> None:
        """Add one row's considered bins, their weights, its count and min/max bin values."""
        self.bins.append(nz)
        self.contrib.append(ws)
        self.samples += n
        self.mn = mn if self.mn is None else min(self.mn, mn)
        self.mx = mx if self.mx is None else max(self.mx, mx)


def _weighted_row(
    bv: _BinVals, r: _Row, half: float, start: float, end: float
) -> tuple[npt.NDArray[np.int64], F64, int, float, float]:
    """``(bins, weights, count, min, max)`` of one held row in interval ``[start, end]``."""
    base = r.t - half
    s_ts = base - bv.vals_ms[r.nz]
    keep = s_ts < end
    nz, hs, s_ts = r.nz[keep], r.cnt[keep], s_ts[keep]
    sb = np.maximum(s_ts, start).astype(float)
    eb = float(np.minimum(r.t, end))
    ws = hs * ((eb - sb) / (r.t - s_ts))
    first, last = int(nz[0]), int(nz[-1])
    # Neighbour-bin rule: the bin before the first non-empty considered bin, if considered.
    lo_bin = first - 1 if first > 0 and (base - bv.vals_ms[first - 1]) < end else first
    mn = float(bv.lower[lo_bin])
    mx = float(bv.upper[min(bv.n - 1, last + 1)])
    return nz, ws, int(hs.sum()), mn, mx


def _weighted_interval(
    bv: _BinVals, opts: FlpOptions, rows: list[_Row], start: float, end: float
) -> Iterator[FlpStats]:
    half = 0.5 * opts.interval_ms
    sums = {d: _DirSums() for d in opts.printdirs}
    for r in rows:
        if not r.s_min < end:
            continue
        part = _weighted_row(bv, r, half, start, end)
        for d in ("m", DIR_CODES[r.ddir]):
            if d in sums:
                sums[d].add(*part)
    for d, acc in sums.items():
        if acc.samples > 0 and acc.mn is not None and acc.mx is not None:
            # bincount adds sequentially in input order: the script's row-by-row "+=".
            hist = np.bincount(
                np.concatenate(acc.bins), weights=np.concatenate(acc.contrib), minlength=bv.n
            ).astype(np.float64)
            yield _stats(bv, opts, end, d, hist, acc.samples, acc.mn, acc.mx)


def _add_counts(acc: Counts | None, h: FioHistRow, bv: _BinVals, dirs: Sequence[str]) -> Counts:
    """Add a record's counts to its direction and mixed (new sums when ``acc`` is None)."""
    if acc is None:
        acc = {d: np.zeros(bv.n, dtype=np.int64) for d in dirs}
    for d in ("m", DIR_CODES[h.ddir]):
        if d in acc:
            acc[d][h.bin_idx] += h.counts
    return acc


def _collect_due(
    iters: Sequence[Iterator[FioHistRow]],
    heads: list[FioHistRow | None],
    end: float,
    bv: _BinVals,
    dirs: Sequence[str],
) -> tuple[bool, Counts | None]:
    """Sum the records due in the interval ending at ``end`` (more than 10 ms before it), file
    by file and round after round as the script does.

    Returns:
        ``(more, sums)``: whether any file has records left, and the bin counts per direction
        (None when no record was due).
    """
    more = False
    acc: Counts | None = None
    while True:
        found = False
        for i, it in enumerate(iters):
            h = heads[i]
            ts = h.time_ms if h is not None else 0
            if h is not None and ts and ts + 10 < end:
                found = more = True
                acc = _add_counts(acc, h, bv, dirs)
                heads[i] = next(it, None)
            elif ts:
                more = True
        if not more or not found:
            return more, acc


def _unweighted_rows(bv: _BinVals, opts: FlpOptions, end: float, acc: Counts) -> Iterator[FlpStats]:
    """The rows of one interval of the unweighted mode, directions in order."""
    for d in sorted(acc):
        hist = acc[d]
        total = int(np.sum(hist))
        if total > 0:
            nz = np.flatnonzero(hist)
            mn, mx = float(bv.vals[nz[0]]), float(bv.vals[nz[-1]])
            yield _stats(bv, opts, end, d, hist, total, mn, mx)


def unweighted_intervals(
    streams: Sequence[Iterable[FioHistRow]], layout: BinLayout, opts: FlpOptions
) -> Iterator[FlpStats]:
    """The script's ``--noweight`` mode: a record counts fully in the interval whose end is more
    than 10 ms after it; min/max are the bin values of the first/last non-empty bin.

    Reproduces its quirks (a record with timestamp 0 ends its file). Runs of empty intervals are
    skipped in one step, so epoch-stamped logs do not walk from 0 (the script would take hours;
    the printed output is the same).
    """
    bv = _BinVals(layout, opts)
    interval = opts.interval_ms
    iters = [iter(s) for s in streams]
    heads: list[FioHistRow | None] = [next(it, None) for it in iters]
    start, end = 0, interval
    while True:
        more, acc = _collect_due(iters, heads, end, bv, opts.printdirs)
        if acc is not None:
            yield from _unweighted_rows(bv, opts, end, acc)
        if not more:
            break
        if acc is None:
            # Nothing was due: jump to the first interval in which some record is due.
            due = min(h.time_ms for h in heads if h is not None and h.time_ms) + 10
            steps = max(0, (due - end) // interval)
            start += steps * interval
        start += interval
        end = start + interval


def flp_rows(
    streams: Sequence[Iterable[FioHistRow]], layout: BinLayout, opts: FlpOptions
) -> Iterator[FlpStats]:
    """Dispatch to the weighted (default) or unweighted mode."""
    if opts.noweight:
        return unweighted_intervals(streams, layout, opts)
    return weighted_intervals(streams, layout, opts)


def weighted_interval(
    rows: Iterable[FioHistRow], layout: BinLayout, opts: FlpOptions, start: float, end: float
) -> list[FlpStats]:
    """One interval of the weighted mode over rows already in merge order (time, then file).

    Used by the pipeline's ``flp`` method, where rows come from indexed histogram documents.
    Pass the rows the script would hold for this interval: ``start < t`` and
    ``t < end + max_latency``.
    """
    bv = _BinVals(layout, opts)
    half = 0.5 * opts.interval_ms
    held = [_held(r, bv, half) for r in rows]
    return list(_weighted_interval(bv, opts, held, start, end))
