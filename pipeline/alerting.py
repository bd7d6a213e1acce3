"""Alert rules for the service levels the seeds describe, created through Kibana's alerting API.

Rules exported as saved objects come back disabled and connectors lose their secrets, so
``iolens setup --kibana-url`` creates them through the API instead (reference/elastic.md 5.2):
a connector, then each rule, under fixed ids (UUIDs derived from the rule's name and the
namespace), so a second setup updates them rather than adding copies:

* **latency SLA** per configured percentile (``alerts.sla``, by default "95 % under 1 s" and
  "99 % under 5 s", seed 000): ``.index-threshold`` on the merged cluster-wide percentile of
  each interval (``fio.clat_ns.p95``... of ``metrics-fio.latency``), per direction;
* **persistent anomaly** (seed 001): a LUN whose persistence accumulator
  (``iolens.persistence.value``) passes ``alerts.persistence_threshold``;
* **low-bandwidth jobs** (seed 004): a job diagnosed as low-bandwidth
  (``logs-iolens.io_diagnosis`` with ``low_bandwidth: true``) in the last hour;
* **pipeline health** (seed 003): the sink saturated, its utilisation over
  ``alerts.sink_utilisation`` (``metrics-iolens.service_rate``); documents waiting longer than
  ``alerts.max_lag_s`` from being read to being acknowledged, and new dead letters
  (``metrics-iolens.pipeline``, written every tick of ``iolens run``);
* **storage incident**: a new revision of an open incident (``logs-iolens.incident``: a LUN
  persistently anomalous among its peers with the fio SLA breaches and Darshan jobs on it), an
  ``.es-query`` rule with one alert per incident.

Actions go to a connector that works on a Basic licence: ``server-log`` (Kibana's log) or
``index`` (an alert document per firing into the plain index ``iolens-alerts-<namespace>``, not
a data stream: Kibana's index connector writes with the ``index`` operation, which data streams
refuse); ``webhook`` (Gold and up) posts to ``alerts.webhook_url``. Watcher definitions for
licensed clusters are in ``kibana/watches/`` (:func:`watches`) and installed only when the
licence allows.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import ConfigError
from pipeline.settings import AlertSettings, Settings

KIBANA_DIR = Path(__file__).resolve().parent.parent / "kibana"
ID_NAMESPACE = uuid.UUID("6f0b6a52-6f2e-4c55-9a8e-2a61b0d6c1a4")
"""Rule and connector ids are ``uuid5(ID_NAMESPACE, "<what>/<namespace>")``."""

WATCHER_LICENCES = {"gold", "platinum", "enterprise", "trial"}
WEBHOOK_LICENCES = WATCHER_LICENCES


@dataclass(frozen=True)
class Rule:
    """A Kibana rule to create: its id and the create-rule body (``POST
    /api/alerting/rule/<id>``)."""

    id: str
    body: dict[str, Any]

    def update_body(self) -> dict[str, Any]:
        """The body of ``PUT /api/alerting/rule/<id>``: what an update may change."""
        keep = ("name", "tags", "schedule", "params", "actions", "notify_when", "throttle")
        return {k: v for k, v in self.body.items() if k in keep}


def _id(what: str, namespace: str) -> str:
    return str(uuid.uuid5(ID_NAMESPACE, f"{what}/{namespace}"))


def connector(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The connector the rules act through: ``(id, create body)``."""
    alerts, ns = settings.alerts, settings.elasticsearch.namespace
    cid = _id(f"connector/{alerts.action}", ns)
    if alerts.action == "index":
        config: dict[str, Any] = {
            "index": f"iolens-alerts-{ns}",
            "executionTimeField": "@timestamp",
            "refresh": False,
        }
        return cid, {"name": "iolens alerts index", "connector_type_id": ".index", "config": config}
    if alerts.action == "webhook":
        config = {"url": alerts.webhook_url, "method": "post", "hasAuth": False}
        return cid, {
            "name": "iolens alerts webhook",
            "connector_type_id": ".webhook",
            "config": config,
            "secrets": {},
        }
    return cid, {"name": "iolens alerts log", "connector_type_id": ".server-log", "config": {}}


