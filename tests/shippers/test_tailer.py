from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from pipeline.shippers.tailer import (
    LineTooLong,
    TailChunk,
    read_complete_lines,
    read_gzip_lines,
    split_complete_lines,
)


def test_split_complete_lines() -> None:
    assert split_complete_lines(b"a\nbb\nccc", 100) == TailChunk((b"a", b"bb"), (102, 105), 105)
    assert split_complete_lines(b"partial", 7) == TailChunk((), (), 7)
    assert split_complete_lines(b"", 0) == TailChunk((), (), 0)
    assert split_complete_lines(b"\n\n", 0) == TailChunk((b"", b""), (1, 2), 2)
    assert split_complete_lines(b"x\r\n", 0) == TailChunk((b"x\r",), (3,), 3)


def test_partial_last_line_is_left_for_later(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"10, 0, 4096, 1\n20, 1, 40")
    chunk = read_complete_lines(p, 0, 4096)
    assert chunk == TailChunk((b"10, 0, 4096, 1",), (15,), 15, truncated=False)
    assert read_complete_lines(p, 15, 4096) == TailChunk((), (), 15)
    with p.open("ab") as f:
        f.write(b"96, 2\n")
    assert read_complete_lines(p, 15, 4096) == TailChunk((b"20, 1, 4096, 2",), (30,), 30)


def test_max_bytes_limits_but_returns_one_long_line(tmp_path: Path) -> None:
    long_line = b"1, 0, 4096, " + b", ".join(b"0" for _ in range(6000))
    p = tmp_path / "hist.log"
    p.write_bytes(long_line + b"\nshort\n")
    chunk = read_complete_lines(p, 0, 4096)
    assert chunk.lines == (long_line,)
    assert chunk.end_offsets == (len(long_line) + 1,)
    assert chunk.next_offset == len(long_line) + 1
    rest = read_complete_lines(p, chunk.next_offset, 4096)
    assert rest.lines == (b"short",)
    assert rest.next_offset == len(long_line) + 7


def test_max_bytes_stops_at_last_newline_within_budget(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"aaaa\nbbbb\ncccc\n")
    assert read_complete_lines(p, 0, 12) == TailChunk((b"aaaa", b"bbbb"), (5, 10), 10)
    assert read_complete_lines(p, 10, 12) == TailChunk((b"cccc",), (15,), 15)


def test_long_line_without_newline_yet(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"x" * 10_000)
    assert read_complete_lines(p, 0, 4096) == TailChunk((), (), 0)


def test_truncation(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"one\ntwo\n")
    assert read_complete_lines(p, 8, 100) == TailChunk((), (), 8)
    p.write_bytes(b"1\n")
    assert read_complete_lines(p, 8, 100) == TailChunk((), (), 0, truncated=True)
    assert read_complete_lines(p, 0, 100) == TailChunk((b"1",), (2,), 2)


def test_bad_arguments(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"")
    with pytest.raises(ValueError):
        read_complete_lines(p, -1, 100)
    with pytest.raises(ValueError):
        read_complete_lines(p, 0, 0)
    with pytest.raises(FileNotFoundError):
        read_complete_lines(tmp_path / "missing.log", 0, 100)


def test_gzip_offsets_are_decompressed(tmp_path: Path) -> None:
    p = tmp_path / "a_clat_hist.1.log.gz"
    p.write_bytes(gzip.compress(b"abc\nde\nf"))
    chunk = read_gzip_lines(p)
    assert chunk == TailChunk((b"abc", b"de", b"f"), (4, 7, 8), 8)
    assert read_gzip_lines(p, 4) == TailChunk((b"de", b"f"), (7, 8), 8)
    assert read_gzip_lines(p, 8) == TailChunk((), (), 8)
    assert read_gzip_lines(p, 9) == TailChunk((), (), 0, truncated=True)


def test_gzip_with_final_newline(tmp_path: Path) -> None:
    p = tmp_path / "b.log.gz"
    p.write_bytes(gzip.compress(b"abc\nde\n"))
    assert read_gzip_lines(p) == TailChunk((b"abc", b"de"), (4, 7), 7)


def test_incomplete_gzip_raises(tmp_path: Path) -> None:
    data = gzip.compress(b"line\n" * 1000)
    p = tmp_path / "c.log.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(EOFError):
        read_gzip_lines(p)


@pytest.mark.parametrize("max_bytes", [4096, 4 << 20])
def test_a_complete_line_of_megabytes_is_returned_wherever_a_read_starts(
    tmp_path: Path, max_bytes: int
) -> None:
    """A garbage line longer than ``max_line_bytes`` that ends is a line (the parser rejects
    it); the lines after it are read, whether or not a read starts at it."""
    huge = b"x" * (2 << 20)
    p = tmp_path / "a.log"
    p.write_bytes(b"one\n" + huge + b"\ntwo\n")
    first = read_complete_lines(p, 0, max_bytes)
    got, offset = list(first.lines), first.next_offset
    while offset < p.stat().st_size:
        chunk = read_complete_lines(p, offset, max_bytes)
        got += chunk.lines
        offset = chunk.next_offset
    assert got == [b"one", huge, b"two"]
    at_the_line = read_complete_lines(p, 4, max_bytes)
    assert at_the_line.lines[0] == huge and at_the_line.end_offsets[0] == 4 + len(huge) + 1


def test_no_line_end_to_the_end_of_a_megabyte_is_not_a_text_log(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"one\n" + b"\x00" * (1 << 20))
    assert read_complete_lines(p, 0, 4096).lines == (b"one",)
    with pytest.raises(LineTooLong, match="no line end within 1048576 bytes after byte 4"):
        read_complete_lines(p, 4, 4096)
