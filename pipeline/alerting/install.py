"""Create or update the alerting connector and rules in Kibana (``iolens setup --kibana-url``).

Each object is looked up by its fixed id first: absent (404), it is created with ``POST``;
present, it is updated with ``PUT`` and only the keys an update may change (Kibana refuses
``rule_type_id``, ``consumer`` and ``enabled`` there; reference/elastic.md 5.2).
"""

from __future__ import annotations

from pipeline.alerting.connector import connector
from pipeline.alerting.rules import Rule, rules
from pipeline.kibana_client import Kibana
from pipeline.records.json import JsonObject
from pipeline.settings import Settings

WATCHER_LICENCES = {"gold", "platinum", "enterprise", "trial"}
"""Licences under which Elasticsearch runs Watcher."""
WEBHOOK_LICENCES = WATCHER_LICENCES
"""Licences under which Kibana's webhook connector works."""


def install_connector(kibana: Kibana, cid: str, body: JsonObject) -> str:
    """Create or update connector ``cid``; what was done, as a message.

    Raises:
        KibanaError: Kibana refused a request.
    """
    what = f"connector {body['name']} ({body['connector_type_id']})"
    if kibana.request("GET", f"/api/actions/connector/{cid}")[0] == 404:
        kibana.request("POST", f"/api/actions/connector/{cid}", body)
        return f"created {what}"
    update = {k: v for k, v in body.items() if k in ("name", "config", "secrets")}
    kibana.request("PUT", f"/api/actions/connector/{cid}", update)
    return f"updated {what}"


def install_rule(kibana: Kibana, rule: Rule) -> str:
    """Create or update ``rule``; what was done, as a message.

    Raises:
        KibanaError: Kibana refused a request.
    """
    if kibana.request("GET", f"/api/alerting/rule/{rule.id}")[0] == 404:
        kibana.request("POST", f"/api/alerting/rule/{rule.id}", rule.body)
        return f"created rule {rule.body['name']}"
    kibana.request("PUT", f"/api/alerting/rule/{rule.id}", rule.update_body())
    return f"updated rule {rule.body['name']}"


def install_alerting(kibana: Kibana, settings: Settings, licence: str | None) -> list[str]:
    """Create (or update) the connector and every rule; one message per object.

    A webhook connector on a licence that lacks it is skipped with its rules' actions left
    out (the rules are still created).

    Raises:
        KibanaError: Kibana refused a request.
    """
    cid, cbody = connector(settings)
    if settings.alerts.action == "webhook" and (licence or "basic") not in WEBHOOK_LICENCES:
        out = [f"skipped: webhook connector (needs a Gold licence; this cluster: {licence or '?'})"]
        usable = False
    else:
        out = [install_connector(kibana, cid, cbody)]
        usable = True
    for rule in rules(settings):
        body = rule.body if usable else {**rule.body, "actions": []}
        out.append(install_rule(kibana, Rule(rule.id, body)))
    return out
