"""Text reports of fio histogram logs for ``iolens fio-hist``, in fiologparser_hist.py's layout."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal, TextIO

from pipeline.formats.fio.decode import detect_layout, is_epoch_ms
from pipeline.formats.fio.logfiles import first_line, iter_rows
from pipeline.formats.fio.window import IntervalMerger, WindowTracker
from pipeline.parsers.errors import ParseError
from pipeline.records.fio_bins import GROUP_NR_US, BinLayout
from pipeline.reducers.fio_flp import FlpOptions, flp_rows, format_row, header

FLP_MAX_COARSENESS = 8  # fiologparser_hist.py's guess_max_from_bins
DIR_NAMES = {"m": "mixed", "r": "read", "w": "write", "t": "trim"}


def flp_layout(path: str, group_nr: int, usbin: bool) -> BinLayout:
    """The layout as fiologparser_hist.py detects it: first line of the first file, and for
    ``19 <= group_nr <= 26`` any of the group counts 19..26.

    Raises:
        ParseError: no accepted layout has that many bins.
    """
    line = first_line(path)
    unit: Literal["ns", "us"] = "us" if usbin or group_nr < 29 else "ns"
    candidates = range(GROUP_NR_US, 27) if GROUP_NR_US <= group_nr <= 26 else [group_nr]
    err: ParseError | None = None
    for g in candidates:
        try:
            return detect_layout(
                line, path, unit=unit, group_nr=g, max_coarseness=FLP_MAX_COARSENESS
            )
        except ParseError as e:
            err = err or e
    assert err is not None
    raise err


def window_lines(files: Sequence[str], layout: BinLayout, opts: FlpOptions) -> Iterator[str]:
    """The completion-window method's rows in fiologparser's column layout (values in ns /
    divisor, ``%.{decimals}f``; ``samples`` is the real number of I/Os)."""
    merger = IntervalMerger(layout)
    for path in files:
        tracker: WindowTracker | None = None
        for row in iter_rows(path, layout):
            if tracker is None:
                tracker = WindowTracker(opts.interval_ms, 0, is_epoch_ms(row.time_ms))
            merger.add(tracker.place(row), "", path)
    keys = sorted({k[3] for k in merger.hists})
    want = [DIR_NAMES[d] for d in opts.printdirs]
    flt = f"%.{opts.decimals}f"
    for start in keys:
        for code, ddir in zip(opts.printdirs, want, strict=True):
            key = ("cluster", "", ddir, start)
            if key not in merger.hists:
                continue
            h = merger.histogram(key)
            if h.samples == 0:
                continue
            qs = h.quantiles_ns([p / 100 for p in opts.percs])
            vals = [h.min_ns(), h.mean_ns(), *qs, h.max_ns()]
            cells = [str(start + opts.interval_ms)]
            if opts.directions:
                cells.append(code)
            cells.append(str(h.samples))
            cells += [flt % (float(v) / opts.divisor) for v in vals if v is not None]
            yield ", ".join(cells)


def write_report(
    files: Sequence[str], opts: FlpOptions, *, method: str, group_nr: int, out: TextIO
) -> None:
    """Write the report for ``files`` to ``out``.

    Raises:
        ParseError: an empty or malformed log, naming the file and line.
    """
    layout = flp_layout(files[0], group_nr, opts.usbin)
    out.write(header(opts) + "\n")
    if method == "window":
        for line in window_lines(files, layout, opts):
            out.write(line + "\n")
        return
    streams = [iter_rows(f, layout) for f in files]
    buf: list[str] = []
    for st in flp_rows(streams, layout, opts):
        buf.append(format_row(st, opts))
        if len(buf) >= 256:
            out.write("\n".join(buf) + "\n")
            buf.clear()
    if buf:
        out.write("\n".join(buf) + "\n")
