"""Line-fed parsing of exported tables whose header line names the columns (sadf, sacct, LMT).

A tail reads a file in chunks, so the header naming a chunk's columns may have come in an
earlier chunk: :attr:`HeaderedLines.header_line` is that header's text, to persist with the
file offset and pass back on resume. A later line that is itself a header (several exports
appended to one file) replaces it. Subclasses say what a header is, how to read it and how to
read a row; this class does the decoding, the blank lines, rows before any header and rows
under a header that could not be read (each an error: every row is indexed or kept). No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, tzinfo
from typing import Generic, TypeVar

from pipeline.parsers.errors import ParseError

H = TypeVar("H")
R = TypeVar("R")


class HeaderedLines(Generic[H, R]):
    """Parses table lines chunk by chunk, remembering the header in force.

    Args:
        path: the input file, for errors.
        header_line: the header in force before the first line fed (None at a file's start).
        tz: the time zone of local date-times in the rows.

    Subclasses set :attr:`no_header` (the reason given for a row before any header) and
    implement :meth:`is_header`, :meth:`parse_header` and :meth:`parse_row`.
    """

    no_header = "row before the header line"

    def __init__(self, path: str, header_line: str | None = None, tz: tzinfo = UTC) -> None:
        self.path = path
        self.tz = tz
        self.header_line = header_line
        self._header: H | None = None
        self._foreign = False
        self._foreign_at = 0
        if header_line is not None:
            try:
                self._header = self.parse_header(header_line, 0)
            except ParseError:
                self._foreign = True

    def is_header(self, line: str) -> bool:
        """Whether ``line`` is a header line."""
        raise NotImplementedError

    def parse_header(self, line: str, line_no: int) -> H:
        """Read a header line.

        Raises:
            ParseError: it lacks a required column (the rows under it are skipped).
        """
        raise NotImplementedError

    def parse_row(self, line: str, header: H, line_no: int) -> R | None:
        """Read one data row under ``header``; None for a row that carries nothing.

        Raises:
            ParseError: naming the line and what is wrong with it.
        """
        raise NotImplementedError

    def parse_headless(self, line: str, line_no: int) -> R | None:
        """Read a line that comes before any header: by default an error (:attr:`no_header`);
        a format whose tool prints some rows before its first header reads them here.

        Raises:
            ParseError: the line cannot be read without a header.
        """
        raise ParseError(self.path, line_no, self.no_header)

    def feed(self, lines: Iterable[bytes | str], first_line_no: int) -> Iterator[R | ParseError]:
        """Parse consecutive lines; a bad line yields its :class:`ParseError` and parsing goes on.

        Empty lines are skipped. A header lacking a required column yields its error, and each
        row under it an error naming that header's line (so that every row is kept).

        Args:
            lines: lines without their ``\\n`` (bytes are decoded as UTF-8; a final ``\\r`` is
                dropped).
            first_line_no: 1-based number of the first line in its file.
        """
        for i, raw in enumerate(lines):
            line_no = first_line_no + i
            try:
                line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError as err:
                yield ParseError(self.path, line_no, f"not UTF-8 text: {err.reason}")
                continue
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            out: R | ParseError | None
            if self.is_header(line):
                out = self._take_header(line, line_no)
            else:
                out = self._take_row(line, line_no)
            if out is not None:
                yield out

    def _take_header(self, line: str, line_no: int) -> ParseError | None:
        """Take a header line as the one in force; the error when it cannot be read."""
        self.header_line = line
        try:
            self._header, self._foreign = self.parse_header(line, line_no), False
        except ParseError as err:
            self._header, self._foreign, self._foreign_at = None, True, line_no
            return err
        return None

    def _take_row(self, line: str, line_no: int) -> R | ParseError | None:
        """A data line under the header in force: its record, its error or None (skipped)."""
        if self._foreign:
            where = f"line {self._foreign_at}" if self._foreign_at else "an earlier read"
            return ParseError(
                self.path, line_no, f"row under a header that could not be read ({where})"
            )
        try:
            if self._header is None:
                return self.parse_headless(line, line_no)
            return self.parse_row(line, self._header, line_no)
        except ParseError as err:
            return err
