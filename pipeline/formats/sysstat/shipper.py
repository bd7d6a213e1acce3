"""Shipping sysstat data: ``sadf -d`` CSV tailed by line (:mod:`pipeline.formats.sysstat.chain`),
``sadf -j`` JSON and binary ``sadc`` files read whole (:mod:`pipeline.formats.sysstat.whole`)."""

from __future__ import annotations

from pathlib import Path

from pipeline.formats.sysstat.chain import SadfChain
from pipeline.formats.sysstat.whole import SysstatFileChain
from pipeline.shippers.interface import NewFile, Tail
from pipeline.shippers.line_tail import LineChain, LineShipper
from pipeline.shippers.whole_file import WholeFileTail


class SadfShipper(LineShipper):
    """``sadf`` output files: ``sadf -d`` CSV (tailed), or ``sadf -j`` JSON (``*.json``, read
    whole); samples downsampled to ``peer.downsample_s``."""

    writes = ("metrics-sysstat.diskio",)

    def chain_for(self, file: NewFile) -> LineChain:
        """The CSV chain; with ``--once`` the intervals complete at the end are delivered."""
        return SadfChain(file.path, self.ctx.settings.peer.downsample_s, once=self.ctx.once)

    def open(self, file: NewFile) -> Tail:
        """A tail on a CSV file, or a whole-file reader of a JSON one."""
        if not file.path.endswith(".json"):
            return super().open(file)
        return self.whole(file, sadc=False)

    def whole(self, file: NewFile, *, sadc: bool) -> Tail:
        """A reader of a whole sysstat file, resumed from its registry entry."""
        state = file.register()
        work_dir = str(Path(self.ctx.state_dir) / "sadc-convert")
        downsample_s = self.ctx.settings.peer.downsample_s
        chain = SysstatFileChain(sadc=sadc, interval_s=downsample_s, work_dir=work_dir)
        tail = WholeFileTail(file.key, file.path, chain)
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail


class SadcShipper(SadfShipper):
    """Binary ``sadc`` data files, converted with ``sadf`` once complete."""

    whole_file = True

    def open(self, file: NewFile) -> Tail:
        """A whole-file reader of the sadc file."""
        return self.whole(file, sadc=True)
