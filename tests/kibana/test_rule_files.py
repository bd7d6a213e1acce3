"""The alert rules as data files (``kibana/rules/*.json``): what a broken file is told."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.alerting.rules import RULES_DIR, fill, rules
from pipeline.errors import ConfigError
from pipeline.settings import settings_from_mapping

BASE: dict[str, Any] = json.loads((RULES_DIR / "02-lun-persistence.json").read_text())


def write(tmp_path: Path, *bodies: dict[str, Any]) -> Path:
    for n, body in enumerate(bodies):
        (tmp_path / f"{n:02d}.json").write_text(json.dumps(body))
    return tmp_path


def test_a_placeholder_alone_keeps_its_type_and_in_text_takes_a_format() -> None:
    values = {"n": 2.5, "s": "x"}
    assert fill(["${n}", "${n:g} s", "${s}-y", {"k": 3}], values, "f") == [
        2.5,
        "2.5 s",
        "x-y",
        {"k": 3},
    ]
    assert fill("{{rule.name}} ${s}", values, "f") == "{{rule.name}} x"  # mustache left alone


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({**BASE, "rule": {**BASE["rule"], "name": "${nope}"}}, r"no value for \$\{nope\}"),
        ({**BASE, "action": {}}, "action must name its group"),
        ({**BASE, "rule": {**BASE["rule"], "rule_type_id": ".x"}}, "rule_type_id is not one of"),
        ({**BASE, "for_each": "fio"}, "for_each can only be alerts.sla"),
        ({k: v for k, v in BASE.items() if k != "rule"}, "id, action and rule"),
    ],
)
def test_a_broken_rule_file_is_named(tmp_path: Path, body: dict[str, Any], message: str) -> None:
    root = write(tmp_path, body)
    with pytest.raises(ConfigError, match=message) as err:
        rules(settings_from_mapping({}), root)
    assert str(root / "00.json") in str(err.value)


def test_two_rules_with_one_id_and_an_empty_directory_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no alert rules"):
        rules(settings_from_mapping({}), tmp_path)
    with pytest.raises(ConfigError, match="two alert rules share an id"):
        rules(settings_from_mapping({}), write(tmp_path, BASE, BASE))


def test_one_sla_rule_per_service_level() -> None:
    settings = settings_from_mapping(
        {"alerts": {"sla": [{"percentile": 99.9, "under_s": 0.25}]}, "fio": {}}
    )
    [sla] = [r for r in rules(settings) if "sla" in r.body["tags"]]
    assert sla.body["name"] == "iolens: fio 99.9 % of completions under 0.25 s"
    assert sla.body["params"]["aggField"] == "fio.clat_ns.p99_9"
    assert sla.body["params"]["threshold"] == [250_000_000]
