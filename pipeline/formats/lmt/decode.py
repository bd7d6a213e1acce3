"""Lustre Monitoring Tool (LMT) OST samples as a CSV export of the LMT database: lines -> records.

The export is one row per OST per LMT timestep (5 s at NERSC), ordered by time::

    sqlite3 -header -csv lmt.sqlite3 "SELECT TIMESTAMP_INFO.TIMESTAMP, OST_INFO.OST_NAME,
        OST_DATA.READ_BYTES, OST_DATA.WRITE_BYTES, OST_DATA.PCT_CPU, OST_DATA.KBYTES_FREE,
        OST_DATA.KBYTES_USED FROM OST_DATA JOIN OST_INFO USING(OST_ID)
        JOIN TIMESTAMP_INFO USING(TS_ID) ORDER BY TIMESTAMP, OST_NAME"

(or ``mysql -B`` with the same query against the live LMT MySQL database; its TAB-separated
output is read too). Verbatim from NERSC's ``lmtdb-reset`` extract (pytokio's test inputs;
tests/data/lmt/README.md), around a reboot of the OSS, exported without the ``KBYTES_*``
columns::

    TIMESTAMP,OST_NAME,READ_BYTES,WRITE_BYTES,PCT_CPU
    "2018-04-18 07:35:45",snx11168-OST00ad,438210634514432,274820641179842,0.0
    "2018-04-18 07:39:05",snx11168-OST00ad,0,0,0.0

Columns are found by name in the header (any case, any order, a ``TABLE.`` prefix ignored):
``TIMESTAMP``, ``OST_NAME``, ``READ_BYTES``, ``WRITE_BYTES`` are required; ``PCT_CPU``,
``KBYTES_FREE``, ``KBYTES_USED`` are read when present (an empty value or ``NULL`` is None).

``READ_BYTES``/``WRITE_BYTES`` are CUMULATIVE byte counters since the OSS last started: they
go back to 0 when it reboots (LMT schema, pytokio ``connectors/lmtdb.py``); per-interval
traffic is computed by :mod:`pipeline.formats.lmt.reduce`. ``TIMESTAMP`` is the time the LMT
collector sampled the counters, ``YYYY-MM-DD HH:MM:SS`` in the database's local time (NERSC's
databases hold Pacific time; the parser is told the zone, default UTC) or Unix seconds.

``OST_NAME`` is the Lustre target name ``<fsname>-OST<index in hex>``: ``snx11168-OST00ad``
is OST index 173 of file system ``snx11168``, the index Darshan's ``LUSTRE_OST_IDS`` and
``lfs getstripe`` report. The database's own ``OST_ID`` key (174 for that OST) is not it.

LMT's own form, the database (pytokio's test inputs and caches are SQLite copies of it), is
not read: a file that begins as an SQLite database does (``SQLite format 3\0``) is refused
whole, with the export command above in the reason (:func:`refuse_database`).

This module is pure: lines in, :class:`LmtSample` records and
:class:`~pipeline.parsers.errors.ParseError` values (file, line, reason) out.
"""

from __future__ import annotations

import csv
import itertools
import math
import re
import shlex
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from pathlib import PurePath

from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import MAX_EXACT, MAX_LONG, epoch_problem, zoned_epoch
from pipeline.parsers.table import HeaderedLines

REQUIRED: tuple[str, ...] = ("TIMESTAMP", "OST_NAME", "READ_BYTES", "WRITE_BYTES")
OPTIONAL: tuple[str, ...] = ("PCT_CPU", "KBYTES_FREE", "KBYTES_USED")
NULLS = frozenset({"", "NULL", "\\N"})
"""Values that mean SQL NULL: sqlite3 -csv prints an empty value, mysql -B ``NULL``."""

