"""Kibana saved objects kept in git, packed into the NDJSON that Kibana's import API takes.

The git layout is one pretty-printed JSON file per object, ``<dir>/<type>/<id>.json``, with the
attributes Kibana stores as JSON *strings* (a dashboard's ``panelsJSON``, ``optionsJSON``,
``kibanaSavedObjectMeta.searchSourceJSON``, a data view's ``fieldFormatMap``...) decoded into
real JSON so that diffs are readable. Packing re-encodes exactly those attributes and writes
one compact object per line::

    {"attributes":{"name":"iolens: fio latency","timeFieldName":"@timestamp",...},
     "coreMigrationVersion":"8.8.0","id":"iolens-dv-metrics-fio","managed":false,
     "references":[],"type":"index-pattern","typeMigrationVersion":"8.0.0"}

(shown wrapped; one line in the file). Unpacking is the reverse and drops what only an export
carries (``created_at``, ``updated_at``, ``version`` and the trailing export summary line), so
``unpack(pack(layout)) == layout`` and an export from Kibana lands in the same layout.

Only the directories named in :data:`TYPES` are saved objects; anything else under the
directory (watches, alerting rules) is left alone. Source of the format: Kibana 8.x
``POST /api/saved_objects/_import`` and the encode/decode convention of elastic-package
(``transform_decode.go``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.assets import asset
from pipeline.errors import ConfigError
from pipeline.records.json import JsonObject

DEFAULT_DIR = asset("kibana")
"""The ``kibana/`` directory shipped in the package (:mod:`pipeline.assets`)."""

TYPES: tuple[str, ...] = ("index-pattern", "lens", "dashboard")
"""Saved-object types kept in git, in NDJSON order (what is referenced comes first)."""

REQUIRED: tuple[str, ...] = (
    "type",
    "id",
    "attributes",
    "references",
    "coreMigrationVersion",
    "typeMigrationVersion",
    "managed",
)
"""Top-level keys every object carries in git and in the NDJSON."""

ENCODED: Mapping[str, tuple[tuple[str, ...], ...]] = {
    "index-pattern": (
        ("fieldFormatMap",),
        ("fieldAttrs",),
        ("fields",),
        ("runtimeFieldMap",),
        ("sourceFilters",),
    ),
    "lens": (),
    "dashboard": (
        ("panelsJSON",),
        ("optionsJSON",),
        ("kibanaSavedObjectMeta", "searchSourceJSON"),
        ("controlGroupInput", "panelsJSON"),
        ("controlGroupInput", "ignoreParentSettingsJSON"),
    ),
}
"""Per type, the attribute paths Kibana stores as JSON strings (decoded in git)."""

EXPORT_ONLY: tuple[str, ...] = ("created_at", "updated_at", "version", "created_by", "updated_by")
"""Top-level keys an export adds that the import does not need."""

SavedObject = JsonObject
"""One Kibana saved object (``type``, ``id``, ``attributes``, ``references``...), read or written
whole: a git file, an NDJSON line."""


def dumps_pretty(obj: SavedObject) -> str:
    """The git form of one object: 2-space indent, sorted keys, trailing newline."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _compact(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _convert(obj: SavedObject, *, encode: bool) -> SavedObject:
    """A copy of ``obj`` with its string-encoded attributes encoded (or decoded)."""
    out: SavedObject = json.loads(json.dumps(obj))
    for path in ENCODED.get(str(obj.get("type")), ()):
        parent = out.get("attributes")
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        value = parent[path[-1]]
        if encode and not isinstance(value, str):
            parent[path[-1]] = _compact(value)
        elif not encode and isinstance(value, str):
            parent[path[-1]] = json.loads(value)
    return out


def encode(obj: SavedObject) -> SavedObject:
    """The import form of a git object: its JSON-string attributes as strings (a copy)."""
    return _convert(obj, encode=True)


def decode(obj: SavedObject) -> SavedObject:
    """The git form of an imported or exported object: JSON-string attributes parsed (a copy).

    Raises:
        json.JSONDecodeError: an attribute that should hold JSON does not.
    """
    return _convert(obj, encode=False)


def check(obj: SavedObject, where: str) -> None:
    """Refuse an object the 8.x import would not take as we mean it.

    Raises:
        ConfigError: a required key is missing, the type is not one of :data:`TYPES`, or
            ``references`` is not a list of ``{type, id, name}``.
    """
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        raise ConfigError(f"{where}: saved object lacks {', '.join(missing)}; add them")
    if obj["type"] not in TYPES:
        raise ConfigError(f"{where}: type {obj['type']!r} is not one of {', '.join(TYPES)}")
    refs = obj["references"]
    if not isinstance(refs, list) or not all(
        isinstance(r, dict) and {"type", "id", "name"} <= r.keys() for r in refs
    ):
        raise ConfigError(f"{where}: references must be a list of {{type, id, name}} objects")


def _order(obj: SavedObject) -> tuple[int, str]:
    return TYPES.index(obj["type"]), str(obj["id"])


def load(root: Path = DEFAULT_DIR) -> list[SavedObject]:
    """The git layout under ``root``, decoded, in NDJSON order.

    Raises:
        ConfigError: ``root`` has no saved objects, a file is not JSON, or an object's type or
            id does not match its path.
    """
    objects: list[SavedObject] = []
    for kind in TYPES:
        for path in sorted((root / kind).glob("*.json")):
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as err:
                raise ConfigError(f"{path}: not JSON ({err})") from None
            check(obj, str(path))
            if obj["type"] != kind or obj["id"] != path.stem:
                name = f"{obj['type']}/{obj['id']}"
                raise ConfigError(f"{path}: holds {name}; name it {name}.json")
            objects.append(obj)
    if not objects:
        raise ConfigError(f"{root}: no saved objects under {', '.join(TYPES)}; pass --dir")
    return objects


def to_ndjson(objects: Iterable[SavedObject]) -> str:
    """The import file: one encoded object per line, in type-then-id order, newline-terminated.

    Raises:
        ConfigError: an object fails :func:`check`, or two objects share a type and id.
    """
    encoded = []
    for obj in objects:
        check(obj, f"{obj.get('type')}/{obj.get('id')}")
        encoded.append(encode(obj))
    encoded.sort(key=_order)
    keys = [_order(o) for o in encoded]
    if len(set(keys)) != len(keys):
        raise ConfigError("two saved objects share a type and id")
    return "".join(_compact(o) + "\n" for o in encoded)


def from_ndjson(text: str) -> list[SavedObject]:
    """Objects of an import or export file, decoded, without export-only keys.

    Blank lines and an export's summary line (``exportedCount``) are skipped.

    Raises:
        ConfigError: a line is not JSON or an object fails :func:`check`.
    """
    objects: list[SavedObject] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as err:
            raise ConfigError(f"line {n}: not JSON ({err})") from None
        if "exportedCount" in raw:
            continue
        obj = {k: v for k, v in raw.items() if k not in EXPORT_ONLY}
        check(obj, f"line {n}")
        objects.append(decode(obj))
    objects.sort(key=_order)
    return objects


def write_layout(objects: Sequence[SavedObject], root: Path) -> list[Path]:
    """Write each (decoded) object to ``root/<type>/<id>.json``; returns the paths written."""
    written = []
    for obj in objects:
        path = root / obj["type"] / f"{obj['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps_pretty(obj), encoding="utf-8")
        written.append(path)
    return written


def build(root: Path = DEFAULT_DIR) -> str:
    """The NDJSON import file for the git layout under ``root`` (see :func:`load`)."""
    return to_ndjson(load(root))
