"""Tailing Slurm ``sacct --parsable2`` output and LMT per-OST CSV exports.

Both are tables with a header line, appended to by periodic exports, so they are tailed by
line (only complete lines). Each Slurm row becomes a ``logs-slurm.job`` document; each LMT row
is one OST's cumulative counters at one time step, which the per-OST reducer
(:class:`pipeline.reducers.lmt.OstDeltaReducer`) turns into the interval since that OST's
previous row: a ``metrics-lmt.ost`` document. A row earlier than its OST's previous one (a
clock step back, rows of an older export) closes no interval, so it is kept in the dead-letter
area with both times. The cursor stored with each committed line holds the header in force
and, for LMT, every OST's last counters, so a restart continues exactly there; a document
derives from one line only, and its deterministic id makes a replay a 409.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import tzinfo
from typing import Literal

from pipeline.parsers.errors import ParseError
from pipeline.parsers.lmt import LmtCsvParser, LmtSample
from pipeline.parsers.slurm import SacctParser, SlurmJob
from pipeline.records import Document, LineRef
from pipeline.reducers.lmt import OstDeltaReducer
from pipeline.shippers.results import BadLine, LineResult
from pipeline.shippers.tailer import TailChunk, pop_snapshot, read_complete_lines
from pipeline.sink.documents import DocContext
from pipeline.sink.hpc_documents import lmt_ost_document, slurm_job_document

log = logging.getLogger(__name__)

TableKind = Literal["slurm", "lmt"]


@dataclass
class TableTail:
    """Read state of one Slurm or LMT file (a :class:`~pipeline.shippers.formats.base.Tail`).

    Attributes:
        key: registry key; path: current path.
        kind: ``slurm`` or ``lmt``.
        tz: time zone of the local times in the file (sacct prints the host's local time; LMT
            stores the database server's).
        offset: next byte to read; line_no: lines read.
    """

    key: str
    path: str
    kind: TableKind
    tz: tzinfo
    offset: int = 0
    line_no: int = 0
    exhausted: bool = False
    compressed: bool = False
    snapshots: dict[int, str] = field(default_factory=dict)
    _parser: SacctParser | LmtCsvParser | None = None
    _reducer: OstDeltaReducer = field(default_factory=OstDeltaReducer)

    def _new_parser(self, header: str | None) -> SacctParser | LmtCsvParser:
        if self.kind == "slurm":
            return SacctParser(self.path, header, self.tz)
        return LmtCsvParser(self.path, header, self.tz)

    def resume(self, offset: int, line_no: int, cursor: str | None) -> None:
        """Continue after a committed line with the cursor stored with it."""
        self.offset, self.line_no = offset, line_no
        state = json.loads(cursor) if cursor else {}
        self._parser = self._new_parser(state.get("header"))
        if state.get("reducer") is not None:
            self._reducer = OstDeltaReducer.from_state(state["reducer"])

    def cursor(self) -> str:
        """JSON state after the last line processed: header, and LMT's per-OST counters."""
        header = self._parser.header_line if self._parser else None
        state: dict[str, object] = {"header": header}
        if self.kind == "lmt":
            state["reducer"] = self._reducer.state()
        return json.dumps(state)

    def restart(self) -> None:
        """Start over at byte 0 after a truncation."""
        self.offset = self.line_no = 0
        self._parser = None
        self._reducer = OstDeltaReducer()
        self.snapshots.clear()
        self.exhausted = False

    def read(self, max_bytes: int) -> TailChunk:
        """The next complete lines."""
        return read_complete_lines(self.path, self.offset, max_bytes)

    def take_snapshot(self, end_offset: int) -> str | None:
        """Pop the cursor stored for a line (and drop older ones)."""
        return pop_snapshot(self.snapshots, end_offset)

    def process(self, chunk: TailChunk, ctx: DocContext, created_ms: float) -> Iterator[LineResult]:
        """Parse each line into its document (or a bad-line record)."""
        if self._parser is None:
            self._parser = self._new_parser(None)
        for raw, end in zip(chunk.lines, chunk.end_offsets, strict=True):
            self.line_no += 1
            self.offset = end
            ref = LineRef(self.key, self.path, self.line_no, end)
            docs: list[Document] = []
            bad: ParseError | None = None
            for rec in self._parser.feed([raw], self.line_no):
                if isinstance(rec, ParseError):
                    bad = rec
                elif isinstance(rec, SlurmJob):
                    docs.append(slurm_job_document(ctx, rec, (ref,), created_ms))
                elif isinstance(rec, LmtSample):
                    refused = self._reducer.refusal(rec)
                    if refused is not None:
                        bad = ParseError(self.path, self.line_no, refused)
                        continue
                    iv = self._reducer.add(rec)
                    if iv is not None:
                        docs.append(lmt_ost_document(ctx, iv, (ref,), created_ms))
            self.snapshots[end] = self.cursor()
            if bad is not None:
                yield LineResult(ref, bad=BadLine(ref, raw, bad))
            else:
                yield LineResult(ref, tuple(docs))
