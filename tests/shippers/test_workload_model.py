"""The workload model of an events drop remembers the ids of its latest requests, oldest
forgotten first, across a save and a load."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.formats.events import workload_model
from pipeline.formats.events.workload_model import WorkloadModel
from pipeline.reducers.canonical import Canonical, Token
from pipeline.settings import RequestsSettings
from pipeline.sink.documents import DocContext


def form(cpu_ms: float) -> Canonical:
    seg = Token("Seg", 1, {"cpu_ns": cpu_ms * 1e6}, 0)
    return Canonical((Token("ReqStart", 1, {}, 0), seg), round(cpu_ms * 1e6), 1, seg.resources)


def test_the_oldest_ids_are_forgotten_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workload_model, "RECENT_IDS", 3)
    model = WorkloadModel("m", tmp_path / "model.json", RequestsSettings())
    for n in range(5):
        model.place(f"r{n}", form(10.0))
    assert list(model.recent) == ["r2", "r3", "r4"]
    model.place("r3", form(10.0))  # read again: not counted twice
    assert model.clusterer.clusters[0].size == 5
    model.save()
    again = WorkloadModel("m", tmp_path / "model.json", RequestsSettings())
    again.place("r5", form(10.0))
    assert list(again.recent) == ["r3", "r4", "r5"]
    assert again.clusterer.clusters[0].size == 6


def test_a_model_read_on_with_another_cluster_snapshots_there_once(tmp_path: Path) -> None:
    ctx = DocContext(namespace="t")
    model = WorkloadModel("m", tmp_path / "model.json", RequestsSettings())
    assert not model.due(0.0, cluster="A")  # nothing placed: nothing to show
    model.place("r0", form(10.0))
    assert model.due(0.0, cluster="A")  # the first snapshot is due at once
    assert len(model.snapshot(ctx, "h", 0.0, "A")) == 1
    again = WorkloadModel("m", tmp_path / "model.json", RequestsSettings())
    assert again.snapshot_cluster == "A"
    again.place("r0", form(10.0))  # read again into cluster B (--redeliver): no change
    assert not again.changed
    assert not again.due(1.0, cluster="A")
    assert again.due(1.0, cluster="B")  # but B has never had a snapshot
    assert not again.due(1.0, cluster=None)  # cluster unknown: nothing to compare
    again.snapshot(ctx, "h", 1.0, "B")
    assert not again.due(2.0, cluster="B")
    assert WorkloadModel("m", tmp_path / "model.json", RequestsSettings()).snapshot_cluster == "B"
