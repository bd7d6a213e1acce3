"""What users expose to their clusters: secrets, TLS, safe configuration, fixed index names."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.jobs.main_job import MainJob
from pipeline.records.event_schema import load_event_schema
from pipeline.settings import (
    ElasticsearchSettings,
    EmbeddedSettings,
    load_settings,
    settings_from_mapping,
)
from pipeline.sink.client import make_client
from pipeline.sink.embedded import EmbeddedServer, ensure_cluster

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "fio" / "samples" / "node01" / "randrw_clat_hist.1.log"

pytestmark = pytest.mark.reliability


def secret_file(tmp_path: Path, name: str, value: str, mode: int = 0o600) -> Path:
    path = tmp_path / name
    path.write_text(value + "\n")
    path.chmod(mode)
    return path


def test_secrets_come_from_files_only_when_kept_private(tmp_path: Path) -> None:
    pw = secret_file(tmp_path, "pw", "hunter2-" + uuid.uuid4().hex)
    es = settings_from_mapping({"elasticsearch": {"username": "ops", "password_file": str(pw)}})
    assert es.elasticsearch.password == pw.read_text().strip()
    key = secret_file(tmp_path, "key", "a2V5OnNlY3JldA==")
    from_env = settings_from_mapping({}, env={"IOLENS_ES_API_KEY_FILE": str(key)})
    assert from_env.elasticsearch.api_key == "a2V5OnNlY3JldA=="
    pw.chmod(0o644)
    with pytest.raises(ConfigError, match=r"readable by group or others \(mode 0644\)"):
        settings_from_mapping({"elasticsearch": {"password_file": str(pw)}})
    with pytest.raises(ConfigError, match="No such file"):
        settings_from_mapping({"elasticsearch": {"password_file": str(tmp_path / "none")}})
    # and a secret never shows in the settings' text
    assert pw.read_text().strip() not in repr(es) and "hunter2" not in str(es)


def test_a_systemd_credential_is_read_whatever_its_mode_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LoadCredential='s copy on a tmpfs shows mode 0440 (systemd grants the read by an ACL):
    under $CREDENTIALS_DIRECTORY the mode is systemd's business; anywhere else it is checked."""
    creds = tmp_path / "credentials" / "iolens.service"
    creds.mkdir(parents=True)
    key = secret_file(creds, "es-api-key", "a2V5OnNlY3JldA==", mode=0o440)
    outside = secret_file(tmp_path, "es-api-key", "a2V5OnNlY3JldA==", mode=0o440)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(creds))
    read = settings_from_mapping({}, env={"IOLENS_ES_API_KEY_FILE": str(key)})
    assert read.elasticsearch.api_key == "a2V5OnNlY3JldA=="
    with pytest.raises(ConfigError, match=r"readable by group or others \(mode 0440\)"):
        settings_from_mapping({}, env={"IOLENS_ES_API_KEY_FILE": str(outside)})
    monkeypatch.delenv("CREDENTIALS_DIRECTORY")
    with pytest.raises(ConfigError, match=r"readable by group or others \(mode 0440\)"):
        settings_from_mapping({}, env={"IOLENS_ES_API_KEY_FILE": str(key)})


@pytest.mark.integration
def test_secrets_never_reach_logs_state_or_dead_letters(
    es_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = f"s3cret-{uuid.uuid4().hex}"
    pw = secret_file(tmp_path, "pw", secret)
    drop = tmp_path / "drop"
    drop.mkdir()
    lines = SAMPLE.read_bytes().splitlines(keepends=True)
    (drop / "randrw_clat_hist.1.log").write_bytes(b"".join(lines[:5]) + b"1, 2, 3\n")
    settings = settings_from_mapping(
        {
            "elasticsearch": {
                "url": es_url,
                "namespace": f"sec{uuid.uuid4().hex[:8]}",
                "username": "ops",
                "password_file": str(pw),
            },
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "fio": {"run_start": "2026-11-22T05:25:00Z", "settle_s": 0},
        }
    )
    caplog.set_level(logging.DEBUG)
    client = make_client(settings.elasticsearch)
    with MainJob(settings, client) as job:
        summary = job.run_once()
    client.close()
    assert summary.bad_lines == 1  # a dead letter was written, with its line
    assert secret not in caplog.text
    written = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert any("deadletter" in str(p) for p in written)
    for path in written:
        assert secret.encode() not in path.read_bytes(), path


def test_tls_verifies_the_certificate_and_the_host_name(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    es = ElasticsearchSettings(url="https://es.example.org:9200", ca_certs=str(ca))
    node = make_client(es).transport.node_pool.all()[0]
    assert node.config.scheme == "https"
    assert node.config.verify_certs is True and node.config.ca_certs == str(ca)
    # no override: urllib3 matches the certificate against the host name
    assert node.config.ssl_assert_hostname is None
    assert node.config.ssl_assert_fingerprint is None


def test_yaml_cannot_run_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payload = f'!!python/object/apply:os.system ["touch {marker}"]'
    config = tmp_path / "iolens.yaml"
    config.write_text(f"state_dir: {payload}\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(config)
    schema = tmp_path / "schema.yaml"
    schema.write_text(f"events: {payload}\n")
    with pytest.raises(ConfigError, match=str(schema)):
        load_event_schema(schema)
    assert not marker.exists()


def test_file_contents_do_not_steer_index_names(tmp_path: Path) -> None:
    """Document indexes are ``<type>-<dataset>-<namespace>`` with fixed datasets: names,
    attributes and hosts from the input never become part of an index name."""
    from pipeline.formats.events.encode import request_document
    from pipeline.records.events import Event
    from pipeline.reducers.canonical import canonical
    from pipeline.reducers.request_join import extract
    from pipeline.sink.documents import DocContext

    schema = load_event_schema(ROOT / "config" / "schemas" / "http_server.yaml")
    hostile = "metrics-x-default/_doc/../../_bulk"
    events = [
        Event(1, "Accept", {"conn": hostile}),
        Event(2, "Dequeue", {"conn": hostile, "tid": 7}),
        Event(3, "ReqStart", {"conn": hostile, "tid": 7}),
        Event(4, "ReqEnd", {"conn": hostile, "tid": 7}),
    ]
    [r] = list(extract(events, schema))
    doc = request_document(DocContext("prod"), hostile, r, canonical(r, schema), 0, (), 0.0)
    assert doc.index == "logs-iolens.request-prod"
    assert "/" not in doc.doc_id and len(doc.doc_id) == 24


def test_the_embedded_server_listens_on_loopback_only(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "db", 1)
    assert server.host == "127.0.0.1" and server.url == "http://127.0.0.1:1"
    # it is started only for a URL on this machine's loopback, never for another address
    emb = EmbeddedSettings(data_dir=str(tmp_path / "db"))
    for url in ("http://0.0.0.0:9299", "https://localhost:9299", "http://[::]:9299"):
        with pytest.raises(ConfigError, match="only started for an http:// URL on localhost"):
            ensure_cluster(ElasticsearchSettings(url=url, request_timeout_s=0.5), emb)
    assert not (tmp_path / "db").exists()
