"""The chain of one fio histogram log: a line -> a record (decode, with the file's bin layout,
detected from its first record) -> its completion window and output interval (reduce: the
window tracker, the previous record time per direction) -> a histogram document (encode).

The chain's cursor (layout, host and the tracker's state) is stored with each committed line,
so a restart resumes exactly after the last committed line; :func:`fio_tail` is the file's
tail (:class:`~pipeline.shippers.line_tail.LineTail`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.formats.fio.decode import detect_layout, is_epoch_ms, row_from_fields, split_fields
from pipeline.formats.fio.encode import FioSource, RecordFields, histogram_document
from pipeline.formats.fio.window import WindowTracker, histogram_stats
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DDIR_NAMES, Document, FioHistRow, LineRef
from pipeline.records.fio_bins import BinLayout, layout_for_bins
from pipeline.reducers.histogram import LatencyHistogram
from pipeline.settings import FioSettings
from pipeline.shippers.hosts import fio_job_for, fio_prefix_for
from pipeline.shippers.line_tail import LineChain, LineTail
from pipeline.shippers.tailer import read_gzip_lines
from pipeline.sink.documents import DocContext

log = logging.getLogger(__name__)


def last_time_ms(path: str) -> int | None:
    """The timestamp of the last complete record of a log (a plain log: only its tail is read;
    a ``.gz`` log is decompressed once). None when the file has no complete record."""
    if path.endswith(".gz"):
        chunk = read_gzip_lines(path)
        data = chunk.lines[-1] + b"\n" if chunk.lines else b""
        data = b"\n" + data
    else:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - (1 << 16)))
            data = fh.read()
    end = data.rfind(b"\n")
    if end <= 0:
        return None
    start = data.rfind(b"\n", 0, end) + 1
    head = data[start:end].split(b",", 1)[0].strip()
    return int(head) if head.isdigit() else None


class FioChain(LineChain):
    """decode -> reduce -> encode of one histogram log (a
    :class:`~pipeline.shippers.line_tail.LineChain`).

    Args:
        path: the log; source: host/job/prefix/fingerprint for document ids and fields.
        fio: fio settings (interval, percentiles, layout overrides, host offsets).
        origin_ms: ms added to job-relative timestamps (run start + host offset).

    Attributes:
        layout: bin layout, known after the first record.
        tracker: window tracker, created at the first record.
    """

    def __init__(self, path: str, source: FioSource, fio: FioSettings, origin_ms: int) -> None:
        self.path, self.source, self.fio, self.origin_ms = path, source, fio, origin_ms
        self.layout: BinLayout | None = None
        self.tracker: WindowTracker | None = None

    def resume(self, cursor: Mapping[str, Any] | None) -> None:
        """Continue from a stored cursor (None: from the file's start)."""
        self.layout, self.tracker = None, None
        if cursor:
            self.layout = BinLayout(cursor["group_nr"], cursor["coarseness"], cursor["unit"])
            if cursor.get("window"):
                self.tracker = WindowTracker.resume(self.fio.interval_ms, cursor["window"])

    def cursor(self) -> Mapping[str, object] | None:
        """The state after the last line (None before the first record)."""
        if self.layout is None:
            return None
        lay = self.layout
        return {
            "group_nr": lay.group_nr,
            "coarseness": lay.coarseness,
            "unit": lay.unit,
            "host": self.source.host,
            "window": self.tracker.cursor() if self.tracker else None,
        }

    def _layout_for(self, line: bytes, line_no: int) -> BinLayout:
        if self.fio.group_nr is not None or self.fio.bins != "auto":
            fields = split_fields(line, self.path, line_no)
            try:
                return layout_for_bins(
                    fields.size - 3, unit=self.fio.bins, group_nr=self.fio.group_nr
                )
            except ValueError as err:
                raise ParseError(self.path, line_no, str(err)) from None
        return detect_layout(line, self.path)

    def decode(self, raw: bytes, line_no: int) -> Iterator[FioHistRow | ParseError]:
        """The record of one line (none for a blank line), or why it cannot be read.

        Raises:
            ParseError: the first record matches no fio bin layout (the whole file is unusable).
        """
        if not raw.strip():
            return
        if self.layout is None:
            self.layout = self._layout_for(raw, line_no)
        try:
            fields = split_fields(raw, self.path, line_no)
            yield row_from_fields(fields, self.layout, self.path, line_no)
        except ParseError as err:
            yield err

    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document]:
        """The record placed on the output timeline, as one ``metrics-fio.histogram`` document."""
        assert isinstance(record, FioHistRow)
        if self.tracker is None:
            epoch = is_epoch_ms(record.time_ms)
            offset = self.fio.host_offsets_ms.get(self.source.host, 0)
            origin = offset if epoch else self.origin_ms
            self.tracker = WindowTracker(self.fio.interval_ms, origin, epoch)
        fields = self._fields(record)
        return [histogram_document(ctx, self.source, fields, ref, start, created_ms)]

    def _fields(self, row: FioHistRow) -> RecordFields:
        assert self.layout is not None and self.tracker is not None
        placed = self.tracker.place(row)
        hist = LatencyHistogram.from_sparse(self.layout, row.bin_idx, row.counts)
        clat: dict[str, Any] = dict(histogram_stats(hist, self.fio.percentiles))
        if row.bin_idx.size:
            values, counts = hist.nonempty()
            clat["histogram"] = {"values": values, "counts": counts}
        lay = self.layout
        return RecordFields(
            time_ms=row.time_ms,
            ddir=DDIR_NAMES[row.ddir],
            bs=row.bs,
            window_ms=(placed.start_ms, placed.end_ms),
            interval_ms=(placed.interval_start_ms, placed.interval_end_ms, placed.interval_ms),
            bins=(lay.nbins, lay.unit, lay.coarseness),
            clat_ns=clat,
        )


def fio_tail(key: str, path: str, source: FioSource, fio: FioSettings, origin_ms: int) -> LineTail:
    """The tail of one histogram log (registry key ``key``): its lines through a
    :class:`FioChain`."""
    return LineTail(key, path, FioChain(path, source, fio, origin_ms))


def fio_path_parts(path: Path) -> tuple[str, str]:
    """``(prefix, job)`` from a histogram log name.

    Raises:
        ValueError: the name is not ``<prefix>_clat_hist.<job>.log[.<host>][.gz]``.
    """
    return fio_prefix_for(path), fio_job_for(path)
