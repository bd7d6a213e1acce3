"""mappings/*.json, their installation, and capability detection on the embedded server."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.errors import ConfigError
from pipeline.formats.fio.window import percentile_key
from pipeline.settings.analysis import FIO_PERCENTILES
from pipeline.sink.capabilities import PROBE_INDEX, Capabilities, detect
from pipeline.sink.templates import (
    TemplateObject,
    install,
    load_templates,
    mappings_dir,
    updatable,
    without_lifecycle,
)

MAPPINGS = mappings_dir()
NO_ILM = Capabilities("8.15.3", ilm=False, data_stream_admin=False, percentiles_agg=False)


def props(name: str) -> dict[str, Any]:
    body = json.loads((MAPPINGS / f"component_template.{name}.json").read_text(encoding="utf-8"))
    result: dict[str, Any] = body["template"]["mappings"]["properties"]
    return result


def flatten(properties: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in properties.items():
        if "properties" in value:
            out.update(flatten(value["properties"], f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value["type"]
    return out


def without_field(
    objects: list[TemplateObject], name: str, parent: str, field: str
) -> list[TemplateObject]:
    """``objects`` as an older release had them: template ``name`` without ``parent.field``."""
    old = []
    for obj in objects:
        if obj.name == name:
            body = copy.deepcopy(obj.body)
            del body["template"]["mappings"]["properties"][parent]["properties"][field]
            obj = dataclasses.replace(obj, body=body)
        old.append(obj)
    return old


FIELD_TYPES = {
    "boolean", "constant_keyword", "date", "double", "histogram", "integer", "keyword", "long",
    "match_only_text", "object", "text", "float", "scaled_float", "ip", "wildcard", "flattened",
}  # fmt: skip
"""Elasticsearch field types (Mapping > Field data types) the templates may use."""

STREAMS = sorted(p.name[len("index_template.") : -5] for p in MAPPINGS.glob("index_template.*"))


def leaves(properties: dict[str, Any], prefix: str = "") -> dict[str, dict[str, Any]]:
    """Every field of a mapping that is not an object with properties: path -> its mapping."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in properties.items():
        if "properties" in value:
            out.update(leaves(value["properties"], f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("stream", STREAMS)
def test_each_data_stream_has_the_templates_elastic_names_for_it(stream: str) -> None:
    """Elastic's data stream naming (``<type>-<dataset>-<namespace>``, reference): an index
    template matching the stream's indices, composed of the shared ECS mappings and settings,
    the stream's ``@package`` template and an optional ``@custom`` one, each of which exists."""
    kind, dataset = stream.split("-", 1)
    assert kind in {"logs", "metrics"} and "-" not in dataset
    body = json.loads((MAPPINGS / f"index_template.{stream}.json").read_text(encoding="utf-8"))
    assert body["index_patterns"] == [f"{stream}-*"] and body["data_stream"] == {}
    custom = f"{stream}@custom"
    assert body["composed_of"] == [
        "iolens-ecs@mappings",
        "iolens@settings",
        f"{stream}@package",
        custom,
    ]
    assert body["ignore_missing_component_templates"] == [custom]
    for name in body["composed_of"][:3]:
        assert (MAPPINGS / f"component_template.{name}.json").is_file(), name


@pytest.mark.parametrize(
    "path", sorted(MAPPINGS.glob("component_template.*")), ids=lambda p: p.name
)
def test_every_field_has_a_type_elasticsearch_knows(path: Path) -> None:
    body = json.loads(path.read_text(encoding="utf-8"))
    fields = leaves(body["template"].get("mappings", {}).get("properties", {}))
    for name, mapping in fields.items():
        assert mapping.get("type") in FIELD_TYPES, (path.name, name, mapping)
    if path.name.endswith("@package.json"):
        assert fields, path.name  # a stream's template maps its fields


def test_load_templates_orders_ilm_component_index() -> None:
    objects = load_templates()
    assert [(o.kind, o.name) for o in objects] == [
        ("ilm", "iolens-metrics"),
        ("component", "iolens-ecs@mappings"),
        ("component", "iolens@settings"),
        ("component", "logs-darshan.file@package"),
        ("component", "logs-darshan.job@package"),
        ("component", "logs-iolens.alert@package"),
        ("component", "logs-iolens.incident@package"),
        ("component", "logs-iolens.io_diagnosis@package"),
        ("component", "logs-iolens.request@package"),
        ("component", "logs-slurm.job@package"),
        ("component", "metrics-fio.histogram@package"),
        ("component", "metrics-fio.latency@package"),
        ("component", "metrics-iolens.peer_anomaly@package"),
        ("component", "metrics-iolens.persistence@package"),
        ("component", "metrics-iolens.pipeline@package"),
        ("component", "metrics-iolens.service_rate@package"),
        ("component", "metrics-iolens.workload_model@package"),
        ("component", "metrics-lmt.ost@package"),
        ("component", "metrics-sysstat.diskio@package"),
        ("index", "logs-darshan.file"),
        ("index", "logs-darshan.job"),
        ("index", "logs-iolens.alert"),
        ("index", "logs-iolens.incident"),
        ("index", "logs-iolens.io_diagnosis"),
        ("index", "logs-iolens.request"),
        ("index", "logs-slurm.job"),
        ("index", "metrics-fio.histogram"),
        ("index", "metrics-fio.latency"),
        ("index", "metrics-iolens.peer_anomaly"),
        ("index", "metrics-iolens.persistence"),
        ("index", "metrics-iolens.pipeline"),
        ("index", "metrics-iolens.service_rate"),
        ("index", "metrics-iolens.workload_model"),
        ("index", "metrics-lmt.ost"),
        ("index", "metrics-sysstat.diskio"),
    ]


@pytest.mark.parametrize("stream", ["metrics-fio.histogram", "metrics-fio.latency"])
def test_index_templates_follow_the_conventions(stream: str) -> None:
    [tpl] = [o for o in load_templates() if o.kind == "index" and o.name == stream]
    body = tpl.body
    assert body["index_patterns"] == [f"{stream}-*"]
    assert body["data_stream"] == {}
    assert body["priority"] >= 200
    assert body["composed_of"] == [
        "iolens-ecs@mappings",
        "iolens@settings",
        f"{stream}@package",
        f"{stream}@custom",
    ]
    assert body["ignore_missing_component_templates"] == [f"{stream}@custom"]
    assert body["_meta"]["managed_by"] == "iolens"
    assert body["version"] >= 1
    own = props(f"{stream}@package")
    assert own["fio"]["dynamic"] == "strict"
    assert all(v["dynamic"] == "strict" for v in own.values() if "properties" in v)


def test_histogram_stream_fields() -> None:
    assert flatten(props("metrics-fio.histogram@package")) == {
        "fio.job": "keyword",
        "fio.prefix": "keyword",
        "fio.ddir": "keyword",
        "fio.bs": "long",
        "fio.log.time_ms": "long",
        "fio.log.line": "long",
        "fio.window.start_ms": "long",
        "fio.window.end_ms": "long",
        "fio.interval.start_ms": "long",
        "fio.interval.end_ms": "long",
        "fio.interval.ms": "long",
        "fio.bins.count": "integer",
        "fio.bins.unit": "keyword",
        "fio.bins.coarseness": "integer",
        "fio.clat_ns.histogram": "histogram",
        "fio.clat_ns.samples": "long",
        **{
            f"fio.clat_ns.{k}": "double"
            for k in ("min", "max", "mean", *map(percentile_key, FIO_PERCENTILES))
        },
    }


def test_latency_stream_fields() -> None:
    assert flatten(props("metrics-fio.latency@package")) == {
        "fio.job": "keyword",
        "fio.prefix": "keyword",
        "fio.ddir": "keyword",
        "fio.interval.start_ms": "long",
        "fio.interval.end_ms": "long",
        "fio.interval.ms": "long",
        "fio.clat_ns.samples": "long",
        **{
            f"fio.clat_ns.{k}": "double"
            for k in ("min", "max", "mean", *map(percentile_key, FIO_PERCENTILES))
        },
        "fio.records": "long",
        "iolens.scope": "keyword",
        "iolens.method": "keyword",
    }


def test_settings_keep_malformed_values_visible() -> None:
    [settings] = [o for o in load_templates() if o.name == "iolens@settings"]
    assert settings.body["template"]["settings"]["index.mapping.ignore_malformed"] is False
    assert settings.body["template"]["settings"]["index.lifecycle.name"] == "iolens-metrics"


def test_without_lifecycle_handles_flat_and_nested_settings() -> None:
    flat = {"template": {"settings": {"index.lifecycle.name": "p", "index.codec": "x"}}}
    nested = {"template": {"settings": {"index": {"lifecycle": {"name": "p"}, "codec": "x"}}}}
    assert without_lifecycle(flat) == ({"template": {"settings": {"index.codec": "x"}}}, True)
    assert without_lifecycle(nested) == (
        {"template": {"settings": {"index": {"codec": "x"}}}},
        True,
    )
    assert without_lifecycle({"template": {}}) == ({"template": {}}, False)
    assert flat["template"]["settings"]["index.lifecycle.name"] == "p"  # input untouched


def test_bad_json_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "index_template.broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"index_template\.broken\.json: not valid JSON"):
        load_templates(tmp_path)


def test_unknown_prefixes_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "notes.json").write_text("{}", encoding="utf-8")
    (tmp_path / "ilm_policy.p.json").write_text('{"policy": {}}', encoding="utf-8")
    assert [(o.kind, o.name) for o in load_templates(tmp_path)] == [("ilm", "p")]


@pytest.mark.integration
def test_detect_on_the_embedded_server(es_client: Elasticsearch) -> None:
    caps = detect(es_client)
    assert (caps.version, caps.ilm, caps.data_stream_admin, caps.percentiles_agg) == (
        "8.15.3",
        False,
        False,
        False,
    )
    assert caps.messages == (
        "ILM is not available on this cluster (noida-db 8.15 API subset): index lifecycle is "
        "not managed; retention must be handled by hand",
        "the data-stream admin API (/_data_stream) is not available on this cluster (noida-db "
        "8.15 API subset): data streams are still created from the index templates, but cannot "
        "be listed or rolled over by name",
        "the percentiles aggregation is not available on this cluster (noida-db 8.15 API "
        "subset): iolens computes percentiles from the stored histograms instead",
    )
    assert not es_client.indices.exists(index=PROBE_INDEX)


@pytest.mark.integration
def test_detect_on_an_unreachable_cluster_raises_config_error() -> None:
    client = Elasticsearch("http://127.0.0.1:1", max_retries=0)
    try:
        with pytest.raises(ConfigError, match="GET /"):
            detect(client)
    finally:
        client.close()


@pytest.mark.integration
def test_install_then_strict_mapping_rejects_unknown_fields(es_client: Elasticsearch) -> None:
    messages = install(es_client, load_templates(), NO_ILM)
    assert messages == [
        "skipped ILM policy iolens-metrics: the cluster has no ILM",
        *(
            f"installed {kind} template {name} (version 1)"
            for kind, name in [(o.kind, o.name) for o in load_templates() if o.kind != "ilm"]
        ),
        "ILM is not available: removed index.lifecycle.name from the settings component; "
        "index lifecycle is not managed and retention must be handled by hand",
    ]
    got = es_client.cluster.get_component_template(name="iolens@settings")
    settings = got["component_templates"][0]["component_template"]["template"]["settings"]
    assert "lifecycle" not in settings.get("index", {})

    index = "metrics-fio.latency-tpl"
    ok = {
        "@timestamp": "2025-01-01T00:00:00Z",
        "fio": {"job": "j", "ddir": "mixed", "clat_ns": {"p99": 12.5}},
        "iolens": {"scope": "cluster", "method": "window"},
    }
    bad_fio = {"@timestamp": "2025-01-01T00:00:01Z", "fio": {"jobname": "j"}}
    bad_iolens = {"@timestamp": "2025-01-01T00:00:02Z", "iolens": {"host": "h"}}
    resp = es_client.bulk(
        operations=[
            {"create": {"_index": index, "_id": "a"}},
            ok,
            {"create": {"_index": index, "_id": "b"}},
            bad_fio,
            {"create": {"_index": index, "_id": "c"}},
            bad_iolens,
        ],
    )
    items = [i["create"] for i in resp["items"]]
    assert [i["status"] for i in items] == [201, 400, 400]
    assert [i.get("error", {}).get("type") for i in items] == [
        None,
        "strict_dynamic_mapping_exception",
        "strict_dynamic_mapping_exception",
    ]
    mapping = es_client.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    assert mapping["fio"]["properties"]["clat_ns"]["properties"]["p99"] == {"type": "double"}
    assert mapping["data_stream"]["properties"]["namespace"] == {"type": "constant_keyword"}


@pytest.mark.integration
def test_install_names_the_file_the_cluster_rejects(
    es_client: Elasticsearch, tmp_path: Path
) -> None:
    (tmp_path / "index_template.bad.json").write_text(
        json.dumps({"index_patterns": ["bad-*"], "composed_of": ["does-not-exist"]}),
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"index_template\.bad\.json: the cluster rejected"):
        install(es_client, load_templates(tmp_path), NO_ILM)


@pytest.mark.integration
def test_an_upgrade_adds_new_fields_to_existing_data_streams(es_client: Elasticsearch) -> None:
    """A data stream created before a field was added (here ``fio.prefix``) takes documents
    with the field once setup ran again, without waiting for a rollover."""
    import uuid

    stream = f"metrics-fio.histogram-up{uuid.uuid4().hex[:8]}"
    objects = load_templates()
    old = without_field(objects, "metrics-fio.histogram@package", "fio", "prefix")
    caps = detect(es_client)
    install(es_client, old, caps)
    doc = {"@timestamp": "2026-01-01T00:00:00Z", "fio": {"job": "1", "ddir": "read"}}
    es_client.index(index=stream, document=doc, op_type="create", refresh=True)
    install(es_client, objects, caps)
    fio = es_client.indices.get_mapping(index=stream)
    [mapping] = fio.body.values()
    assert mapping["mappings"]["properties"]["fio"]["properties"]["prefix"] == {"type": "keyword"}
    doc["fio"]["prefix"] = "lun3"
    es_client.index(index=stream, document=doc, op_type="create", refresh=True)
    assert es_client.count(index=stream)["count"] == 2


def test_agent_fields_are_ecs_keywords() -> None:
    ecs = flatten(props("iolens-ecs@mappings"))
    assert {k: v for k, v in ecs.items() if k.startswith("agent.")} == {
        "agent.type": "keyword",
        "agent.name": "keyword",
        "agent.version": "keyword",
        "agent.id": "keyword",
    }


def test_constant_keywords_are_not_sent_to_existing_data_streams() -> None:
    ecs = props("iolens-ecs@mappings")
    sent = updatable(ecs)
    assert "data_stream" not in sent
    assert flatten(sent) == {k: v for k, v in flatten(ecs).items() if not k.startswith("data_")}


@pytest.mark.integration
def test_an_upgrade_adds_ecs_fields_to_existing_data_streams(
    es_client: Elasticsearch, caplog: pytest.LogCaptureFixture
) -> None:
    """``agent.id`` came with an upgrade of the shared ECS component: data streams made before
    it map it as a keyword once setup ran again (not dynamically, as text). A stream where it
    is mapped otherwise already (written while the older templates were installed) is said,
    and holds back no other stream."""
    import logging
    import uuid

    ns = f"up{uuid.uuid4().hex[:8]}"
    streams = [f"metrics-fio.latency-{ns}", f"logs-slurm.job-{ns}"]
    clash = f"metrics-lmt.ost-{ns}"
    objects = load_templates()
    old = without_field(objects, "iolens-ecs@mappings", "agent", "id")
    caps = detect(es_client)
    doc: dict[str, Any] = {"@timestamp": "2026-01-01T00:00:00Z"}
    try:
        install(es_client, old, caps)
        for stream in streams:
            es_client.index(index=stream, document=doc, op_type="create", refresh=True)
        dynamic = {**doc, "agent": {"id": "written-before-the-upgrade"}}
        es_client.index(index=clash, document=dynamic, op_type="create", refresh=True)
        with caplog.at_level(logging.WARNING, logger="pipeline.sink.templates"):
            install(es_client, objects, caps)
    finally:
        es_client.indices.delete(index=clash, ignore_unavailable=True)
        install(es_client, objects, caps)
    with_id = {**doc, "agent": {"id": "0b6f5c1e-2f7d-4a8e-9d3c-7e1a2b3c4d5e"}}
    for stream in streams:
        [mapping] = es_client.indices.get_mapping(index=stream).body.values()
        agent = mapping["mappings"]["properties"]["agent"]["properties"]
        assert agent["id"] == {"type": "keyword"}, stream
        es_client.index(index=stream, document=with_id, op_type="create", refresh=True)
        assert es_client.count(index=stream)["count"] == 2
    [warning] = [r.getMessage() for r in caplog.records]
    assert "iolens-ecs@mappings cannot be added to the existing data streams metrics-lmt.ost-*" in (
        warning
    )
    assert "agent.id" in warning
