"""The index templates of ``mappings/`` as Elasticsearch applies them, for the alert tests:
which template a new index gets and what its mapping holds."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

from pipeline.sink.templates import load_templates


def flatten(props: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted field -> mapped type of a mapping's ``properties``."""
    out: dict[str, str] = {}
    for name, spec in props.items():
        if "properties" in spec:
            out |= flatten(spec["properties"], f"{prefix}{name}.")
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
        fields |= flatten(mappings.get("properties", {}))
    return fields


def leaves(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value of every leaf of a document."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out |= leaves(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out
