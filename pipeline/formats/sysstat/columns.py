"""``sadf -d`` CSV read in blocks into numpy columns, without a Python object per line.

The per-line parser (:func:`pipeline.formats.sysstat.decode.parse_sadf_csv`) makes one object per
sample, ~30 µs a line: hours for a day of 1 s data of a thousand LUNs. :class:`Reader` reads the
same files in blocks with pandas' C parser into :class:`Rows` of numpy columns, with the values
the per-line parser gives. Input, as ``sadf -d [-U] FILE -- -d -p`` prints it
(reference/sysstat.md 1.4)::

    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;2026-11-22 04:28:49 UTC;vda;1167.00;10044.00;28.00;52.00;8.68;0.66;0.56;2.80
    vm;-1;2026-11-22 04:28:49 UTC;LINUX-RESTART	(2 CPU)

Timestamps are interval ends, UTC (``YYYY-MM-DD HH:MM:SS UTC``, or Unix seconds with ``-U``).
Restart rows are not rows of their own: each data row carries its host's restart count
(:attr:`Rows.epoch`); the restart and comment rows sadf prints before a file's first header (a
file sadc started at boot) are read too. Anything this reader does not take exactly as the
per-line path would -- a JSON, XML or binary file, a second header that differs from the
first, a bad line, a host going back in time -- raises :class:`Unsupported`; the caller then
uses the per-line path.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from pipeline.formats.sysstat.decode import SadfCsvParser, SadfHeader
from pipeline.formats.sysstat.values import COMMENT, RESTART
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DISK_METRICS, RestartMark

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
    def empty() -> Rows:
        """No rows."""
        ids, times = np.empty(0, np.int64), np.empty(0)
        return Rows(ids, ids, times, times, np.empty((0, len(FIELDS))), ids)

    @staticmethod
    def concat(parts: Sequence[Rows]) -> Rows:
        """The rows of ``parts``, one after the other."""
        return Rows(
            np.concatenate([p.lun for p in parts]),
            np.concatenate([p.host for p in parts]),
            np.concatenate([p.end_s for p in parts]),
            np.concatenate([p.interval_s for p in parts]),
            np.concatenate([p.values for p in parts]),
            np.concatenate([p.epoch for p in parts]),
        )

    def take(self, idx: I64 | BOOL) -> Rows:
        """The rows selected by an index array or a mask."""
        return Rows(
            self.lun[idx],
            self.host[idx],
            self.end_s[idx],
            self.interval_s[idx],
            self.values[idx],
            self.epoch[idx],
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
        """The id of host ``name`` (a new one the first time)."""
        i = self._host_id.get(name)
        if i is None:
            i = self._host_id[name] = len(self.hosts)
            self.hosts.append(name)
            self._restarts.append(0)
            self._last_end.append(-math.inf)
        return i

    def lun_id(self, host: str, device: str) -> int:
        """The id of LUN ``(host, device)`` (a new one the first time)."""
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
            first = self._leading_marks(f, path)
            if not first:
                return
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

    def _leading_marks(self, f: BinaryIO, path: Path) -> bytes:
        """Take the ``LINUX-RESTART`` and ``COM`` rows sadf prints before a file's first header
        (a file sadc started at boot, as ``sa1 --boot`` does) and return that header line (empty
        when the file has none and holds nothing else).

        Raises:
            Unsupported: the file does not start with such rows and a ``#`` header.
        """
        parser = SadfCsvParser(str(path))
        for line_no in count(1):
            line = f.readline(1 << 16)
            if not line:
                return b""  # empty, or restart and comment rows only: no rows
            if line.startswith(b"#"):
                return line
            if not line.endswith(b"\n"):
                break
            for rec in parser.feed([line], line_no):
                if not isinstance(rec, RestartMark):
                    raise Unsupported(f"{path}: line {line_no} is not a sadf -d header or restart")
                self.restart(rec.host, rec.end_s, path)
        raise Unsupported(f"{path}: no sadf -d '#' header line")

    def restart(self, host: str, end_s: float, path: Path) -> None:
        """Count a restart of ``host`` at ``end_s`` (Unix s) read outside a block.

        Raises:
            Unsupported: it is earlier than the host's last record.
        """
        hid = self.host_id(host)
        if end_s < self._last_end[hid]:
            raise Unsupported(f"{path}: a host's records go back in time (not streamable)")
        self._restarts[hid] += 1
        self._last_end[hid] = end_s

    def parse_block(self, block: bytes, first: bytes, header: SadfHeader, path: Path) -> Rows:
        """Rows of complete lines; restart rows update the hosts' restart counts.

        Raises:
            Unsupported: another header, a bad row, or a host going back in time.
        """
        _check_headers(block, first, path)
        df = _read_csv(block, header, path)
        if len(df) == 0:
            return Rows.empty()
        return self._rows(df, header, path)

    def _rows(self, df: Any, header: SadfHeader, path: Path) -> Rows:
        """The data rows of a parsed block (restarts counted, comments dropped)."""
        i_host, i_interval, i_time, i_dev = header.keys
        interval = df[i_interval].to_numpy(np.int64)
        end_s = _timestamps(df[i_time], path)
        host = self._host_column(df[i_host], path)
        dev_cat = df[i_dev].cat
        dev_names = [str(d) for d in dev_cat.categories]
        dev_code = dev_cat.codes.to_numpy(np.int64)
        special, is_restart = _special_rows(interval, dev_names, dev_code, path)
        data = ~special
        if (interval[data] < 1).any() or (dev_code[data] < 0).any():
            raise Unsupported(f"{path}: a row with a bad interval or device")
        if (df[header.width].cat.codes.to_numpy(np.int64)[data] >= 0).any():
            raise Unsupported(f"{path}: a row with more columns than the header")
        epoch = self._epochs(host, end_s, is_restart, special & ~is_restart, path)
        values = _metric_values(df, header, data, path)
        return Rows(
            self._lun_column(host[data], dev_code[data], dev_names),
            host[data],
            end_s[data],
            interval[data].astype(np.float64),
            values,
            epoch[data],
        )

    def _host_column(self, col: Any, path: Path) -> I64:
        """Host id per row of a categorical host-name column."""
        host_cat = col.cat
        host_code = host_cat.codes.to_numpy(np.int64)
        if (host_code < 0).any():
            raise Unsupported(f"{path}: a row without a host name")
        host_map = np.array([self.host_id(str(h)) for h in host_cat.categories], np.int64)
        out: I64 = host_map[host_code]
        return out

    def _lun_column(self, host: I64, dev_code: I64, dev_names: list[str]) -> I64:
        """LUN id per data row from its host id and device code."""
        pairs = np.unique(np.stack([host, dev_code]), axis=1)
        lun_of = {
            (int(h), int(d)): self.lun_id(self.hosts[int(h)], dev_names[int(d)]) for h, d in pairs.T
        }
        lun_table = np.full((len(self.hosts), len(dev_names)), -1, np.int64)
        for (h, d), i in lun_of.items():
            lun_table[h, d] = i
        out: I64 = lun_table[host, dev_code]
        return out

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


def _check_headers(block: bytes, first: bytes, path: Path) -> None:
    """Every ``#`` line of ``block`` must be the file's first header again."""
    at = 0 if block.startswith(b"#") else block.find(b"\n#") + 1 or -1
    while at >= 0:
        end = block.find(b"\n", at)
        if block[at : end if end >= 0 else len(block)].rstrip(b"\r") != first:
            raise Unsupported(f"{path}: a header that differs from the first")
        at = block.find(b"\n#", at) + 1 or -1