OST_NAME_PATTERN = re.compile(r"(?P<fs>[^\s]+)-OST(?P<index>[0-9a-fA-F]{1,8})")
EXPORT_QUERY = (
    "SELECT TIMESTAMP_INFO.TIMESTAMP, OST_INFO.OST_NAME, OST_DATA.READ_BYTES, "
    "OST_DATA.WRITE_BYTES, OST_DATA.PCT_CPU, OST_DATA.KBYTES_FREE, OST_DATA.KBYTES_USED "
    "FROM OST_DATA JOIN OST_INFO USING(OST_ID) JOIN TIMESTAMP_INFO USING(TS_ID) "
    "ORDER BY TIMESTAMP, OST_NAME"
)
"""The SQL whose ``sqlite3 -header -csv`` (or ``mysql -B``) output the parser reads."""
SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite 3 database file (sqlite.org/fileformat.html, 1.3.1)."""


@dataclass(frozen=True)
class LmtSample:
    """One OST's LMT counters at one timestep.

    Attributes:
        ts_s: when the counters were sampled, Unix seconds (UTC).
        ost_name: the Lustre target name, e.g. ``snx11168-OST00ad``.
        fs: the file system name before ``-OST`` (``snx11168``).
        ost_index: the Lustre OST index, the hex suffix of the name (``00ad`` -> 173).
        read_bytes, write_bytes: cumulative bytes read from / written to the OST since its
            server started (reset to 0 by a reboot).
        pct_cpu: the OSS CPU use LMT recorded with the OST, percent; None when not exported.
        kbytes_free, kbytes_used: OST space, KiB; None when not exported.
    """

    ts_s: float
    ost_name: str
    fs: str
    ost_index: int
    read_bytes: int
    write_bytes: int
    pct_cpu: float | None = None
    kbytes_free: int | None = None
    kbytes_used: int | None = None


def split_ost_name(name: str) -> tuple[str, int]:
    """``snx11168-OST00ad`` -> ``("snx11168", 173)``: file system and Lustre OST index.

    Raises:
        ValueError: the name is not ``<fsname>-OST<hex>``.
    """
    m = OST_NAME_PATTERN.fullmatch(name.strip())
    if m is None:
        raise ValueError(f"OST name {name!r} is not <fsname>-OST<hex index>")
    return m["fs"], int(m["index"], 16)


def parse_timestamp(text: str, tz: tzinfo = UTC) -> float:
    """Unix seconds from an LMT ``TIMESTAMP``: ``2018-04-18 07:35:15`` in ``tz``, or Unix s.

    Raises:
        ValueError: neither form, or a time before 1970 or beyond the year 9999.
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        try:
            when = datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise ValueError(
                f"not a timestamp: {text[:40]!r} (expected YYYY-MM-DD HH:MM:SS or Unix seconds)"
            ) from None
        value = zoned_epoch(when, tz)
    problem = epoch_problem(value)
    if problem is not None:
        raise ValueError(f"not a timestamp: {text[:40]!r} is {problem}")
    return value


def _count(text: str, name: str) -> int:
    """A byte or KiB count: a whole number in ``[0, 2^63)`` (``123`` or ``123.0``; LMT's
    counters are 64-bit, and Elasticsearch stores them as ``long``)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} is not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError(f"{name} must be a whole number >= 0, got {text[:40]!r}")
    count = int(text) if text.isascii() and text.isdigit() and len(text) <= 20 else int(value)
    if count > MAX_LONG:
        raise ValueError(f"{name} is out of range (>= 2^63): {text[:40]!r}")
    return count


def _percent(text: str, name: str) -> float:
    """A percentage: a finite number in ``[0, 2^53)``."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} is not a number: {text[:40]!r}") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {text[:40]!r}")
    if value >= MAX_EXACT:
        raise ValueError(f"{name} is out of range (>= 2^53): {text[:40]!r}")
    return value


