"""The chain of a whole sysstat file: a binary sadc file (converted with ``sadf`` once complete)
or a ``sadf -j`` JSON document -> disk samples -> downsampled ``metrics-sysstat.diskio``
documents, the last interval flushed (the file is complete).

A file that cannot be read at all (sadf refuses it: truncated, damaged, of another sysstat
version; invalid JSON) is quarantined whole; its rejected parts are kept as one dead letter
whose reason names each part (JSON path, or line of sadf's output) while its good records are
indexed. A ``sadf -j`` file cut before the end of its document is kept as such a dead letter (it
may still be being written) and read again when it grows. Samples are checked for overlaps
within the file only, since a file that changed is read again whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pipeline.formats.sysstat.chain import CoarseHosts
from pipeline.formats.sysstat.coverage import CoverageCheck
from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.formats.sysstat.encode import diskio_document
from pipeline.formats.sysstat.sadc import convert_sadc
from pipeline.formats.sysstat.sadf_json import parse_sadf_json
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DiskSample, Document, LineRef, RestartMark
from pipeline.reducers.downsample import Downsampler
from pipeline.shippers.results import BadLine, LineResult
from pipeline.shippers.whole_file import FileChain, WholeRead
from pipeline.sink.documents import DocContext

Record = DiskSample | RestartMark | ParseError


class SysstatFileChain(FileChain):
    """decode -> downsample -> encode of a whole sadc or ``sadf -j`` file (a
    :class:`~pipeline.shippers.whole_file.FileChain`).

    Args:
        sadc: a binary sadc file (else ``sadf`` output read whole: JSON, or CSV).
        interval_s: downsampling interval (s, ``peer.downsample_s``).
        work_dir: where a sadc file of an earlier sysstat format is converted (``sadf -c``).
    """

    rereads: ClassVar[bool] = True

    def __init__(self, *, sadc: bool, interval_s: float, work_dir: str | None = None) -> None:
        self.sadc, self.interval_s, self.work_dir = sadc, interval_s, work_dir
        self._data = b""
        self._coarse: CoarseHosts | None = None

    def extent(self, path: str) -> int:
        """The size of the file's text (sadf's output for a sadc file, converted now).

        Raises:
            ParseError: sadf refuses the sadc file.
        """
        if self.sadc:
            self._data = convert_sadc(path, work_dir=self.work_dir)
        else:
            with open(path, "rb") as fh:
                self._data = fh.read()
        return len(self._data) if self._data.splitlines() else 0

    def encode(self, read: WholeRead, ctx: DocContext, created_ms: float) -> Sequence[LineResult]:
        """All of the file: its rejected parts as one dead letter, first, on its own
        pseudo-line (the first rejected line of the file; 1 when the place is a JSON path or
        a line of sadf's output: the reason names the place in any case), then the documents
        on the pseudo-line of the whole file.

        Raises:
            ParseError: nothing in the file could be read (the caller quarantines it).
        """
        lines = self._data[: read.extent].splitlines()
        records, raw, unfinished = self._records(read, lines)
        errors = [r for r in records if isinstance(r, ParseError)]
        good = [r for r in records if not isinstance(r, ParseError)]
        if errors and not good and not unfinished:
            raise _combined(read.path, errors)
        line_no = read.line_no + len(lines)
        out: list[LineResult] = []
        if errors:
            err = _combined(read.path, errors)
            # a file read again (it changed) goes on counting lines after its first reading
            at = max(err.line_no, 1, read.line_no + 1)
            bad_ref = LineRef(read.key, read.path, at, read.extent - 1)
            line_no = max(line_no, at + 1)
            out.append(LineResult(bad_ref, bad=BadLine(bad_ref, b"\n".join(raw), err)))
        ref = LineRef(read.key, read.path, line_no, read.extent)
        out.append(LineResult(ref, self._documents(read.path, good, ref, ctx, created_ms)))
        return out

    def _records(
        self, read: WholeRead, lines: list[bytes]
    ) -> tuple[list[Record], list[bytes], bool]:
        """The file's records (overlapping samples as errors), the raw lines of its rejected
        CSV rows, and whether it is a JSON document that does not end."""
        data = b"\n".join(lines)
        first_line = read.line_no + 1
        raw: list[bytes] = []
        unfinished = False
        records: list[Record]
        if not self.sadc and data.lstrip()[:1] == b"{":
            records = list(parse_sadf_json(data, read.path))
            unfinished = not data.rstrip().endswith(b"}")
        else:
            records = list(parse_sadf_csv(lines, read.path, first_line))
            bad_at = [r.line_no - first_line for r in records if isinstance(r, ParseError)]
            raw = [lines[i] for i in bad_at]
            if self.sadc:
                records = [_from_sadf(r) if isinstance(r, ParseError) else r for r in records]
        check = CoverageCheck(read.path)
        return [_checked(check, r) for r in records], raw, unfinished

    def _documents(
        self,
        path: str,
        good: list[DiskSample | RestartMark],
        ref: LineRef,
        ctx: DocContext,
        created_ms: float,
    ) -> tuple[Document, ...]:
        """The downsampled documents of the file, its last interval flushed."""
        down = Downsampler(self.interval_s)
        if self._coarse is None:
            self._coarse = CoarseHosts(path, self.interval_s)
        samples: list[DiskSample] = []
        for r in good:
            self._coarse.say(r)
            samples += down.add(r)
        samples += down.flush()
        return tuple(diskio_document(ctx, s, (ref,), created_ms) for s in samples)


def _checked(check: CoverageCheck, rec: Record) -> Record:
    """``rec``, or why it is refused: its time overlaps time of its device read before."""
    if isinstance(rec, ParseError):
        return rec
    refused = check.overlap(rec, 0)
    return rec if refused is None else refused


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
