"""Shipping Slurm ``sacct --parsable2`` exports: each row a ``logs-slurm.job`` document, no
state but the header (tailed by :class:`~pipeline.shippers.table_tail.TableTail`)."""

from __future__ import annotations

from datetime import tzinfo

from pipeline.formats.slurm.decode import SacctParser, SlurmJob
from pipeline.formats.slurm.encode import slurm_job_document
from pipeline.records.core import Document, LineRef
from pipeline.shippers.table_tail import TableDecoder, TableShipper
from pipeline.sink.documents import DocContext


class SlurmChain:
    """decode (:class:`SacctParser`) -> encode (:func:`slurm_job_document`); nothing held."""

    def decoder(self, path: str, header: str | None, tz: tzinfo) -> TableDecoder:
        """A sacct parser resumed under ``header``."""
        return SacctParser(path, header, tz)

    def encode(
        self, record: object, ref: LineRef, ctx: DocContext, created_ms: float
    ) -> list[Document] | str:
        """One job (or step) record's document."""
        assert isinstance(record, SlurmJob)
        return [slurm_job_document(ctx, record, (ref,), created_ms)]

    def state(self) -> object | None:
        """None: no state besides the header."""
        return None

    def resume(self, state: object | None) -> None:
        """Nothing to resume."""


class SlurmShipper(TableShipper):
    """Slurm ``sacct`` exports; times in the drop's time zone (``drops[].tz``)."""

    writes = ("logs-slurm.job",)

    chain = SlurmChain
