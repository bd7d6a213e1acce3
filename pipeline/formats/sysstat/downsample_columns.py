"""Exact downsampling of columnar sysstat rows: the vectorised twin of the Downsampler.

:class:`ColumnarDownsampler` takes the :class:`~pipeline.formats.sysstat.columns.Rows` of
``sadf -d`` blocks and gives the samples :class:`~pipeline.reducers.downsample.Downsampler`
gives (same formulas, grid, restarts and gaps; sums in another order, so floats agree to ~1e-12
relative), with array operations instead of one Python object per sample.

Exactness rests on two facts. (1) The Downsampler's output for a host depends only on that
host's records in the order the offline loader sorts them (by ``end_s``, stably); when every
host's records already come in non-decreasing time (as sadf prints one file, and files given in
time order), that order is file order, so blocks can be processed as they come. (2) Within a
host all devices share the interval column, so closing a device that stopped being reported
(the Downsampler's sweep) gives the same sample as closing it at its own next sample after the
gap. A target interval still open at the end of a block is carried to the next block as its
raw rows (at most target/source rows per device). A source interval longer than the target
raises :class:`~pipeline.formats.sysstat.columns.Unsupported` (the per-line path passes such a
sample through unchanged).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
import numpy.typing as npt

from pipeline.formats.sysstat.columns import FIELDS, Rows, Unsupported
from pipeline.records.core import DiskSample
from pipeline.reducers.downsample import DEFAULT_MAX_GAP_INTERVALS

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Downsampled:
    """Downsampled samples of many LUNs, sorted by LUN then time.

    Attributes:
        luns: ``(host, device)`` per LUN id.
        lun: LUN id per sample, shape ``(n,)``, non-decreasing.
        end_s: sample end, Unix s (on the grid, or the last source end for a partial sample).
        interval_s: seconds of data in the sample (< the target for a partial one).
        values: ``(n, 8)`` metrics in :data:`FIELDS` order.
    """

    luns: list[tuple[str, str]]
    lun: I64
    end_s: F64
    interval_s: F64
    values: F64

    @staticmethod
    def empty(luns: list[tuple[str, str]]) -> Downsampled:
        """No samples."""
        return Downsampled(
            luns, np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty((0, len(FIELDS)))
        )


@dataclass(frozen=True)
class _Runs:
    """Runs of sorted rows that go into one output sample each.

    Attributes:
        starts, last: first and last row of each run.
        on_grid: the run's sample ends on the grid (closed by a later bucket of its LUN).
        open_: the run may still grow (its LUN's last run, no restart of its host since).
    """

    starts: I64
    last: I64
    on_grid: BOOL
    open_: BOOL


@dataclass
class ColumnarDownsampler:
    """Vectorised twin of :class:`~pipeline.reducers.downsample.Downsampler` over :class:`Rows`.

    Feed blocks in file order (:meth:`add`), then :meth:`finish`. Formulas, grid and the
    handling of restarts and gaps are those of :mod:`pipeline.reducers.downsample`.

    Raises:
        ValueError: ``interval_s <= 0`` or ``max_gap_intervals < 0``.
    """

    interval_s: float
    offset_s: float = 0.0
    max_gap_intervals: float = DEFAULT_MAX_GAP_INTERVALS
    _carry: Rows = field(default_factory=Rows.empty)
    _out: list[tuple[I64, F64, F64, F64]] = field(default_factory=list)
    _host_epoch: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {self.interval_s}")
        if not self.max_gap_intervals >= 0:
            raise ValueError(f"max_gap_intervals must be >= 0, got {self.max_gap_intervals}")

    def add(self, rows: Rows, host_restarts: Sequence[int]) -> None:
        """Take one block's rows; ``host_restarts[h]`` is host h's restart count after it.

        Raises:
            Unsupported: a source interval longer than the target.
        """
        if (rows.interval_s > self.interval_s).any():
            longest = float(rows.interval_s.max())
            target = self.interval_s
            raise Unsupported(f"samples of {longest:g} s, longer than the {target:g} s target")
        r = Rows.concat([self._carry, rows])
        if len(r.lun) == 0:
            return
        r = r.take(np.argsort(r.lun, kind="stable"))
        grid = self.offset_s + np.ceil((r.end_s - self.offset_s) / self.interval_s) * (
            self.interval_s
        )
        runs = self._runs(r, grid, np.asarray(host_restarts, np.int64))
        keep = np.zeros(len(r.lun), np.bool_)
        for s, e in zip(runs.starts[runs.open_], runs.last[runs.open_], strict=True):
            keep[s : e + 1] = True
        self._carry = r.take(keep)
        closed = ~runs.open_
        self._emit(r, runs.starts[closed], runs.last[closed], runs.on_grid[closed], grid)

    def _runs(self, r: Rows, grid: F64, restarts: I64) -> _Runs:
        """Cut rows sorted by LUN into runs: a new run at a new LUN or restart, a gap, or a new
        grid bucket."""
        n = len(r.lun)
        same = np.zeros(n, np.bool_)
        same[1:] = (r.lun[1:] == r.lun[:-1]) & (r.epoch[1:] == r.epoch[:-1])
        gap = np.zeros(n, np.bool_)
        missing = (r.end_s[1:] - r.interval_s[1:]) - r.end_s[:-1]
        gap[1:] = (r.end_s[1:] < r.end_s[:-1]) | (
            missing > self.max_gap_intervals * r.interval_s[1:]
        )
        new_bucket = np.zeros(n, np.bool_)
        new_bucket[1:] = grid[1:] > grid[:-1]
        starts = np.flatnonzero(~same | gap | new_bucket)
        last = np.r_[starts[1:] - 1, n - 1]
        nxt = last + 1
        has_next = nxt < n
        nxt_c = np.minimum(nxt, n - 1)
        continued = has_next & same[nxt_c]  # the LUN's next row is in this block, same epoch
        on_grid = continued & ~gap[nxt_c]  # closed by a later bucket: ends on the grid
        last_of_lun = ~(has_next & (r.lun[nxt_c] == r.lun[last]))
        open_ = last_of_lun & (r.epoch[last] == restarts[r.host[last]])
        return _Runs(starts, last, on_grid, open_)

    def _emit(self, r: Rows, starts: I64, last: I64, on_grid: BOOL, grid: F64) -> None:
        """One output sample per closed run: the rates of its summed amounts."""
        if len(starts) == 0:
            return
        amounts = _amounts(r)
        # reduceat sums a[idx[i]:idx[i+1]]; closed runs need not be adjacent, so each run's end
        # is a boundary too and the sums at even positions are the runs'
        bounds = np.stack([starts, last + 1], axis=1).ravel()
        sums = np.add.reduceat(amounts, bounds, axis=0)[::2]
        t, out = _rates(sums)
        end = np.where(on_grid, grid[last], r.end_s[last])
        self._out.append((r.lun[last], end, t, out))

    def finish(self, luns: list[tuple[str, str]]) -> Downsampled:
        """Close every open interval (partial ones end at their last source end)."""
        if len(self._carry.lun):
            self.add(Rows.empty(), [-1] * (int(self._carry.host.max()) + 1))
        pieces, self._out = self._out, []
        if not pieces:
            return Downsampled.empty(luns)
        lun = np.concatenate([o[0] for o in pieces])
        end = np.concatenate([o[1] for o in pieces])
        order = np.lexsort((end, lun))
        dest = np.empty_like(order)
        dest[order] = np.arange(len(order))
        # each piece goes straight to its sorted rows and is dropped: memory stays ~1x output
        interval = np.empty(len(order))
        values = np.empty((len(order), len(FIELDS)), order="F")
        at = 0
        while pieces:
            _, _, dt, v = pieces.pop(0)
            rows = dest[at : at + len(dt)]
            interval[rows] = dt
            values[rows] = v
            at += len(dt)
        return Downsampled(luns, lun[order], end[order], interval, values)


def _amounts(r: Rows) -> F64:
    """Per row, the counter increments behind it (the columns of
    :class:`~pipeline.reducers.downsample.DiskAmounts`), and a zero row at index ``len(r)``."""
    dt = r.interval_s
    ios = r.values[:, 0] * dt
    v = r.values
    amounts = np.stack(
        [
            dt,
            ios,
            v[:, 1] * dt,
            v[:, 2] * dt,
            v[:, 3] * dt,
            v[:, 4] * ios,
            v[:, 6] * ios,
            v[:, 5] * dt,
            v[:, 7] / 100.0 * dt,
        ],
        axis=1,
    )
    out: F64 = np.vstack([amounts, np.zeros((1, amounts.shape[1]))])  # index len(dt) valid
    return out


def _rates(sums: F64) -> tuple[F64, F64]:
    """``(seconds, metrics)`` of summed amounts: sysstat's formulas (await and areq-sz 0 when
    no I/O completed), metrics in :data:`FIELDS` order."""
    t, n = sums[:, 0].copy(), sums[:, 1]  # a copy: a view would keep all of sums alive
    safe_n = np.where(n > 0, n, 1.0)
    out = np.empty((len(sums), len(FIELDS)))
    out[:, 0] = n / t
    out[:, 1] = sums[:, 2] / t
    out[:, 2] = sums[:, 3] / t
    out[:, 3] = sums[:, 4] / t
    out[:, 4] = np.where(n > 0, sums[:, 5] / safe_n, 0.0)
    out[:, 5] = sums[:, 7] / t
    out[:, 6] = np.where(n > 0, sums[:, 6] / safe_n, 0.0)
    out[:, 7] = 100.0 * sums[:, 8] / t
    return t, out


class SampleColumns(Sequence[DiskSample]):
    """One LUN's downsampled samples as columns; items are built only when indexed.

    Attributes:
        host, device: the LUN.
        end_s, interval_s: shape ``(n,)``.
        values: ``(n, 8)`` metrics in :data:`FIELDS` order.
    """

    def __init__(self, host: str, device: str, end_s: F64, interval_s: F64, values: F64) -> None:
        self.host, self.device = host, device
        self.end_s, self.interval_s, self.values = end_s, interval_s, values

    def column(self, name: str) -> F64:
        """One DiskSample field's values (``end_s``, ``interval_s``, a metric or ``svctm_ms``)."""
        if name == "end_s":
            return self.end_s
        if name == "interval_s":
            return self.interval_s
        if name == "svctm_ms":  # derived as records.svctm_ms derives it
            util, tps = self.column("util_pct"), self.column("tps")
            return np.divide(util * 10.0, tps, out=np.zeros_like(tps), where=tps > 0)
        return self.values[:, FIELDS.index(name)]

    def __len__(self) -> int:
        return len(self.end_s)

    @overload
    def __getitem__(self, i: int) -> DiskSample: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[DiskSample]: ...
    def __getitem__(self, i: int | slice) -> DiskSample | Sequence[DiskSample]:
        if isinstance(i, slice):
            return SampleColumns(
                self.host, self.device, self.end_s[i], self.interval_s[i], self.values[i]
            )
        row = self.values[i]
        return DiskSample(
            host=self.host,
            device=self.device,
            end_s=float(self.end_s[i]),
            interval_s=float(self.interval_s[i]),
            **{name: float(x) for name, x in zip(FIELDS, row, strict=True)},
        )


def by_lun(
    ds: Downsampled, interval_s: float, *, full_only: bool = True
) -> dict[str, SampleColumns]:
    """``{"host/device": SampleColumns}``; with ``full_only``, full target intervals only."""
    keep = np.abs(ds.interval_s - interval_s) <= 1e-6 * interval_s
    if not full_only or keep.all():  # no copy (the arrays may be memory-mapped)
        lun, end, dt, values = ds.lun, ds.end_s, ds.interval_s, ds.values
    else:
        lun, end, dt, values = ds.lun[keep], ds.end_s[keep], ds.interval_s[keep], ds.values[keep]
    cuts = np.flatnonzero(np.diff(lun)) + 1
    starts = np.r_[0, cuts] if len(lun) else np.empty(0, np.int64)
    stops = np.r_[cuts, len(lun)] if len(lun) else np.empty(0, np.int64)
    out: dict[str, SampleColumns] = {}
    for a, b in zip(starts, stops, strict=True):
        host, device = ds.luns[int(lun[a])]
        out[f"{host}/{device}"] = SampleColumns(host, device, end[a:b], dt[a:b], values[a:b])
    return out