def _read_csv(block: bytes, header: SadfHeader, path: Path) -> Any:
    """The block as a DataFrame of the columns used (names and times categorical)."""
    i_host, i_interval, i_time, i_dev = header.keys
    # one column more than the header has: a longer row shows there
    usecols = sorted({*header.keys, *(i for _, i, _ in header.metrics), header.width})
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
    return df


def _special_rows(
    interval: I64, dev_names: list[str], dev_code: I64, path: Path
) -> tuple[BOOL, BOOL]:
    """``(special, restart)`` masks: rows of interval -1, and those of them that are restarts.

    Raises:
        Unsupported: an interval -1 row that is neither a restart nor a ``COM`` comment.
    """
    special = interval == -1
    is_restart = np.zeros(len(interval), np.bool_)
    if special.any():
        kinds = np.array([d.startswith(RESTART) for d in dev_names] + [False])
        comment = np.array([d.startswith(COMMENT) for d in dev_names] + [False])
        is_restart = special & kinds[dev_code]
        if not (is_restart | comment[dev_code] | ~special).all():
            raise Unsupported(f"{path}: interval -1 but neither LINUX-RESTART nor COM")
    return special, is_restart


def _metric_values(df: Any, header: SadfHeader, data: BOOL, path: Path) -> F64:
    """``(n_data, 8)`` metrics in :data:`FIELDS` order, converted to DiskSample units (0 for a
    metric the header lacks)."""
    metric_pos = {name: (i, factor) for name, i, factor in header.metrics}
    values = np.zeros((int(data.sum()), len(FIELDS)))
    for k, name in enumerate(FIELDS):
        if name in metric_pos:
            i, factor = metric_pos[name]
            col = df[i].to_numpy(np.float64)[data]
            if not (np.isfinite(col) & (col >= 0)).all():
                raise Unsupported(f"{path}: {name} not a finite number >= 0 on some row")
            values[:, k] = col * factor
    return values


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
