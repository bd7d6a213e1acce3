"""Alert documents: the watch is throttled, and every document a rule (through the ``index``
connector) or a watch writes fits the index template of the stream it goes to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pipeline.alerting import connector, rules, watches
from pipeline.alerting.rules import UNIT_S, window
from pipeline.settings import settings_from_mapping
from tests.kibana.alert_mappings import COMPONENTS, flatten, leaves, mapped_fields, template_for

DEFAULTS = settings_from_mapping({})


def painless_map(source: str, start: int) -> tuple[dict[str, Any], int]:
    """The Painless map literal at ``source[start]`` (``['k': v, ...]``) as a dict whose leaves
    are the values' source text; and the index after it."""
    out: dict[str, Any] = {}
    i = start + 1
    while True:
        while source[i] in " ,":
            i += 1
        if source[i] == "]":
            return out, i + 1
        key = re.compile(r"'([^']*)'\s*:\s*").match(source, i)
        assert key is not None, source[i : i + 40]
        i = key.end()
        if source[i] == "[" and re.compile(r"\[\s*'[^']*'\s*:").match(source, i):
            out[key[1]], i = painless_map(source, i)
            continue
        depth, j, quoted = 0, i, False
        while quoted or depth or source[j] not in ",]":
            ch = source[j]
            if ch == "'":
                quoted = not quoted
            elif not quoted and ch in "([":
                depth += 1
            elif not quoted and ch in ")]":
                depth -= 1
            j += 1
        out[key[1]], i = source[i:j].strip(), j


def watch_documents(watch: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The documents a watch's transform adds to ``_doc`` (``out.add([...])``), values as
    Painless source text."""
    source = watch["transform"]["script"]["source"]
    docs = []
    for call in re.finditer(r"out\.add\(", source):
        doc, _ = painless_map(source, call.end())
        docs.append(doc)
    return docs


def test_the_watch_is_throttled() -> None:
    [(_, watch)] = list(watches(DEFAULTS))
    assert watch["throttle_period"] == "15m"
    size, unit = window(watch["throttle_period"])
    trigger, tunit = window(watch["trigger"]["schedule"]["interval"])
    assert size * UNIT_S[unit] == 15 * 60 > trigger * UNIT_S[tunit] == 60
    assert all("throttle_period" not in a for a in watch["actions"].values())  # the watch's


def test_the_watch_documents_are_read_from_its_transform() -> None:
    [(wid, watch)] = list(watches(settings_from_mapping({"elasticsearch": {"namespace": "prod"}})))
    [doc] = watch_documents(watch)
    assert leaves(doc) == {
        "data_stream.type": "'logs'",
        "data_stream.dataset": "'iolens.alert'",
        "data_stream.namespace": "'prod'",
        "event.kind": "'alert'",
        "event.module": "'iolens'",
        "event.dataset": "'iolens.alert'",
        "host.name": "b.key",
        "rule.id": f"'{wid}'",
        "rule.name": "'iolens: fio p95 under 1 s per host (Watcher)'",
        "iolens.alert.group": "b.key",
        "iolens.alert.value": "v",
        "iolens.alert.threshold": "ctx.metadata.threshold_ns",
        "message": "'fio p95 on ' + b.key + ' is ' + v + ' ns, over ' + "
        "ctx.metadata.threshold_ns + ' ns'",
    }


def written() -> list[tuple[str, str, str, dict[str, Any]]]:
    """``(who, index, op_type, document leaves)`` of every alert document a rule (through the
    ``index`` connector) or a watch writes, namespace ``prod``."""
    settings = settings_from_mapping(
        {"elasticsearch": {"namespace": "prod"}, "alerts": {"action": "index"}}
    )
    _, body = connector(settings)
    out = []
    for rule in rules(settings):
        for action in rule.body["actions"]:
            for doc in action["params"]["documents"]:
                fields = leaves(doc) | {body["config"]["executionTimeField"]: "now"}
                # Kibana's index connector writes with op_type create (elastic/kibana#136011)
                out.append((rule.body["name"], body["config"]["index"], "create", fields))
    for wid, watch in watches(settings):
        index = watch["actions"]["index"]["index"]
        for doc in watch_documents(watch):
            fields = leaves(doc) | {index["execution_time_field"]: "now"}
            out.append((wid, index["index"], index["op_type"], fields))
    return out


def strip_quotes(value: Any) -> Any:
    return value.strip("'") if isinstance(value, str) else value


def test_every_alert_document_fits_the_template_of_its_index() -> None:
    docs = written()
    assert {(index, op) for _, index, op, _ in docs} == {("logs-iolens.alert-prod", "create")}
    assert len(docs) == 9  # 8 rules (two service levels) and the watch
    for who, index, op_type, fields in docs:
        name, template = template_for(index)
        assert name == "logs-iolens.alert"
        mapped = mapped_fields(index)
        assert sorted(f for f in fields if f not in mapped) == [], who
        if "data_stream" in template:
            assert op_type == "create", who  # data streams take only create
            stream = {k: strip_quotes(v) for k, v in fields.items() if k.startswith("data_")}
            assert stream == {
                "data_stream.type": "logs",
                "data_stream.dataset": "iolens.alert",
                "data_stream.namespace": "prod",
            }, who
            assert f"{stream['data_stream.type']}-{stream['data_stream.dataset']}-prod" == index


def test_the_alert_template_follows_the_conventions() -> None:
    name, body = template_for("logs-iolens.alert-default")
    assert body["index_patterns"] == [f"{name}-*"]
    assert body["data_stream"] == {}
    assert body["priority"] == 200
    assert body["composed_of"] == [
        "iolens-ecs@mappings",
        "iolens@settings",
        f"{name}@package",
        f"{name}@custom",
    ]
    assert body["ignore_missing_component_templates"] == [f"{name}@custom"]
    assert body["_meta"]["managed_by"] == "iolens" and body["version"] == 1
    own = COMPONENTS[f"{name}@package"]["template"]["mappings"]["properties"]
    assert own["iolens"]["dynamic"] == "strict"
    assert flatten(own) == {
        "message": "match_only_text",
        "rule.id": "keyword",
        "rule.name": "keyword",
        "iolens.alert.group": "keyword",
        "iolens.alert.value": "double",
        "iolens.alert.threshold": "double",
        "iolens.alert.conditions": "keyword",
    }
