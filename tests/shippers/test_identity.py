from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path
from typing import Any

import pytest

from pipeline.shippers.identity import FileIdentity, find_renamed, fingerprint_range, identify


def _fp(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def test_key_format() -> None:
    assert FileIdentity(device=2049, inode=131, fingerprint="0123456789abcdef").key == (
        "2049:131:0123456789abcdef"
    )


@pytest.mark.parametrize(
    ("head", "n", "whole", "expected"),
    [
        (b"", 8, False, None),
        (b"abc", 8, False, None),  # no newline, shorter than the range: wait
        (b"ab\ncd", 8, False, 3),  # first line complete: just past its newline
        (b"\n", 8, False, 1),
        (b"abcdefgh", 8, False, 8),  # range full before the first newline
        (b"abcdefghij\n", 8, False, 8),  # head longer than the range is cut to it
        (b"abc", 8, True, 3),  # complete file: all of it
        (b"", 8, True, None),
    ],
)
def test_fingerprint_range(head: bytes, n: int, whole: bool, expected: int | None) -> None:
    assert fingerprint_range(head, n, whole_file=whole) == expected


def test_fingerprint_range_rejects_nonpositive() -> None:
    with pytest.raises(ValueError, match="fingerprint_bytes"):
        fingerprint_range(b"x\n", 0)


def test_not_identifiable_until_first_line_complete(tmp_path: Path) -> None:
    p = tmp_path / "a_clat_hist.1.log"
    p.write_bytes(b"")
    assert identify(p, 1024) is None
    p.write_bytes(b"100, 0, 4096")
    assert identify(p, 1024) is None
    p.write_bytes(b"100, 0, 4096, 1\n200, 0")
    ident = identify(p, 1024)
    st = os.stat(p)
    assert ident == FileIdentity(st.st_dev, st.st_ino, _fp(b"100, 0, 4096, 1\n"))


def test_stable_while_growing_and_after_rename(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(b"first line\n")
    before = identify(p, 1024)
    with p.open("ab") as f:
        f.write(b"second line\nthird")
    assert identify(p, 1024) == before
    moved = tmp_path / "sub" / "b.log"
    moved.parent.mkdir()
    p.rename(moved)
    assert before is not None
    assert identify(moved, 1024) == before


def test_long_first_line_uses_fingerprint_bytes(tmp_path: Path) -> None:
    p = tmp_path / "long.log"
    p.write_bytes(b"x" * 20)
    ident = identify(p, 16)
    assert ident is not None
    assert ident.fingerprint == _fp(b"x" * 16)
    p.write_bytes(b"x" * 40 + b"\n")
    assert identify(p, 16) == ident


def test_inode_reuse_with_new_content_gives_new_key() -> None:
    # A fake stat returning the same device/inode for both contents: only the fingerprint differs.
    stat_result = os.stat_result((0o100644, 77, 9, 1, 0, 0, 0, 0, 0, 0))
    contents = {"old": b"0, 0, 4096, 1\n", "new": b"5, 1, 4096, 2\n"}

    def fake_open(path: str, mode: str) -> io.BytesIO:
        assert mode == "rb"
        return io.BytesIO(contents[path])

    def fake_stat(path: str) -> os.stat_result:
        return stat_result

    old = identify("old", 1024, stat=fake_stat, open_=fake_open)
    new = identify("new", 1024, stat=fake_stat, open_=fake_open)
    assert old is not None and new is not None
    assert (old.device, old.inode) == (new.device, new.inode) == (9, 77)
    assert old.key != new.key
    assert new.key == f"9:77:{_fp(contents['new'])}"


def test_replaced_while_reading_is_not_identified() -> None:
    results = iter(
        [
            os.stat_result((0o100644, 1, 9, 1, 0, 0, 0, 0, 0, 0)),
            os.stat_result((0o100644, 2, 9, 1, 0, 0, 0, 0, 0, 0)),
        ]
    )

    def fake_stat(path: str) -> os.stat_result:
        return next(results)

    def fake_open(path: str, mode: str) -> Any:
        return io.BytesIO(b"line\n")

    assert identify("f", 1024, stat=fake_stat, open_=fake_open) is None


def test_whole_file_short_without_newline(tmp_path: Path) -> None:
    p = tmp_path / "x.log.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00")
    assert identify(p, 1024) is None
    ident = identify(p, 1024, whole_file=True)
    assert ident is not None
    assert ident.fingerprint == _fp(b"\x1f\x8b\x08\x00")


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        identify(tmp_path / "nope", 1024)


def test_find_renamed_follows_the_inode_within_the_directory(tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_bytes(b"first line\n")
    ident = identify(str(log), 64)
    assert ident is not None
    assert find_renamed(ident.key, log) is None  # still there, under no other name
    log.rename(tmp_path / "app.log.1")
    log.write_bytes(b"a new file\n")  # another inode takes the old name
    assert find_renamed(ident.key, log) == tmp_path / "app.log.1"
    (tmp_path / "app.log.1").unlink()
    assert find_renamed(ident.key, log) is None
    assert find_renamed("not-a-key", log) is None
