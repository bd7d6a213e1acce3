"""The cluster each file was delivered to: recorded on commit, migrated into old registries,
forgotten by ``redeliver``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pipeline.shippers.registry import REGISTRY_FILE, FileState, Registry
from pipeline.shippers.rotation import adopt_rotated

OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    key            TEXT PRIMARY KEY,
    path           TEXT NOT NULL,
    offset         INTEGER NOT NULL DEFAULT 0,
    line_no        INTEGER NOT NULL DEFAULT 0,
    size_seen      INTEGER NOT NULL DEFAULT 0,
    cursor         TEXT,
    anchor_ms      INTEGER,
    first_seen_ms  INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    done           INTEGER NOT NULL DEFAULT 0,
    generation     INTEGER NOT NULL DEFAULT 0
)
"""
"""The ``files`` table as registries were created before the ``cluster`` column."""


def _old_registry(path: Path) -> None:
    """A registry in the old schema, written as the old code wrote it (WAL, one row per file:
    ``a`` delivered up to offset 120, ``q`` quarantined, ``n`` registered but not read)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(OLD_SCHEMA)
    rows = [
        ("1:2:a", "/d/a.log", 120, 3, 120, '{"c": 1}', 5, 1000, 2000, 0, 1),
        ("1:3:q", "/d/q.log", 40, 1, 90, None, None, 1000, 2000, 1, 0),
        ("1:4:n", "/d/n.log", 0, 0, 0, None, None, 1000, 1000, 0, 0),
    ]
    db.executemany("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    db.close()


def test_an_old_registry_opens_with_unknown_clusters_and_works(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    _old_registry(path)
    with Registry(path, clock=lambda: 3.0, cluster="B") as reg:
        a = reg.get("1:2:a")
        assert a == FileState("1:2:a", "/d/a.log", 120, 3, 120, '{"c": 1}', 5, 1000, 2000, False, 1)
        assert a.cluster is None
        assert not a.delivered_elsewhere("B")  # unknown counts as this cluster
        assert reg.redeliver() == 0
        state = reg.commit("1:2:a", 200, 5, None)
        assert (state.offset, state.line_no, state.cluster, state.updated_ms) == (200, 5, "B", 3000)
        assert reg.upsert_new("9:9:z", "/d/z.log").cluster is None
    db = sqlite3.connect(path)
    try:
        cols = [r[1] for r in db.execute("PRAGMA table_info(files)")]
    finally:
        db.close()
    assert cols[-1] == "cluster" and len(cols) == 12
    with Registry(path) as again:  # opened twice: no second migration
        assert [(s.key, s.cluster) for s in again.all()] == [
            ("1:2:a", "B"),
            ("1:3:q", None),
            ("1:4:n", None),
            ("9:9:z", None),
        ]


def test_commit_records_the_cluster_and_keeps_it_when_unknown(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    with Registry(path, cluster="A") as reg:
        reg.upsert_new("k", "/d/k.log")
        assert reg.commit("k", 10, 1, None).cluster == "A"
    with Registry(path) as unknown:
        assert unknown.commit("k", 20, 2, None).cluster == "A"
    with Registry(path, cluster="B") as reg:
        state = reg.get("k")
        assert state is not None
        assert (state.delivered_elsewhere("B"), state.delivered_elsewhere("A")) == (True, False)
        assert state.delivered_elsewhere(None) is False


def test_redeliver_restarts_what_went_elsewhere_keeping_generation(tmp_path: Path) -> None:
    path = tmp_path / REGISTRY_FILE
    with Registry(path, cluster="A") as reg:
        for key in ("gone", "kept", "bad", "fresh"):
            reg.upsert_new(key, f"/d/{key}.log", anchor_ms=7)
        reg.commit("gone", 10, 1, None)
        reg.reset("gone")
        reg.commit("gone", 300, 9, '{"x": 2}')
        reg.set_size_seen("gone", 300)
        reg.commit("bad", 50, 2, None)
        reg.mark_done("bad")
    with Registry(path, cluster="C") as reg:
        reg.upsert_new("kept", "/d/kept.log")
        reg.commit("kept", 40, 1, None)
    with Registry(path, cluster="C") as reg:
        assert reg.redeliver() == 1
        gone = reg.get("gone")
        assert gone is not None
        assert (gone.offset, gone.line_no, gone.size_seen, gone.cursor, gone.cluster) == (
            0,
            0,
            0,
            None,
            None,
        )
        assert (gone.generation, gone.anchor_ms, gone.done) == (1, 7, False)
        assert [(s.key, s.offset, s.cluster) for s in reg.all()] == [
            ("bad", 50, "A"),  # quarantined: stays
            ("fresh", 0, None),
            ("gone", 0, None),
            ("kept", 40, "C"),
        ]
        assert reg.redeliver() == 0
    with Registry(path) as unknown:
        assert unknown.redeliver() == 0


def test_a_rotated_copy_adopts_only_what_went_to_this_cluster(tmp_path: Path) -> None:
    copy = tmp_path / "app.log.1"
    copy.write_bytes(b"first\nsecond\nthird\n")
    path = tmp_path / REGISTRY_FILE
    with Registry(path, cluster="A") as reg:
        reg.upsert_new("1:10:fp", tmp_path / "app.log")
        reg.commit("1:10:fp", 13, 2, None)  # "first\nsecond\n"
    with Registry(path, cluster="B") as reg:
        assert adopt_rotated(reg, {}, "1:11:fp", copy) is None
        assert reg.get("1:11:fp") is None
    with Registry(path, cluster="A") as reg:
        state = adopt_rotated(reg, {}, "1:11:fp", copy)
        assert state is not None
        assert (state.path, state.offset, state.line_no, state.cluster) == (str(copy), 13, 2, "A")
