"""Time already read per device of a sysstat file: a sample whose time overlaps it is refused,
since its interval would get the id of a document already indexed (the clock stepped back,
rows repeated or out of order) and be dropped as a duplicate. Time a clock jumped over is not
covered, so samples that fill it are indexed."""

from __future__ import annotations

import bisect

from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import utc_text
from pipeline.records.core import DiskSample, RestartMark


class CoverageCheck:
    """The spans read of every device of one file.

    Args:
        path: the file (for the reasons given).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._covered: dict[tuple[str, str], Coverage] = {}

    def overlap(self, rec: DiskSample | RestartMark, line_no: int) -> ParseError | None:
        """Why ``rec`` (of line ``line_no``; 0: of a whole file) is refused (its time overlaps
        time of its device read before), or None after recording its span (a restart record
        covers nothing)."""
        if not isinstance(rec, DiskSample):
            return None
        covered = self._covered.setdefault((rec.host, rec.device), Coverage())
        start = rec.end_s - rec.interval_s
        overlap = covered.overlap(start, rec.end_s)
        if overlap is not None:
            return ParseError(
                self.path,
                line_no,
                f"{rec.host}/{rec.device} sample of {utc_text(start)} to {utc_text(rec.end_s)} "
                f"overlaps the time from {utc_text(overlap[0])} to {utc_text(overlap[1])} read "
                "before (the clock stepped back, or rows repeated or out of order)",
            )
        covered.add(start, rec.end_s)
        return None


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
