"""Tailing sysstat disk data: ``sadf -d`` CSV lines, or whole sadc binary / ``sadf -j`` files.

Samples are downsampled exactly (:mod:`pipeline.reducers.downsample`) before they become
``metrics-sysstat.diskio`` documents, so one document derives from several lines: each
document refers to every line whose sample it holds, and a line is acknowledged when that
document is. The registry therefore never commits past a line whose interval is still open:
after a restart those lines are read again and the interval is rebuilt whole (a document that
was already indexed comes back as a 409: its id is host, device and interval end).

Bad input goes to the dead-letter area: a bad CSV line as itself; a sample whose time overlaps
time of its device already read (the clock stepped back, rows repeated or out of order) too,
since its interval would get the id of a document already indexed and be dropped as a
duplicate. Time a clock jumped over is not covered, so samples that fill it are indexed. A
whole-file input (sadc, ``sadf -j``) that cannot be read at all (sadf refuses it: truncated,
damaged, of another sysstat version; invalid JSON) is quarantined whole; its rejected parts
are kept as one dead letter whose reason names each part (JSON path, or line of sadf's output)
while its good records are indexed. A ``sadf -j`` file cut before the end of its document is
kept as such a dead letter (it may still be being written) and read again when it grows.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
from collections import defaultdict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from pipeline.formats.sysstat.decode import SadfCsvParser, parse_sadf_csv
from pipeline.formats.sysstat.encode import diskio_document
from pipeline.formats.sysstat.sadc import convert_sadc
from pipeline.formats.sysstat.sadf_json import parse_sadf_json
from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import utc_text
from pipeline.records.core import DiskSample, Document, LineRef, RestartMark
from pipeline.reducers.downsample import Downsampler
from pipeline.shippers.results import BadLine, LineResult
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_complete_lines
from pipeline.sink.documents import DocContext

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
        work_dir: where a sadc file of an earlier sysstat format is converted (``sadf -c``).
    """

    key: str
    path: str
    kind: SysstatKind
    interval_s: float
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    work_dir: str | None = None
    snapshots: dict[int, str] = field(default_factory=dict)
    _parser: SadfCsvParser | None = None
    _down: Downsampler | None = None
    _refs: dict[tuple[str, str], deque[tuple[float, LineRef]]] = field(
        default_factory=lambda: defaultdict(deque)
    )
    _covered: dict[tuple[str, str], Coverage] = field(default_factory=dict)
    _rejection: ParseError | None = None
    _coarse: set[str] = field(default_factory=set)

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
        self._covered.clear()
        self._rejection = None
        self.snapshots.clear()
        self.exhausted = False

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines; a whole-file input is converted and returned at once.

        A sadc file sadf refuses is returned as one pseudo-line whose :meth:`process` raises
        sadf's :class:`ParseError`, so the caller quarantines the file like any unreadable one.
        """
        if self.kind == "sadc":
            try:
                data = convert_sadc(self.path, work_dir=self.work_dir)
            except ParseError as err:
                if self.offset > 0:
                    return TailChunk((), (), self.offset)
                self._rejection = err
                size = max(os.stat(self.path).st_size, 1)
                return TailChunk((b"",), (size,), size)
            return _whole(data, self.offset)
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

        Raises:
            ParseError: a whole-file input that cannot be read at all (the caller quarantines
                the file).
        """
        if self._rejection is not None:
            err, self._rejection = self._rejection, None
            raise err
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
        """All of a whole-file input: its documents, and its rejected parts as one dead letter.

        The dead letter comes first, as its own pseudo-line: its line is the first rejected
        line of the file (1 when the place is a JSON path or a line of sadf's output; the
        reason names the place in any case). The documents follow on the pseudo-line of the
        whole file. A JSON file whose document does not end (cut, or still being written) is
        such a dead letter too, not quarantined: when it changes it is read again, whole.
        Samples are checked for overlaps within the file only, since a file that changed is
        read again whole.

        Raises:
            ParseError: nothing in the file could be read (the caller quarantines it).
        """
        records, raw, unfinished = self._whole_records(chunk)
        errors = [r for r in records if isinstance(r, ParseError)]
        good = [r for r in records if not isinstance(r, ParseError)]
        if errors and not good and not unfinished:
            raise _combined(self.path, errors)
        read_before, self.line_no = self.line_no, self.line_no + len(chunk.lines)
        self.offset = chunk.next_offset
        if errors:
            err = _combined(self.path, errors)
            # a file read again (it changed) goes on counting lines after its first reading
            at = max(err.line_no, 1, read_before + 1)
            bad_ref = LineRef(self.key, self.path, at, chunk.next_offset - 1)
            self.line_no = max(self.line_no, bad_ref.line_no + 1)
            self.snapshots[bad_ref.end_offset] = ""
            yield LineResult(bad_ref, bad=BadLine(bad_ref, b"\n".join(raw), err))
        ref = LineRef(self.key, self.path, self.line_no, chunk.next_offset)
        docs = self._whole_documents(good, ref, ctx, created_ms)
        self.snapshots[chunk.next_offset] = ""
        yield LineResult(ref, docs)

    def _whole_records(
        self, chunk: TailChunk
    ) -> tuple[list[DiskSample | RestartMark | ParseError], list[bytes], bool]:
        """A whole-file input's records (overlapping samples as errors), the raw lines of its
        rejected CSV rows, and whether it is a JSON document that does not end."""
        data = b"\n".join(chunk.lines)
        records: list[DiskSample | RestartMark | ParseError]
        first_line = self.line_no + 1
        raw: list[bytes] = []
        self._covered.clear()
        unfinished = False
        if self.kind == "sadf" and data.lstrip()[:1] == b"{":
            records = list(parse_sadf_json(data, self.path))
            unfinished = not data.rstrip().endswith(b"}")
        else:
            records = list(parse_sadf_csv(chunk.lines, self.path, first_line))
            bad_at = [r.line_no - first_line for r in records if isinstance(r, ParseError)]
            raw = [chunk.lines[i] for i in bad_at]
            if self.kind == "sadc":
                records = [_from_sadf(r) if isinstance(r, ParseError) else r for r in records]
        return [self._unread(r, self.path, 0) for r in records], raw, unfinished

    def _whole_documents(
        self,
        good: list[DiskSample | RestartMark],
        ref: LineRef,
        ctx: DocContext,
        created_ms: float,
    ) -> tuple[Document, ...]:
        """The downsampled documents of a whole-file input, its last interval flushed."""
        assert self._down is not None
        docs: list[Document] = []
        for r in good:
            self._say_coarse(r)
            docs += [diskio_document(ctx, s, (ref,), created_ms) for s in self._down.add(r)]
        docs += [diskio_document(ctx, s, (ref,), created_ms) for s in self._down.flush()]
        return tuple(docs)

    def _unread(
        self, rec: DiskSample | RestartMark | ParseError, path: str, line_no: int
    ) -> DiskSample | RestartMark | ParseError:
        """``rec``, or a :class:`ParseError` for a sample whose time overlaps time of its
        device read before: its interval would get the id of a document already indexed (the
        clock stepped back, rows repeated or out of order)."""
        if not isinstance(rec, DiskSample):
            return rec
        covered = self._covered.setdefault((rec.host, rec.device), Coverage())
        start = rec.end_s - rec.interval_s
        overlap = covered.overlap(start, rec.end_s)
        if overlap is not None:
            return ParseError(
                path,
                line_no,
                f"{rec.host}/{rec.device} sample of {utc_text(start)} to {utc_text(rec.end_s)} "
                f"overlaps the time from {utc_text(overlap[0])} to {utc_text(overlap[1])} read "
                "before (the clock stepped back, or rows repeated or out of order)",
            )
        covered.add(start, rec.end_s)
        return rec

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
        records = [self._unread(r, ref.path, ref.line_no) for r in records]
        bad = next((r for r in records if isinstance(r, ParseError)), None)
        if bad is not None:
            return LineResult(ref, bad=BadLine(ref, raw, bad))
        docs: list[Document] = []
        for rec in records:
            if isinstance(rec, ParseError):
                continue
            self._say_coarse(rec)
            finished = self._down.add(rec)
            if isinstance(rec, DiskSample):
                self._refs[(rec.host, rec.device)].append((rec.end_s, ref))
            for s in finished:
                docs.append(diskio_document(ctx, s, self._take_refs(s), created_ms))
        return LineResult(
            ref, tuple(docs), pending=sum(1 for r in records if isinstance(r, DiskSample))
        )

    def flush_complete(self, ctx: DocContext, created_ms: float) -> tuple[Document, ...]:
        """The documents of the open target intervals no later line can add to (each LUN's
        last, when its last sample ends on the grid: :meth:`Downsampler.flush_complete`), for
        the end of ``iolens run --once``. The document is the one the next line would have
        made, so reading on later gives no other."""
        if self.compressed or self._down is None:
            return ()
        return tuple(
            diskio_document(ctx, s, self._take_refs(s), created_ms)
            for s in self._down.flush_complete()
        )

    def held(self) -> list[LineRef]:
        """The lines whose samples wait in an open target interval."""
        return [ref for queue in self._refs.values() for _, ref in queue]

    def held_lines(self) -> int:
        """How many lines :meth:`held` holds."""
        return sum(len(q) for q in self._refs.values())

    def _say_coarse(self, rec: DiskSample | RestartMark) -> None:
        """Say once per host that its samples are coarser than the downsampling interval: they
        are indexed as they are, and only ``iolens diagnose`` compares them."""
        if not isinstance(rec, DiskSample) or rec.interval_s <= self.interval_s:
            return
        if rec.host in self._coarse:
            return
        self._coarse.add(rec.host)
        log.warning(
            "%s: %s samples every %g s, coarser than the downsampling interval (peer.downsample_s "
            "= %g s): indexed at %g s; the scheduled peer comparison compares %g s samples only "
            "(iolens diagnose compares these at their own interval)",
            self.path,
            rec.host,
            rec.interval_s,
            self.interval_s,
            rec.interval_s,
            self.interval_s,
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


def _from_sadf(err: ParseError) -> ParseError:
    """An error in the CSV sadf made of a sadc file: the binary file has no lines, so the
    reason names the line of sadf's output and the error none (0)."""
    return ParseError(err.path, 0, f"line {err.line_no} of sadf's output: {err.reason}")


def _combined(path: str, errors: list[ParseError]) -> ParseError:
    """One error for the rejected parts of a whole-file input: the first one's line, and
    every part's reason (a JSON path or line names each place)."""
    if len(errors) == 1:
        return errors[0]
    reasons = "; ".join(e.reason for e in errors)
    return ParseError(path, errors[0].line_no, f"{len(errors)} parts rejected: {reasons}")


class Coverage:
    """Time spans ``(start, end]`` (Unix seconds) already read for one device, merged.

    Samples normally come in order and each starts where the previous one ended, so the spans
    merge into one; a clock jump leaves a gap, which samples may still fill.
    """

    def __init__(self) -> None:
        self._starts: list[float] = []
        self._ends: list[float] = []

    def overlap(self, start: float, end: float) -> tuple[float, float] | None:
        """A span read before that overlaps ``(start, end]``, or None."""
        i = bisect.bisect_left(self._starts, end)
        if i > 0 and self._ends[i - 1] > start:
            return self._starts[i - 1], self._ends[i - 1]
        return None

    def add(self, start: float, end: float) -> None:
        """Record ``(start, end]`` (it overlaps no span: see :meth:`overlap`), merging it with
        the spans it touches."""
        i = bisect.bisect_left(self._starts, start)
        if i > 0 and self._ends[i - 1] >= start:
            i -= 1
            start = self._starts[i]
        else:
            self._starts.insert(i, start)
            self._ends.insert(i, end)
        self._ends[i] = max(self._ends[i], end)
        if i + 1 < len(self._starts) and self._starts[i + 1] <= self._ends[i]:
            self._ends[i] = max(self._ends[i], self._ends.pop(i + 1))
            self._starts.pop(i + 1)
