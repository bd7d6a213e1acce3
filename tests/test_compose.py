"""compose/: no Docker engine here, so the files are checked against Compose's documented shape."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pipeline.assets import event_schema
from pipeline.settings import load_settings

COMPOSE = Path(__file__).resolve().parent.parent / "compose"


def test_services_health_checks_and_order() -> None:
    doc = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    services = doc["services"]
    assert set(services) == {"elasticsearch", "setup", "kibana", "iolens-setup", "iolens"}
    assert "healthcheck" in services["elasticsearch"]
    assert "healthcheck" in services["kibana"]
    assert services["kibana"]["depends_on"] == {
        "setup": {"condition": "service_completed_successfully"}
    }
    assert services["iolens-setup"]["depends_on"] == {
        "elasticsearch": {"condition": "service_healthy"},
        "kibana": {"condition": "service_healthy"},
    }
    assert services["iolens-setup"]["command"][-1] == "setup"
    assert "IOLENS_KIBANA_URL=http://kibana:5601" in services["iolens-setup"]["environment"]
    assert services["iolens"]["depends_on"] == {
        "iolens-setup": {"condition": "service_completed_successfully"}
    }
    assert set(doc["volumes"]) == {"esdata", "iolensstate"}


def test_every_variable_is_defined_in_env() -> None:
    text = (COMPOSE / "docker-compose.yml").read_text()
    env = dict(
        line.split("=", 1)
        for line in (COMPOSE / ".env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    used = set(re.findall(r"\$\{([A-Z_]+)\}", text))
    assert used <= set(env)
    assert len(env["KIBANA_ENCRYPTION_KEY"]) >= 32


def test_the_container_config_is_valid() -> None:
    settings = load_settings(COMPOSE / "iolens.yaml", env={})
    assert not settings.embedded.enabled
    assert settings.drops[0].path == "/drops/fio"


def test_the_compose_file_follows_the_compose_specification() -> None:
    """Against the Compose Specification's JSON Schema (as check-jsonschema ships it)."""
    import json
    from importlib.resources import files

    import jsonschema

    spec = files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(spec.read_text(encoding="utf-8"))
    doc = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    jsonschema.validate(doc, schema, cls=jsonschema.validators.validator_for(schema))
    # and the validation can fail: a misspelt key is refused
    bad = {**doc, "services": {**doc["services"], "kibana": {**doc["services"]["kibana"]}}}
    bad["services"]["kibana"]["healthckeck"] = {}
    try:
        jsonschema.validate(bad, schema, cls=jsonschema.validators.validator_for(schema))
    except jsonschema.ValidationError as err:
        assert "healthckeck" in err.message
    else:
        raise AssertionError("a misspelt key passed the schema")


def test_the_paths_the_stack_uses_exist() -> None:
    doc = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    root = COMPOSE.parent
    for name in ("iolens", "iolens-setup"):
        build = doc["services"][name]["build"]
        assert (COMPOSE / build["context"] / build["dockerfile"]).is_file()
    copied = re.findall(r"^COPY (\S+)", (COMPOSE / "Dockerfile").read_text(), re.M)
    assert copied and all((root / c).exists() for c in copied)
    config = load_settings(COMPOSE / "iolens.yaml", env={})
    mounted = "/drops"
    for drop in config.drops:
        assert drop.path.startswith(mounted + "/")
        assert (COMPOSE / "drops" / drop.path.removeprefix(mounted + "/")).is_dir()
        if drop.schema_file:  # a schema shipped in the package, named as the image has it
            assert event_schema(drop.schema_file).is_file()
