"""What the alert rules and the watch mean, checked against Kibana's documentation, the
configuration, ``docs/kibana.md`` and ``mappings/``.

The stand-in Kibana of ``tests/cli/test_setup_kibana.py`` checks that each create-rule body has
the parameters Kibana takes; these tests check what the parameters say: every mustache variable
of an action is one Kibana passes for the rule type, every window sees documents as late as the
pipeline tolerates, each rule is the sentence ``docs/kibana.md`` gives for it, and every alert
document fits the index template of the stream it is written to.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from pipeline.alerting import Rule, connector, rules, watches
from pipeline.alerting.connector import DEFAULT_MESSAGE
from pipeline.alerting.rules import (
    UNIT_S,
    lag_window_s,
    load,
    placeholders,
    render,
    sla_placeholders,
    window,
)
from pipeline.settings import Settings, settings_from_mapping
from pipeline.sink.templates import load_templates

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kibana.md"

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


# --- mappings ----------------------------------------------------------------------------------


def _flatten(props: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for name, spec in props.items():
        if "properties" in spec:
            out |= _flatten(spec["properties"], f"{prefix}{name}.")
        else:
            out[prefix + name] = spec["type"]
    return out


TEMPLATES = load_templates()
COMPONENTS = {o.name: o.body for o in TEMPLATES if o.kind == "component"}
INDEX_TEMPLATES = [o for o in TEMPLATES if o.kind == "index"]


def template_for(index: str) -> tuple[str, dict[str, Any]]:
    """The index template Elasticsearch applies to a new ``index`` (the highest priority among
    those whose ``index_patterns`` match): ``(name, body)``."""
    matching = [
        o
        for o in INDEX_TEMPLATES
        if any(fnmatch.fnmatch(index, p) for p in o.body["index_patterns"])
    ]
    assert matching, f"no index template in mappings/ matches {index}"
    best = max(matching, key=lambda o: o.body["priority"])
    assert [o.body["priority"] for o in matching].count(best.body["priority"]) == 1, index
    return best.name, best.body


def mapped_fields(index: str) -> dict[str, str]:
    """Field -> type of the mapping ``index`` gets from its index template."""
    _, body = template_for(index)
    fields: dict[str, str] = {}
    for part in body["composed_of"]:
        mappings = COMPONENTS.get(part, {}).get("template", {}).get("mappings", {})
        fields |= _flatten(mappings.get("properties", {}))
    return fields


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


def leaves(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value of every leaf of a document."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out |= leaves(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


# --- settings ----------------------------------------------------------------------------------

DEFAULTS = settings_from_mapping({})
OTHER = settings_from_mapping(
    {
        "elasticsearch": {"namespace": "prod"},
        "alerts": {
            "interval": "2m",
            "window_m": 3,
            "max_lag_s": 450.5,
            "sink_utilisation": 0.9,
            "persistence_threshold": 4,
            "sla": [{"percentile": 99.9, "under_s": 0.25}],
        },
        "fio": {},
    }
)


def interval_s(settings: Settings) -> int:
    size, unit = window(settings.alerts.interval)
    return size * UNIT_S[unit]


def window_of(rule: Rule) -> int:
    """A rule's time window in seconds."""
    p = rule.body["params"]
    return int(p["timeWindowSize"]) * UNIT_S[p["timeWindowUnit"]]


def with_action(action: str) -> Settings:
    extra = {"webhook_url": "https://hooks.example/iolens"} if action == "webhook" else {}
    return settings_from_mapping({"alerts": {"action": action, **extra}})


# --- 1. action variables -----------------------------------------------------------------------


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


# --- 2. windows against the pipeline's lag -----------------------------------------------------


def test_the_lag_window_is_the_settings_max_lag_and_interval() -> None:
    assert DEFAULTS.alerts.max_lag_s == 300.0 and DEFAULTS.alerts.interval == "1m"
    assert lag_window_s(DEFAULTS) == 360
    assert lag_window_s(OTHER) == 571  # 450.5 s + 2 min, rounded up
    assert placeholders(DEFAULTS)["alerts.window_s"] == 360  # window_m 5 min, lengthened
    assert placeholders(OTHER)["alerts.window_s"] == 571
    longer = settings_from_mapping({"alerts": {"window_m": 10}})
    assert placeholders(longer)["alerts.window_s"] == 600


@pytest.mark.parametrize("settings", [DEFAULTS, OTHER], ids=["defaults", "other"])
def test_every_window_covers_the_pipelines_maximum_lag(settings: Settings) -> None:
    need = math.ceil(settings.alerts.max_lag_s) + interval_s(settings)
    short = {r.body["name"]: window_of(r) for r in rules(settings) if window_of(r) < need}
    assert short == {}


