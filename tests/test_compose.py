"""compose/: no Docker engine here, so the files are checked against Compose's documented shape."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from pipeline.settings import load_settings

COMPOSE = Path(__file__).resolve().parent.parent / "compose"


def test_services_health_checks_and_order() -> None:
    doc = yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())
    services = doc["services"]
    assert set(services) == {"elasticsearch", "setup", "kibana", "iolens"}
    assert "healthcheck" in services["elasticsearch"]
    assert services["kibana"]["depends_on"] == {
        "setup": {"condition": "service_completed_successfully"}
    }
    assert services["iolens"]["depends_on"] == {"elasticsearch": {"condition": "service_healthy"}}
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


def test_kibana_saved_objects_have_the_import_shape() -> None:
    """Kibana saved-object import format: type, id, attributes, migration versions."""
    import json

    kibana = COMPOSE.parent / "kibana"
    objects = sorted(kibana.glob("*/*.json"))
    assert objects
    for path in objects:
        obj = json.loads(path.read_text())
        assert obj["id"] == path.stem
        assert obj["type"] == path.parent.name
        assert {"coreMigrationVersion", "typeMigrationVersion", "attributes"} <= obj.keys()
        if obj["type"] == "index-pattern":
            assert obj["attributes"]["timeFieldName"] == "@timestamp"
