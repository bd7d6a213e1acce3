"""The connector the alert rules act through, and the action each rule sends to it.

One connector per install, of the type ``alerts.action`` names: ``server-log`` (Kibana's log),
``index`` (an alert document per firing into the plain index ``iolens-alerts-<namespace>``) or
``webhook`` (a POST of ``{"text": message}`` to ``alerts.webhook_url``; Gold licence and up).
Ids are fixed, ``uuid5(ID_NAMESPACE, "<what>/<namespace>")``, so a second setup updates the
objects instead of adding copies.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pipeline.settings import AlertSettings, Settings

ID_NAMESPACE = uuid.UUID("6f0b6a52-6f2e-4c55-9a8e-2a61b0d6c1a4")
"""Rule and connector ids are ``uuid5(ID_NAMESPACE, "<what>/<namespace>")``."""

DEFAULT_MESSAGE = "{{rule.name}}: {{context.group}} is {{context.value}} ({{context.conditions}})"
"""An action's text (Kibana mustache) when its rule names none."""


def object_id(what: str, namespace: str) -> str:
    """The fixed id of a rule or connector: ``uuid5(ID_NAMESPACE, "<what>/<namespace>")``."""
    return str(uuid.uuid5(ID_NAMESPACE, f"{what}/{namespace}"))


def connector(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The connector the rules act through: ``(id, create body)``."""
    alerts, ns = settings.alerts, settings.elasticsearch.namespace
    cid = object_id(f"connector/{alerts.action}", ns)
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


def _action_params(alerts: AlertSettings, message: str) -> dict[str, Any]:
    """What the connector of ``alerts.action`` is given per firing."""
    if alerts.action == "index":
        alert = {"group": "{{context.group}}", "value": "{{context.value}}"}
        document = {
            "rule": {"name": "{{rule.name}}", "id": "{{rule.id}}"},
            "iolens": {"alert": alert},
            "message": message,
        }
        return {"documents": [document]}
    if alerts.action == "webhook":
        return {"body": json.dumps({"text": message})}
    return {"level": "warn", "message": message}


def action(
    alerts: AlertSettings, connector_id: str, group: str, message: str | None = None
) -> dict[str, Any]:
    """A rule's action: ``message`` (default :data:`DEFAULT_MESSAGE`) to the connector when the
    rule's action ``group`` (``"threshold met"``, ``"query matched"``) changes."""
    return {
        "group": group,
        "id": connector_id,
        "params": _action_params(alerts, message or DEFAULT_MESSAGE),
        "frequency": {"summary": False, "notify_when": "onActionGroupChange", "throttle": None},
    }
