"""The drop formats iolens reads: one line each in :data:`FORMATS`.

``drops[].type`` names a format; its shipper class (:class:`~pipeline.shippers.interface.Shipper`)
declares the rest: the default file pattern, the data streams it writes, how files are read.
A format is a package under ``pipeline/formats/`` (decoder, reducers, document encoder,
shipper); adding one is adding its package and its line here.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping

from pipeline.errors import ConfigError
from pipeline.records.json import JsonObject
from pipeline.settings import Settings
from pipeline.shippers.interface import ShipContext, Shipper

FORMATS: dict[str, str] = {
    "fio-hist": "pipeline.formats.fio.shipper:FioShipper",
    "sadf": "pipeline.formats.sysstat.shipper:SadfShipper",
    "sadc": "pipeline.formats.sysstat.shipper:SadcShipper",
    "darshan": "pipeline.formats.darshan.shipper:DarshanShipper",
    "slurm": "pipeline.formats.slurm.shipper:SlurmShipper",
    "lmt": "pipeline.formats.lmt.shipper:LmtShipper",
    "events": "pipeline.formats.events.shipper:EventsShipper",
}
"""Drop type -> its shipper class (``module:Class``, imported when a job needs it, so that a
command that only names the formats does not load them), in the order their idle work runs."""


def shipper_class(kind: str, formats: Mapping[str, str] = FORMATS) -> type[Shipper]:
    """The shipper class of drop type ``kind``.

    Raises:
        ConfigError: ``kind`` is not a format of ``formats`` (:func:`unknown_type`).
        ImportError, AttributeError: the registry names a class that does not exist.
    """
    if kind not in formats:
        raise ConfigError(unknown_type("drop type", kind, formats))
    module, _, name = formats[kind].partition(":")
    cls: type[Shipper] = getattr(importlib.import_module(module), name)
    return cls


def build_shippers(ctx: ShipContext, formats: Mapping[str, str] = FORMATS) -> dict[str, Shipper]:
    """The shipper of every drop type (``drops[].type`` -> shipper), made once per job."""
    return {kind: shipper_class(kind, formats)(ctx) for kind in formats}


def check_drops(settings: Settings, formats: Mapping[str, str] = FORMATS) -> None:
    """Refuse a configuration whose drops name a format iolens does not read.

    Raises:
        ConfigError: ``drops[i].type`` is not a key of ``formats``; the message names the drop,
            the formats known and the closest name.
    """
    for i, drop in enumerate(settings.drops):
        if drop.type not in formats:
            raise ConfigError(unknown_type(f"drops[{i}].type", drop.type, formats))


def unknown_type(where: str, kind: str, formats: Mapping[str, str] = FORMATS) -> str:
    """Why ``kind`` is refused: the formats known, and the closest name when one is close."""
    close = difflib.get_close_matches(kind, list(formats), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{where}: {kind!r} is not a drop format iolens reads ({', '.join(formats)}){hint}"


def config_schema(schema: JsonObject) -> JsonObject:
    """The configuration's JSON Schema with ``drops[].type`` limited to the formats known."""
    out = dict(schema)
    defs = {**out["$defs"]}
    drop = {**defs["DropSettings"]}
    props = {**drop["properties"]}
    props["type"] = {**props["type"], "enum": list(FORMATS)}
    drop["properties"], defs["DropSettings"], out["$defs"] = props, drop, defs
    return out
