"""The connector the alert rules act through, and the action each rule sends to it.

One connector per install, of the type ``alerts.action`` names: ``server-log`` (Kibana's log),
``index`` (an alert document per firing into the data stream ``logs-iolens.alert-<namespace>``,
:func:`alert_document`) or ``webhook`` (a POST of ``{"text": message}`` to
``alerts.webhook_url``; Gold licence and up). Ids are fixed,
``uuid5(ID_NAMESPACE, "<what>/<namespace>")``, so a second setup updates the objects instead of
adding copies.

Messages and documents use only the action variables Kibana documents for every rule type
(``rule.*``, ``alert.*``, ``date``) and the ``context`` both ``.index-threshold`` and
``.es-query`` give (``value``, ``conditions``): the group an alert is for (a LUN, a host, an
incident id) is ``{{alert.id}}``, since ``context.group`` exists for ``.index-threshold`` only.
"""

from __future__ import annotations

import json
import uuid

from pipeline.records.json import JsonObject, SourceFields
from pipeline.settings import AlertSettings, Settings

ID_NAMESPACE = uuid.UUID("6f0b6a52-6f2e-4c55-9a8e-2a61b0d6c1a4")
"""Rule and connector ids are ``uuid5(ID_NAMESPACE, "<what>/<namespace>")``."""

DEFAULT_MESSAGE = "{{rule.name}}: {{alert.id}} is {{context.value}} ({{context.conditions}})"
"""An action's text (Kibana mustache) when its rule names none."""

ALERT_DATASET = "iolens.alert"
"""The dataset of alert documents: the data stream ``logs-iolens.alert-<namespace>``."""


def object_id(what: str, namespace: str) -> str:
    """The fixed id of a rule or connector: ``uuid5(ID_NAMESPACE, "<what>/<namespace>")``."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{what}/{namespace}"))


def connector(settings: Settings) -> tuple[str, JsonObject]:
    """The connector the rules act through: ``(id, create body)``."""
    alerts, ns = settings.alerts, settings.elasticsearch.namespace
    cid = object_id(f"connector/{alerts.action}", ns)
    if alerts.action == "index":
        config: JsonObject = {
            "index": f"logs-{ALERT_DATASET}-{ns}",
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


def alert_document(namespace: str, message: str) -> SourceFields:
    """The document the ``index`` connector writes per firing (Kibana mustache in the values).

    Kibana's index connector adds ``@timestamp`` (``executionTimeField``) and writes with
    ``op_type: create``, which data streams require (Kibana 8.4 and later, elastic/kibana#136011).
    Rendered values are strings: ``iolens.alert.value`` is a number in text, which the mapping
    (``logs-iolens.alert@package``, a ``double``) takes.
    """
    return {
        "data_stream": {"type": "logs", "dataset": ALERT_DATASET, "namespace": namespace},
        "event": {"kind": "alert", "module": "iolens", "dataset": ALERT_DATASET},
        "rule": {"id": "{{rule.id}}", "name": "{{rule.name}}"},
        "iolens": {
            "alert": {
                "group": "{{alert.id}}",
                "value": "{{context.value}}",
                "conditions": "{{context.conditions}}",
            }
        },
        "message": message,
    }


def _action_params(alerts: AlertSettings, namespace: str, message: str) -> JsonObject:
    """What the connector of ``alerts.action`` is given per firing."""
    if alerts.action == "index":
        return {"documents": [alert_document(namespace, message)]}
    if alerts.action == "webhook":
        return {"body": json.dumps({"text": message})}
    return {"level": "warn", "message": message}


def action(
    settings: Settings, connector_id: str, group: str, message: str | None = None
) -> JsonObject:
    """A rule's action: ``message`` (default :data:`DEFAULT_MESSAGE`) to the connector when an
    alert of the rule enters the action ``group`` (``"threshold met"``, ``"query matched"``):
    once per alert (per group of a grouped rule) while it stays active."""
    return {
        "group": group,
        "id": connector_id,
        "params": _action_params(
            settings.alerts, settings.elasticsearch.namespace, message or DEFAULT_MESSAGE
        ),
        "frequency": {"summary": False, "notify_when": "onActionGroupChange", "throttle": None},
    }
