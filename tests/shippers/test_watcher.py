from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from watchdog.events import (
    DirCreatedEvent,
    FileClosedEvent,
    FileClosedNoWriteEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileOpenedEvent,
    FileSystemEvent,
)

from pipeline.shippers.watcher import DropWatcher, FileEvent, ObserverKind, to_file_event

PATTERN = "*_clat_hist.*.log*"
WAIT_S = 30.0  # generous: only bounds how long a failing test hangs


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (
            FileCreatedEvent("/d/a_clat_hist.1.log"),
            FileEvent(Path("/d/a_clat_hist.1.log"), "created"),
        ),
        (
            FileModifiedEvent(b"/d/a_clat_hist.1.log"),
            FileEvent(Path("/d/a_clat_hist.1.log"), "modified"),
        ),
        (
            FileDeletedEvent("/d/a_clat_hist.1.log.gz"),
            FileEvent(Path("/d/a_clat_hist.1.log.gz"), "deleted"),
        ),
        (
            FileClosedEvent("/d/a_clat_hist.1.log"),
            FileEvent(Path("/d/a_clat_hist.1.log"), "closed"),
        ),
        (
            FileMovedEvent("/d/a_clat_hist.1.log", "/d/b_clat_hist.1.log"),
            FileEvent(Path("/d/a_clat_hist.1.log"), "moved", Path("/d/b_clat_hist.1.log")),
        ),
        (  # a temporary name renamed to a matching one counts
            FileMovedEvent("/d/tmp123", "/d/a_clat_hist.1.log"),
            FileEvent(Path("/d/tmp123"), "moved", Path("/d/a_clat_hist.1.log")),
        ),
        (FileCreatedEvent("/d/notes.txt"), None),
        (FileCreatedEvent("/d/A_CLAT_HIST.1.LOG"), None),  # case-sensitive
        (DirCreatedEvent("/d/x_clat_hist.1.log"), None),
        (FileOpenedEvent("/d/a_clat_hist.1.log"), None),
        (FileClosedNoWriteEvent("/d/a_clat_hist.1.log"), None),
    ],
)
def test_to_file_event(event: FileSystemEvent, expected: FileEvent | None) -> None:
    assert to_file_event(event, PATTERN) == expected


def test_missing_drop_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"drops\[\]\.path") as info:
        DropWatcher([tmp_path, tmp_path / "missing"], PATTERN)
    assert str(tmp_path / "missing") in str(info.value)


def test_initial_scan_with_fake_walk(tmp_path: Path) -> None:
    d1, d2 = tmp_path / "drop1", tmp_path / "drop2"
    d1.mkdir()
    d2.mkdir()
    tree: dict[str, list[tuple[str, list[str], list[str]]]] = {
        str(d1): [
            (str(d1), ["n2"], ["b_clat_hist.1.log", "readme"]),
            (f"{d1}/n2", [], ["a_clat_hist.2.log.n2.gz"]),
        ],
        str(d2): [(str(d2), [], ["a_clat_hist.1.log"])],
    }
    w = DropWatcher([d2, d1], PATTERN, walk=lambda top: tree[top])
    assert w.initial_scan() == [
        d1 / "b_clat_hist.1.log",
        d1 / "n2" / "a_clat_hist.2.log.n2.gz",
        d2 / "a_clat_hist.1.log",
    ]


def test_initial_scan_real(tmp_path: Path) -> None:
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "x_clat_hist.1.log").write_bytes(b"")
    (tmp_path / "x_clat_hist.2.log").write_bytes(b"")
    (tmp_path / "other.txt").write_bytes(b"")
    w = DropWatcher([tmp_path], PATTERN)
    assert w.initial_scan() == [
        tmp_path / "n1" / "x_clat_hist.1.log",
        tmp_path / "x_clat_hist.2.log",
    ]


def test_drain_times_out_empty(tmp_path: Path) -> None:
    with DropWatcher([tmp_path], PATTERN, "polling", 0.05) as w:
        assert w.drain(0.01) == []


@pytest.fixture(params=["native", "polling"])
def watcher(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DropWatcher]:
    drops = [tmp_path / "drop1", tmp_path / "drop2"]
    for d in drops:
        d.mkdir()
    kind: ObserverKind = request.param
    w = DropWatcher(drops, PATTERN, kind, 0.05)
    w.start()
    try:
        yield w
    finally:
        w.stop()


class Events:
    """Everything a watcher reported so far, drained on demand."""

    def __init__(self, watcher: DropWatcher) -> None:
        self.watcher = watcher
        self.seen: list[FileEvent] = []

    def wait_for(self, want: FileEvent, since: int = 0) -> None:
        """Drain until ``want`` is among the events seen (from index ``since`` on)."""
        deadline = time.monotonic() + WAIT_S
        while want not in self.seen[since:]:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no {want} within {WAIT_S} s; saw {self.seen}")
            self.seen.extend(self.watcher.drain(remaining))


def test_observer_reports_file_lifecycle(watcher: DropWatcher) -> None:
    drop1, drop2 = watcher.dirs
    events = Events(watcher)
    (drop1 / "node01").mkdir()
    path = drop1 / "node01" / "a_clat_hist.1.log"
    (drop1 / "node01" / "ignored.txt").write_bytes(b"x\n")
    path.write_bytes(b"0, 0, 4096, 1\n")
    events.wait_for(FileEvent(path, "created"))

    n_before = len(events.seen)
    with path.open("ab") as f:
        f.write(b"1000, 0, 4096, 2\n")
    events.wait_for(FileEvent(path, "modified"), since=n_before)

    dest = drop1 / "node01" / "a_clat_hist.1.log.node01"
    path.rename(dest)
    events.wait_for(FileEvent(path, "moved", dest))

    other = drop2 / "b_clat_hist.2.log"
    other.write_bytes(b"")
    dest.unlink()
    events.wait_for(FileEvent(dest, "deleted"))
    events.wait_for(FileEvent(other, "created"))

    assert all("ignored" not in str(e.path) for e in events.seen)
    assert all(e.dest is None for e in events.seen if e.kind != "moved")


def test_stop_is_idempotent_and_restart_refused(tmp_path: Path) -> None:
    w = DropWatcher([tmp_path], PATTERN, "native")
    w.start()
    with pytest.raises(RuntimeError, match="already started"):
        w.start()
    w.stop()
    w.stop()