def test_the_incident_window_follows_max_lag_s() -> None:
    for settings, seconds in ((DEFAULTS, 360), (OTHER, 571)):
        [incident] = [r for r in rules(settings) if r.body["rule_type_id"] == ".es-query"]
        params = incident.body["params"]
        assert (params["timeWindowSize"], params["timeWindowUnit"]) == (seconds, "s")
        assert params["timeField"] == "iolens.incident.updated"


def test_a_fixed_window_shorter_than_the_lag_is_named(caplog: pytest.LogCaptureFixture) -> None:
    settings = settings_from_mapping({"alerts": {"max_lag_s": 900}})
    with caplog.at_level(logging.WARNING, logger="pipeline.alerting.rules"):
        rules(settings)
    assert [r.getMessage() for r in caplog.records] == [
        f"rule {name!r} looks back 900 s, less than alerts.max_lag_s + alerts.interval "
        "(960 s): documents indexed that late are not evaluated by it"
        for name in (
            "iolens: the sink limits the pipeline",
            "iolens: documents wait more than 900 s to be indexed",
            "iolens: new dead letters",
        )
    ]


# --- 3. each rule is the sentence docs/kibana.md gives for it ----------------------------------

HEADER = "| file | rule | type | on | per | fires when | window |"
CODE = re.compile(r"`([^`]+)`")
# "fires when" -> (aggType, thresholdComparator); docs/kibana.md defines the words.
SENTENCES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"`(?P<field>[^`]+)` rises above (?P<threshold>.+)"), "max", ">"),
    (re.compile(r"`(?P<field>[^`]+)` reaches (?P<threshold>.+)"), "max", ">="),
    (
        re.compile(
            r"`(?P<field>[^`]+)` stays above (?P<threshold>.+) for (?P<minutes>\d+) minutes"
        ),
        "min",
        ">",
    ),
    (re.compile(r"`(?P<field>[^`]+)` sums to more than (?P<threshold>.+)"), "sum", ">"),
    (re.compile(r"more than (?P<threshold>\d+) documents match"), "count", ">"),
]
UNIT_IN_NAME = {"_ns": 1e-9, "_ms": 1e-3, "_s": 1.0}


def doc_rows(text: str) -> dict[str, dict[str, str]]:
    """The rule table of ``docs/kibana.md``: file stem -> column -> cell."""
    lines = text.splitlines()
    start = lines.index(HEADER)
    names = [c.strip() for c in HEADER.strip("|").split("|")]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = dict(zip(names, (c.strip() for c in line.strip("|").split("|")), strict=True))
        rows[CODE.findall(cells["file"])[0]] = cells
    return rows


def _unit(name: str) -> float:
    """Seconds per unit of a field or setting named with its unit (``clat_ns``, ``max_lag_s``)."""
    for suffix, seconds in UNIT_IN_NAME.items():
        if any(part.endswith(suffix) for part in name.split(".")):
            return seconds
    return 1.0


def expected_threshold(
    cell: str, field: str, settings: Settings, sla: Mapping[str, Any] | None
) -> float:
    """The number a "fires when" threshold (a setting in backticks, or a number) stands for,
    in the unit of ``field``: ``sla.*`` is a value of the service level (``sla``),
    another name one of ``alerts``."""
    names = CODE.findall(cell)
    if not names:
        return float(cell)
    [name] = names
    value = sla[name] if sla is not None and name.startswith("sla.") else None
    if value is None:
        value = getattr(settings.alerts, name)
    return float(value) * _unit(name) / _unit(field)


def expected_window(cell: str, settings: Settings) -> int:
    """Seconds of a "window" cell: ``N min``, ``N h``, ``window_m``, ``max_lag_s`` +
    ``interval``, optionally ``, at least`` another of these."""
    base, _, floor = cell.partition(", at least ")

    def seconds(term: str) -> int:
        if term == "`max_lag_s` + `interval`":
            return math.ceil(settings.alerts.max_lag_s) + interval_s(settings)
        if term == "`window_m`":
            return settings.alerts.window_m * 60
        count, unit = term.split()
        return int(count) * {"min": 60, "h": 3600}[unit]

    return max(seconds(base), seconds(floor)) if floor else seconds(base)


def query_filter(params: Mapping[str, Any]) -> str | None:
    """An ``.es-query`` rule's term filters as KQL text (``field : "value"``)."""
    query = json.loads(params["esQuery"])["query"]
    terms = [t["term"] for t in query.get("bool", {}).get("filter", []) if "term" in t]
    return " and ".join(f'{f} : "{v}"' for t in terms for f, v in t.items()) or None


