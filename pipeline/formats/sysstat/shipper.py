"""Shipping sysstat data: ``sadf -d`` CSV (tailed) or ``sadf -j`` JSON, and binary ``sadc``
files (read whole) — see :mod:`pipeline.formats.sysstat.tail`."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from pipeline.formats.sysstat.tail import SysstatKind, SysstatTail
from pipeline.shippers.interface import Idled, NewFile, Shipper, Tail
from pipeline.shippers.results import Released

log = logging.getLogger(__name__)


class SadfShipper(Shipper):
    """``sadf`` output files."""

    writes = ("metrics-sysstat.diskio",)

    kind: SysstatKind = "sadf"
    final_line = True

    def open(self, file: NewFile) -> Tail:
        """A tail on a sysstat file, samples downsampled to ``peer.downsample_s``."""
        state = file.register()
        downsample_s = self.ctx.settings.peer.downsample_s
        work_dir = str(Path(self.ctx.state_dir) / "sadc-convert")
        tail = SysstatTail(file.key, file.path, self.kind, downsample_s, work_dir=work_dir)
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail

    def idle(self, tails: Sequence[Tail], now_s: float, final: bool) -> Iterator[Idled]:
        """When the run ends, each CSV's open intervals (an interval ends with the first sample
        after it): with ``--once``, those no later line can add to are delivered (the last
        interval of a recording that ends on the grid); what stays open is said, and read
        again at the next start."""
        if not final:
            return
        for tail in tails:
            if not isinstance(tail, SysstatTail) or not tail.held_lines():
                continue
            if self.ctx.once:
                docs = tail.flush_complete(self.ctx.doc_ctx, now_s * 1000)
                yield Idled(tail.key, Released(docs))
            if tail.held_lines():
                log.info(
                    "%s: %d line(s) of %g s intervals still open are held (an interval ends "
                    "with the first sample after it); they are read again at the next start",
                    tail.path,
                    tail.held_lines(),
                    tail.interval_s,
                )


class SadcShipper(SadfShipper):
    """Binary ``sadc`` data files, converted with ``sadf`` once complete."""

    whole_file = True
    kind: SysstatKind = "sadc"
