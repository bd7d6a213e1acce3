"""Reading whole histogram logs for the offline commands (``iolens fio-hist``, benchmarks).

The live pipeline tails files through the registry; this module only streams a finished file,
plain or gzip-compressed, line by line with bounded memory.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from pipeline.formats.fio.decode import row_from_fields, split_fields
from pipeline.parsers.errors import ParseError
from pipeline.records.core import FioHistRow
from pipeline.records.fio_bins import BinLayout


def open_log(path: str | Path) -> IO[bytes]:
    """Open a log for binary reading; ``.gz`` files are decompressed on the fly."""
    p = str(path)
    if p.endswith(".gz"):
        return cast(IO[bytes], gzip.open(p, "rb"))
    return open(p, "rb", buffering=1 << 20)


def first_line(path: str | Path) -> bytes:
    """The first line of a log (without its newline).

    Raises:
        ParseError: the file is empty.
    """
    with open_log(path) as fh:
        line = fh.readline()
    if not line.strip():
        raise ParseError(str(path), 1, "empty file: no histogram record to read")
    return line.rstrip(b"\r\n")


def iter_rows(path: str | Path, layout: BinLayout) -> Iterator[FioHistRow]:
    """Stream the records of a histogram log (blank lines are skipped).

    Raises:
        ParseError: on the first bad line, naming it.
    """
    p = str(path)
    with open_log(p) as fh:
        for line_no, line in enumerate(fh, start=1):
            if line.isspace():
                continue
            yield row_from_fields(split_fields(line, p, line_no), layout, p, line_no)
