"""The chain of one ``sadf -d`` CSV file: a line -> a disk sample or restart record (decode,
under the header in force) -> exact downsampling to ``peer.downsample_s``, checked for time read
before (reduce) -> ``metrics-sysstat.diskio`` documents (encode).

Samples are downsampled exactly (:mod:`pipeline.reducers.downsample`) before they become
documents, so one document derives from several lines: each document refers to every line
whose sample it holds, and a line waits for that document (:class:`Held`). The registry
therefore never commits past a line whose interval is still open: after a restart those lines
are read again and the interval is rebuilt whole (a document that was already indexed comes
back as a 409: its id is host, device and interval end). The cursor holds only the header.

A sample whose time overlaps time of its device already read (the clock stepped back, rows
repeated or out of order) is a bad line, since its interval would get the id of a document
already indexed and be dropped as a duplicate. Time a clock jumped over is not covered, so
samples that fill it are indexed.
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Sequence

from pipeline.formats.sysstat.coverage import CoverageCheck
from pipeline.formats.sysstat.decode import SadfCsvParser
from pipeline.formats.sysstat.encode import diskio_document
from pipeline.records.core import DiskSample, Document, LineRef, RestartMark
from pipeline.reducers.downsample import Downsampler
from pipeline.shippers.line_tail import WAITING, Held, TableChain, TableDecoder
from pipeline.shippers.results import NOTHING, Released
from pipeline.sink.documents import DocContext

log = logging.getLogger(__name__)


class SadfChain(TableChain):
    """decode -> downsample -> encode of one ``sadf -d`` CSV file (a
    :class:`~pipeline.shippers.line_tail.LineChain`).

    Args:
        path: the file.
        interval_s: downsampling interval (s, ``peer.downsample_s``).
        once: the run reads what is there and ends (``iolens run --once``): at its end the
            intervals no later line can add to are delivered.
    """

    def __init__(self, path: str, interval_s: float, *, once: bool = False) -> None:
        super().__init__(path)
        self.interval_s, self.once = interval_s, once
        self._down = Downsampler(interval_s)
        self._refs: dict[tuple[str, str], deque[tuple[float, LineRef]]] = defaultdict(deque)
        self._unread = CoverageCheck(path)
        self._coarse = CoarseHosts(path, interval_s)

    def decoder(self, header: str | None) -> TableDecoder:
        """``sadf -d`` lines under ``header``."""
        return SadfCsvParser(self.path, header)

    def resume_state(self, state: object | None) -> None:
        """From a file's start (None): a fresh reducer; otherwise the lines after the cursor
        are those of intervals not yet delivered, so the reducer starts fresh too."""
        self._down = Downsampler(self.interval_s)
        self._refs.clear()
        self._unread = CoverageCheck(self.path)

    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document] | Held | str:
        """The documents of the intervals ``record`` closes; the line of a sample waits for
        the document of its own interval (one acknowledgement)."""
        assert isinstance(record, DiskSample | RestartMark)
        refused = self._unread.overlap(record, ref.line_no)
        if refused is not None:
            return refused.reason
        self._coarse.say(record)
        finished = self._down.add(record)
        if isinstance(record, DiskSample):
            self._refs[(record.host, record.device)].append((record.end_s, ref))
        sample = isinstance(record, DiskSample)
        if not finished:
            return WAITING if sample else ()
        docs = tuple(diskio_document(ctx, s, self._take_refs(s), created_ms) for s in finished)
        return Held(docs, pending=int(sample))

    def idle(self, now_s: float, ctx: DocContext, final: bool) -> Released:
        """When the run ends: with ``--once`` the open intervals no later line can add to (each
        LUN's last, when its last sample ends on the grid:
        :meth:`Downsampler.flush_complete`) — the documents the next line would have made, so
        reading on later gives no other; what stays open is said, and read again at the next
        start."""
        if not final or not self.held_lines():
            return NOTHING
        released = NOTHING
        if self.once:
            docs = self._down.flush_complete()
            released = Released(
                tuple(diskio_document(ctx, s, self._take_refs(s), now_s * 1000) for s in docs)
            )
        if self.held_lines():
            log.info(
                "%s: %d line(s) of %g s intervals still open are held (an interval ends "
                "with the first sample after it); they are read again at the next start",
                self.path,
                self.held_lines(),
                self.interval_s,
            )
        return released

    def held(self) -> list[LineRef]:
        """The lines whose samples wait in an open target interval."""
        return [ref for queue in self._refs.values() for _, ref in queue]

    def held_lines(self) -> int:
        """How many lines wait in an open target interval."""
        return sum(len(q) for q in self._refs.values())

    def _take_refs(self, s: DiskSample) -> tuple[LineRef, ...]:
        """The lines whose samples the downsampled ``s`` holds (ends up to ``s.end_s``)."""
        queue = self._refs[(s.host, s.device)]
        refs = []
        while queue and queue[0][0] <= s.end_s + 1e-9:
            refs.append(queue.popleft()[1])
        return tuple(refs)


class CoarseHosts:
    """Says once per host that its samples are coarser than the downsampling interval: they
    are indexed as they are, and only ``iolens diagnose`` compares them.

    Args:
        path: the file; interval_s: the downsampling interval (s).
    """

    def __init__(self, path: str, interval_s: float) -> None:
        self.path, self.interval_s = path, interval_s
        self._said: set[str] = set()

    def say(self, rec: DiskSample | RestartMark) -> None:
        """Warn when ``rec`` is the first sample of its host coarser than the interval."""
        if not isinstance(rec, DiskSample) or rec.interval_s <= self.interval_s:
            return
        if rec.host in self._said:
            return
        self._said.add(rec.host)
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
