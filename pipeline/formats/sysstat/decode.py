"""sysstat disk statistics as ``sadf`` 12.6.1 prints them: CSV lines -> records.

``sadf -d -U FILE -- -d -p`` (CSV; verbatim from a real sadc file of a 2-vCPU VM with six loop
devices; the restart row holds a TAB before ``(2 CPU)``)::

    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;2026-11-22 04:28:49 UTC;vda;1167.00;10044.00;28.00;52.00;8.68;0.66;0.56;2.80
    vm;-1;2026-11-22 04:28:49 UTC;LINUX-RESTART	(2 CPU)
    # hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util
    vm;1;2026-11-22 04:28:50 UTC;vda;164.00;3104.00;96.00;56.00;19.85;0.02;0.12;0.80

Timestamps are the END of the interval a row averages over, in UTC, whole seconds (truncated):
``YYYY-MM-DD HH:MM:SS UTC`` by default, Unix seconds with ``-U``. ``interval`` is the nominal
interval in whole seconds; ``-1`` marks a ``LINUX-RESTART`` or (with ``sadf -- -C``) a ``COM``
comment row. Times without ``UTC`` come from ``-T``/``-t`` (reader's or creator's local time,
and ``-t`` is buggy across time zones in 12.6.1) and are refused (reference/sysstat.md 1.5).

Columns are found by name in the ``#`` header that precedes each block, so the order does not
matter; both vocabularies are read (reference/sysstat.md 1.4): sysstat >= 11.5.7 (``rkB/s``,
``areq-sz`` in kB, ``aqu-sz``) and older (``rd_sec/s`` and ``avgrq-sz`` in 512-byte sectors,
``avgqu-sz``), converted once here (sector = 512 B). ``dkB/s`` exists since 12.1.2; before,
discards were not counted and ``discard_kb_per_s`` is 0. ``sadf -j`` JSON is read by
:mod:`pipeline.formats.sysstat.sadf_json`
(:func:`~pipeline.formats.sysstat.sadf_json.parse_sadf_json`), and
whole files in blocks, as numpy columns, by :mod:`pipeline.formats.sysstat.columns`.

Device names are resolved by sadf when it runs, from major:minor (reference/sysstat.md 1.2), so
sadc binary files must be converted on the host that recorded them: see :func:`sadf_command`.

This module is pure: it turns lines or bytes into :class:`~pipeline.records.core.DiskSample` and
:class:`~pipeline.records.core.RestartMark` records and reports bad input as
:class:`~pipeline.parsers.errors.ParseError` values naming the file, the line and the reason.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from pipeline.formats.sysstat.values import (
    COMMENT,
    MAX_INTERVAL_S,
    OPTIONAL_FIELDS,
    RESTART,
    SysstatRecord,
    parse_timestamp,
)
from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import MAX_EXACT
from pipeline.parsers.table import HeaderedLines
from pipeline.records.core import DiskSample, RestartMark

__all__ = [
    "CSV_METRICS",
    "KEY_COLUMNS",
    "MARKER_LAYOUT",
    "SadfCsvParser",
    "SadfHeader",
    "parse_row",
    "parse_sadf_csv",
    "sadf_command",
]

KEY_COLUMNS: tuple[str, ...] = ("hostname", "interval", "timestamp", "DEV")
"""Columns every disk row has, in sadf's order."""

CSV_METRICS: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = (
    ("tps", (("tps", 1.0),)),
    ("read_kb_per_s", (("rkB/s", 1.0), ("rd_sec/s", 0.5))),
    ("write_kb_per_s", (("wkB/s", 1.0), ("wr_sec/s", 0.5))),
    ("discard_kb_per_s", (("dkB/s", 1.0),)),
    ("areq_sz_kb", (("areq-sz", 1.0), ("avgrq-sz", 0.5))),
    ("aqu_sz", (("aqu-sz", 1.0), ("avgqu-sz", 1.0))),
    ("await_ms", (("await", 1.0),)),
    ("util_pct", (("%util", 1.0),)),
)
"""DiskSample field -> candidate (column, factor to the field's unit), preferred first."""