@dataclass(frozen=True)
class LmtHeader:
    """Where each column sits in the rows under one export header line.

    Attributes:
        line: the header line as read (persist it with the offset to resume mid-file).
        delimiter: ``,`` (sqlite3 -csv) or TAB (mysql -B).
        width: number of values of a row.
        pos: column name (upper case, no table prefix) -> position, for the known columns.
    """

    line: str
    delimiter: str
    width: int
    pos: dict[str, int]

    @classmethod
    def parse(cls, line: str, path: str, line_no: int) -> LmtHeader:
        """Read an export header line.

        Raises:
            ParseError: a required column is missing or a known column appears twice.
        """
        delimiter = "\t" if "\t" in line and "," not in line else ","
        names = next(csv.reader([line], delimiter=delimiter))
        pos: dict[str, int] = {}
        for i, name in enumerate(names):
            key = name.strip().upper().rpartition(".")[2]
            if key in pos:
                raise ParseError(path, line_no, f"column {key} appears twice")
            if key in REQUIRED or key in OPTIONAL:
                pos[key] = i
        missing = [c for c in REQUIRED if c not in pos]
        if missing:
            raise ParseError(
                path,
                line_no,
                f"LMT export header without {', '.join(missing)} (export with: {EXPORT_QUERY});"
                " its rows up to the next header are dead-lettered",
            )
        return cls(line, delimiter, len(names), pos)


def refuse_database(first_line: bytes | str, path: str) -> None:
    """Refuse a file whose first line shows it is an SQLite database: LMT's database itself,
    not the CSV export of it that this module reads.

    Args:
        first_line: the file's first line (bytes as read, or text).
        path: the file, for the error and the export command.

    Raises:
        ParseError: at line 0 (the whole file): it is an SQLite database; the reason gives the
            ``sqlite3`` command that writes the CSV (:data:`EXPORT_QUERY`) next to it.
    """
    head = first_line if isinstance(first_line, bytes) else first_line.encode("utf-8", "replace")
    if not head.startswith(SQLITE_MAGIC):
        return
    csv_path = str(PurePath(path).with_suffix(".csv"))
    raise ParseError(
        path,
        0,
        "an SQLite database (LMT's own tables, as pytokio keeps them), not the CSV export of "
        "it that iolens reads for LMT; write the CSV with: sqlite3 -header -csv "
        f'{shlex.quote(path)} "{EXPORT_QUERY}" > {shlex.quote(csv_path)} and give iolens '
        "that file (an lmt drop reads *.csv)",
    )


def is_header(line: str) -> bool:
    """True for an export header line: it names both ``TIMESTAMP`` and ``OST_NAME``."""
    words = {w.upper().rpartition(".")[2] for w in re.split(r"[,\t\"\s]+", line) if w}
    return {"TIMESTAMP", "OST_NAME"} <= words


def parse_row(
    values: list[str], header: LmtHeader, path: str, line_no: int, tz: tzinfo = UTC
) -> LmtSample:
    """Turn one split data row into an :class:`LmtSample`.

    Raises:
        ParseError: wrong number of values, a bad timestamp or OST name, a counter that is
            not a whole number >= 0, or a PCT_CPU that is not a finite number >= 0.
    """
    if len(values) != header.width:
        raise ParseError(path, line_no, f"{len(values)} value(s), the header has {header.width}")
    pos = header.pos

    def optional(name: str) -> str | None:
        i = pos.get(name)
        text = None if i is None else values[i].strip()
        return None if text is None or text in NULLS else text

    try:
        name = values[pos["OST_NAME"]].strip()
        fs, index = split_ost_name(name)
        ts = parse_timestamp(values[pos["TIMESTAMP"]], tz)
        read = _count(values[pos["READ_BYTES"]].strip(), "READ_BYTES")
        write = _count(values[pos["WRITE_BYTES"]].strip(), "WRITE_BYTES")
        cpu, free, used = _optional_fields(optional)
    except ValueError as err:
        raise ParseError(path, line_no, str(err)) from None
    return LmtSample(ts, name, fs, index, read, write, cpu, free, used)


