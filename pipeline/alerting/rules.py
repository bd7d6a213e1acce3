"""The Kibana alert rules: data files in ``kibana/rules/``, filled in for one install.

Each file holds one rule (``NN-name.json``, created in file-name order)::

    {"id": "rule/lag",                          # uuid5 seed of the rule's id, + "/<namespace>"
     "action": {"group": "threshold met"},      # the action group (+ optional "message")
     "rule": {"name": "iolens: documents wait more than ${alerts.max_lag_s:g} s ...",
              "rule_type_id": ".index-threshold", ...,
              "params": {..., "threshold": ["${alerts.max_lag_s}"]}}}

``rule`` is the body of ``POST /api/alerting/rule/<id>`` without its actions (added for the
configured connector, :mod:`pipeline.alerting.connector`). ``${name}`` stands for a value of
the settings (:func:`placeholders`): a string that is only ``${name}`` becomes the value itself
(a number stays a number), elsewhere it is formatted into the text (``${name:g}`` with a format
spec). A file with ``"for_each": "alerts.sla"`` gives one rule per service level, with the
``sla.*`` values of each. An ``.es-query`` rule's ``esQuery`` is kept as JSON in the file and
sent as the JSON string Kibana's ``es_query/rule_type_params.ts`` takes.

Every rule should look back at least ``alerts.max_lag_s + alerts.interval``
(:func:`lag_window_s`), so that a document indexed as late as the pipeline tolerates is still
evaluated by one run; :func:`rules` logs a warning for a rule that does not.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from pipeline.alerting.connector import action, connector, object_id
from pipeline.errors import ConfigError
from pipeline.kibana import DEFAULT_DIR
from pipeline.records.json import JsonObject
from pipeline.settings import Settings, SlaSettings

log = logging.getLogger(__name__)

RULES_DIR = DEFAULT_DIR / "rules"
"""The packaged ``kibana/rules/`` (found as :data:`pipeline.kibana.DEFAULT_DIR` is)."""

RULE_TYPES = (".index-threshold", ".es-query")
RULE_KEYS = ("name", "rule_type_id", "consumer", "schedule", "enabled", "tags", "params")
"""Keys every ``rule`` of a file carries."""

_PLACEHOLDER = re.compile(r"\$\{([\w.]+)(?::([^}]*))?\}")
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
"""Seconds per unit of a Kibana interval or time window."""

Values: TypeAlias = dict[str, str | float]
"""The values a rule file may name as ``${name}``: name (``alerts.max_lag_s``, ``sla.key``...)
-> a string or a number (int or float, units as the name says)."""


@dataclass(frozen=True)
class Rule:
    """A Kibana rule to create: its id and the create-rule body (``POST
    /api/alerting/rule/<id>``)."""

    id: str
    body: JsonObject

    def update_body(self) -> JsonObject:
        """The body of ``PUT /api/alerting/rule/<id>``: what an update may change."""
        keep = ("name", "tags", "schedule", "params", "actions", "notify_when", "throttle")
        return {k: v for k, v in self.body.items() if k in keep}


@dataclass(frozen=True)
class RuleFile:
    """One file of ``kibana/rules/``, checked but not filled in."""

    path: Path
    id: str
    group: str
    message: str | None
    for_each: str | None
    rule: JsonObject


def window(interval: str) -> tuple[int, str]:
    """``"5m"`` -> ``(5, "m")``: a Kibana interval as a time window's size and unit.

    Raises:
        ConfigError: the interval is not a count of s, m, h or d.
    """
    match = re.fullmatch(r"([1-9]\d*)([smhd])", interval)
    if match is None:
        raise ConfigError(
            f"alerts.interval: {interval!r} is not a count of s, m, h or d; write e.g. 1m"
        )
    return int(match[1]), match[2]


def lag_window_s(settings: Settings) -> int:
    """The shortest time window (s) that sees every document indexed up to ``alerts.max_lag_s``
    after its time: ``max_lag_s + interval``, rounded up.

    A rule run at ``t`` looks at ``[t - window, t]``; a document of time ``T`` becomes visible
    at ``T + lag`` and the next run comes at most one ``interval`` later, so the window must
    reach back ``lag + interval``.

    Raises:
        ConfigError: ``alerts.interval`` is not a count of s, m, h or d.
    """
    size, unit = window(settings.alerts.interval)
    return math.ceil(settings.alerts.max_lag_s + size * UNIT_S[unit])


def placeholders(settings: Settings) -> Values:
    """The values a rule file may name as ``${name}``.

    ``alerts.lag_window_s`` is :func:`lag_window_s`; ``alerts.window_s`` is ``alerts.window_m``
    in seconds, lengthened to ``alerts.lag_window_s`` when shorter.

    Raises:
        ConfigError: ``alerts.interval`` is not a count of s, m, h or d.
    """
    alerts = settings.alerts
    size, unit = window(alerts.interval)
    lag = lag_window_s(settings)
    return {
        "namespace": settings.elasticsearch.namespace,
        "alerts.interval": alerts.interval,
        "alerts.interval.size": size,
        "alerts.interval.unit": unit,
        "alerts.window_m": alerts.window_m,
        "alerts.window_s": max(alerts.window_m * 60, lag),
        "alerts.lag_window_s": lag,
        "alerts.persistence_threshold": alerts.persistence_threshold,
        "alerts.sink_utilisation": alerts.sink_utilisation,
        "alerts.max_lag_s": alerts.max_lag_s,
    }


def sla_placeholders(sla: SlaSettings) -> Values:
    """The ``sla.*`` values of one service level (a file with ``for_each: alerts.sla``):
    ``sla.key`` is the stored percentile field (``p95``, ``p99_9``), ``sla.under_ns`` the limit
    in nanoseconds (``fio.clat_ns``)."""
    return {
        "sla.key": f"p{sla.percentile:g}".replace(".", "_"),
        "sla.percentile": sla.percentile,
        "sla.under_s": sla.under_s,
        "sla.under_ns": round(sla.under_s * 1e9),
    }


def fill(template: Any, values: Mapping[str, str | float], where: str) -> Any:
    """A copy of ``template`` (parsed JSON) with each ``${name}`` replaced from ``values``.

    Raises:
        ConfigError: a placeholder names no value (the message names ``where``).
    """
    if isinstance(template, dict):
        return {k: fill(v, values, where) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values, where) for v in template]
    if not isinstance(template, str):
        return template

    def value(name: str) -> str | float:
        if name not in values:
            known = ", ".join(sorted(values))
            raise ConfigError(f"{where}: no value for ${{{name}}}; one of {known}")
        return values[name]

    whole = _PLACEHOLDER.fullmatch(template)
    if whole is not None and whole[2] is None:
        return value(whole[1])
    return _PLACEHOLDER.sub(lambda m: format(value(m[1]), m[2] or ""), template)


def _check(raw: Any, path: Path) -> RuleFile:
    """``raw`` (a parsed file) as a :class:`RuleFile`.

    Raises:
        ConfigError: a key is missing, the action names no group, the rule type is not one of
            :data:`RULE_TYPES`, or ``for_each`` names something other than ``alerts.sla``.
    """
    if not isinstance(raw, dict) or not {"id", "action", "rule"} <= raw.keys():
        raise ConfigError(f"{path}: a rule file holds an object with id, action and rule")
    rule, act = raw["rule"], raw["action"]
    if not isinstance(act, dict) or not isinstance(act.get("group"), str):
        raise ConfigError(f'{path}: action must name its group, e.g. "threshold met"')
    missing = [k for k in RULE_KEYS if k not in rule]
    if missing:
        raise ConfigError(f"{path}: rule lacks {', '.join(missing)}; add them")
    if rule["rule_type_id"] not in RULE_TYPES:
        raise ConfigError(f"{path}: rule_type_id is not one of {', '.join(RULE_TYPES)}")
    if raw.get("for_each") not in (None, "alerts.sla"):
        raise ConfigError(f"{path}: for_each can only be alerts.sla")
    return RuleFile(path, raw["id"], act["group"], act.get("message"), raw.get("for_each"), rule)


def load(root: Path = RULES_DIR) -> list[RuleFile]:
    """The rule files under ``root``, checked, in file-name order.

    Raises:
        ConfigError: ``root`` holds no rule, a file is not JSON or fails the checks.
    """
    files = []
    for path in sorted(root.glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise ConfigError(f"{path}: not JSON ({err})") from None
        files.append(_check(raw, path))
    if not files:
        raise ConfigError(f"{root}: no alert rules (*.json)")
    return files


def render(file: RuleFile, values: Mapping[str, str | float], settings: Settings, cid: str) -> Rule:
    """One rule of ``file`` for ``values``, acting through connector ``cid``."""
    body = fill(file.rule, values, str(file.path))
    params = body["params"]
    if body["rule_type_id"] == ".es-query" and not isinstance(params.get("esQuery"), str):
        params["esQuery"] = json.dumps(params["esQuery"], sort_keys=True)
    body["actions"] = [action(settings, cid, file.group, file.message)]
    rid = object_id(fill(file.id, values, str(file.path)), settings.elasticsearch.namespace)
    return Rule(rid, body)


def rules(settings: Settings, root: Path = RULES_DIR) -> list[Rule]:
    """Every rule of ``root`` (``kibana/rules/``) for ``settings.alerts`` and the namespace.

    Raises:
        ConfigError: ``alerts.interval`` is not a count of s, m, h or d; a rule file fails
            :func:`load`'s checks or names an unknown placeholder; two rules share an id.
    """
    cid, _ = connector(settings)
    values = placeholders(settings)
    out: list[Rule] = []
    for file in load(root):
        if file.for_each == "alerts.sla":
            scopes = [{**values, **sla_placeholders(sla)} for sla in settings.alerts.sla]
        else:
            scopes = [values]
        out += [render(file, scope, settings, cid) for scope in scopes]
    if len({r.id for r in out}) != len(out):
        raise ConfigError(f"{root}: two alert rules share an id")
    for rule in out:
        _warn_if_short(rule, settings)
    return out


def window_seconds(params: JsonObject) -> int:
    """A rule's time window (``timeWindowSize`` x ``timeWindowUnit``) in seconds."""
    return int(params["timeWindowSize"]) * UNIT_S[params["timeWindowUnit"]]


def _warn_if_short(rule: Rule, settings: Settings) -> None:
    """Log when ``rule`` looks back less than :func:`lag_window_s`: a document indexed that
    late is never evaluated by it."""
    need = lag_window_s(settings)
    have = window_seconds(rule.body["params"])
    if have < need:
        log.warning(
            "rule %r looks back %d s, less than alerts.max_lag_s + alerts.interval (%d s): "
            "documents indexed that late are not evaluated by it",
            rule.body["name"],
            have,
            need,
        )
