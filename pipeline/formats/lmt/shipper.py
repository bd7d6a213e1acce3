"""Shipping LMT (Lustre Monitoring Tool) per-OST CSV exports (tailed by
:class:`~pipeline.shippers.line_tail.LineTail`).

Each row is one OST's cumulative counters at one time step, which the per-OST reducer
(:class:`~pipeline.formats.lmt.reduce.OstDeltaReducer`) turns into the interval since that
OST's previous row: a ``metrics-lmt.ost`` document. A row earlier than its OST's previous one
(a clock step back, rows of an older export) closes no interval, so it is kept in the
dead-letter area with both times. The cursor holds every OST's last counters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, tzinfo

from pipeline.formats.lmt.decode import LmtCsvParser, LmtSample
from pipeline.formats.lmt.encode import lmt_ost_document
from pipeline.formats.lmt.reduce import OstDeltaReducer
from pipeline.records.core import Document, LineRef
from pipeline.shippers.line_tail import TableChain, TableDecoder, TableShipper
from pipeline.sink.documents import DocContext


class LmtChain(TableChain):
    """decode (:class:`LmtCsvParser`) -> reduce (:class:`OstDeltaReducer`) -> encode
    (:func:`lmt_ost_document`)."""

    def __init__(self, path: str, tz: tzinfo = UTC) -> None:
        self.reducer = OstDeltaReducer()
        super().__init__(path, tz)

    def decoder(self, header: str | None) -> TableDecoder:
        """An LMT CSV parser resumed under ``header``."""
        return LmtCsvParser(self.path, header, self.tz)

    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document] | str:
        """The interval a sample closes (none for an OST's first), or why it is refused."""
        assert isinstance(record, LmtSample)
        refused = self.reducer.refusal(record)
        if refused is not None:
            return refused
        iv = self.reducer.add(record)
        return [] if iv is None else [lmt_ost_document(ctx, iv, (ref,), created_ms)]

    def state(self) -> object | None:
        """The reducer's state (:meth:`OstDeltaReducer.state`)."""
        return self.reducer.state()

    def resume_state(self, state: object | None) -> None:
        """Continue from a saved reducer state (a fresh reducer when None)."""
        if isinstance(state, Mapping):
            self.reducer = OstDeltaReducer.from_state(state)
        else:
            self.reducer = OstDeltaReducer()


class LmtShipper(TableShipper):
    """LMT (Lustre Monitoring Tool) CSV exports."""

    pattern = "*.csv"
    writes = ("metrics-lmt.ost",)
    chain = LmtChain
