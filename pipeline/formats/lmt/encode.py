"""OST intervals -> ``metrics-lmt.ost-<namespace>`` documents: one per OST x LMT interval,
fields under ``lmt.ost.*`` plus ``metricset.period`` (ms) (reference/elastic.md 1.2). The id is
the OST and the interval start, so reading the same export again is a 409 (``create``).
"""

from __future__ import annotations

from pipeline.formats.lmt.reduce import OstInterval
from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.sources import LmtOstLmtOst, LmtOstSource
from pipeline.sink.documents import DocContext, stream_name

LMT_OST_DATASET = "lmt.ost"


def lmt_ost_document(
    ctx: DocContext, iv: OstInterval, refs: tuple[LineRef, ...], created_ms: float
) -> Document:
    """One ``metrics-lmt.ost`` document per OST x interval.

    ``@timestamp`` is the interval start (the interval is ``[start, start + interval_s)``);
    ``metricset.period`` its length in ms. ``lmt.ost``: ``name``, ``fs``, ``index`` (the
    Lustre OST index), ``read_bytes``, ``write_bytes``, ``read_bytes_per_s``,
    ``write_bytes_per_s``, ``interval_s``, ``reset``, ``gap`` and ``pct_cpu`` (omitted when not
    exported). The id is the dataset, the OST name and the interval start.

    Args:
        ctx: the instance's shared document fields.
        iv: the interval.
        refs: the input lines of the samples it derives from.
        created_ms: when the document is built, epoch ms (``event.created``).
    """
    source: LmtOstSource = {
        **ctx.base("metrics", LMT_OST_DATASET, iv.start_s * 1000, created_ms),
        "metricset": {"period": round(iv.interval_s * 1000)},
        "lmt": {"ost": _ost_fields(iv)},
    }
    ident = doc_id(LMT_OST_DATASET, iv.ost_name, f"{iv.start_s:.3f}")
    return Document(stream_name("metrics", LMT_OST_DATASET, ctx.namespace), ident, source, refs)


def _ost_fields(iv: OstInterval) -> LmtOstLmtOst:
    """``lmt.ost.*`` of one interval (``pct_cpu`` only when exported)."""
    ost: LmtOstLmtOst = {
        "name": iv.ost_name,
        "fs": iv.fs,
        "index": iv.ost_index,
        "read_bytes": iv.read_bytes,
        "write_bytes": iv.write_bytes,
        "read_bytes_per_s": iv.read_bytes_per_s,
        "write_bytes_per_s": iv.write_bytes_per_s,
        "interval_s": iv.interval_s,
        "reset": iv.reset,
        "gap": iv.gap,
    }
    if iv.pct_cpu is not None:
        ost["pct_cpu"] = iv.pct_cpu
    return ost
