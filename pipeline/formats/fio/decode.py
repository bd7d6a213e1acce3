"""fio histogram logs (``write_hist_log=<prefix>`` with ``log_hist_msec=<ms>``): lines -> records.

A verbatim record of fio 3.33 (``randrw_clat_hist.1.log``, 1856 bins, most of them elided)::

    101, 0, 4096, 0, 0, 0, ..., 0, 3, 17, 52, ..., 0, 0

Fields: ``time_ms, ddir, bs, bin_0, ..., bin_{N-1}`` separated by comma+space (fio ``iolog.c``
``flush_hist_samples``). ``time_ms`` is the END of the record's window, in ms since the job's
epoch (Unix epoch ms with ``log_unix_epoch=1``); ``ddir`` is 0 read, 1 write, 2 trim; each bin
holds the completions whose clat fell in that bucket since the previous record of the same
direction (deltas, not cumulative). After a stall fio writes bursts of records with the same
timestamp; they are real deltas (reference/fio.md sections 1.1-1.2).

This module is pure: it turns bytes into :class:`~pipeline.records.core.FioHistRow` and raises
:class:`~pipeline.parsers.errors.ParseError` naming the file, the line and the reason.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

from pipeline.parsers.errors import ParseError
from pipeline.records.core import FioHistRow
from pipeline.records.fio_bins import MAX_COARSENESS, BinLayout, layout_for_bins

HEADER_FIELDS = 3  # time_ms, ddir, bs
MAX_TIME_MS = 253402300799999  # 9999-12-31T23:59:59.999Z
MAX_FIELD = 2**53  # larger values lose precision as JSON numbers (and int64 saturates at 2^63)
EPOCH_MS_THRESHOLD = 10**12  # timestamps above this are Unix epoch ms (log_unix_epoch)


def split_fields(line: bytes, path: str, line_no: int) -> npt.NDArray[np.int64]:
    """Parse one line into its integer fields, shape ``(3 + nbins,)``.

    Raises:
        ParseError: a field is not an integer, or the line has fewer than 4 fields.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            fields = np.fromstring(line, dtype=np.int64, sep=",")
        except (ValueError, DeprecationWarning):
            fields = None
    if fields is None or fields.size < HEADER_FIELDS + 1:
        n = line.count(b",") + 1
        raise ParseError(
            path,
            line_no,
            f"not a histogram record: expected integers 'time, ddir, bs, bins...' "
            f"separated by ', ', got {n} field(s) starting {line[:40]!r}",
        )
    return fields


def detect_layout(
    first_line: bytes,
    path: str,
    *,
    unit: Literal["auto", "ns", "us"] = "auto",
    group_nr: int | None = None,
    max_coarseness: int = MAX_COARSENESS,
) -> BinLayout:
    """Detect the bin layout from the column count of a log's first line.

    Raises:
        ParseError: the line is not a record, or its bin count matches no fio layout.
    """
    fields = split_fields(first_line, path, 1)
    try:
        return layout_for_bins(
            fields.size - HEADER_FIELDS, unit=unit, group_nr=group_nr, max_coarseness=max_coarseness
        )
    except ValueError as err:
        raise ParseError(path, 1, str(err)) from None


def row_from_fields(
    fields: npt.NDArray[np.int64], layout: BinLayout, path: str, line_no: int
) -> FioHistRow:
    """Validate one parsed line and keep its non-empty bins.

    Raises:
        ParseError: wrong bin count for the layout, a negative timestamp, block size or bin
            count, or a ddir other than 0-2.
    """
    nbins = fields.size - HEADER_FIELDS
    if nbins != layout.nbins:
        raise ParseError(
            path,
            line_no,
            f"{nbins} bins, but this log's layout has {layout.nbins} "
            f"(from its first line); the line is cut or from another log",
        )
    t, ddir, bs = int(fields[0]), int(fields[1]), int(fields[2])
    _check_header(path, line_no, t, ddir, bs, int(fields.max()))
    bins = fields[HEADER_FIELDS:]
    nz = np.flatnonzero(bins)
    counts = bins[nz]
    if counts.size and counts.min() < 0:
        raise ParseError(path, line_no, "negative bin count")
    return FioHistRow(time_ms=t, ddir=ddir, bs=bs, bin_idx=nz, counts=counts)


def _check_header(path: str, line_no: int, t: int, ddir: int, bs: int, largest: int) -> None:
    """Raise :class:`ParseError` when a line's time (ms), ddir or block size, or its
    ``largest`` value, is out of what fio writes."""
    if t < 0:
        raise ParseError(path, line_no, f"negative timestamp {t}")
    if t > MAX_TIME_MS:
        raise ParseError(path, line_no, f"timestamp {t} ms is beyond the year 9999")
    if largest >= MAX_FIELD:
        raise ParseError(path, line_no, f"a value is out of range (>= 2^53): {largest}")
    if ddir not in (0, 1, 2):
        raise ParseError(path, line_no, f"ddir {ddir} is not 0 (read), 1 (write) or 2 (trim)")
    if bs < 0:
        raise ParseError(path, line_no, f"negative block size {bs} (fio writes it unsigned)")


def parse_lines(
    lines: Sequence[bytes], layout: BinLayout, path: str, first_line_no: int
) -> Iterator[FioHistRow | ParseError]:
    """Parse consecutive lines; a bad line yields its :class:`ParseError` instead of a row.

    Yielding the error (rather than raising) lets the shipper quarantine that line and go on
    with the rest of the file.
    """
    for i, line in enumerate(lines):
        line_no = first_line_no + i
        try:
            yield row_from_fields(split_fields(line, path, line_no), layout, path, line_no)
        except ParseError as err:
            yield err


def is_epoch_ms(time_ms: int) -> bool:
    """True when a timestamp is Unix epoch ms (``log_unix_epoch=1``), not job-relative ms."""
    return time_ms >= EPOCH_MS_THRESHOLD
