"""Shipping Slurm ``sacct --parsable2`` exports: each row a ``logs-slurm.job`` document, no
state but the header (tailed by :class:`~pipeline.shippers.line_tail.LineTail`)."""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.formats.slurm.decode import SacctParser, SlurmJob
from pipeline.formats.slurm.encode import slurm_job_document
from pipeline.records.core import Document, LineRef
from pipeline.shippers.line_tail import TableChain, TableDecoder, TableShipper
from pipeline.sink.documents import DocContext


class SlurmChain(TableChain):
    """decode (:class:`SacctParser`) -> encode (:func:`slurm_job_document`); nothing held."""

    def decoder(self, header: str | None) -> TableDecoder:
        """A sacct parser resumed under ``header``."""
        return SacctParser(self.path, header, self.tz)

    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document] | str:
        """One job (or step) record's document."""
        assert isinstance(record, SlurmJob)
        return [slurm_job_document(ctx, record, (ref,), created_ms)]


class SlurmShipper(TableShipper):
    """Slurm ``sacct`` exports; times in the drop's time zone (``drops[].tz``)."""

    writes = ("logs-slurm.job",)
    chain = SlurmChain
