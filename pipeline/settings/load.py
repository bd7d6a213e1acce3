"""Loading the configuration: a YAML file or a mapping, with the ``IOLENS_ES_*`` environment
overrides, validated into :class:`~pipeline.settings.model.Settings`; and its JSON Schema."""

from __future__ import annotations

import difflib
import os
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from pipeline.errors import ConfigError
from pipeline.records.json import JsonObject
from pipeline.settings.model import Settings

DEFAULT_CONFIG = Path("config/pipeline.yaml")
"""The configuration read from the current directory when none is named (a checkout's)."""

_ENV = {
    "IOLENS_ES_URL": "url",
    "IOLENS_ES_API_KEY": "api_key",
    "IOLENS_ES_USERNAME": "username",
    "IOLENS_ES_PASSWORD": "password",
    "IOLENS_ES_CA_CERTS": "ca_certs",
    "IOLENS_ES_PASSWORD_FILE": "password_file",
    "IOLENS_ES_API_KEY_FILE": "api_key_file",
}


def _describe(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid configuration"]
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"]) or "(top level)"
        hint = unknown_key_hint(e["loc"]) if e["type"] == "extra_forbidden" else ""
        lines.append(f"  {key}: {e['msg']}{hint}")
    return "\n".join(lines)


def unknown_key_hint(loc: Sequence[int | str], model: type[BaseModel] = Settings) -> str:
    """What to add to pydantic's "Extra inputs are not permitted" for the unknown key at
    ``loc`` (its path from the top of ``model``, as in a validation error's ``loc``).

    Returns:
        ``"; did you mean 'downsample_s'?"`` with the key of the same section closest to the
        unknown one (``difflib.get_close_matches``, the default cutoff 0.6, aliases such as a
        drop's ``schema`` included); ``"; <section> has no such key (iolens config example
        prints every key)"`` when none is close; ``""`` when ``loc`` leads to no section of
        ``model``.
    """
    *parents, bad = loc
    keys = _section_keys(model, parents)
    if keys is None:
        return ""
    close = difflib.get_close_matches(str(bad), keys, n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    where = ".".join(str(p) for p in parents) or "the top level"
    return f"; {where} has no such key (iolens config example prints every key)"


def _section_keys(model: type[BaseModel], path: Sequence[int | str]) -> list[str] | None:
    """The keys the section at ``path`` under ``model`` accepts (a field's alias, and its
    name where the section takes names too); None when ``path`` leads to no section."""
    tp: Any = model
    for part in path:
        tp = _child_type(tp, part)
    tp = _single(tp)
    if not (isinstance(tp, type) and issubclass(tp, BaseModel)):
        return None
    by_name = bool(tp.model_config.get("populate_by_name"))
    keys: list[str] = []
    for name, f in tp.model_fields.items():
        if f.alias:
            keys.append(f.alias)
        if by_name or not f.alias:
            keys.append(name)
    return keys


def _child_type(tp: Any, part: int | str) -> Any:
    """The type of item ``part`` of a value of type ``tp``: a section's field, a list's item,
    a mapping's value; None when there is none."""
    tp = _single(tp)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        for name, f in tp.model_fields.items():
            if part in (name, f.alias):
                return f.annotation
        return None
    origin, args = get_origin(tp), get_args(tp)
    if origin in (tuple, list, Sequence) and isinstance(part, int) and args:
        return args[0]
    if origin in (dict, Mapping) and len(args) == 2:
        return args[1]
    return None


def _single(tp: Any) -> Any:
    """``X`` of ``X | None``; None for a union of several types (which one is meant is not
    known)."""
    if get_origin(tp) in (Union, types.UnionType):
        kinds = [a for a in get_args(tp) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    return tp


def settings_from_mapping(
    data: JsonObject, env: Mapping[str, str] | None = None, source: str = "config"
) -> Settings:
    """Validate a configuration mapping, applying the ``IOLENS_ES_*`` environment overrides.

    Raises:
        ConfigError: naming every offending key (``fio.interval_ms: ...``).
    """
    merged: JsonObject = dict(data)
    given = merged.get("elasticsearch")
    if given is None or isinstance(given, Mapping):
        # (anything else is left for validation to name: elasticsearch must be a mapping)
        es = dict(given or {})
        for var, key in _ENV.items():
            value = (env if env is not None else os.environ).get(var)
            if value:
                es[key] = value
        if es:
            merged["elasticsearch"] = es
    try:
        return Settings.model_validate(merged)
    except ValidationError as err:
        raise ConfigError(_describe(err, source)) from None


def load_settings(path: str | Path | None, env: Mapping[str, str] | None = None) -> Settings:
    """Load the YAML file at ``path`` (defaults only when None) and validate it.

    Raises:
        ConfigError: the file is missing or unreadable, is not UTF-8 YAML (tags that would
            build Python objects are refused: it is read with ``yaml.safe_load``), or has a
            bad or unknown key.
    """
    if path is None:
        return settings_from_mapping({}, env, "defaults")
    p = Path(path)
    data = _yaml_file(p, "configuration file", "pass --config FILE") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of keys")
    return settings_from_mapping(data, env, str(p))


def _yaml_file(p: Path, what: str, fix: str) -> Any:
    """The YAML document in ``p`` (``yaml.safe_load``: plain data only, never objects).

    Raises:
        ConfigError: naming ``p`` and the problem: missing (with ``fix``), unreadable, not
            UTF-8, not YAML, or nested too deeply to read.
    """
    try:
        return yaml.safe_load(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: {what} not found ({fix})") from None
    except OSError as err:
        raise ConfigError(f"{p}: cannot read the {what}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{p}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{p}: not valid YAML: nested too deeply") from None


def json_schema() -> JsonObject:
    """The JSON Schema of :class:`Settings` (written to ``config/schemas/pipeline.schema.json``)."""
    return Settings.model_json_schema()
