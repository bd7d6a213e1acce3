"""Histogram documents read back from Elasticsearch: their bin layout, bins and merge scopes.

A ``metrics-fio.histogram`` document stores its window's histogram sparsely, as bucket
midpoints and counts under ``fio.clat_ns.histogram``, with the layout it was written with under
``fio.bins``, e.g.::

    "fio": {"job": "1", "ddir": "read", "bins": {"count": 1856, "unit": "ns", "coarseness": 0},
            "window": {"end_ms": 5500}, "interval": {"ms": 1000, "start_ms": 5000},
            "clat_ns": {"histogram": {"values": [101.0, 7456.0], "counts": [3, 1]}}}

The functions here turn such an object back into bin indices and counts of that layout, and
name the job scope a document is merged into.
"""

from __future__ import annotations

import numpy as np

from pipeline.records.core import DDIR_NAMES, FioHistRow
from pipeline.records.fio_bins import BinLayout
from pipeline.records.json import Source
from pipeline.reducers.histogram import LatencyHistogram

SEP = "\x1f"
"""Separates the parts of a job scope's merge key."""


def layout_of(fio: Source) -> BinLayout:
    """The bin layout a histogram document was written with (``fio.bins``)."""
    bins = fio["bins"]
    unit = bins["unit"]
    coarse = int(bins["coarseness"])
    group_nr = int(bins["count"]) * (1 << coarse) // 64
    return BinLayout(group_nr=group_nr, coarseness=coarse, unit=unit)


def sparse_bins(fio: Source, layout: BinLayout) -> tuple[np.ndarray, np.ndarray]:
    """Bin indices and counts of a document's ``fio.clat_ns.histogram`` (values are midpoints).

    Raises:
        ValueError: a value is not a bucket midpoint of ``layout``.
    """
    hist = fio.get("clat_ns", {}).get("histogram")
    if not hist:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    values = np.asarray(hist["values"], dtype=np.float64)
    idx = np.searchsorted(layout.midpoints_ns, values)
    if np.any(idx >= layout.nbins) or np.any(
        layout.midpoints_ns[np.minimum(idx, layout.nbins - 1)] != values
    ):
        raise ValueError("histogram values are not bucket midpoints of the document's layout")
    return idx.astype(np.int64), np.asarray(hist["counts"], dtype=np.int64)


def histogram_of(fio: Source) -> LatencyHistogram:
    """The :class:`LatencyHistogram` stored in a histogram document's ``fio`` object."""
    layout = layout_of(fio)
    idx, cnt = sparse_bins(fio, layout)
    return LatencyHistogram.from_sparse(layout, idx, cnt)


def hist_row(fio: Source, layout: BinLayout) -> FioHistRow:
    """The document as the log row fiologparser_hist.py would read (window end, ddir, bs)."""
    idx, cnt = sparse_bins(fio, layout)
    return FioHistRow(
        int(fio["window"]["end_ms"]),
        DDIR_NAMES.index(fio["ddir"]),
        int(fio.get("bs", 0)),
        idx,
        cnt,
    )


def job_scope(host: str, prefix: str | None, job: object) -> str:
    """The job scope's merge key: host, ``write_hist_log`` prefix (``""`` for histograms
    indexed before prefixes were recorded) and fio's job number. Two fio runs on one host
    with different log prefixes are different jobs, even with the same job numbers."""
    return f"{host}{SEP}{prefix or ''}{SEP}{job}"
