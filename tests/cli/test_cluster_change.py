"""The registry remembers the cluster each file went to; capability notices are said once per
cluster and state directory; everyday commands are quiet. Against two embedded servers: the
session's (cluster A) and one started here with a data directory of its own (cluster B)."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.cli.main import main
from pipeline.sink.cluster_id import cluster_id
from pipeline.sink.embedded import EmbeddedServer, free_port

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples"
NOTICES = (
    "ILM is not available on this cluster (noida-db 8.15 API subset): index lifecycle is not "
    "managed; retention must be handled by hand",
    "the data-stream admin API (/_data_stream) is not available on this cluster (noida-db 8.15 "
    "API subset): data streams are still created from the index templates, but cannot be "
    "listed or rolled over by name",
    "the percentiles aggregation is not available on this cluster (noida-db 8.15 API subset): "
    "iolens computes percentiles from the stored histograms instead",
)

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster_b(tmp_path: Path) -> Iterator[str]:
    """A second, fresh embedded server: another cluster."""
    server = EmbeddedServer(tmp_path / "noida-b", free_port())
    server.start(timeout_s=30.0)
    try:
        yield server.url
    finally:
        server.stop()


def _ids(*urls: str) -> list[str | None]:
    ids = []
    for url in urls:
        client = Elasticsearch(url, request_timeout=30)
        ids.append(cluster_id(client))
        client.close()
    return ids


def _count(url: str, index: str) -> int:
    client = Elasticsearch(url, request_timeout=30)
    try:
        if not client.indices.exists(index=index):
            return 0
        client.indices.refresh(index=index)
        return int(client.count(index=index)["count"])
    finally:
        client.close()


def _lines(err: str, level: str) -> list[str]:
    """The log records of ``level`` in captured stderr: ``logger: message``."""
    return re.findall(rf"^\S+ \S+Z {level} (.*)$", err, flags=re.M)


def test_files_delivered_to_another_cluster_are_held_until_redeliver(
    es_url: str,
    cluster_b: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    ns = f"mv{uuid.uuid4().hex[:8]}"
    config = tmp_path / "iolens.yaml"
    config.write_text(
        f"elasticsearch: {{namespace: {ns}}}\nstate_dir: {tmp_path / 'state'}\n"
        f"embedded: {{data_dir: {tmp_path / 'unused'}}}\n"
        "fio: {run_start: '2026-01-01T00:00:00Z', settle_s: 0}\n"
    )
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "node01", logs)
    files = [str(p) for p in sorted(logs.glob("*.log"))]
    hist = f"metrics-fio.histogram-{ns}"
    id_a, id_b = _ids(es_url, cluster_b)
    assert id_a is not None and id_b is not None and id_a != id_b

    def ingest(url: str, *extra: str) -> tuple[str, str]:
        argv = ["--config", str(config), "--es-url", url, *extra, "ingest", "--type", "fio-hist"]
        assert main([*argv, *files]) == 0
        got = capsys.readouterr()
        return got.out, got.err

    out, err = ingest(es_url)
    assert "files read: 2   lines: 159   bad lines: 0" in out
    assert _count(es_url, hist) == 159

    out, err = ingest(cluster_b)
    assert _lines(err, "WARNING") == [
        f"pipeline.jobs.main_job: files already delivered to another cluster ({id_a}), not to "
        f"this one ({id_b}), are not read: 2. To read them into this cluster, run the command "
        "again with --redeliver"
    ]
    assert "files read: 0   not read (delivered to another cluster): 2   lines: 0   " in out
    assert _count(cluster_b, hist) == 0

    out, err = ingest(cluster_b, "-v")  # said once a run; each file at DEBUG
    assert len(_lines(err, "WARNING")) == 1
    assert sorted(ln for ln in _lines(err, "DEBUG") if "not read" in ln) == [
        f"pipeline.shippers.discovery: {f} was delivered to cluster {id_a}: not read" for f in files
    ]
    assert "files read: 0   not read (delivered to another cluster): 2   lines: 0   " in out

    argv = ["--config", str(config), "--es-url", cluster_b, "run", "--once", "--redeliver"]
    assert main([*argv, "--drop", f"fio-hist={logs}"]) == 0
    got = capsys.readouterr()
    assert _lines(got.err, "INFO") == [
        f"pipeline.jobs.main_job: --redeliver: 2 files delivered to another cluster are read "
        f"again into this one ({id_b})"
    ]
    assert "files read: 2   lines: 159   bad lines: 0" in got.out
    assert _count(cluster_b, hist) == 159

    out, err = ingest(cluster_b)
    assert "files read: 0   skipped (delivered before): 2   lines: 0   " in out
    assert err == ""
    assert _count(cluster_b, hist) == 159


def test_notices_are_said_once_per_cluster_and_status_lists_them(
    es_url: str,
    cluster_b: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    config = tmp_path / "iolens.yaml"
    config.write_text(
        f"elasticsearch: {{namespace: nt{uuid.uuid4().hex[:8]}}}\n"
        f"state_dir: {tmp_path / 'state'}\nembedded: {{data_dir: {tmp_path / 'unused'}}}\n"
        "fio: {run_start: '2026-01-01T00:00:00Z', settle_s: 0}\n"
    )
    logs = tmp_path / "logs"
    shutil.copytree(SAMPLES / "node01", logs)

    def run_once(url: str, *extra: str) -> str:
        argv = ["--config", str(config), "--es-url", url, *extra, "run", "--once"]
        assert main([*argv, "--drop", f"fio-hist={logs}"]) == 0
        return capsys.readouterr().err

    said = [f"pipeline.sink.notices: {m}" for m in NOTICES]
    assert _lines(run_once(cluster_b), "INFO") == said
    assert run_once(cluster_b) == ""  # the same cluster and state directory: quiet
    verbose = run_once(cluster_b, "-v")
    assert [ln for ln in _lines(verbose, "DEBUG") if "notices" in ln] == said
    assert _lines(verbose, "INFO") == []

    assert main(["--config", str(config), "--es-url", cluster_b, "status"]) == 0
    out = capsys.readouterr().out
    (id_b,) = _ids(cluster_b)
    assert f"  cluster id: {id_b}\n" in out
    for msg in NOTICES:
        assert re.search(
            rf"^  {re.escape(msg)} \(first said \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$", out, re.M
        ), msg

    # Another cluster: its notices are its own, said once more (and its files held).
    err = run_once(es_url)
    assert _lines(err, "INFO") == said
    assert main(["--config", str(config), "--es-url", es_url, "status"]) == 0
    out = capsys.readouterr().out
    for msg in NOTICES:
        assert re.search(rf"^  {re.escape(msg)} \(first said ", out, re.M), msg


def test_status_says_when_a_notice_was_not_said_yet(
    cluster_b: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    config = tmp_path / "iolens.yaml"
    config.write_text(f"state_dir: {tmp_path / 'state'}\n")
    assert main(["--config", str(config), "--es-url", cluster_b, "status"]) == 0
    out = capsys.readouterr().out
    assert "  cluster id: unknown (nothing was delivered to it yet)\n" in out
    for msg in NOTICES:
        assert f"  {msg} (not said yet)\n" in out