def _optional_fields(
    optional: Callable[[str], str | None],
) -> tuple[float | None, int | None, int | None]:
    """``(PCT_CPU, KBYTES_FREE, KBYTES_USED)`` of a row, None where absent or null
    (``optional``: a column's stripped text, None when absent or null).

    Raises:
        ValueError: a PCT_CPU that is not a finite number >= 0, or a count that is not a whole
            number >= 0.
    """
    cpu_text = optional("PCT_CPU")
    cpu = _percent(cpu_text, "PCT_CPU") if cpu_text is not None else None
    free_text, used_text = optional("KBYTES_FREE"), optional("KBYTES_USED")
    free = _count(free_text, "KBYTES_FREE") if free_text is not None else None
    used = _count(used_text, "KBYTES_USED") if used_text is not None else None
    return cpu, free, used


class LmtCsvParser(HeaderedLines[LmtHeader, LmtSample]):
    """Parses LMT export lines chunk by chunk, remembering the header.

    A tail reads a file in chunks, so the header that names a chunk's columns may have come in
    an earlier chunk: :attr:`header_line` is that header's text (persist it with the offset and
    pass it back to resume). A later header line (exports appended to one file) replaces it.
    The only state is that header; no I/O.

    Args:
        path: the input file, for errors.
        header_line: the header in force before the first line fed (None at a file's start).
        tz: the time zone of ``YYYY-MM-DD HH:MM:SS`` timestamps (the LMT database's).
    """

    no_header = "row before the header line (export with sqlite3 -header)"

    def feed(
        self, lines: Iterable[bytes | str], first_line_no: int
    ) -> Iterator[LmtSample | ParseError]:
        """:meth:`HeaderedLines.feed`; from a file's first line, an SQLite database is refused.

        Raises:
            ParseError: the file is an SQLite database, not an export (see
                :func:`refuse_database`); raised when the first line is read.
        """
        rest = iter(lines)
        if first_line_no == 1:
            first = next(rest, None)
            if first is None:
                return
            refuse_database(first, self.path)
            rest = itertools.chain([first], rest)
        yield from super().feed(rest, first_line_no)

    def is_header(self, line: str) -> bool:
        """An export header names both ``TIMESTAMP`` and ``OST_NAME``."""
        return is_header(line)

    def parse_header(self, line: str, line_no: int) -> LmtHeader:
        """:meth:`LmtHeader.parse`."""
        return LmtHeader.parse(line, self.path, line_no)

    def parse_row(self, line: str, header: LmtHeader, line_no: int) -> LmtSample:
        """One row; a value may be quoted (``"2018-04-18 07:35:15"``) but not span lines."""
        try:
            values = next(csv.reader([line], delimiter=header.delimiter, strict=True))
        except csv.Error as err:
            raise ParseError(self.path, line_no, f"bad CSV: {err}") from None
        return parse_row(values, header, self.path, line_no, self.tz)


def parse_lmt_csv(
    lines: Iterable[bytes | str],
    path: str,
    first_line_no: int = 1,
    header_line: str | None = None,
    tz: tzinfo = UTC,
) -> Iterator[LmtSample | ParseError]:
    """Parse an LMT OST export (``sqlite3 -header -csv`` / ``mysql -B``) into samples, or errors.

    Args:
        lines: consecutive lines of one file, without their ``\\n``.
        path: the file, for errors.
        first_line_no: 1-based number of the first line.
        header_line: the header in force before the first line (when resuming mid-file).
        tz: the time zone of ``YYYY-MM-DD HH:MM:SS`` timestamps (default UTC).

    Yields:
        An :class:`LmtSample` per row, in file order; a ParseError per bad line.

    Raises:
        ParseError: the file is an SQLite database (LMT's own form), not an export: see
            :func:`refuse_database`.
    """
    yield from LmtCsvParser(path, header_line, tz).feed(lines, first_line_no)
