"""fio histogram log records -> ``metrics-fio.histogram`` documents (one per record: host x
job x ddir x row), with the non-empty bins so Elasticsearch re-aggregates percentiles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeAlias, cast

from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.sources import FioHistogramFio, FioHistogramFioClatNs, FioHistogramSource
from pipeline.sink.documents import DocContext, drop_none, stream_name

HISTOGRAM_DATASET = "fio.histogram"

ClatStats: TypeAlias = Mapping[str, float | int | dict[str, list[float] | list[int]] | None]
"""A record's latency fields, ns: ``samples``, ``min``, ``mean``, ``max`` and ``pNN`` (None for
an empty record) and, when the record is not empty, ``histogram``: ``{"values": bucket
midpoints, "counts": counts of the non-empty bins}``."""


@dataclass(frozen=True)
class FioSource:
    """Identity of one histogram log for document ids and fields."""

    host: str
    job: str
    prefix: str
    path: str
    fingerprint: str


@dataclass(frozen=True)
class RecordFields:
    """What a histogram document says about its record, in plain values.

    Attributes:
        time_ms, ddir, bs: the record's own fields (ddir as a name: read/write/trim).
        window_ms: ``(start, end]`` of its completion window on the output timeline.
        interval_ms: ``(start, end, width)`` of the output interval it is assigned to.
        bins: ``(count, unit, coarseness)`` of the log's bin layout.
        clat_ns: statistics (``samples``, ``min`` ... ``p99_9``) and, when the record is not
            empty, ``histogram``: ``{"values": bucket midpoints in ns, "counts": [...]}``.
    """

    time_ms: int
    ddir: str
    bs: int
    window_ms: tuple[int, int]
    interval_ms: tuple[int, int, int]
    bins: tuple[int, str, int]
    clat_ns: ClatStats


def histogram_document(
    ctx: DocContext,
    src: FioSource,
    rec: RecordFields,
    ref: LineRef,
    line_offset: int,
    created_ms: float,
) -> Document:
    """One ``metrics-fio.histogram`` document per log record (host x job x ddir x row).

    ``fio.clat_ns.histogram`` holds the non-empty bins (values = fio's bucket midpoints in ns,
    so Elasticsearch/Kibana can re-aggregate percentiles over any grouping).

    The id is the record's identity: host, log prefix, job, the file's fingerprint (a hash of
    its first line) and the line number. The same log read again, from a copy or after a
    truncation, gives the same ids, so nothing is indexed twice.
    """
    source: FioHistogramSource = {
        **ctx.base("metrics", HISTOGRAM_DATASET, rec.window_ms[1], created_ms),
        "host": {"name": src.host},
        "log": {"file": {"path": src.path}, "offset": line_offset},
        "fio": _histogram_fio(src, rec, ref),
    }
    ident = doc_id(HISTOGRAM_DATASET, src.host, src.prefix, src.job, src.fingerprint, ref.line_no)
    return Document(stream_name("metrics", HISTOGRAM_DATASET, ctx.namespace), ident, source, (ref,))


def _histogram_fio(src: FioSource, rec: RecordFields, ref: LineRef) -> FioHistogramFio:
    """The ``fio.*`` fields of a histogram document."""
    count, unit, coarseness = rec.bins
    start_ms, end_ms, interval_ms = rec.interval_ms
    return {
        "job": src.job,
        "prefix": src.prefix,
        "ddir": rec.ddir,
        "bs": rec.bs,
        "log": {"time_ms": rec.time_ms, "line": ref.line_no},
        "window": {"start_ms": rec.window_ms[0], "end_ms": rec.window_ms[1]},
        "interval": {"start_ms": start_ms, "end_ms": end_ms, "ms": interval_ms},
        "bins": {"count": count, "unit": unit, "coarseness": coarseness},
        "clat_ns": _clat_ns(rec.clat_ns),
    }


def _clat_ns(stats: ClatStats) -> FioHistogramFioClatNs:
    """``fio.clat_ns``: a record's statistics without their None values.

    Their percentiles (``p50`` ...) are named at run time from the configured ``fio.percentiles``,
    so mypy cannot check their keys: the stream's strict mapping does (a percentile it does not
    map is refused by the cluster).
    """
    return cast(FioHistogramFioClatNs, drop_none(stats))
