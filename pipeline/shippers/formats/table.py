"""Shipping tables with a header line: Slurm ``sacct`` exports and LMT CSV (see
:mod:`pipeline.shippers.table_tail`)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from pipeline.shippers.formats.base import NewFile, Shipper, Tail
from pipeline.shippers.table_tail import TableKind, TableTail


class SlurmShipper(Shipper):
    """Slurm ``sacct`` exports; times in the drop's time zone (``drops[].tz``)."""

    kind: TableKind = "slurm"
    final_line = True

    def open(self, file: NewFile) -> Tail:
        """A tail on a table export."""
        state = file.register()
        tail = TableTail(file.key, file.path, self.kind, ZoneInfo(file.drop.tz))
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail


class LmtShipper(SlurmShipper):
    """LMT (Lustre Monitoring Tool) CSV exports."""

    kind: TableKind = "lmt"