def _action(
    alerts: AlertSettings, connector_id: str, group: str, message: str | None = None
) -> dict[str, Any]:
    message = message or (
        "{{rule.name}}: {{context.group}} is {{context.value}} ({{context.conditions}})"
    )
    if alerts.action == "index":
        params: dict[str, Any] = {
            "documents": [
                {
                    "rule": {"name": "{{rule.name}}", "id": "{{rule.id}}"},
                    "iolens": {
                        "alert": {"group": "{{context.group}}", "value": "{{context.value}}"}
                    },
                    "message": message,
                }
            ]
        }
    elif alerts.action == "webhook":
        params = {"body": json.dumps({"text": message})}
    else:
        params = {"level": "warn", "message": message}
    return {
        "group": group,
        "id": connector_id,
        "params": params,
        "frequency": {"summary": False, "notify_when": "onActionGroupChange", "throttle": None},
    }


def _threshold_rule(
    alerts: AlertSettings,
    connector_id: str,
    rid: str,
    name: str,
    tags: list[str],
    params: dict[str, Any],
) -> Rule:
    body = {
        "name": name,
        "rule_type_id": ".index-threshold",
        "consumer": "stackAlerts",
        "schedule": {"interval": alerts.interval},
        "enabled": True,
        "tags": ["iolens", *tags],
        "params": {"timeField": "@timestamp", **params},
        "actions": [_action(alerts, connector_id, "threshold met")],
    }
    return Rule(rid, body)


INCIDENT_MESSAGE = (
    "{{rule.name}} {{context.group}}: "
    "{{#context.hits}}{{_source.iolens.incident.summary}} {{/context.hits}}"
)
"""The incident rule's action text: the incident id, then the summary of each matched revision
(``context.hits`` of the ``.es-query`` rule type)."""


def _window(interval: str) -> tuple[int, str]:
    """``"5m"`` -> ``(5, "m")``: a Kibana interval as an ``.es-query`` time window.

    Raises:
        ConfigError: the interval is not a count of s, m, h or d.
    """
    match = re.fullmatch(r"([1-9]\d*)([smhd])", interval)
    if match is None:
        raise ConfigError(
            f"alerts.interval: {interval!r} is not a count of s, m, h or d; write e.g. 1m"
        )
    return int(match[1]), match[2]


def _incident_rule(alerts: AlertSettings, connector_id: str, ns: str) -> Rule:
    """``.es-query`` on ``logs-iolens.incident-<ns>``: open incidents whose
    ``iolens.incident.updated`` falls in the last rule interval, one alert per incident id (so a
    second incident is announced while the first is still active). Params as Kibana's
    ``es_query/rule_type_params.ts`` documents them (reference/elastic.md 5.2)."""
    size, unit = _window(alerts.interval)
    query = {
        "query": {"bool": {"filter": [{"term": {"iolens.incident.status": "open"}}]}},
        "_source": ["@timestamp", "host.name", "iolens.incident"],
    }
    params = {
        "searchType": "esQuery",
        "index": [f"logs-iolens.incident-{ns}"],
        "timeField": "iolens.incident.updated",
        "esQuery": json.dumps(query, sort_keys=True),
        "size": 10,
        "aggType": "count",
        "groupBy": "top",
        "termField": "iolens.incident.id",
        "termSize": 100,
        "timeWindowSize": size,
        "timeWindowUnit": unit,
        "thresholdComparator": ">",
        "threshold": [0],
        "excludeHitsFromPreviousRun": True,
    }
    body = {
        "name": "iolens: storage incident",
        "rule_type_id": ".es-query",
        "consumer": "stackAlerts",
        "schedule": {"interval": alerts.interval},
        "enabled": True,
        "tags": ["iolens", "incident", "lun"],
        "params": params,
        "actions": [_action(alerts, connector_id, "query matched", INCIDENT_MESSAGE)],
    }
    return Rule(_id("rule/incident", ns), body)


