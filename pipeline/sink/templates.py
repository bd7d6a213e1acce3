"""Index templates, component templates and the ILM policy: JSON files in ``mappings/``.

One file per object, named by kind (elastic.md §1.1, §1.3)::

    component_template.<name>.json   PUT _component_template/<name>
    index_template.<name>.json       PUT _index_template/<name>
    ilm_policy.<name>.json           PUT _ilm/policy/<name>

:func:`install` puts the ILM policies first (when the cluster has ILM), then component templates,
then index templates (an index template may only name component templates that exist, except
those listed in ``ignore_missing_component_templates``). On a cluster without ILM the
``index.lifecycle.name`` setting is removed from component templates before they are sent, and
this is said once.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elasticsearch import ApiError, Elasticsearch

from pipeline.assets import required
from pipeline.errors import ConfigError
from pipeline.records.json import JsonObject
from pipeline.sink.capabilities import Capabilities

log = logging.getLogger(__name__)

Kind = Literal["component", "index", "ilm"]
_PREFIXES: dict[str, Kind] = {
    "component_template": "component",
    "index_template": "index",
    "ilm_policy": "ilm",
}
_ORDER: dict[Kind, int] = {"ilm": 0, "component": 1, "index": 2}
_LIFECYCLE = "index.lifecycle.name"


@dataclass(frozen=True)
class TemplateObject:
    """One object to PUT.

    Attributes:
        kind: ``component`` / ``index`` template or ``ilm`` policy.
        name: its name (the file name without kind prefix and ``.json``).
        body: the request body, exactly as in the file.
        path: the file it came from.
    """

    kind: Kind
    name: str
    body: JsonObject
    path: Path


def mappings_dir() -> Path:
    """The ``mappings/`` directory shipped in the package (:mod:`pipeline.assets`).

    Raises:
        ConfigError: it is missing (a broken installation).
    """
    return required("mappings")


def load_templates(directory: Path | None = None) -> list[TemplateObject]:
    """Read every ``<kind>.<name>.json`` in ``directory`` (default :func:`mappings_dir`).

    Returns:
        The objects in install order: ILM policies, component templates, index templates, each
        group sorted by name. Files with another prefix are skipped with a warning.

    Raises:
        ConfigError: a file is not valid JSON or its top level is not an object.
    """
    directory = mappings_dir() if directory is None else directory
    objects: list[TemplateObject] = []
    for path in sorted(directory.glob("*.json")):
        prefix, _, rest = path.name.partition(".")
        kind = _PREFIXES.get(prefix)
        if kind is None or not rest.endswith(".json"):
            log.warning("%s: not <kind>.<name>.json with a known kind; skipped", path)
            continue
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ConfigError(f"{path}: not valid JSON: {err}") from None
        if not isinstance(body, dict):
            raise ConfigError(f"{path}: the top level must be a JSON object")
        objects.append(TemplateObject(kind, rest.removesuffix(".json"), body, path))
    objects.sort(key=lambda o: (_ORDER[o.kind], o.name))
    return objects


def without_lifecycle(body: JsonObject) -> tuple[JsonObject, bool]:
    """A copy of a component-template body without ``index.lifecycle.name``.

    Handles both the flat (``"index.lifecycle.name"``) and nested (``index.lifecycle.name`` as
    objects) spellings. Returns the copy and whether anything was removed.
    """
    out = copy.deepcopy(body)
    settings = out.get("template", {}).get("settings")
    if not isinstance(settings, dict):
        return out, False
    removed = settings.pop(_LIFECYCLE, None) is not None
    index = settings.get("index")
    if isinstance(index, dict):
        removed |= index.pop("lifecycle.name", None) is not None
        lifecycle = index.get("lifecycle")
        if isinstance(lifecycle, dict):
            removed |= lifecycle.pop("name", None) is not None
            if not lifecycle:
                del index["lifecycle"]
    return out, removed


def _put(client: Elasticsearch, obj: TemplateObject, body: JsonObject) -> None:
    if obj.kind == "ilm":
        client.ilm.put_lifecycle(name=obj.name, body=body)
    elif obj.kind == "component":
        client.cluster.put_component_template(name=obj.name, body=body)
    else:
        client.indices.put_index_template(name=obj.name, body=body)


def _update_existing(client: Elasticsearch, index: str, props: JsonObject) -> None:
    """Add the fields ``props`` to the data streams of ``index`` (a pattern) that exist already.

    A template applies to backing indices created after it; without this, a field added by an
    upgrade (mapped ``dynamic: strict`` in our namespaces) would be rejected until the next
    rollover. ``PUT <stream>-*/_mapping`` adds fields to every backing index of the matching
    data streams (Elasticsearch: "Add a new field mapping to a data stream"); fields that exist
    keep their types (a changed type is an error, as it is for Elasticsearch).
    """
    if not props:
        return
    client.indices.put_mapping(
        index=index,
        properties=props,
        allow_no_indices=True,
        ignore_unavailable=True,
        expand_wildcards="open",
    )


def _properties(body: JsonObject) -> JsonObject:
    """The top-level mapped fields of a component-template body (none: empty)."""
    props = body.get("template", {}).get("mappings", {}).get("properties")
    return props if isinstance(props, dict) else {}


def updatable(props: JsonObject) -> JsonObject:
    """``props`` without its ``constant_keyword`` fields (and objects left empty by that).

    A constant keyword's value is fixed by the first document of each data stream; a mapping
    without it is refused by Elasticsearch where the value is set, so those fields are never
    sent to existing data streams (they are there since the stream was made).
    """
    out: JsonObject = {}
    for name, spec in props.items():
        if spec.get("type") == "constant_keyword":
            continue
        if "properties" in spec:
            inner = updatable(spec["properties"])
            if not inner:
                continue
            spec = {**spec, "properties": inner}
        out[name] = spec
    return out


def _composed_patterns(objects: Sequence[TemplateObject], component: str) -> list[str]:
    """The index patterns of the index templates in ``objects`` composed of ``component``."""
    return [
        pattern
        for o in objects
        if o.kind == "index" and component in o.body.get("composed_of", ())
        for pattern in o.body.get("index_patterns", ())
    ]


def _update_shared(client: Elasticsearch, obj: TemplateObject, patterns: Sequence[str]) -> None:
    """Add the fields of a component shared by several streams (the ECS part) to the existing
    data streams of each of ``patterns``, as a stream's own component's are
    (:func:`_update_existing`).

    Our ECS objects are not strict: without this, a field added there by an upgrade (such as
    ``agent.id``) would be mapped dynamically, as text, in each stream's current backing index.
    A refusal (the field was mapped otherwise already, by documents written while an older
    version's templates were installed) is said and left: the new type comes with the stream's
    next rollover. Each pattern is a request of its own, so one refusal holds back no other.
    """
    props = updatable(_properties(obj.body))
    for pattern in patterns:
        try:
            _update_existing(client, pattern, props)
        except ApiError as err:
            log.warning(
                "%s: the fields of %s cannot be added to the existing data streams %s (%s: %s); "
                "they are mapped from the next rollover (POST <data stream>/_rollover)",
                obj.path,
                obj.name,
                pattern,
                err.status_code,
                err.body,
            )


def install(
    client: Elasticsearch, objects: Sequence[TemplateObject], caps: Capabilities
) -> list[str]:
    """PUT ``objects`` in install order (ILM, component, index), adapting to ``caps``; the
    fields of each data stream's own component, and of the components it shares with others
    (:func:`_update_shared`), are also added to its existing data streams.

    Returns:
        One message per object installed or skipped, plus one about ILM when it is missing.

    Raises:
        ConfigError: the cluster rejected an object; the message names the file and the error.
    """
    messages: list[str] = []
    stripped = False
    for obj in sorted(objects, key=lambda o: (_ORDER[o.kind], o.name)):
        message, removed = _install_one(client, obj, caps)
        messages.append(message)
        stripped |= removed
        if obj.kind == "component" and not obj.name.endswith("@package"):
            _update_shared(client, obj, _composed_patterns(objects, obj.name))
    if stripped:
        messages.append(
            f"ILM is not available: removed {_LIFECYCLE} from the settings component; "
            "index lifecycle is not managed and retention must be handled by hand"
        )
    for msg in messages:
        log.debug("%s", msg)
    return messages


def _install_one(
    client: Elasticsearch, obj: TemplateObject, caps: Capabilities
) -> tuple[str, bool]:
    """PUT one object (see :func:`install`): (the message, whether the ILM lifecycle setting
    was removed from it).

    Raises:
        ConfigError: the cluster rejected it.
    """
    body = obj.body
    if obj.kind == "ilm" and not caps.ilm:
        return f"skipped ILM policy {obj.name}: the cluster has no ILM", False
    removed = False
    if obj.kind == "component" and not caps.ilm:
        body, removed = without_lifecycle(body)
    try:
        _put(client, obj, body)
        if obj.kind == "component" and obj.name.endswith("@package"):
            stream = obj.name.removesuffix("@package")
            _update_existing(client, f"{stream}-*", _properties(body))
    except ApiError as err:
        raise ConfigError(
            f"{obj.path}: the cluster rejected {obj.kind} {obj.name}: HTTP "
            f"{err.status_code}: {err.body}. Fix the file and run setup again"
        ) from None
    version = body.get("version")
    what = {"ilm": "ILM policy", "component": "component template", "index": "index template"}
    message = f"installed {what[obj.kind]} {obj.name}"
    return message + (f" (version {version})" if version is not None else ""), removed
