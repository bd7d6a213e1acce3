"""A format added to iolens: its package (tests/formats/loadavg_format.py, standing in for
``pipeline/formats/loadavg/``) and one line in the registry are all it takes for a drop of it to
be read by ``iolens run``: documents indexed, a bad line dead-lettered, the rest untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.errors import ConfigError
from pipeline.formats import registry
from pipeline.jobs.main_job import MainJob
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.search import refresh
from tests.formats.loadavg_format import LoadavgShipper
from tests.reliability.test_bad_input import make_settings

LOADAVG = "tests.formats.loadavg_format:LoadavgShipper"
SAMPLES = b"1764300000 0.52 0.58 0.59 1/389 12345\n1764300060 0.61 0.60 0.59 2/390 12351\n"


def test_a_format_added_by_one_registry_line_is_read_by_the_main_job(
    es_url: str, es_client: Elasticsearch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(registry.FORMATS, "loadavg", LOADAVG)  # the registry line
    drop = tmp_path / "drop"
    drop.mkdir()
    path = drop / "node7.loadavg"
    path.write_bytes(SAMPLES + b"1764300120 not-a-load\n1764300180 -1 0.2 0.3 1/1 1\n")
    old = os.stat(path).st_mtime - 60
    os.utime(path, (old, old))
    cfg = make_settings(es_url, tmp_path, "loadavg")
    with MainJob(cfg, es_client) as job:
        job.run_once()
    index = f"metrics-loadavg.sample-{cfg.elasticsearch.namespace}"
    refresh(es_client, index)
    hits = es_client.search(index=index, sort=["@timestamp"])["hits"]["hits"]
    assert [h["_source"]["loadavg"] for h in hits] == [
        {"load1": 0.52, "load5": 0.58, "load15": 0.59},
        {"load1": 0.61, "load5": 0.60, "load15": 0.59},
    ]
    first_line = SAMPLES.split(b"\n")[0]
    assert [h["_source"]["log"]["offset"] for h in hits] == [0, len(first_line) + 1]
    assert [h["_source"]["@timestamp"] for h in hits] == [
        "2025-11-28T03:20:00.000Z",
        "2025-11-28T03:21:00.000Z",
    ]
    letters = list(DeadLetters(Path(cfg.state_dir) / "deadletter").iter_inputs())
    assert sorted((x.line_no, x.reason) for x in letters) == [
        (3, "expected: <epoch s> <load1> <load5> <load15> ..."),
        (4, "negative load average -1.0"),
    ]


def test_a_drop_of_a_format_not_in_the_registry_is_refused_naming_it(
    es_url: str, es_client: Elasticsearch, tmp_path: Path
) -> None:
    (tmp_path / "drop").mkdir()
    cfg = make_settings(es_url, tmp_path, "fio")
    with pytest.raises(ConfigError) as err:
        MainJob(cfg, es_client)
    assert str(err.value) == (
        "drops[0].type: 'fio' is not a drop format iolens reads (fio-hist, sadf, sadc, darshan, "
        "slurm, lmt, events); did you mean 'fio-hist'?"
    )


def test_every_format_declares_its_files_and_streams() -> None:
    for kind in registry.FORMATS:
        shipper = registry.shipper_class(kind)
        assert shipper.pattern and shipper.writes, kind
        assert all(s.split("-", 1)[0] in {"logs", "metrics"} for s in shipper.writes), kind
    assert registry.shipper_class("fio-hist").pattern == "*_clat_hist.*.log*"
    assert registry.shipper_class("sadf").pattern == "*"
    assert registry.shipper_class("loadavg", {"loadavg": LOADAVG}) is LoadavgShipper
    with pytest.raises(ConfigError, match="did you mean 'sadf'"):
        registry.shipper_class("sadd")
