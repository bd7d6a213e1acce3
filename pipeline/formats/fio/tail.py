"""Tailing one fio histogram log: new complete lines -> records -> histogram documents.

The tail owns a file's read position, its bin layout (from the first line), the window
tracker (previous record time per direction) and the cursor snapshots the registry stores when
a prefix of lines is acknowledged, so a restart resumes exactly after the last committed line.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.formats.fio.decode import detect_layout, is_epoch_ms, row_from_fields, split_fields
from pipeline.formats.fio.encode import FioSource, RecordFields, histogram_document
from pipeline.formats.fio.window import WindowTracker, histogram_stats
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DDIR_NAMES, FioHistRow, LineRef
from pipeline.records.fio_bins import BinLayout, layout_for_bins
from pipeline.reducers.histogram import LatencyHistogram
from pipeline.settings import FioSettings
from pipeline.shippers.hosts import fio_job_for, fio_prefix_for
from pipeline.shippers.results import BadLine, LineResult
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_complete_lines, read_gzip_lines
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


@dataclass
class FioTail:
    """Read state of one histogram log.

    Attributes:
        key: registry key of the file.
        path: current path.
        source: host/job/prefix/fingerprint for document ids and fields.
        fio: fio settings (interval, percentiles, layout overrides, host offsets).
        origin_ms: ms added to job-relative timestamps (run start + host offset).
        offset: next byte to read (>= the registry's committed offset).
        line_no: lines read so far.
        layout: bin layout, known after the first line.
        tracker: window tracker, created at the first record.
        snapshots: cursor JSON after each read-but-uncommitted line, by end offset.
        exhausted: a compressed log was read to its end; it is read again only when a file
            event says it changed.
    """

    key: str
    path: str
    source: FioSource
    fio: FioSettings
    origin_ms: int
    offset: int = 0
    line_no: int = 0
    layout: BinLayout | None = None
    tracker: WindowTracker | None = None
    snapshots: dict[int, str] = field(default_factory=dict)
    exhausted: bool = False

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        self.offset = self.line_no = 0
        self.layout, self.tracker = None, None
        self.snapshots.clear()
        self.exhausted = False

    @property
    def compressed(self) -> bool:
        """A ``.gz`` log is read whole once complete."""
        return self.path.endswith(".gz")

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line, from the cursor the registry stored with it."""
        self.offset, self.line_no = offset, line_no
        if cursor:
            state = json.loads(cursor)
            self.layout = BinLayout(state["group_nr"], state["coarseness"], state["unit"])
            if state.get("window"):
                self.tracker = WindowTracker.resume(self.fio.interval_ms, state["window"])

    def cursor(self) -> str | None:
        """JSON state to store with the last read line (None before the first line)."""
        if self.layout is None:
            return None
        lay = self.layout
        state: dict[str, object] = {
            "group_nr": lay.group_nr,
            "coarseness": lay.coarseness,
            "unit": lay.unit,
            "host": self.source.host,
            "window": self.tracker.cursor() if self.tracker else None,
        }
        return json.dumps(state, separators=(",", ":"))

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines (a ``.gz`` file: all remaining lines)."""
        if self.compressed:
            return read_gzip_lines(self.path, self.offset)
        return read_complete_lines(self.path, self.offset, max_bytes)

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

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """Turn the chunk's lines into documents (or bad-line records), advancing the tail.

        Raises:
            ParseError: the first line matches no fio bin layout (the whole file is unusable).
        """
        start = self.offset
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            line_start, self.offset = start, end
            start = end
            ref = LineRef(self.key, self.path, self.line_no, end)
            yield self._line(raw, ref, line_start, ctx, created_ms)
        self.offset = chunk.next_offset if chunk.lines else self.offset

    def _line(
        self, raw: bytes, ref: LineRef, line_start: int, ctx: DocContext, created_ms: float
    ) -> LineResult:
        """One line (starting at byte ``line_start``): its document, or a bad line."""
        end = ref.end_offset
        if not raw.strip():
            self.snapshots[end] = self.cursor() or ""
            return LineResult(ref)
        if self.layout is None:
            self.layout = self._layout_for(raw, self.line_no)
        try:
            fields = split_fields(raw, self.path, self.line_no)
            row = row_from_fields(fields, self.layout, self.path, self.line_no)
        except ParseError as err:
            self.snapshots[end] = self.cursor() or ""
            return LineResult(ref, bad=BadLine(ref, raw, err))
        if self.tracker is None:
            epoch = is_epoch_ms(row.time_ms)
            offset = self.fio.host_offsets_ms.get(self.source.host, 0)
            origin = offset if epoch else self.origin_ms
            self.tracker = WindowTracker(self.fio.interval_ms, origin, epoch)
        doc = histogram_document(ctx, self.source, self._fields(row), ref, line_start, created_ms)
        self.snapshots[end] = self.cursor() or ""
        return LineResult(ref, (doc,))

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

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for a line (and drop older ones); None if unknown."""
        return pop_snapshot(self.snapshots, end_offset)


def fio_path_parts(path: Path) -> tuple[str, str]:
    """``(prefix, job)`` from a histogram log name.

    Raises:
        ValueError: the name is not ``<prefix>_clat_hist.<job>.log[.<host>][.gz]``.
    """
    return fio_prefix_for(path), fio_job_for(path)
