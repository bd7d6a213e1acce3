"""An example drop format, as a new package under ``pipeline/formats/`` would hold it: samples of
``/proc/loadavg`` prefixed with the epoch second they were taken at (``date +%s; cat
/proc/loadavg`` on one line)::

    1764300000 0.52 0.58 0.59 1/389 12345

Decode (:class:`LoadavgDecoder`) -> encode (:class:`LoadavgChain`) -> one
``metrics-loadavg.sample`` document per line; a line that is not a sample is a bad line (kept
in the dead-letter area). The shipper (:class:`LoadavgShipper`) is a table export shipper (tailed
by line, the cursor saved with each committed line). Adding it to iolens is this module as
``pipeline/formats/loadavg/`` and its line in :data:`pipeline.formats.registry.FORMATS`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import tzinfo

from pipeline.ids import doc_id
from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document, LineRef
from pipeline.shippers.table_tail import TableDecoder, TableShipper
from pipeline.sink.documents import DocContext, stream_name

DATASET = "loadavg.sample"


@dataclass(frozen=True)
class Loadavg:
    """One sample: when (epoch s) and the 1, 5 and 15 minute load averages."""

    host_time_s: int
    load: tuple[float, float, float]


class LoadavgDecoder:
    """Lines -> :class:`Loadavg` records or :class:`ParseError` values; no header."""

    header_line: str | None = None

    def __init__(self, path: str) -> None:
        self.path = path

    def feed(self, lines: Sequence[bytes], first_line_no: int) -> Iterator[object]:
        """One record (or error) per non-blank line."""
        for line_no, raw in enumerate(lines, start=first_line_no):
            fields = raw.split()
            if not fields:
                continue
            try:
                yield Loadavg(
                    int(fields[0]), (float(fields[1]), float(fields[2]), float(fields[3]))
                )
            except (ValueError, IndexError):
                yield ParseError(
                    self.path, line_no, "expected: <epoch s> <load1> <load5> <load15> ..."
                )


class LoadavgChain:
    """decode -> encode; nothing held between lines."""

    def decoder(self, path: str, header: str | None, tz: tzinfo) -> TableDecoder:
        """A decoder of one file."""
        return LoadavgDecoder(path)

    def encode(
        self, record: object, ref: LineRef, ctx: DocContext, created_ms: float
    ) -> list[Document] | str:
        """The sample's document, or why it is refused (a negative load)."""
        assert isinstance(record, Loadavg)
        if min(record.load) < 0:
            return f"negative load average {min(record.load)}"
        source = ctx.base("metrics", DATASET, record.host_time_s * 1000, created_ms)
        source["loadavg"] = dict(zip(("load1", "load5", "load15"), record.load, strict=True))
        ident = doc_id(DATASET, ref.path, record.host_time_s)
        return [Document(stream_name("metrics", DATASET, ctx.namespace), ident, source, (ref,))]

    def state(self) -> object | None:
        """No state."""
        return None

    def resume(self, state: object | None) -> None:
        """Nothing to resume."""


class LoadavgShipper(TableShipper):
    """``/proc/loadavg`` samples, tailed by line."""

    pattern = "*.loadavg"
    writes = ("metrics-loadavg.sample",)
    chain = LoadavgChain