def sadf_command(
    binary_file: str | os.PathLike[str], *, sadf: str = "sadf", pretty: bool = True
) -> list[str]:
    """The argv that converts a sadc binary file into the CSV :func:`parse_sadf_csv` reads.

    ``sadf -d -U FILE -- -d -p``: ``-d`` CSV, ``-U`` Unix-second timestamps (no time zone to
    get wrong), ``-- -d`` the disk activity. ``-p`` after ``--`` is sar's ``--pretty``: it
    prints device-mapper devices under their ``/dev/mapper`` names (``mpathc``, ``vg-lv``),
    which survive reboots while ``dm-N`` numbers may not; other devices print the same with or
    without it (reference/sysstat.md 1.5). Run it on the host that recorded the file: names are
    resolved from major:minor by the reading host (reference/sysstat.md 1.2).

    Args:
        binary_file: the sadc file (``saDD`` or one written by ``sadc -S DISK``).
        sadf: the sadf executable.
        pretty: add ``-p`` (set False to keep kernel ``dm-N`` names).
    """
    argv = [sadf, "-d", "-U", os.fspath(binary_file), "--", "-d"]
    return [*argv, "-p"] if pretty else argv


@dataclass(frozen=True)
class SadfHeader:
    """Where each value sits in the rows that follow one ``# hostname;interval;...`` header.

    Attributes:
        line: the header line as read (without the line end), kept so a tail can persist it.
        width: number of columns a row of this block has.
        keys: positions of ``hostname, interval, timestamp, DEV``.
        metrics: ``(field, position, factor)`` for each DiskSample metric the header has.
    """

    line: str
    width: int
    keys: tuple[int, int, int, int]
    metrics: tuple[tuple[str, int, float], ...]

    @classmethod
    def parse(cls, line: str, path: str, line_no: int) -> SadfHeader:
        """Read a ``sadf -d`` header line.

        Raises:
            ParseError: the line is not a sadf header, or it heads another activity's block
                (e.g. ``CPU;%user;...`` from ``sadf -d -- -u``): it lacks the disk columns.
        """
        columns = [c.strip() for c in line.lstrip("#").split(";")]
        pos = {name: i for i, name in enumerate(columns)}
        missing = [c for c in KEY_COLUMNS if c not in pos]
        metrics: list[tuple[str, int, float]] = []
        for field_name, candidates in CSV_METRICS:
            found = next(((pos[c], f) for c, f in candidates if c in pos), None)
            if found is not None:
                metrics.append((field_name, found[0], found[1]))
            elif field_name not in OPTIONAL_FIELDS:
                missing.append(candidates[0][0])
        if missing:
            raise ParseError(
                path,
                line_no,
                f"header without the disk columns {', '.join(missing)} (another activity's "
                f"block? convert with sadf -d -- -d); its rows up to the next header are "
                "dead-lettered",
            )
        keys = (pos["hostname"], pos["interval"], pos["timestamp"], pos["DEV"])
        return cls(line, len(columns), keys, tuple(metrics))


