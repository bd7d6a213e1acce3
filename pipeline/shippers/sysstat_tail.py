"""Tailing sysstat disk data: ``sadf -d`` CSV lines, or whole sadc binary / ``sadf -j`` files.

Samples are downsampled exactly (:mod:`pipeline.reducers.downsample`) before they become
``metrics-sysstat.diskio`` documents, so one document derives from several lines: each
document refers to every line whose sample it holds, and a line is acknowledged when that
document is. The registry therefore never commits past a line whose interval is still open:
after a restart those lines are read again and the interval is rebuilt whole (a document that
was already indexed comes back as a 409: its id is host, device and interval end).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from pipeline.parsers.errors import ParseError
from pipeline.parsers.sysstat import SadfCsvParser, parse_sadf_csv, parse_sadf_json
from pipeline.records import DiskSample, Document, LineRef, RestartMark
from pipeline.reducers.downsample import Downsampler
from pipeline.shippers.fio_tail import BadLine, LineResult
from pipeline.shippers.sadc import convert_sadc
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_complete_lines
from pipeline.sink.documents import DocContext, diskio_document

log = logging.getLogger(__name__)

SysstatKind = Literal["sadf", "sadc"]


@dataclass
class SysstatTail:
    """Read state of one sysstat file.

    Attributes:
        key: registry key of the file.
        path: current path.
        kind: ``sadf`` (``sadf -d`` CSV tailed by line, or a ``sadf -j`` JSON file read whole)
            or ``sadc`` (a binary activity file converted with ``sadf`` once complete).
        interval_s: downsampling interval (s).
        offset: next byte to read; line_no: lines read.
    """

    key: str
    path: str
    kind: SysstatKind
    interval_s: float
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    snapshots: dict[int, str] = field(default_factory=dict)
    _parser: SadfCsvParser | None = None
    _down: Downsampler | None = None
    _refs: dict[tuple[str, str], deque[tuple[float, LineRef]]] = field(
        default_factory=lambda: defaultdict(deque)
    )

    @property
    def compressed(self) -> bool:
        """Read whole (binary or JSON), not by line."""
        return self.kind == "sadc" or self.path.endswith(".json")

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line; the cursor holds the CSV header in force there."""
        self.offset, self.line_no = offset, line_no
        header = json.loads(cursor).get("header") if cursor else None
        self._parser = SadfCsvParser(self.path, header)

    def cursor(self) -> str | None:
        """JSON state stored with a committed line: the CSV header in force after it."""
        header = self._parser.header_line if self._parser else None
        return json.dumps({"header": header}) if header else None

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        self.offset = self.line_no = 0
        self._parser, self._down = None, None
        self._refs.clear()
        self.snapshots.clear()
        self.exhausted = False

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines; a whole-file input is converted and returned at once."""
        if self.kind == "sadc":
            return _whole(convert_sadc(self.path), self.offset)
        if self.compressed:
            with open(self.path, "rb") as fh:
                return _whole(fh.read(), self.offset)
        return read_complete_lines(self.path, self.offset, max_bytes)

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for a line (and drop older ones)."""
        return pop_snapshot(self.snapshots, end_offset)

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """Parse, downsample and turn finished intervals into documents, line by line.

        A whole-file input is flushed at its end (its last interval is complete).
        """
        if self._parser is None:
            self._parser = SadfCsvParser(self.path)
        if self._down is None:
            self._down = Downsampler(self.interval_s)
        if self.compressed and chunk.lines:
            yield from self._process_whole(chunk, ctx, created_ms)
            return
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            self.offset = end
            ref = LineRef(self.key, self.path, self.line_no, end)
            records = list(self._parser.feed([raw], self.line_no))
            yield self._line_result(ref, raw, records, ctx, created_ms)

    def _process_whole(
        self, chunk: TailChunk, ctx: DocContext, created_ms: float
    ) -> Iterator[LineResult]:
        data = b"\n".join(chunk.lines)
        records: list[DiskSample | RestartMark | ParseError]
        if self.kind == "sadf" and data.lstrip()[:1] == b"{":
            records = list(parse_sadf_json(data, self.path))
        else:
            records = list(parse_sadf_csv(chunk.lines, self.path, self.line_no + 1))
        self.line_no += len(chunk.lines)
        self.offset = chunk.next_offset
        ref = LineRef(self.key, self.path, self.line_no, chunk.next_offset)
        errors = [r for r in records if isinstance(r, ParseError)]
        for err in errors:
            log.warning("%s (skipped)", err)
        assert self._down is not None
        docs: list[Document] = []
        for r in records:
            if not isinstance(r, ParseError):
                docs += [diskio_document(ctx, s, (ref,), created_ms) for s in self._down.add(r)]
        docs += [diskio_document(ctx, s, (ref,), created_ms) for s in self._down.flush()]
        self.snapshots[chunk.next_offset] = ""
        yield LineResult(ref, tuple(docs))

    def _line_result(
        self,
        ref: LineRef,
        raw: bytes,
        records: list[DiskSample | RestartMark | ParseError],
        ctx: DocContext,
        created_ms: float,
    ) -> LineResult:
        assert self._down is not None
        self.snapshots[ref.end_offset] = self.cursor() or ""
        bad = next((r for r in records if isinstance(r, ParseError)), None)
        if bad is not None:
            return LineResult(ref, bad=BadLine(ref, raw, bad))
        docs: list[Document] = []
        for rec in records:
            if isinstance(rec, ParseError):
                continue
            finished = self._down.add(rec)
            if isinstance(rec, DiskSample):
                self._refs[(rec.host, rec.device)].append((rec.end_s, ref))
            for s in finished:
                docs.append(diskio_document(ctx, s, self._take_refs(s), created_ms))
        return LineResult(
            ref, tuple(docs), pending=sum(1 for r in records if isinstance(r, DiskSample))
        )

    def _take_refs(self, s: DiskSample) -> tuple[LineRef, ...]:
        """The lines whose samples the downsampled ``s`` holds (ends up to ``s.end_s``)."""
        queue = self._refs[(s.host, s.device)]
        refs = []
        while queue and queue[0][0] <= s.end_s + 1e-9:
            refs.append(queue.popleft()[1])
        return tuple(refs)


def _whole(data: bytes, offset: int) -> TailChunk:
    """All of a whole-file input as lines, once (nothing new after the first read)."""
    if offset >= len(data) and offset > 0:
        return TailChunk((), (), offset)
    lines = tuple(data.splitlines())
    return (
        TailChunk(lines, (len(data),) * len(lines), len(data))
        if lines
        else TailChunk((), (), offset)
    )
