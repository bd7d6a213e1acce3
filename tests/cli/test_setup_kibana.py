"""``iolens setup --kibana-url``: connectors and alert rules through Kibana's alerting API.

No Kibana runs here, so a stand-in HTTP server answers as the documented API does
(reference/elastic.md 5.2: ``kbn-xsrf`` required, ``POST /api/alerting/rule/<id>`` creates,
``PUT`` updates and refuses ``rule_type_id``/``consumer``/``enabled``) and checks every rule
body against the ``.index-threshold`` or ``.es-query`` parameters; the fields the rules name are
checked against ``mappings/``.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pipeline.alerting import ID_NAMESPACE, Kibana, KibanaError, rules, watches
from pipeline.cli.main import main
from pipeline.cli.setup_cmd import install_kibana
from pipeline.errors import ConfigError
from pipeline.kibana import load
from pipeline.settings import settings_from_mapping

MAPPINGS = Path(__file__).resolve().parents[2] / "mappings"
AGG_TYPES = {"count", "avg", "min", "max", "sum"}
COMPARATORS = {">", ">=", "<", "<=", "between", "notBetween"}


def index_threshold_problems(body: dict[str, Any], connectors: set[str]) -> list[str]:
    """What is wrong with a create-rule body for ``.index-threshold`` (documented params)."""
    bad = [
        f"missing {k}"
        for k in ("name", "rule_type_id", "consumer", "schedule", "params")
        if k not in body
    ]
    p = body.get("params", {})
    if body.get("rule_type_id") != ".index-threshold":
        bad.append("rule type")
    if not re.fullmatch(r"\d+[smhd]", body.get("schedule", {}).get("interval", "")):
        bad.append("schedule.interval")
    if not (isinstance(p.get("index"), list) and all(isinstance(i, str) for i in p["index"])):
        bad.append("index")
    if p.get("aggType") not in AGG_TYPES:
        bad.append("aggType")
    if p.get("aggType") != "count" and not p.get("aggField"):
        bad.append("aggField")
    if p.get("groupBy") not in ("all", "top"):
        bad.append("groupBy")
    if p.get("groupBy") == "top" and not (p.get("termField") and p.get("termSize", 0) > 0):
        bad.append("termField/termSize")
    if not (isinstance(p.get("timeWindowSize"), int) and p["timeWindowSize"] > 0):
        bad.append("timeWindowSize")
    if p.get("timeWindowUnit") not in ("s", "m", "h", "d"):
        bad.append("timeWindowUnit")
    if p.get("thresholdComparator") not in COMPARATORS:
        bad.append("thresholdComparator")
    t = p.get("threshold")
    if not (
        isinstance(t, list) and 1 <= len(t) <= 2 and all(isinstance(x, int | float) for x in t)
    ):
        bad.append("threshold")
    for a in body.get("actions", []):
        if a.get("group") != "threshold met" or a.get("id") not in connectors:
            bad.append(f"action {a.get('group')} -> {a.get('id')}")
    return bad


def es_query_problems(body: dict[str, Any], connectors: set[str]) -> list[str]:
    """What is wrong with a create-rule body for ``.es-query`` with ``searchType: esQuery``
    (Kibana's ``es_query/rule_type_params.ts``: the threshold, window and grouping parameters of
    ``.index-threshold`` plus ``size`` 0-10000 and ``esQuery``, a JSON string with a ``query``)."""
    p = body.get("params", {})
    as_threshold = {**body, "rule_type_id": ".index-threshold", "actions": []}
    bad = [b for b in index_threshold_problems(as_threshold, connectors) if b != "rule type"]
    if body.get("rule_type_id") != ".es-query" or p.get("searchType") != "esQuery":
        bad.append("rule type")
    if not p.get("timeField"):
        bad.append("timeField")
    if not (isinstance(p.get("size"), int) and 0 <= p["size"] <= 10_000):
        bad.append("size")
    try:
        if "query" not in json.loads(p.get("esQuery", "")):
            bad.append("esQuery has no query")
    except (TypeError, ValueError):
        bad.append("esQuery is not JSON")
    if not isinstance(p.get("excludeHitsFromPreviousRun", True), bool):
        bad.append("excludeHitsFromPreviousRun")
    for a in body.get("actions", []):
        if a.get("group") != "query matched" or a.get("id") not in connectors:
            bad.append(f"action {a.get('group')} -> {a.get('id')}")
    return bad


RULE_CHECKS = {".index-threshold": index_threshold_problems, ".es-query": es_query_problems}


class FakeKibana(BaseHTTPRequestHandler):
    connectors: dict[str, dict[str, Any]]
    rules: dict[str, dict[str, Any]]
    imports: list[bytes]
    log: list[str]

    def _reply(self, status: int, body: Any = None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def do_GET(self) -> None:
        kind, _, ident = self.path.removeprefix("/api/").rpartition("/")
        store = {"actions/connector": self.connectors, "alerting/rule": self.rules}.get(kind)
        if store is None or ident not in store:
            self._reply(404, {"statusCode": 404, "error": "Not Found"})
        else:
            self._reply(200, store[ident])

    def _write(self, method: str) -> None:
        self.log.append(f"{method} {self.path}")
        raw = self._body()
        if self.headers.get("kbn-xsrf") is None:
            self._reply(400, {"message": "Request must contain a kbn-xsrf header."})
            return
        if self.path.startswith("/api/saved_objects/_import"):
            self.imports.append(raw)
            # the NDJSON of the multipart part "file"; each object answered as imported
            part = raw.split(b"\r\n\r\n", 1)[1].rsplit(b"\r\n--", 1)[0]
            objs = [json.loads(line) for line in part.splitlines() if line.strip()]
            results = [
                {"type": o["type"], "id": o["id"], "meta": {"title": o["attributes"].get("title")}}
                for o in objs
            ]
            ok = all("typeMigrationVersion" in o and "references" in o for o in objs)
            self._reply(200, {"success": ok, "successCount": len(objs), "successResults": results})
            return
        body = json.loads(raw)
        kind, _, ident = self.path.removeprefix("/api/").rpartition("/")
        if kind == "actions/connector":
            if method == "POST" and ident in self.connectors:
                self._reply(409, {"message": "exists"})
                return
            self.connectors[ident] = {**self.connectors.get(ident, {}), **body, "id": ident}
            self._reply(200, self.connectors[ident])
        elif kind == "alerting/rule":
            uuid.UUID(ident)  # Kibana takes only a UUID v1/v4 as a rule id
            if method == "PUT":
                refused = {"rule_type_id", "consumer", "enabled"} & body.keys()
                if refused or ident not in self.rules:
                    self._reply(400, {"message": f"cannot update {sorted(refused)}"})
                    return
                body = {**self.rules[ident], **body}
            elif ident in self.rules:
                self._reply(409, {"message": "exists"})
                return
            check = RULE_CHECKS.get(body.get("rule_type_id"), index_threshold_problems)
            problems = check(body, set(self.connectors))
            if problems:
                self._reply(400, {"message": "; ".join(problems)})
                return
            self.rules[ident] = {**body, "id": ident}
            self._reply(200, self.rules[ident])
        else:
            self._reply(404)

    def do_POST(self) -> None:
        self._write("POST")

    def do_PUT(self) -> None:
        self._write("PUT")

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def kibana() -> Iterator[type[FakeKibana]]:
    handler = type(
        "Handler", (FakeKibana,), {"connectors": {}, "rules": {}, "imports": [], "log": []}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        server.shutdown()
        server.server_close()


def test_rules_are_created_once_then_updated(kibana: type[FakeKibana]) -> None:
    settings = settings_from_mapping({"elasticsearch": {"namespace": "prod"}})
    client = Kibana(kibana.url, username="elastic", password="x")  # type: ignore[attr-defined]
    first = install_kibana(client, settings, "basic")
    assert first == [
        "created connector iolens alerts log (.server-log)",
        "created rule iolens: fio 95 % of completions under 1 s",
        "created rule iolens: fio 99 % of completions under 5 s",
        "created rule iolens: a LUN persistently anomalous among its peers",
        "created rule iolens: low-bandwidth HPC jobs",
        "created rule iolens: the sink limits the pipeline",
        "created rule iolens: documents wait more than 300 s to be indexed",
        "created rule iolens: new dead letters",
        "created rule iolens: storage incident",
    ]
    assert len(kibana.rules) == 8 and len(kibana.connectors) == 1
    sla = next(r for r in kibana.rules.values() if "95 %" in r["name"])
    assert sla["params"]["aggField"] == "fio.clat_ns.p95"
    assert sla["params"]["threshold"] == [1_000_000_000]
    assert sla["params"]["index"] == ["metrics-fio.latency-prod"]
    again = install_kibana(client, settings, "basic")
    assert again == [m.replace("created", "updated") for m in first]
    assert len(kibana.rules) == 8  # updated in place: the same ids


def test_setup_says_what_it_skipped(
    kibana: type[FakeKibana], es_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "iolens.yaml"
    config.write_text(
        "elasticsearch: {namespace: kb}\n"
        "alerts: {action: webhook, webhook_url: 'https://hooks.example/iolens'}\n"
    )
    base = ["--config", str(config), "--es-url", es_url, "setup"]
    assert main(base) == 0
    out = capsys.readouterr().out
    assert "skipped: 1 watch(es) (Watcher needs Gold or a trial; licence unknown)" in out
    assert "skipped: data views, dashboards and alert rules (no --kibana-url)" in out
    assert main([*base, "--kibana-url", kibana.url]) == 0  # type: ignore[attr-defined]
    out = capsys.readouterr().out
    # no licence for webhooks: the rules come without actions
    assert "skipped: webhook connector (needs a Gold licence; this cluster: ?)" in out
    assert "created rule iolens: low-bandwidth HPC jobs" in out
    assert not kibana.connectors and all(not r["actions"] for r in kibana.rules.values())
    assert all(line.startswith(("POST", "PUT")) for line in kibana.log)
    # the saved objects went in first, in one import, and each is reported
    assert kibana.log[0] == "POST /api/saved_objects/_import?overwrite=true"
    [upload] = kibana.imports
    objects = list(load())
    assert upload.count(b'"typeMigrationVersion"') == len(objects)
    for o in objects:
        assert f"imported {o['type']} {o['attributes']['title']}" in out


def test_a_refused_request_is_an_error(kibana: type[FakeKibana]) -> None:
    settings = settings_from_mapping({})
    client = Kibana(kibana.url)  # type: ignore[attr-defined]
    client.headers.pop("kbn-xsrf")
    with pytest.raises(KibanaError, match="kbn-xsrf"):
        install_kibana(client, settings, "basic")
    with pytest.raises(KibanaError, match="no answer"):
        install_kibana(Kibana("http://127.0.0.1:9"), settings, "basic")


def mapped_fields() -> dict[str, str]:
    """Every field of ``mappings/`` with its type."""
    out: dict[str, str] = {}

    def walk(props: dict[str, Any], prefix: str) -> None:
        for name, spec in props.items():
            if "properties" in spec:
                walk(spec["properties"], f"{prefix}{name}.")
            elif "type" in spec:
                out[f"{prefix}{name}"] = spec["type"]

    for path in MAPPINGS.glob("component_template.*.json"):
        mappings = json.loads(path.read_text())["template"].get("mappings", {})
        walk(mappings.get("properties", {}), "")
    return out


def test_every_field_a_rule_or_watch_names_is_mapped_with_a_fitting_type() -> None:
    fields = mapped_fields()
    numeric = {"long", "double", "float", "integer", "scaled_float"}
    for rule in rules(settings_from_mapping({})):
        p = rule.body["params"]
        if "aggField" in p:
            assert fields[p["aggField"]] in numeric, p["aggField"]
        if "termField" in p:
            assert fields[p["termField"]] in {"keyword", "long", "boolean"}, p["termField"]
        for name in re.findall(r"([\w.]+) :", p.get("filterKuery", "")):
            assert name in fields, name
        for name in re.findall(r'"term": \{"([\w.]+)"', p.get("esQuery", "")):
            assert fields[name] == "keyword", name
        assert fields[p["timeField"]] == "date"
    [(wid, watch)] = list(watches(settings_from_mapping({})))
    assert wid == "iolens-fio_p95_sla-default"
    assert watch["input"]["search"]["request"]["indices"] == ["metrics-fio.histogram-default"]
    aggs = watch["input"]["search"]["request"]["body"]["aggs"]["hosts"]
    assert fields[aggs["terms"]["field"]] == "keyword"
    assert fields[aggs["aggs"]["clat"]["percentiles"]["field"]] == "histogram"
    assert watch["actions"]["index"]["index"]["op_type"] == "create"  # a data stream


def test_the_incident_rule_fires_per_new_open_incident() -> None:
    settings = settings_from_mapping(
        {"elasticsearch": {"namespace": "prod"}, "alerts": {"interval": "2m"}}
    )
    [rule] = [r for r in rules(settings) if r.body["rule_type_id"] == ".es-query"]
    assert rule.id == str(uuid.uuid5(ID_NAMESPACE, "rule/incident/prod"))
    body = dict(rule.body)
    params = dict(body.pop("params"))
    [action] = body.pop("actions")
    assert body == {
        "name": "iolens: storage incident",
        "rule_type_id": ".es-query",
        "consumer": "stackAlerts",
        "schedule": {"interval": "2m"},
        "enabled": True,
        "tags": ["iolens", "incident", "lun"],
    }
    assert json.loads(params.pop("esQuery")) == {
        "query": {"bool": {"filter": [{"term": {"iolens.incident.status": "open"}}]}},
        "_source": ["@timestamp", "host.name", "iolens.incident"],
    }
    assert params == {
        "searchType": "esQuery",
        "index": ["logs-iolens.incident-prod"],
        "timeField": "iolens.incident.updated",
        "size": 10,
        "aggType": "count",
        "groupBy": "top",
        "termField": "iolens.incident.id",
        "termSize": 100,
        "timeWindowSize": 420,  # max_lag_s (300) + interval (2 min)
        "timeWindowUnit": "s",
        "thresholdComparator": ">",
        "threshold": [0],
        "excludeHitsFromPreviousRun": False,  # ignored by Kibana on a grouped rule
    }
    assert action == {
        "group": "query matched",
        "id": str(uuid.uuid5(ID_NAMESPACE, "connector/server-log/prod")),
        "params": {
            "level": "warn",
            "message": "{{rule.name}} {{alert.id}}: "
            "{{#context.hits}}{{_source.iolens.incident.summary}} {{/context.hits}}",
        },
        "frequency": {"summary": False, "notify_when": "onActionGroupChange", "throttle": None},
    }
    assert es_query_problems(rule.body, {action["id"]}) == []
    broken = {**rule.body, "params": {**rule.body["params"], "esQuery": '{"size": 1}'}}
    assert es_query_problems(broken, {action["id"]}) == ["esQuery has no query"]


def test_an_interval_the_incident_window_cannot_take_names_the_key() -> None:
    settings = settings_from_mapping({"alerts": {"interval": "90sec"}})
    with pytest.raises(ConfigError, match=r"alerts\.interval: '90sec' is not a count of s, m"):
        rules(settings)