def row_problems(
    row: Mapping[str, str], rule: Rule, settings: Settings, sla: Mapping[str, Any] | None
) -> list[str]:
    """How ``rule`` differs from its row of the documentation's table (empty: it does not);
    ``sla``: the ``sla.*`` values of a rule made per service level."""
    body, p = rule.body, rule.body["params"]
    bad: list[str] = []
    if CODE.findall(row["type"]) != [body["rule_type_id"]]:
        bad.append(f"type {body['rule_type_id']}")
    stream, *where = CODE.findall(row["on"])
    if p["index"] != [f"{stream}-{settings.elasticsearch.namespace}"]:
        bad.append(f"index {p['index']}")
    kuery = p.get("filterKuery") if body["rule_type_id"] == ".index-threshold" else query_filter(p)
    if kuery != (where[0] if where else None):
        bad.append(f"filter {kuery!r}")
    per = CODE.findall(row["per"])
    if (p["groupBy"], p.get("termField")) != (("top", per[0]) if per else ("all", None)):
        bad.append(f"group by {p['groupBy']} {p.get('termField')}")
    sentence = row["fires when"].replace("<sla.key>", sla["sla.key"] if sla else "")
    for pattern, agg, comparator in SENTENCES:
        match = pattern.fullmatch(sentence)
        if match is None:
            continue
        field = match.groupdict().get("field")
        if (p["aggType"], p.get("aggField"), p["thresholdComparator"]) != (agg, field, comparator):
            bad.append(f"{p['aggType']}({p.get('aggField')}) {p['thresholdComparator']}")
        limit = expected_threshold(match["threshold"], field or "", settings, sla)
        if [float(x) for x in p["threshold"]] != [pytest.approx(limit)]:
            bad.append(f"threshold {p['threshold']}, not {limit}")
        if match.groupdict().get("minutes") and window_of(rule) != int(match["minutes"]) * 60:
            bad.append(f"window {window_of(rule)} s, not {match['minutes']} minutes")
        break
    else:
        bad.append(f"no known words in {row['fires when']!r}")
    if window_of(rule) != expected_window(row["window"], settings):
        bad.append(f"window {window_of(rule)} s, not {row['window']}")
    return bad


@pytest.mark.parametrize("settings", [DEFAULTS, OTHER], ids=["defaults", "other"])
def test_each_rule_is_the_sentence_the_documentation_gives(settings: Settings) -> None:
    rows = doc_rows(DOC.read_text(encoding="utf-8"))
    files = load()
    assert sorted(rows) == [f.path.stem for f in files]
    cid, _ = connector(settings)
    values = placeholders(settings)
    problems = []
    for file in files:
        slas: list[dict[str, Any] | None] = [None]
        if file.for_each == "alerts.sla":
            slas = [sla_placeholders(s) for s in settings.alerts.sla]
        for sla in slas:
            rule = render(file, {**values, **(sla or {})}, settings, cid)
            row = rows[file.path.stem]
            problems += [f"{file.path.stem}: {b}" for b in row_problems(row, rule, settings, sla)]
    assert problems == []


def test_the_documentation_check_can_fail() -> None:
    rows = doc_rows(DOC.read_text(encoding="utf-8"))
    [sink] = [
        r for r in rules(DEFAULTS) if r.body["name"] == "iolens: the sink limits the pipeline"
    ]
    as_before = {
        **sink.body,
        "params": {**sink.body["params"], "aggType": "max", "groupBy": "all", "termField": None},
    }
    assert row_problems(rows["04-pipeline-sink"], Rule(sink.id, as_before), DEFAULTS, None) == [
        "group by all None",
        "max(iolens.service_rate.utilisation) >",
    ]
    longer = {**sink.body, "params": {**sink.body["params"], "timeWindowSize": 30}}
    assert row_problems(rows["04-pipeline-sink"], Rule(sink.id, longer), DEFAULTS, None) == [
        "window 1800 s, not 15 minutes",
        "window 1800 s, not 15 min",
    ]
    wrong = {**rows["04-pipeline-sink"], "fires when": "`x` goes up"}
    assert row_problems(wrong, sink, DEFAULTS, None) == ["no known words in '`x` goes up'"]


# --- 4. the watch, and where alert documents go ------------------------------------------------


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
    assert _flatten(own) == {
        "message": "match_only_text",
        "rule.id": "keyword",
        "rule.name": "keyword",
        "iolens.alert.group": "keyword",
        "iolens.alert.value": "double",
        "iolens.alert.threshold": "double",
        "iolens.alert.conditions": "keyword",
    }
