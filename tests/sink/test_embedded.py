"""The embedded noida-db server, choosing a cluster, and the client helpers."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.settings import ElasticsearchSettings, EmbeddedSettings
from pipeline.sink.client import make_client, ping_url
from pipeline.sink.embedded import (
    LOG_NAME,
    PID_NAME,
    EmbeddedServer,
    ensure_cluster,
    free_port,
    stop_detached,
)

pytestmark = pytest.mark.integration


def test_ping_url(es_url: str) -> None:
    assert ping_url(es_url, timeout=5.0) is True
    assert ping_url(f"http://127.0.0.1:{free_port()}", timeout=5.0) is False
    assert ping_url("not a url", timeout=5.0) is False


def test_make_client_talks_to_the_server_and_sets_auth(es_url: str) -> None:
    es = ElasticsearchSettings(url="http://example.invalid:9200", api_key="aWQ6a2V5")
    client = make_client(es, url=es_url)
    try:
        assert client.info()["version"]["number"] == "8.15.3"
        assert client._headers["authorization"] == "ApiKey aWQ6a2V5"
    finally:
        client.close()
    basic = make_client(ElasticsearchSettings(username="u", password="p"))
    try:
        assert basic._headers["authorization"] == "Basic dTpw"
    finally:
        basic.close()


def test_start_and_stop(tmp_path: Path) -> None:
    with EmbeddedServer(tmp_path / "data", free_port()) as server:
        assert ping_url(server.url + "/", timeout=5.0)
        assert server.pid is not None
    assert server.pid is None
    assert not ping_url(server.url + "/", timeout=5.0)
    server.stop()  # idempotent


def test_start_refuses_a_port_where_something_answers(es_url: str, tmp_path: Path) -> None:
    port = int(es_url.rsplit(":", 1)[1])
    with pytest.raises(ConfigError, match="something already answers"):
        EmbeddedServer(tmp_path, port).start(timeout_s=5.0)


def test_failed_start_quotes_the_server_output(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as blocker:
        blocker.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = blocker.getsockname()[1]
        server = EmbeddedServer(tmp_path, port)
        with pytest.raises(ConfigError, match="exited with status") as info:
            server.start(timeout_s=30.0)
    assert str(tmp_path / LOG_NAME) in str(info.value)
    assert "weak version" not in str(info.value)
    assert server.pid is None


def test_detached_server_outlives_its_object_until_stop_detached(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path, free_port())
    server.start(timeout_s=30.0, detach=True)
    pid = server.pid
    assert (tmp_path / PID_NAME).read_text(encoding="utf-8") == f"{pid}\n"
    assert stop_detached(tmp_path) is True
    assert not (tmp_path / PID_NAME).exists()
    assert not ping_url(server.url + "/", timeout=5.0)
    assert stop_detached(tmp_path) is False
    server.stop()


def test_stale_pid_file_is_removed(tmp_path: Path) -> None:
    (tmp_path / PID_NAME).write_text("999999999\n", encoding="utf-8")
    assert stop_detached(tmp_path) is False
    assert not (tmp_path / PID_NAME).exists()


def test_ensure_cluster_uses_a_cluster_that_answers(es_url: str, tmp_path: Path) -> None:
    emb = EmbeddedSettings(data_dir=str(tmp_path))
    assert ensure_cluster(ElasticsearchSettings(url=es_url), emb) == (es_url, None)


def test_ensure_cluster_starts_the_embedded_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    es = ElasticsearchSettings(url=f"http://localhost:{port}")
    emb = EmbeddedSettings(data_dir=str(tmp_path / "noida"), start_timeout_s=30.0)
    with caplog.at_level(logging.INFO):
        url, server = ensure_cluster(es, emb, logging.getLogger("test"))
    try:
        assert server is not None
        assert url == f"http://127.0.0.1:{port}"
        assert ping_url(url, timeout=5.0)
        assert (
            f"no cluster answered at http://localhost:{port}; started the embedded "
            f"Elasticsearch-API server (noida-db) with data in {tmp_path / 'noida'}"
        ) in caplog.messages
    finally:
        if server is not None:
            server.stop()


def test_ensure_cluster_without_embedded_names_url_and_fix(tmp_path: Path) -> None:
    url = f"http://localhost:{free_port()}"
    emb = EmbeddedSettings(enabled=False, data_dir=str(tmp_path))
    with pytest.raises(ConfigError, match=f"no Elasticsearch cluster answered at {url}"):
        ensure_cluster(ElasticsearchSettings(url=url), emb)
    remote = f"https://localhost:{free_port()}"
    with pytest.raises(ConfigError, match="only started for an http:// URL on localhost"):
        ensure_cluster(ElasticsearchSettings(url=remote), EmbeddedSettings(data_dir=str(tmp_path)))


def test_a_data_directory_that_cannot_be_made_is_a_config_error(tmp_path: Path) -> None:
    """As under a service's read-only file system: the directory named, the fixes said."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    emb = EmbeddedSettings(data_dir=str(blocker / "noida-db"))
    url = f"http://localhost:{free_port()}"
    with pytest.raises(ConfigError) as err:
        ensure_cluster(ElasticsearchSettings(url=url), emb)
    assert str(err.value) == (
        f"cannot start the embedded Elasticsearch-API server: its data directory "
        f"{blocker / 'noida-db'}: Not a directory. Fix: set embedded.data_dir to a writable "
        "directory, or embedded.enabled: false (iolens run --no-embedded) where a real cluster "
        "is expected"
    )


def test_run_no_embedded_never_starts_the_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli.main import main

    url = f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "iolens.yaml"
    config.write_text(f"embedded: {{data_dir: {tmp_path / 'noida-db'}}}\n")
    drop = tmp_path / "drop"
    drop.mkdir()
    argv = ["--config", str(config), "--es-url", url, "run", "--no-embedded", "--once"]
    argv += ["--drop", f"fio-hist={drop}", "--state-dir", str(tmp_path / "state")]
    assert main(argv) == 2
    assert f"no Elasticsearch cluster answered at {url} (embedded.enabled is false)" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "noida-db").exists()


def test_a_restart_on_the_same_data_is_said_at_debug_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    es = ElasticsearchSettings(url=f"http://localhost:{port}")
    emb = EmbeddedSettings(data_dir=str(tmp_path / "noida"), start_timeout_s=30.0)
    said = (
        f"no cluster answered at http://localhost:{port}; started the embedded "
        f"Elasticsearch-API server (noida-db) with data in {tmp_path / 'noida'}"
    )
    levels = []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            _url, server = ensure_cluster(es, emb, logging.getLogger("test"))
        assert server is not None
        server.stop()
        levels.append([r.levelname for r in caplog.records if r.getMessage() == said])
    assert levels == [["INFO"], ["DEBUG"]]
