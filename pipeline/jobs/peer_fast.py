"""Columnar ingestion and exact downsampling of ``sadf -d`` CSV for offline peer diagnosis.

The per-line path (:func:`pipeline.parsers.sysstat.parse_sadf_csv` ->
:class:`pipeline.reducers.downsample.Downsampler`) makes one Python object per sample, ~30 µs a
line: hours for a day of 1 s data of a thousand LUNs. This module reads the same files in
blocks with pandas' C parser into numpy columns and downsamples them with array operations,
giving the samples the Downsampler gives (same formulas, grid, restarts and gaps; sums in
another order, so floats agree to ~1e-12 relative). Input, as ``sadf -d [-U] FILE -- -d -p``
prints it (reference/sysstat.md 1.4)::

    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;2026-11-22 04:28:49 UTC;vda;1167.00;10044.00;28.00;52.00;8.68;0.66;0.56;2.80
    vm;-1;2026-11-22 04:28:49 UTC;LINUX-RESTART	(2 CPU)

Timestamps are interval ends, UTC (``YYYY-MM-DD HH:MM:SS UTC``, or Unix seconds with ``-U``).

Exactness rests on two facts. (1) The Downsampler's output for a host depends only on that
host's records in the order the offline loader sorts them (by ``end_s``, stably); when every
host's records already come in non-decreasing time (as sadf prints one file, and files given in
time order), that order is file order, so blocks can be processed as they come. (2) Within a
host all devices share the interval column, so closing a device that stopped being reported
(the Downsampler's sweep) gives the same sample as closing it at its own next sample after the
gap. A target interval still open at the end of a block is carried to the next block as its
raw rows (at most target/source rows per device).

Anything this reader does not take exactly as the per-line path would -- a JSON, XML or binary
file, a second header that differs from the first, a bad line, a host going back in time, a
source interval longer than the target -- raises :class:`Unsupported`; the caller then uses the
per-line path (:func:`pipeline.jobs.peer_diagnosis.load` does).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from pipeline.parsers.errors import ParseError
from pipeline.parsers.sysstat import COMMENT, RESTART, SadfHeader
from pipeline.records import DISK_METRICS, DiskSample
from pipeline.reducers.downsample import DEFAULT_MAX_GAP_INTERVALS

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

FIELDS = DISK_METRICS
"""DiskSample metric fields, in the order of the value columns here."""

DEFAULT_BLOCK_BYTES = 8 << 20
"""Bytes of CSV parsed at a time (about 100,000 rows; bounds memory, not results)."""


class Unsupported(Exception):
    """A file the columnar reader does not take exactly; use the per-line path."""


@dataclass(frozen=True)
class Rows:
    """Parsed data rows of one block, in file order (restart rows apart).

    Attributes:
        lun: LUN id per row (index into the reader's ``luns``), shape ``(n,)``.
        host: host id per row (index into the reader's ``hosts``).
        end_s: interval end, Unix s.
        interval_s: interval, s.
        values: ``(n, 8)`` DiskSample metrics in :data:`FIELDS` order, sysstat units.
        epoch: number of restarts of the row's host before it (all blocks so far).
    """

    lun: I64
    host: I64
    end_s: F64
    interval_s: F64
    values: F64
    epoch: I64

    @staticmethod
    def concat(parts: Sequence[Rows]) -> Rows:
        return Rows(
            np.concatenate([p.lun for p in parts]),
            np.concatenate([p.host for p in parts]),
            np.concatenate([p.end_s for p in parts]),
            np.concatenate([p.interval_s for p in parts]),
            np.concatenate([p.values for p in parts]),
            np.concatenate([p.epoch for p in parts]),
        )

    def take(self, idx: I64 | BOOL) -> Rows:
        return Rows(
            self.lun[idx],
            self.host[idx],
            self.end_s[idx],
            self.interval_s[idx],
            self.values[idx],
            self.epoch[idx],
        )


def _empty_samples() -> tuple[I64, F64, F64, F64]:
    return np.empty(0, np.int64), np.empty(0), np.empty(0), np.empty((0, len(FIELDS)))


def _empty_rows() -> Rows:
    return Rows(
        np.empty(0, np.int64),
        np.empty(0, np.int64),
        np.empty(0),
        np.empty(0),
        np.empty((0, len(FIELDS))),
        np.empty(0, np.int64),
    )


@dataclass
class Reader:
    """Turns ``sadf -d`` CSV blocks into :class:`Rows`, keeping host/LUN ids and restart counts.

    State: the names seen so far, each host's restart count and last time (to check order).
    """

    hosts: list[str] = field(default_factory=list)
    luns: list[tuple[str, str]] = field(default_factory=list)
    _host_id: dict[str, int] = field(default_factory=dict)
    _lun_id: dict[tuple[str, str], int] = field(default_factory=dict)
    _restarts: list[int] = field(default_factory=list)
    _last_end: list[float] = field(default_factory=list)

    @property
    def restarts(self) -> list[int]:
        """Restarts seen so far, by host id."""
        return self._restarts

    def host_id(self, name: str) -> int:
        i = self._host_id.get(name)
        if i is None:
            i = self._host_id[name] = len(self.hosts)
            self.hosts.append(name)
            self._restarts.append(0)
            self._last_end.append(-math.inf)
        return i

    def lun_id(self, host: str, device: str) -> int:
        key = (host, device)
        i = self._lun_id.get(key)
        if i is None:
            i = self._lun_id[key] = len(self.luns)
            self.luns.append(key)
        return i

    def read_file(self, path: Path, block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[Rows]:
        """Rows of one file, block by block.

        Raises:
            Unsupported: see the module docstring.
        """
        with path.open("rb") as f:
            head = f.read(1)
            if head != b"#":
                raise Unsupported(f"{path}: does not start with a sadf -d '#' header")
            first = head + f.readline()
            line = first.decode("utf-8", "replace").rstrip("\r\n")
            try:
                header = SadfHeader.parse(line, str(path), 1)
            except ParseError as err:
                raise Unsupported(str(err)) from None
            rest = b""
            while True:
                data = f.read(block_bytes)
                if not data:
                    break
                cut = data.rfind(b"\n")
                if cut < 0:
                    rest += data
                    continue
                block, rest = rest + data[: cut + 1], data[cut + 1 :]
                yield self.parse_block(block, first.rstrip(b"\r\n"), header, path)
            if rest.strip():
                yield self.parse_block(rest, first.rstrip(b"\r\n"), header, path)

    def parse_block(self, block: bytes, first: bytes, header: SadfHeader, path: Path) -> Rows:
        """Rows of complete lines; restart rows update the hosts' restart counts.

        Raises:
            Unsupported: another header, a bad row, or a host going back in time.
        """
        at = 0 if block.startswith(b"#") else block.find(b"\n#") + 1 or -1
        while at >= 0:
            end = block.find(b"\n", at)
            if block[at : end if end >= 0 else len(block)].rstrip(b"\r") != first:
                raise Unsupported(f"{path}: a header that differs from the first")
            at = block.find(b"\n#", at) + 1 or -1
        i_host, i_interval, i_time, i_dev = header.keys
        metric_pos = {name: (i, factor) for name, i, factor in header.metrics}
        # one column more than the header has: a longer row shows there
        usecols = sorted({*header.keys, *(i for i, _ in metric_pos.values()), header.width})
        dtype: dict[int, Any] = {i: np.float64 for i in usecols}
        dtype |= {i_host: "category", i_time: "category", i_dev: "category"}
        dtype[header.width] = "category"
        dtype[i_interval] = np.int64
        # pandas cannot size the columns of a block of short rows only (restarts, comments):
        # a dummy first row one column longer than the header, dropped after parsing, lets it
        dummy = ";".join(["\x00", "1", "0", *["0"] * (header.width - 2)]).encode() + b"\n"
        try:
            df = pd.read_csv(
                io.BytesIO(dummy + block),
                sep=";",
                header=None,
                names=list(range(header.width + 1)),
                usecols=usecols,
                dtype=dtype,
                comment="#",
                quoting=csv.QUOTE_NONE,
                engine="c",
                skip_blank_lines=True,
            ).iloc[1:]
        except (ValueError, pd.errors.ParserError) as err:
            raise Unsupported(f"{path}: {err}") from None
        for i in (i_host, i_time, i_dev):
            df[i] = df[i].cat.remove_unused_categories()
        if len(df) == 0:
            return _empty_rows()
        return self._rows(df, header, metric_pos, path)

    def _rows(
        self,
        df: Any,
        header: SadfHeader,
        metric_pos: dict[str, tuple[int, float]],
        path: Path,
    ) -> Rows:
        i_host, i_interval, i_time, i_dev = header.keys
        interval = df[i_interval].to_numpy(np.int64)
        end_s = _timestamps(df[i_time], path)
        host_cat = df[i_host].cat
        host_code = host_cat.codes.to_numpy(np.int64)
        if (host_code < 0).any():
            raise Unsupported(f"{path}: a row without a host name")
        host_map = np.array([self.host_id(str(h)) for h in host_cat.categories], np.int64)
        host = host_map[host_code]
        dev_cat = df[i_dev].cat
        dev_names = [str(d) for d in dev_cat.categories]
        dev_code = dev_cat.codes.to_numpy(np.int64)
        special = interval == -1
        is_restart = np.zeros(len(df), np.bool_)
        if special.any():
            kinds = np.array([d.startswith(RESTART) for d in dev_names] + [False])
            comment = np.array([d.startswith(COMMENT) for d in dev_names] + [False])
            is_restart = special & kinds[dev_code]
            if not (is_restart | comment[dev_code] | ~special).all():
                raise Unsupported(f"{path}: interval -1 but neither LINUX-RESTART nor COM")
        data = ~special
        if (interval[data] < 1).any() or (dev_code[data] < 0).any():
            raise Unsupported(f"{path}: a row with a bad interval or device")
        if (df[header.width].cat.codes.to_numpy(np.int64)[data] >= 0).any():
            raise Unsupported(f"{path}: a row with more columns than the header")
        epoch = self._epochs(host, end_s, is_restart, special & ~is_restart, path)
        values = np.zeros((int(data.sum()), len(FIELDS)))
        for k, name in enumerate(FIELDS):
            if name in metric_pos:
                i, factor = metric_pos[name]
                col = df[i].to_numpy(np.float64)[data]
                if not (np.isfinite(col) & (col >= 0)).all():
                    raise Unsupported(f"{path}: {name} not a finite number >= 0 on some row")
                values[:, k] = col * factor
        pairs = np.unique(np.stack([host[data], dev_code[data]]), axis=1)
        lun_of = {
            (int(h), int(d)): self.lun_id(self.hosts[int(h)], dev_names[int(d)]) for h, d in pairs.T
        }
        lun_table = np.full((len(self.hosts), len(dev_names)), -1, np.int64)
        for (h, d), i in lun_of.items():
            lun_table[h, d] = i
        return Rows(
            lun_table[host[data], dev_code[data]],
            host[data],
            end_s[data],
            interval[data].astype(np.float64),
            values,
            epoch[data],
        )

    def _epochs(self, host: I64, end_s: F64, is_restart: BOOL, is_comment: BOOL, path: Path) -> I64:
        """Restarts before each row of its host; checks each host's times do not go back."""
        keep = ~is_comment
        order = np.flatnonzero(keep)[np.argsort(host[keep], kind="stable")]
        h, t, r = host[order], end_s[order], is_restart[order]
        first = np.ones(len(order), np.bool_)
        first[1:] = h[1:] != h[:-1]
        prev = np.empty(len(order))
        prev[1:] = t[:-1]
        last = np.array(self._last_end)
        prev[first] = last[h[first]]
        if (t < prev).any():
            raise Unsupported(f"{path}: a host's records go back in time (not streamable)")
        counts: I64 = (
            np.cumsum(r, dtype=np.int64) - r
        )  # restarts strictly before, within this block (all hosts)
        base: I64 = counts[first]
        group = np.cumsum(first) - 1
        before = counts - base[group] + np.array(self._restarts)[h]
        epoch = np.zeros(len(host), np.int64)
        epoch[order] = before
        ends = np.flatnonzero(np.r_[first[1:], True])
        for j in ends:
            hid = int(h[j])
            self._last_end[hid] = float(t[j])
            self._restarts[hid] = int(before[j] + r[j])
        return epoch


def _timestamps(col: Any, path: Path) -> F64:
    """Unix seconds of a categorical timestamp column (each distinct text parsed once)."""
    cats = pd.Index(col.cat.categories).astype(str)
    codes = col.cat.codes.to_numpy(np.int64)
    if (codes < 0).any():
        raise Unsupported(f"{path}: a row without a timestamp")
    digits = np.asarray(cats.str.fullmatch(r"\d+"), np.bool_)
    out = np.empty(len(cats))
    if digits.any():
        out[digits] = cats[digits].astype(np.int64).to_numpy(np.float64)
    if not digits.all():
        text = cats[~digits]
        if not text.str.endswith(" UTC").all():
            raise Unsupported(f"{path}: a timestamp that is not UTC")
        try:
            when = pd.to_datetime(text.str.slice(0, -4), format="%Y-%m-%d %H:%M:%S", utc=True)
        except ValueError:
            raise Unsupported(f"{path}: not a sadf timestamp") from None
        out[~digits] = (when - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(seconds=1)
    result: F64 = out[codes]
    return result


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
    _carry: Rows = field(default_factory=_empty_rows)
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
            raise Unsupported("a source interval longer than the target interval")
        r = Rows.concat([self._carry, rows])
        if len(r.lun) == 0:
            return
        r = r.take(np.argsort(r.lun, kind="stable"))
        n = len(r.lun)
        grid = self.offset_s + np.ceil((r.end_s - self.offset_s) / self.interval_s) * (
            self.interval_s
        )
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
        restarts = np.asarray(host_restarts, np.int64)
        open_ = last_of_lun & (r.epoch[last] == restarts[r.host[last]])
        closed = ~open_
        keep = np.zeros(n, np.bool_)
        for s, e in zip(starts[open_], last[open_], strict=True):
            keep[s : e + 1] = True
        self._carry = r.take(keep)
        self._emit(r, starts[closed], last[closed], on_grid[closed], grid)

    def _emit(self, r: Rows, starts: I64, last: I64, on_grid: BOOL, grid: F64) -> None:
        if len(starts) == 0:
            return
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
        amounts = np.vstack([amounts, np.zeros((1, amounts.shape[1]))])  # index len(dt) valid
        # reduceat sums a[idx[i]:idx[i+1]]; closed runs need not be adjacent, so each run's end
        # is a boundary too and the sums at even positions are the runs'
        bounds = np.stack([starts, last + 1], axis=1).ravel()
        sums = np.add.reduceat(amounts, bounds, axis=0)[::2]
        t, n = sums[:, 0].copy(), sums[:, 1]  # a copy: a view would keep all of sums alive
        safe_n = np.where(n > 0, n, 1.0)
        out = np.empty((len(starts), len(FIELDS)))
        out[:, 0] = n / t
        out[:, 1] = sums[:, 2] / t
        out[:, 2] = sums[:, 3] / t
        out[:, 3] = sums[:, 4] / t
        out[:, 4] = np.where(n > 0, sums[:, 5] / safe_n, 0.0)
        out[:, 5] = sums[:, 7] / t
        out[:, 6] = np.where(n > 0, sums[:, 6] / safe_n, 0.0)
        out[:, 7] = 100.0 * sums[:, 8] / t
        end = np.where(on_grid, grid[last], r.end_s[last])
        self._out.append((r.lun[last], end, t, out))

    def finish(self, luns: list[tuple[str, str]]) -> Downsampled:
        """Close every open interval (partial ones end at their last source end)."""
        if len(self._carry.lun):
            self.add(_empty_rows(), [-1] * (int(self._carry.host.max()) + 1))
        pieces, self._out = self._out, []
        if not pieces:
            return Downsampled(luns, *_empty_samples())
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


def downsample_files(
    paths: Iterable[Path],
    interval_s: float,
    *,
    offset_s: float = 0.0,
    max_gap_intervals: float = DEFAULT_MAX_GAP_INTERVALS,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Downsampled:
    """Read and downsample ``sadf -d`` CSV files (in the order given) without per-row objects.

    Returns:
        Every downsampled sample, partial ones included (as :func:`downsample` returns them).

    Raises:
        Unsupported: a file this reader does not take exactly (module docstring).
        ValueError: bad ``interval_s`` or ``max_gap_intervals``.
    """
    reader = Reader()
    ds = ColumnarDownsampler(interval_s, offset_s, max_gap_intervals)
    for path in paths:
        for rows in reader.read_file(path, block_bytes):
            ds.add(rows, reader.restarts)
    return ds.finish(reader.luns)


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
        """One DiskSample field's values (``end_s``, ``interval_s`` or a metric)."""
        if name == "end_s":
            return self.end_s
        if name == "interval_s":
            return self.interval_s
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
