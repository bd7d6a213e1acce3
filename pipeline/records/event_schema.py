"""Event schemas: how an application's events join into requests (seed 002, section 3).

A schema is YAML (``config/schemas/*.yaml``); per event type it declares the join attributes,
each with the *domain* of its values (``Thread``, ``Conn``: two attributes of one domain
share valid-intervals) and a binding type, whether the event is the request's *seed*, and the
attributes that count resources::

    events:
      Accept:
        attrs: {conn: {domain: Conn, bind: BIND_START}}
      Dequeue:
        attrs: {conn: {domain: Conn, bind: BIND_BASIC}, tid: {domain: Thread, bind: BIND_START}}
      ReqStart:
        seed: true
        attrs: {conn: {domain: Conn, bind: BIND_BASIC}, tid: {domain: Thread, bind: BIND_BASIC}}
      Spin:
        resources: [cpu_ns]
        attrs: {tid: {domain: Thread, bind: BIND_BASIC}}
      Send:
        resources: [bytes:net]
        attrs: {tid: {domain: Thread, bind: BIND_BASIC}, conn: {domain: Conn, bind: BIND_BASIC}}
      ReqEnd:
        attrs: {tid: {domain: Thread, bind: BIND_STOP}, conn: {domain: Conn, bind: BIND_STOP}}
      CSwitch: {kernel: cpu_accounting}
    sync:
      - [Fork, task, TaskStart]
    parser: {reorder_window_ms: 1000, timeout_s: 10}

Binding types (seed 002, 3; reference/magpie-servicerate.md A.2): ``BIND_START`` opens a new
valid-interval for the attribute's (domain, value), owned by the event's sub-graph;
``BIND_STOP`` joins the open interval, then closes it; ``BIND_BASIC`` joins the open interval
and leaves it open. A resource entry ``attr`` counts attribute ``attr`` as the resource of the
same name (``cpu_ns``); ``attr:kind`` counts it as ``<kind>_<attr>`` (``bytes:disk`` ->
``disk_bytes``). ``kernel: cpu_accounting`` marks the context-switch event whose intervals of
running time are charged to the request the running thread is bound to. ``start_attr``
names the attribute of an event posted at the end of an operation that holds its start time
(ns): a synthetic ``<event>Start`` event is put in the stream at that time (seed 002, 3).
``sync`` triples ``[source_event, attribute, destination_event]`` are the causal hand-offs
of section 4.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.assets import event_schema as bundled_event_schema
from pipeline.errors import ConfigError


class Bind(StrEnum):
    """Binding type of a join attribute."""

    START = "BIND_START"
    STOP = "BIND_STOP"
    BASIC = "BIND_BASIC"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class JoinAttr(_Frozen):
    """A join attribute of an event type: the domain of its values and its binding type."""

    domain: str = Field(min_length=1)
    bind: Bind


class EventType(_Frozen):
    """What the schema says of one event type."""

    seed: bool = False
    attrs: dict[str, JoinAttr] = Field(default_factory=dict)
    resources: tuple[str, ...] = ()
    kernel: Literal["cpu_accounting"] | None = None
    start_attr: str | None = None

    @field_validator("attrs")
    @classmethod
    def _no_ground_truth(cls, attrs: dict[str, JoinAttr]) -> dict[str, JoinAttr]:
        bad = [a for a in attrs if a.startswith("_")]
        if bad:
            raise ValueError(f"attributes starting with _ are never joined on: {bad}")
        return attrs

    @field_validator("resources")
    @classmethod
    def _resource_names(cls, resources: tuple[str, ...]) -> tuple[str, ...]:
        for r in resources:
            attr, _, kind = r.partition(":")
            if not attr or (":" in r and not kind):
                raise ValueError(f"a resource is 'attr' or 'attr:kind', not {r!r}")
        return resources

    @cached_property
    def resource_keys(self) -> tuple[tuple[str, str], ...]:
        """``(attribute, resource name)`` of each resource entry (``bytes:disk`` ->
        ``("bytes", "disk_bytes")``)."""
        out = []
        for r in self.resources:
            attr, _, kind = r.partition(":")
            out.append((attr, f"{kind}_{attr}" if kind else attr))
        return tuple(out)


class ParserOptions(_Frozen):
    """Request parser settings."""

    reorder_window_ms: float = Field(1000.0, ge=0)
    timeout_s: float = Field(10.0, gt=0)
    thread_attr: str = Field("tid", min_length=1)


class EventSchema(_Frozen):
    """A whole event schema (see the module docstring); build it with :func:`event_schema`,
    which refuses unknown keys, bad binding types, sync triples naming undeclared event types,
    more than one context-switch event and a schema without a seed."""

    events: dict[str, EventType]
    sync: tuple[tuple[str, str, str], ...] = ()
    parser: ParserOptions = ParserOptions()

    @model_validator(mode="after")
    def _consistent(self) -> EventSchema:
        names = set(self.events)
        for src, attr, dst in self.sync:
            missing = [e for e in (src, dst) if e not in names]
            if missing:
                raise ValueError(f"sync [{src}, {attr}, {dst}] names undeclared events {missing}")
        kernels = [n for n, t in self.events.items() if t.kernel == "cpu_accounting"]
        if len(kernels) > 1:
            raise ValueError(f"one cpu_accounting event at most, not {kernels}")
        for name, t in self.events.items():
            if t.start_attr is not None and f"{name}Start" not in names:
                raise ValueError(
                    f"{name} has start_attr {t.start_attr!r}: declare {name}Start, the "
                    "synthetic event put in the stream at that time"
                )
        if not any(t.seed for t in self.events.values()):
            raise ValueError("no event type is the seed (seed: true) of a request")
        return self

    @cached_property
    def cpu_event(self) -> str | None:
        """The context-switch event type (``kernel: cpu_accounting``), if any."""
        return next((n for n, t in self.events.items() if t.kernel == "cpu_accounting"), None)

    @cached_property
    def resource_names(self) -> tuple[str, ...]:
        """Every resource a request can carry, in schema order (``sched_cpu_ns`` last when a
        context-switch event is declared: CPU measured by the kernel)."""
        names = dict.fromkeys(k for t in self.events.values() for _a, k in t.resource_keys)
        if self.cpu_event is not None:
            names["sched_cpu_ns"] = None
        return tuple(names)

    @cached_property
    def sync_roles(self) -> dict[str, tuple[tuple[str, str] | None, str | None]]:
        """Event type -> its part in the ``sync`` triples: ``(attribute, destination)`` when it
        is a source (the last triple naming it wins), and the attribute when it is a
        destination; ``(None, None)`` for an event type in no triple."""
        sources = {src: (attr, dst) for src, attr, dst in self.sync}
        dests = {dst: attr for _src, attr, dst in self.sync}
        return {name: (sources.get(name), dests.get(name)) for name in self.events}

    @cached_property
    def layout_roles(
        self,
    ) -> dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, str] | None, str | None]]:
        """Event type -> what laying out a canonical request asks of it: its resource keys
        (:attr:`EventType.resource_keys`) and its :attr:`sync_roles`, in one lookup."""
        roles = self.sync_roles
        return {name: (t.resource_keys, *roles[name]) for name, t in self.events.items()}


def event_schema(data: Mapping[str, Any], source: str) -> EventSchema:
    """Build a schema from its parsed YAML.

    Raises:
        ConfigError: the schema is invalid; the message names ``source`` and each bad key.
    """
    try:
        return EventSchema.model_validate(dict(data))
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"event schema {source}: {problems}") from None


def load_event_schema(path: Path | str) -> EventSchema:
    """The event schema in the YAML file ``path``, or a bundled one named by a bare name.

    ``http_server`` (no directory, no suffix, no such file here) is the schema shipped with
    iolens as ``config/schemas/http_server.yaml`` (:func:`pipeline.assets.event_schema`).

    Raises:
        ConfigError: unreadable, not UTF-8, not YAML (read with ``yaml.safe_load``: tags that
            would build Python objects are refused), nested too deeply, or not a valid schema
            (naming the keys); no bundled schema of that name (naming those there are).
    """
    path = Path(path)
    if path.parent == Path(".") and not path.suffix and not path.exists():
        path = bundled_event_schema(path.name)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"event schema {path}: {err}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"event schema {path}: not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None
    except RecursionError:
        raise ConfigError(f"event schema {path}: not valid YAML: nested too deeply") from None
    if not isinstance(data, dict):
        raise ConfigError(f"event schema {path}: a mapping with 'events' is expected")
    return event_schema(data, str(path))
