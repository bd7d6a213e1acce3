"""An example drop format, as a new package under ``pipeline/formats/`` would hold it: samples of
``/proc/loadavg`` prefixed with the epoch second they were taken at (``date +%s; cat
/proc/loadavg`` on one line)::

    1764300000 0.52 0.58 0.59 1/389 12345

Its chain (:class:`LoadavgChain`): decode a line into a :class:`Loadavg` record, encode it into
one ``metrics-loadavg.sample`` document; a line that is not a sample, or a negative load, is a
bad line (kept in the dead-letter area). Its shipper (:class:`LoadavgShipper`) tails files by
line (:class:`~pipeline.shippers.line_tail.LineTail`, the cursor saved with each committed
line). Adding it to iolens is this module as ``pipeline/formats/loadavg/`` and its line in
:data:`pipeline.formats.registry.FORMATS`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from pipeline.ids import doc_id
from pipeline.parsers.errors import ParseError
from pipeline.records.core import Document, LineRef
from pipeline.shippers.interface import NewFile
from pipeline.shippers.line_tail import LineChain, LineShipper
from pipeline.sink.documents import DocContext, stream_name

DATASET = "loadavg.sample"


@dataclass(frozen=True)
class Loadavg:
    """One sample: when (epoch s) and the 1, 5 and 15 minute load averages."""

    host_time_s: int
    load: tuple[float, float, float]


class LoadavgChain(LineChain):
    """decode -> encode; nothing held between lines, so no cursor."""

    def __init__(self, path: str) -> None:
        self.path = path

    def decode(self, raw: bytes, line_no: int) -> Iterator[object]:
        """One record (or error) per non-blank line."""
        fields = raw.split()
        if not fields:
            return
        try:
            yield Loadavg(int(fields[0]), (float(fields[1]), float(fields[2]), float(fields[3])))
        except (ValueError, IndexError):
            yield ParseError(self.path, line_no, "expected: <epoch s> <load1> <load5> <load15> ...")

    def encode(
        self, record: object, ref: LineRef, start: int, ctx: DocContext, created_ms: float
    ) -> Sequence[Document] | str:
        """The sample's document, or why it is refused (a negative load)."""
        assert isinstance(record, Loadavg)
        if min(record.load) < 0:
            return f"negative load average {min(record.load)}"
        source = ctx.base("metrics", DATASET, record.host_time_s * 1000, created_ms)
        source["log"] = {"file": {"path": ref.path}, "offset": start}
        source["loadavg"] = dict(zip(("load1", "load5", "load15"), record.load, strict=True))
        ident = doc_id(DATASET, ref.path, record.host_time_s)
        return [Document(stream_name("metrics", DATASET, ctx.namespace), ident, source, (ref,))]


class LoadavgShipper(LineShipper):
    """``/proc/loadavg`` samples, tailed by line."""

    pattern = "*.loadavg"
    writes = ("metrics-loadavg.sample",)

    def chain_for(self, file: NewFile) -> LineChain:
        """The chain of one file."""
        return LoadavgChain(file.path)
