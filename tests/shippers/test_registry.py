from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.shippers.registry import REGISTRY_FILE, FileState, Registry


class FakeClock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def reg(tmp_path: Path, clock: FakeClock) -> Iterator[Registry]:
    r = Registry(tmp_path / "state" / REGISTRY_FILE, clock=clock)
    yield r
    r.close()


def test_upsert_new_starts_at_zero(reg: Registry) -> None:
    state = reg.upsert_new("1:2:ab", "/drop/a.log", anchor_ms=1234)
    assert state == FileState(
        key="1:2:ab",
        path="/drop/a.log",
        offset=0,
        line_no=0,
        size_seen=0,
        cursor=None,
        anchor_ms=1234,
        first_seen_ms=1_700_000_000_000,
        updated_ms=1_700_000_000_000,
        done=False,
        generation=0,
    )
    assert reg.get("1:2:ab") == state
    assert reg.get("nope") is None


def test_sqlite_settings(reg: Registry) -> None:
    db = sqlite3.connect(reg.path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()
    assert reg._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL


def test_upsert_existing_keeps_progress_and_updates_path(reg: Registry, clock: FakeClock) -> None:
    reg.upsert_new("k", "/drop/a.log", anchor_ms=5)
    reg.commit("k", 100, 3, '{"t": 1}')
    clock.t += 2
    state = reg.upsert_new("k", "/drop/renamed.log", anchor_ms=99)
    assert (state.path, state.offset, state.line_no, state.cursor, state.anchor_ms) == (
        "/drop/renamed.log",
        100,
        3,
        '{"t": 1}',
        5,
    )
    assert state.first_seen_ms == 1_700_000_000_000
    assert state.updated_ms == 1_700_000_002_000


def test_commit_moves_forward_only(reg: Registry) -> None:
    reg.upsert_new("k", "/a")
    assert reg.commit("k", 50, 2, "c1").offset == 50
    assert reg.commit("k", 50, 2, "c2").cursor == "c2"  # same position again is fine
    with pytest.raises(ValueError, match="backwards"):
        reg.commit("k", 40, 3, None)
    with pytest.raises(ValueError, match="backwards"):
        reg.commit("k", 60, 1, None)
    state = reg.get("k")
    assert state is not None
    assert (state.offset, state.line_no, state.cursor) == (50, 2, "c2")


def test_commit_unknown_key(reg: Registry) -> None:
    with pytest.raises(KeyError):
        reg.commit("missing", 1, 1, None)
    with pytest.raises(KeyError):
        reg.reset("missing")
    with pytest.raises(KeyError):
        reg.set_path("missing", "/x")


def test_reset_after_truncation_bumps_generation(reg: Registry) -> None:
    reg.upsert_new("k", "/a")
    reg.commit("k", 500, 10, '{"x": 1}')
    reg.set_size_seen("k", 600)
    reg.mark_done("k")
    state = reg.reset("k")
    assert (state.offset, state.line_no, state.cursor, state.size_seen, state.done) == (
        0,
        0,
        None,
        0,
        False,
    )
    assert state.generation == 1
    assert reg.commit("k", 20, 1, None).offset == 20
    assert reg.reset("k").generation == 2


def test_set_path_size_done_forget_all(reg: Registry) -> None:
    reg.upsert_new("b", "/b")
    reg.upsert_new("a", "/a")
    assert reg.set_path("a", "/a2").path == "/a2"
    assert reg.set_size_seen("a", 77).size_seen == 77
    assert reg.mark_done("a").done is True
    assert [s.key for s in reg.all()] == ["a", "b"]
    assert reg.forget("b") is True
    assert reg.forget("b") is False
    assert [s.path for s in reg.all()] == ["/a2"]


def test_reopen_sees_committed_values(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    with Registry(path) as r:
        r.upsert_new("k", "/a", anchor_ms=7)
        r.commit("k", 123, 4, '{"open": []}')
    with Registry(path) as r:
        state = r.get("k")
    assert state is not None
    assert (state.path, state.offset, state.line_no, state.cursor, state.anchor_ms) == (
        "/a",
        123,
        4,
        '{"open": []}',
        7,
    )


_CHILD = textwrap.dedent(
    """
    import sys
    from pipeline.shippers.registry import Registry
    reg = Registry(sys.argv[1])
    reg.upsert_new("k", "/drop/a.log")
    for i in range(1, 4):
        reg.commit("k", i * 100, i, '{"i": %d}' % i)
    print("committed", flush=True)
    sys.stdin.readline()  # wait here until killed
    """
)


def test_committed_values_survive_kill(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "committed\n"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    assert child.returncode == -signal.SIGKILL
    with Registry(path) as r:
        state = r.get("k")
    assert state is not None
    assert (state.offset, state.line_no, state.cursor) == (300, 3, '{"i": 3}')


def test_by_path_finds_the_files_last_seen_there(reg: Registry) -> None:
    reg.upsert_new("1:10:aaaa", "/d/app.log")
    reg.commit("1:10:aaaa", 300, 3, None)
    reg.upsert_new("1:11:bbbb", "/d/app.log.1")
    found = reg.by_path("/d/app.log")
    assert [(st.key, st.offset, st.line_no) for st in found] == [("1:10:aaaa", 300, 3)]
    assert reg.by_path("/d/other.log") == []