def _number(text: str, name: str, path: str, line_no: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ParseError(path, line_no, f"{name} is not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ParseError(path, line_no, f"{name} must be a finite number >= 0, got {text!r}")
    if value >= MAX_EXACT:
        raise ParseError(path, line_no, f"{name} is out of range (>= 2^53): {text[:40]!r}")
    return value


def _interval(text: str, path: str, line_no: int) -> int:
    try:
        interval = int(text)
    except ValueError:  # not an integer, or more digits than int() converts
        raise ParseError(path, line_no, f"interval is not an integer: {text[:40]!r}") from None
    if interval > MAX_INTERVAL_S:
        raise ParseError(path, line_no, f"interval {text[:40]!r} s is out of range (> 2^31 - 1)")
    return interval


def parse_row(
    fields: list[str], header: SadfHeader, path: str, line_no: int
) -> SysstatRecord | None:
    """Turn one split data row into a record; None for a ``COM`` comment row.

    Raises:
        ParseError: wrong column count, an interval < 1 (other than a restart or comment), a
            bad timestamp or a metric that is not a finite number >= 0.
    """
    i_host, i_interval, i_time, i_dev = header.keys
    if len(fields) <= max(header.keys[:3]):
        raise ParseError(path, line_no, f"{len(fields)} column(s), the header has {header.width}")
    interval = _interval(fields[i_interval], path, line_no)
    if interval == -1:
        return _marker_row(fields, header, path, line_no)
    if len(fields) != header.width:
        raise ParseError(path, line_no, f"{len(fields)} column(s), the header has {header.width}")
    if interval < 1:
        raise ParseError(path, line_no, f"interval must be >= 1 s, got {interval}")
    values = {
        name: _number(fields[i], name, path, line_no) * factor for name, i, factor in header.metrics
    }
    return DiskSample(
        host=fields[i_host],
        device=fields[i_dev],
        end_s=parse_timestamp(fields[i_time], path, line_no),
        interval_s=float(interval),
        discard_kb_per_s=values.pop("discard_kb_per_s", 0.0),
        **values,
    )


def _marker_row(
    fields: list[str], header: SadfHeader, path: str, line_no: int
) -> RestartMark | None:
    """A row of interval -1: a restart mark, or None for a ``COM`` comment.

    Raises:
        ParseError: neither ``LINUX-RESTART`` nor ``COM``, or a bad timestamp.
    """
    i_host, _, i_time, i_dev = header.keys
    text = ";".join(fields[i_dev:])
    if text.startswith(RESTART):
        return RestartMark(fields[i_host], parse_timestamp(fields[i_time], path, line_no))
    if text.startswith(COMMENT):
        return None
    raise ParseError(path, line_no, f"interval -1 but neither LINUX-RESTART nor COM: {text!r}")


MARKER_LAYOUT = SadfHeader("", len(KEY_COLUMNS), (0, 1, 2, 3), ())
"""Where the key columns of a ``LINUX-RESTART`` or ``COM`` row sit: sadf prints them in the order
of :data:`KEY_COLUMNS` in every version, header or not."""


class SadfCsvParser(HeaderedLines[SadfHeader, SysstatRecord]):
    """Parses ``sadf -d -- -d`` lines chunk by chunk, remembering the current block's header.

    A tail reads a file in chunks, so the header that maps a chunk's columns may have come in
    an earlier chunk: :attr:`header_line` is that header's text (persist it with the offset and
    pass it back to resume). ``#`` lines set the header for the rows after them; the rows of a
    block whose header lacks the disk columns are skipped (the header yields the one error for
    them); ``COM`` rows carry no statistics and yield nothing. Restart and comment rows may come
    before the first header (sadf prints a boot record first). The only state is that header;
    no I/O.

    Args:
        path: the input file, for errors.
        header_line: the header in force before the first line fed (None at a file's start).
    """

    no_header = "row before any '# hostname;interval;...' header line"

    def parse_headless(self, line: str, line_no: int) -> SysstatRecord | None:
        """A row before the first header: sadf prints a file's leading ``LINUX-RESTART`` (a file
        sadc started at boot, as ``sa1 --boot`` does) or ``COM`` row before it.

        Raises:
            ParseError: any other row (:attr:`no_header`).
        """
        fields = line.split(";")
        if len(fields) >= len(KEY_COLUMNS) and fields[1].strip() == "-1":
            return _marker_row(fields, MARKER_LAYOUT, self.path, line_no)
        raise ParseError(self.path, line_no, self.no_header)

    def is_header(self, line: str) -> bool:
        """sadf's header lines start with ``#``."""
        return line.startswith("#")

    def parse_header(self, line: str, line_no: int) -> SadfHeader:
        """:meth:`SadfHeader.parse`."""
        return SadfHeader.parse(line, self.path, line_no)

    def parse_row(self, line: str, header: SadfHeader, line_no: int) -> SysstatRecord | None:
        """One ``;``-separated row (None for a ``COM`` row)."""
        return parse_row(line.split(";"), header, self.path, line_no)


def parse_sadf_csv(
    lines: Iterable[bytes | str],
    path: str,
    first_line_no: int = 1,
    header_line: str | None = None,
) -> Iterator[SysstatRecord | ParseError]:
    """Parse ``sadf -d [-U] FILE -- -d [-p]`` lines into records, or errors for bad lines.

    Yielding errors (rather than raising) lets the shipper dead-letter a line and go on.

    Args:
        lines: consecutive lines of one file, without their ``\\n``.
        path: the file, for errors.
        first_line_no: 1-based number of the first line.
        header_line: the header in force before the first line (when resuming mid-file).

    Yields:
        DiskSample per device row, RestartMark per ``LINUX-RESTART`` row, in file order; a
        ParseError per bad line.
    """
    yield from SadfCsvParser(path, header_line).feed(lines, first_line_no)
