"""One event of an application or kernel event log: what the event decoder
(:mod:`pipeline.formats.events.decode`) gives the request join (seed 002)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Event:
    """One event of an application or kernel event log.

    Attributes:
        ts_ns: timestamp, ns on the machine's monotonic clock.
        ev: event type (``ReqStart``, ``CSwitch``...).
        attrs: every other key of the line (join attributes, resources, anything else).
        line_no: where it was read (1-based; 0 for a synthetic event).
    """

    ts_ns: int
    ev: str
    attrs: Mapping[str, Any]
    line_no: int = 0
