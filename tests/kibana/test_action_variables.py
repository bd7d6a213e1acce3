"""Every mustache variable an alert rule's action uses is one Kibana passes for its rule type.

The stand-in Kibana of ``tests/cli/test_setup_kibana.py`` checks that a rule body has the
parameters Kibana takes, not what its messages name: a variable Kibana does not pass renders
empty (``{{context.group}}`` in an Elasticsearch query rule gave alerts without their incident).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from pipeline.alerting import Rule, rules
from pipeline.alerting.connector import DEFAULT_MESSAGE
from pipeline.alerting.rules import load
from pipeline.settings import Settings, settings_from_mapping
from tests.kibana.alert_mappings import mapped_fields

# --- the action variables Kibana documents -----------------------------------------------------
#
# Common to every rule type, elastic/kibana docs/user/alerting/action-variables.asciidoc
# ("Rule action variables": "General variables" and "Action frequency: For each alert
# variables"; our actions run per alert, not as summaries, so ``alerts.*`` is not passed).
# ``rule.params`` is an object: ``rule.params.<name>`` is one of the rule's parameters, as in
# the example messages of the rule type pages (``{{rule.params.timeWindowSize}}``).
COMMON = frozenset(
    {
        "date",
        "kibanaBaseUrl",
        "rule.id",
        "rule.name",
        "rule.params",
        "rule.spaceId",
        "rule.tags",
        "rule.url",
        "alert.actionGroup",
        "alert.actionGroupName",
        "alert.actionSubgroup",
        "alert.consecutiveMatches",
        "alert.flapping",
        "alert.id",
        "alert.uuid",
        "context",
    }
)
# ``context.*`` per rule type id:
# * ``.index-threshold``: docs/user/alerting/rule-types/index-threshold.asciidoc, "Add action
#   variables" (conditions, date, group, message, title, value), the same six as
#   ``actionVariables.context`` in x-pack/plugins/stack_alerts/server/rule_types/
#   index_threshold/rule_type.ts; ``group`` is the group's value (``action_context.ts``).
# * ``.es-query``: docs/user/alerting/rule-types/es-query.asciidoc, "Add action variables"
#   (conditions, date, hits, link, message, sourceFields, title, value); ``rule_type.ts`` of
#   es_query lists the same but sourceFields. There is no ``context.group``: the group of a
#   grouped rule is the alert's id (``executor.ts`` reports each group as an alert of that id).
CONTEXT: Mapping[str, frozenset[str]] = {
    ".index-threshold": frozenset({"conditions", "date", "group", "message", "title", "value"}),
    ".es-query": frozenset(
        {"conditions", "date", "hits", "link", "message", "sourceFields", "title", "value"}
    ),
}
# Mustache lambdas Kibana provides (action-variables.asciidoc, "Using Mustache lambdas").
LAMBDAS = frozenset({"EvalMath", "FormatDate", "FormatNumber", "ParseHjson"})
# Keys of one element of ``context.hits`` (an Elasticsearch search hit; es-query.asciidoc).
HIT_KEYS = frozenset({"_id", "_index", "_score", "sort"})

TAG = re.compile(
    r"\{\{\{\s*(?P<raw>[^}]+?)\s*\}\}\}|\{\{(?P<op>[#^/!&]?)\s*(?P<name>[^}]*?)\s*\}\}"
)


def _hit_variable(name: str, source_fields: frozenset[str]) -> str | None:
    """What is wrong with ``name`` inside a ``{{#context.hits}}`` section (None: nothing)."""
    if name.startswith("_source."):
        field = name.removeprefix("_source.")
        if field not in source_fields:
            return f"{name}: {field} is not a field the query returns"
        return None
    if name in HIT_KEYS or name.startswith("fields."):
        return None
    return ""  # not a key of the hit: looked up in the enclosing context


def variable_problem(
    name: str,
    rule_type: str,
    params: Mapping[str, Any],
    sections: list[str],
    source_fields: frozenset[str],
) -> str | None:
    """What is wrong with the variable ``name`` in an action of a ``rule_type`` rule with
    ``params``, inside the open ``sections`` (None: nothing)."""
    if name == "." and sections:
        return None
    name = name.removesuffix(".asJSON")
    if "context.hits" in sections:
        problem = _hit_variable(name, source_fields)
        if problem != "":
            return problem
    if name in COMMON:
        return None
    if name.startswith("rule.params.") and name.split(".")[2] in params:
        return None
    if name.startswith("context.") and name.removeprefix("context.") in CONTEXT[rule_type]:
        return None
    return f"{name} is not an action variable of {rule_type}"


def mustache_problems(
    template: str,
    rule_type: str,
    params: Mapping[str, Any] | None = None,
    source_fields: frozenset[str] = frozenset(),
) -> list[str]:
    """Every variable of ``template`` that Kibana does not pass to a ``rule_type`` action, and
    sections left open or closed twice (empty: none)."""
    problems: list[str] = []
    sections: list[str] = []
    for tag in TAG.finditer(template):
        op, name = tag["op"] or "", tag["raw"] or tag["name"]
        if op == "!":
            continue
        if op == "/":
            if sections and sections[-1] == name:
                sections.pop()
            else:
                problems.append(f"{{{{/{name}}}}} closes no open section")
            continue
        if op == "#" and name in LAMBDAS:
            sections.append(name)
            continue
        problem = variable_problem(name, rule_type, params or {}, sections, source_fields)
        if problem is not None:
            problems.append(problem)
        if op in ("#", "^"):
            sections.append(name)
    problems += [f"section {name} is not closed" for name in sections]
    return problems


def source_fields(rule: Rule) -> frozenset[str]:
    """The fields an ``.es-query`` rule's hits carry in ``_source``: mapped in its index and
    kept by the query's ``_source`` list (all of them without one)."""
    params = rule.body["params"]
    fields = {f for index in params["index"] for f in mapped_fields(index)}
    keep = json.loads(params.get("esQuery", "{}")).get("_source")
    if keep is None:
        return frozenset(fields)
    return frozenset(f for f in fields if any(f == k or f.startswith(f"{k}.") for k in keep))


def strings(value: Any) -> Iterator[str]:
    """Every string in a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


DEFAULTS = settings_from_mapping({})


def with_action(action: str) -> Settings:
    extra = {"webhook_url": "https://hooks.example/iolens"} if action == "webhook" else {}
    return settings_from_mapping({"alerts": {"action": action, **extra}})


def test_every_rule_type_of_the_rule_files_has_a_variable_table() -> None:
    assert {f.rule["rule_type_id"] for f in load()} <= CONTEXT.keys()


@pytest.mark.parametrize("action", ["server-log", "index", "webhook"])
def test_every_action_variable_is_one_kibana_passes(action: str) -> None:
    problems = []
    for rule in rules(with_action(action)):
        kind, params = rule.body["rule_type_id"], rule.body["params"]
        hits = source_fields(rule) if kind == ".es-query" else frozenset()
        for text in strings(rule.body["actions"]):
            problems += [
                f"{rule.body['name']}: {p}" for p in mustache_problems(text, kind, params, hits)
            ]
    assert problems == []


@pytest.mark.parametrize("rule_type", sorted(CONTEXT))
def test_the_default_message_is_valid_for_every_rule_type(rule_type: str) -> None:
    assert mustache_problems(DEFAULT_MESSAGE, rule_type) == []


def test_the_variable_check_fails_on_context_group_for_es_query() -> None:
    old_default = "{{rule.name}}: {{context.group}} is {{context.value}} ({{context.conditions}})"
    assert mustache_problems(old_default, ".es-query") == [
        "context.group is not an action variable of .es-query"
    ]
    assert mustache_problems(old_default, ".index-threshold") == []
    [incident] = [r for r in rules(DEFAULTS) if r.body["rule_type_id"] == ".es-query"]
    params, hits = incident.body["params"], source_fields(incident)
    old_message = (
        "{{rule.name}} {{context.group}}: "
        "{{#context.hits}}{{_source.iolens.incident.summary}} {{/context.hits}}"
    )
    assert mustache_problems(old_message, ".es-query", params, hits) == [
        "context.group is not an action variable of .es-query"
    ]


def test_the_variable_check_reads_sections_hits_and_lambdas() -> None:
    [incident] = [r for r in rules(DEFAULTS) if r.body["rule_type_id"] == ".es-query"]
    params, hits = incident.body["params"], source_fields(incident)
    assert "iolens.incident.summary" in hits and "iolens.incident.lun" in hits
    assert "message" not in hits  # mapped, but not in the query's _source list
    ok = (
        "{{#context.hits}}{{_id}} {{_source.host.name}} {{{_source.iolens.incident.lun}}}"
        " {{#_source.iolens.incident.jobs}}{{.}} {{/_source.iolens.incident.jobs}}"
        "{{rule.params.timeWindowSize}}{{/context.hits}}"
        "{{#FormatDate}}{{{date}}};UTC{{/FormatDate}} {{context.hits.asJSON}}{{! a note }}"
    )
    assert mustache_problems(ok, ".es-query", params, hits) == []
    bad = (
        "{{#each context.hits}}{{_source.message}}{{/each context.hits}}"
        "{{#context.hits}}{{_source.iolens.incident.nope}}{{rule.params.nope}}"
        "{{alerts.new.count}}{{/context.link}}"
    )
    assert mustache_problems(bad, ".es-query", params, hits) == [
        "each context.hits is not an action variable of .es-query",
        "_source.message is not an action variable of .es-query",  # no hit section is open
        "_source.iolens.incident.nope: iolens.incident.nope is not a field the query returns",
        "rule.params.nope is not an action variable of .es-query",
        "alerts.new.count is not an action variable of .es-query",
        "{{/context.link}} closes no open section",
        "section context.hits is not closed",
    ]


def test_a_grouped_query_rule_notifies_once_per_alert() -> None:
    """Kibana ignores ``excludeHitsFromPreviousRun`` when the rule is grouped (es_query
    ``executor.ts``: "latestTimestamp will be ignored if set for grouped queries";
    es-query.asciidoc: "not available when you use a grouping field"), so a grouped rule says
    false, and repeats are kept out by the per-group alert: its action runs when the alert
    becomes active (``onActionGroupChange``), not on each run that matches the group again."""
    for rule in rules(DEFAULTS):
        for action in rule.body["actions"]:
            assert action["frequency"] == {
                "summary": False,
                "notify_when": "onActionGroupChange",
                "throttle": None,
            }
        params = rule.body["params"]
        if rule.body["rule_type_id"] == ".es-query" and params["groupBy"] == "top":
            assert params["excludeHitsFromPreviousRun"] is False
