"""What the alert rules mean, against the configuration and ``docs/kibana.md``: every window
sees documents as late as the pipeline tolerates (``alerts.max_lag_s``), and each rule is the
sentence the documentation's table gives for it, so that a rule and its documentation cannot
drift apart.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pipeline.alerting import Rule, connector, rules
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

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kibana.md"

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
