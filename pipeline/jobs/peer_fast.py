"""Columnar ingestion and exact downsampling of ``sadf -d`` CSV for offline peer diagnosis.

The per-line path (:func:`pipeline.formats.sysstat.decode.parse_sadf_csv` ->
:class:`pipeline.reducers.downsample.Downsampler`) makes one Python object per sample, ~30 µs a
line: hours for a day of 1 s data of a thousand LUNs. This path reads the same files in blocks
with pandas' C parser into numpy columns (:mod:`pipeline.formats.sysstat.columns`) and
downsamples them with array operations
(:mod:`pipeline.formats.sysstat.downsample_columns`), giving the
samples the Downsampler gives (same formulas, grid, restarts and gaps; sums in another order, so
floats agree to ~1e-12 relative).

Anything this path does not take exactly as the per-line path would -- a JSON, XML or binary
file, a second header that differs from the first, a bad line, a host going back in time, a
source interval longer than the target -- raises :class:`Unsupported`; the caller then uses the
per-line path (:func:`pipeline.jobs.peer_diagnosis.load` does).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pipeline.formats.sysstat.columns import DEFAULT_BLOCK_BYTES, Reader
from pipeline.formats.sysstat.downsample_columns import ColumnarDownsampler, Downsampled
from pipeline.reducers.downsample import DEFAULT_MAX_GAP_INTERVALS


def downsample_files(
    paths: Iterable[Path],
    interval_s: float,
    *,
    offset_s: float = 0.0,
    max_gap_intervals: float = DEFAULT_MAX_GAP_INTERVALS,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Downsampled:
    """Read and downsample ``sadf -d`` CSV files (in the order given) without per-row objects.

    Returns:
        Every downsampled sample, partial ones included (as :func:`downsample` returns them).

    Raises:
        Unsupported: a file this reader does not take exactly (module docstring).
        ValueError: bad ``interval_s`` or ``max_gap_intervals``.
    """
    reader = Reader()
    ds = ColumnarDownsampler(interval_s, offset_s, max_gap_intervals)
    for path in paths:
        for rows in reader.read_file(path, block_bytes):
            ds.add(rows, reader.restarts)
    return ds.finish(reader.luns)
