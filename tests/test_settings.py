"""The configuration model: defaults, closed to unknown keys, environment overrides, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import ConfigError
from pipeline.formats.fio.window import percentile_key
from pipeline.formats.registry import config_schema
from pipeline.settings import Settings, json_schema, load_settings, settings_from_mapping
from pipeline.settings.analysis import FIO_PERCENTILES
from pipeline.sink.templates import mappings_dir

MAPPINGS = mappings_dir()

REPO = Path(__file__).resolve().parent.parent


def test_documented_defaults_file_is_the_defaults() -> None:
    assert load_settings(REPO / "config" / "pipeline.yaml", env={}) == Settings()


def test_schema_file_is_current() -> None:
    """Fails when the model changed without `make schema`."""
    on_disk = json.loads((REPO / "config" / "schemas" / "pipeline.schema.json").read_text())
    assert on_disk == config_schema(json_schema())


def test_unknown_key_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_mapping({"fio": {"interval": 100}}, env={})
    assert "fio.interval: Extra inputs are not permitted" in str(err.value)


def test_misspelt_key_gets_the_key_it_probably_meant(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text("peer:\n  downsampel_s: 15\n")
    with pytest.raises(ConfigError) as err:
        load_settings(config, env={})
    assert str(err.value) == (
        f"{config}: invalid configuration\n"
        "  peer.downsampel_s: Extra inputs are not permitted; did you mean 'downsample_s'?"
    )


def test_misspelt_nested_keys_are_matched_in_their_own_section(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "drops:\n"
        "  - {type: events, path: /var/spool/events, shema: http_server, patern: '*.jsonl'}\n"
        "incident:\n"
        "  sla: {percentil: 99, under_s: 5}\n"
        "elasticsearh: {url: 'http://localhost:9200'}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_settings(config, env={})
    assert str(err.value).splitlines()[1:] == [
        # a drop's key is "schema" (the alias of schema_file); the sla's own keys, not the top
        "  drops.0.shema: Extra inputs are not permitted; did you mean 'schema'?",
        "  drops.0.patern: Extra inputs are not permitted; did you mean 'pattern'?",
        "  incident.sla.percentile: Field required",
        "  incident.sla.percentil: Extra inputs are not permitted; did you mean 'percentile'?",
        "  elasticsearh: Extra inputs are not permitted; did you mean 'elasticsearch'?",
    ]


def test_unknown_key_without_a_close_match_gets_no_suggestion() -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_mapping({"peer": {"colour": "red"}, "verbose": True}, env={})
    assert str(err.value).splitlines()[1:] == [
        "  peer.colour: Extra inputs are not permitted; peer has no such key "
        "(iolens config example prints every key)",
        "  verbose: Extra inputs are not permitted; the top level has no such key "
        "(iolens config example prints every key)",
    ]
    assert "did you mean" not in str(err.value)


def test_bad_value_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        settings_from_mapping({"fio": {"interval_ms": 0, "percentiles": [50, 100]}}, env={})
    text = str(err.value)
    assert "fio.interval_ms: Input should be greater than 0" in text
    assert "fio.percentiles: Value error, percentiles must lie strictly between 0 and 100" in text


def test_namespace_must_be_a_data_stream_namespace() -> None:
    with pytest.raises(ConfigError, match=r"elasticsearch\.namespace"):
        settings_from_mapping({"elasticsearch": {"namespace": "Prod-1"}}, env={})


def test_environment_overrides_the_connection() -> None:
    env = {
        "IOLENS_ES_URL": "https://es:9200",
        "IOLENS_ES_API_KEY": "a2V5",
        "IOLENS_ES_USERNAME": "u",
        "IOLENS_ES_PASSWORD": "p",
        "IOLENS_ES_CA_CERTS": "/ca.pem",
    }
    es = settings_from_mapping({"elasticsearch": {"url": "http://x:9200"}}, env=env).elasticsearch
    assert (es.url, es.api_key, es.username, es.password, es.ca_certs) == (
        "https://es:9200",
        "a2V5",
        "u",
        "p",
        "/ca.pem",
    )


def test_settings_are_frozen() -> None:
    s = Settings()
    with pytest.raises(ValueError, match="frozen"):
        s.fio.interval_ms = 5  # type: ignore[misc]


def test_missing_and_broken_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="configuration file not found"):
        load_settings(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("fio: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad)


def test_percentiles_are_those_the_templates_map() -> None:
    """A percentile outside fio's default list would be refused by the strict mapping of every
    document: the setting says so instead, and every one it allows is mapped."""
    with pytest.raises(ConfigError) as err:
        settings_from_mapping({"fio": {"percentiles": [50, 75, 99.9]}}, env={})
    assert "fio.percentiles: Value error, 75: not a percentile iolens stores; choose from " in str(
        err.value
    )
    assert "(1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99)" in str(
        err.value
    )
    s = settings_from_mapping({"fio": {"percentiles": list(FIO_PERCENTILES)}}, env={})
    assert s.fio.percentiles == FIO_PERCENTILES
    for stream in ("metrics-fio.histogram", "metrics-fio.latency"):
        template = json.loads((MAPPINGS / f"component_template.{stream}@package.json").read_text())
        clat = template["template"]["mappings"]["properties"]["fio"]["properties"]["clat_ns"]
        mapped = {k for k in clat["properties"] if k[:1] == "p" and k[1:2].isdigit()}
        assert mapped == {percentile_key(p) for p in FIO_PERCENTILES}, stream


def test_percentiles_sorted_and_unique() -> None:
    s = settings_from_mapping({"fio": {"percentiles": [99, 50, 99, 90]}}, env={})
    assert s.fio.percentiles == (50.0, 90.0, 99.0)
