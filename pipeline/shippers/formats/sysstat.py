"""Shipping sysstat data: ``sadf -d`` CSV (tailed) or ``sadf -j`` JSON, and binary ``sadc``
files (read whole) — see :mod:`pipeline.shippers.sysstat_tail`."""

from __future__ import annotations

from pathlib import Path

from pipeline.shippers.formats.base import NewFile, Shipper, Tail
from pipeline.shippers.sysstat_tail import SysstatKind, SysstatTail


class SadfShipper(Shipper):
    """``sadf`` output files."""

    kind: SysstatKind = "sadf"

    def open(self, file: NewFile) -> Tail:
        """A tail on a sysstat file, samples downsampled to ``peer.downsample_s``."""
        state = file.register()
        downsample_s = self.ctx.settings.peer.downsample_s
        work_dir = str(Path(self.ctx.state_dir) / "sadc-convert")
        tail = SysstatTail(file.key, file.path, self.kind, downsample_s, work_dir=work_dir)
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail


class SadcShipper(SadfShipper):
    """Binary ``sadc`` data files, converted with ``sadf`` once complete."""

    whole_file = True
    kind: SysstatKind = "sadc"