def rules(settings: Settings) -> list[Rule]:
    """Every rule of the module docstring, for ``settings.alerts`` and the namespace."""
    alerts, ns = settings.alerts, settings.elasticsearch.namespace
    cid, _ = connector(settings)
    out: list[Rule] = []
    for sla in alerts.sla:
        key = f"p{sla.percentile:g}".replace(".", "_")
        out.append(
            _threshold_rule(
                alerts,
                cid,
                _id(f"rule/sla/{key}", ns),
                f"iolens: fio {sla.percentile:g} % of completions under {sla.under_s:g} s",
                ["sla", "fio"],
                {
                    "index": [f"metrics-fio.latency-{ns}"],
                    "aggType": "max",
                    "aggField": f"fio.clat_ns.{key}",
                    "groupBy": "top",
                    "termField": "fio.ddir",
                    "termSize": 4,
                    "filterKuery": 'iolens.scope : "cluster"',
                    "timeWindowSize": alerts.window_m,
                    "timeWindowUnit": "m",
                    "thresholdComparator": ">",
                    "threshold": [round(sla.under_s * 1e9)],
                },
            )
        )
    out.append(
        _threshold_rule(
            alerts,
            cid,
            _id("rule/persistence", ns),
            "iolens: a LUN persistently anomalous among its peers",
            ["lun", "peer-comparison"],
            {
                "index": [f"metrics-iolens.persistence-{ns}"],
                "aggType": "max",
                "aggField": "iolens.persistence.value",
                "groupBy": "top",
                "termField": "iolens.persistence.lun",
                "termSize": 50,
                "timeWindowSize": 2,
                "timeWindowUnit": "h",
                "thresholdComparator": ">=",
                "threshold": [alerts.persistence_threshold],
            },
        )
    )
    out.append(
        _threshold_rule(
            alerts,
            cid,
            _id("rule/low-bandwidth", ns),
            "iolens: low-bandwidth HPC jobs",
            ["hpc", "darshan"],
            {
                "index": [f"logs-iolens.io_diagnosis-{ns}"],
                "aggType": "count",
                "groupBy": "all",
                "filterKuery": "iolens.io_diagnosis.low_bandwidth : true",
                "timeWindowSize": 1,
                "timeWindowUnit": "h",
                "thresholdComparator": ">",
                "threshold": [0],
            },
        )
    )
    out.append(
        _threshold_rule(
            alerts,
            cid,
            _id("rule/pipeline", ns),
            "iolens: the sink limits the pipeline",
            ["pipeline", "service-rate"],
            {
                "index": [f"metrics-iolens.service_rate-{ns}"],
                "aggType": "max",
                "aggField": "iolens.service_rate.utilisation",
                "groupBy": "all",
                "filterKuery": 'iolens.service_rate.stage : "sink"',
                "timeWindowSize": 15,
                "timeWindowUnit": "m",
                "thresholdComparator": ">",
                "threshold": [alerts.sink_utilisation],
            },
        )
    )
    out.append(
        _threshold_rule(
            alerts,
            cid,
            _id("rule/lag", ns),
            f"iolens: documents wait more than {alerts.max_lag_s:g} s to be indexed",
            ["pipeline", "lag"],
            {
                "index": [f"metrics-iolens.pipeline-{ns}"],
                "aggType": "max",
                "aggField": "iolens.pipeline.lag_max_s",
                "groupBy": "top",
                "termField": "host.name",
                "termSize": 50,
                "timeWindowSize": 15,
                "timeWindowUnit": "m",
                "thresholdComparator": ">",
                "threshold": [alerts.max_lag_s],
            },
        )
    )
    out.append(
        _threshold_rule(
            alerts,
            cid,
            _id("rule/dead-letters", ns),
            "iolens: new dead letters",
            ["pipeline", "dead-letters"],
            {
                "index": [f"metrics-iolens.pipeline-{ns}"],
                "aggType": "sum",
                "aggField": "iolens.pipeline.dead_letters_new",
                "groupBy": "top",
                "termField": "host.name",
                "termSize": 50,
                "timeWindowSize": 15,
                "timeWindowUnit": "m",
                "thresholdComparator": ">",
                "threshold": [0],
            },
        )
    )
    out.append(_incident_rule(alerts, cid, ns))
    return out


def watches(settings: Settings) -> Iterator[tuple[str, dict[str, Any]]]:
    """The Watcher definitions of ``kibana/watches/`` for the namespace: ``(id, body)``.

    ``{namespace}`` in a watch's text is replaced by the data streams' namespace.

    Raises:
        ValueError: a file is not JSON.
    """
    ns = settings.elasticsearch.namespace
    for path in sorted((KIBANA_DIR / "watches").glob("*.json")):
        text = path.read_text(encoding="utf-8").replace("{namespace}", ns)
        try:
            yield f"iolens-{path.stem}-{ns}", json.loads(text)
        except ValueError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None


# -- the Kibana API ----------------------------------------------------------------------------


