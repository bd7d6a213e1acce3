"""Shipping Darshan logs: whole files, analysed in a worker pool (see
:mod:`pipeline.formats.darshan.chain`)."""

from __future__ import annotations

from pipeline.formats.darshan.chain import DarshanChain, darshan_tail
from pipeline.formats.darshan.pool import DarshanPool
from pipeline.reducers.io_diagnosis import Thresholds
from pipeline.shippers.interface import NewFile, ShipContext, Shipper, Tail
from pipeline.shippers.whole_file import WholeFileTail


class DarshanShipper(Shipper):
    """Darshan logs (binary, or ``darshan-parser`` text dumps).

    Args:
        ctx: what the job gives its shippers; ``darshan.workers`` and ``darshan.inline`` size
            the pool.
    """

    pattern = "*.darshan"
    writes = ("logs-darshan.job", "logs-darshan.file", "logs-iolens.io_diagnosis")

    whole_file = True
    rotated_copies = False

    def __init__(self, ctx: ShipContext) -> None:
        super().__init__(ctx)
        ds = ctx.settings.darshan
        self.pool = DarshanPool(ds.workers, inline=ds.inline)
        thresholds = Thresholds(ds.min_nprocs, ds.min_bytes_per_proc, ds.max_bytes_per_s)
        self.chain = DarshanChain(self.pool, thresholds, ctx.evidence)

    def open(self, file: NewFile) -> Tail:
        """A reader of a log, read once it was unchanged for ``darshan.stable_s`` (at once in
        a ``--once`` run)."""
        state = file.register()
        tail = darshan_tail(
            file.key,
            file.path,
            self.chain,
            stable_s=0.0 if self.ctx.once else self.ctx.settings.darshan.stable_s,
            clock=self.ctx.clock,
            monotonic=self.ctx.monotonic,
        )
        tail.resume(state.offset, state.line_no, state.cursor)
        return tail

    def prefetch(self, tail: Tail) -> None:
        """Hand the log to the pool now, so logs are analysed while others are shipped."""
        if isinstance(tail, WholeFileTail):
            tail.prefetch()

    def close(self) -> None:
        """Stop the workers."""
        self.pool.close()