class KibanaError(RuntimeError):
    """Kibana answered with an error (or not at all); the message names the request."""


class Kibana:
    """A minimal Kibana API client (``kbn-xsrf`` on every request).

    Args:
        url: Kibana's base URL, e.g. ``http://localhost:5601`` (a space: ``.../s/<space>``).
        username, password / api_key: Basic or ``ApiKey`` authentication.
        timeout_s: per request.
    """

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.headers = {"kbn-xsrf": "true"}
        if api_key:
            self.headers["Authorization"] = f"ApiKey {api_key}"
        elif username:
            token = base64.b64encode(f"{username}:{password or ''}".encode()).decode()
            self.headers["Authorization"] = f"Basic {token}"
        self.timeout_s = timeout_s

    def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        data: bytes | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        """One request; ``(status, parsed JSON body)``; 404 is returned, not raised.

        Raises:
            KibanaError: no answer, or a status of 400 and above other than 404.
        """
        payload = data if data is not None else (json.dumps(body).encode() if body else None)
        req = urllib.request.Request(f"{self.url}{path}", data=payload, method=method)
        for k, v in self.headers.items():
            req.add_header(k, v)
        if payload is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as err:
            raw = err.read()
            if err.code == 404:
                return 404, None
            raise KibanaError(
                f"{method} {path}: {err.code} {raw.decode(errors='replace')[:300]}"
            ) from None
        except (urllib.error.URLError, TimeoutError, OSError) as err:
            raise KibanaError(f"{method} {path}: no answer from {self.url} ({err})") from None

    def import_objects(self, ndjson: bytes) -> Mapping[str, Any]:
        """``POST /api/saved_objects/_import?overwrite=true`` of ``ndjson``; the response.

        Raises:
            KibanaError: the request failed, or the response says ``success: false`` (each
                failed object named with its error).
        """
        boundary = f"iolens-{uuid.uuid4().hex}"
        data = (
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="iolens.ndjson"\r\nContent-Type: application/ndjson\r\n\r\n'
            ).encode()
            + ndjson
            + f"\r\n--{boundary}--\r\n".encode()
        )
        status, body = self.request(
            "POST",
            "/api/saved_objects/_import?overwrite=true",
            data=data,
            content_type=f"multipart/form-data; boundary={boundary}",
        )
        if status == 404 or not isinstance(body, Mapping):
            raise KibanaError("the saved-objects import API is missing (Kibana 8 needed)")
        if not body.get("success"):
            errors = "; ".join(
                f"{e.get('type')}/{e.get('id')}: {e.get('error', {}).get('type')}"
                for e in body.get("errors", [])
            )
            raise KibanaError(f"saved-objects import failed: {errors or body}")
        return body


def install_alerting(kibana: Kibana, settings: Settings, licence: str | None) -> list[str]:
    """Create (or update) the connector and every rule; one message per object.

    A webhook connector on a licence that lacks it is skipped with its rules' actions left
    out (the rules are still created).

    Raises:
        KibanaError: Kibana refused a request.
    """
    out: list[str] = []
    cid, cbody = connector(settings)
    usable = True
    if settings.alerts.action == "webhook" and (licence or "basic") not in WEBHOOK_LICENCES:
        out.append(
            f"skipped: webhook connector (needs a Gold licence; this cluster: {licence or '?'})"
        )
        usable = False
    elif kibana.request("GET", f"/api/actions/connector/{cid}")[0] == 404:
        kibana.request("POST", f"/api/actions/connector/{cid}", cbody)
        out.append(f"created connector {cbody['name']} ({cbody['connector_type_id']})")
    else:
        update = {k: v for k, v in cbody.items() if k in ("name", "config", "secrets")}
        kibana.request("PUT", f"/api/actions/connector/{cid}", update)
        out.append(f"updated connector {cbody['name']} ({cbody['connector_type_id']})")
    for rule in rules(settings):
        body = dict(rule.body)
        if not usable:
            body["actions"] = []
        rule = Rule(rule.id, body)
        if kibana.request("GET", f"/api/alerting/rule/{rule.id}")[0] == 404:
            kibana.request("POST", f"/api/alerting/rule/{rule.id}", rule.body)
            out.append(f"created rule {body['name']}")
        else:
            kibana.request("PUT", f"/api/alerting/rule/{rule.id}", rule.update_body())
            out.append(f"updated rule {body['name']}")
    return out
