"""Application and kernel event logs: JSON lines, one event per line -> :class:`Event` records.

An instrumented HTTP server's request, then a kernel context switch converted from
``perf script`` (the JSON-lines form iolens reads; seed 002, section 2.1, has ETW events of
the same shape: a timestamp, an event type and typed attributes)::

    {"ts":1783505753848,"ev":"ReqStart","pid":9104,"tid":9148,"cpu_ns":87480,"conn":"10.0.0.1:50282>10.0.0.2:80"}
    {"ts":1783505370416,"ev":"CSwitch","cpu":0,"prev_tid":0,"prev_state":"R","next_tid":9104}

``ts`` is an integer count of nanoseconds on one clock per machine (``CLOCK_MONOTONIC``, which
``time.monotonic_ns()`` reads and ``perf record -k mono`` stamps kernel events with, so that
application and kernel events of one machine need no clock fitting); ``ev`` is the event type.
Every other key is an attribute: the event schema (:mod:`pipeline.records.event_schema`) says
which attributes join events into requests and which count resources. Attributes whose name
starts with ``_`` are carried but never joined on (ground truth written by test workloads).

Kernel scheduler events come from ``perf record -a -k mono -e sched:sched_switch -e
sched:sched_wakeup`` printed by ``perf script --ns -F tid,pid,cpu,time,event,trace`` (perf 6.1)::

    21949/21949 [000] 18884.293507342: sched:sched_switch: prev_comm=perf prev_pid=21949 prev_prio=120 prev_state=D ==> next_comm=migration/0 next_pid=18 next_prio=0
        0/0     [000] 18884.293616575: sched:sched_wakeup: comm=perf-exec pid=21951 prio=120 target_cpu=000

:func:`perf_sched_events` turns those lines into ``CSwitch`` and ``Wakeup`` events
(``perf``'s ``pid`` fields are thread ids).

This module is pure: lines in, records and :class:`~pipeline.parsers.errors.ParseError` values
(file, line, reason) out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import orjson

from pipeline.parsers.errors import ParseError
from pipeline.records.events import Event, new_event


def parse_event_line(line: bytes | str, path: str, line_no: int) -> Event:
    """One JSON line -> :class:`Event`.

    Raises:
        ParseError: not a JSON object, ``ts`` missing or not a non-negative integer, ``ev``
            missing or not a non-empty string.
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as err:
        raise ParseError(path, line_no, f"not a JSON event: {err}") from None
    if not isinstance(obj, dict):
        raise ParseError(path, line_no, f"an event is a JSON object, not {type(obj).__name__}")
    ts = obj.pop("ts", None)
    ev = obj.pop("ev", None)
    if type(ts) is not int or ts < 0:
        raise ParseError(path, line_no, f"'ts' must be a non-negative integer of ns, not {ts!r}")
    if not isinstance(ev, str) or not ev:
        raise ParseError(path, line_no, f"'ev' must be the event type (a string), not {ev!r}")
    return new_event(ts, ev, obj, line_no)


def parse_events(lines: Iterable[bytes | str], path: str, first_line: int = 1) -> Iterator[Event]:
    """Events of JSON lines (blank lines skipped), in file order.

    Raises:
        ParseError: the first bad line (see :func:`parse_event_line`).
    """
    for n, line in enumerate(lines, start=first_line):
        if line.strip():
            yield parse_event_line(line, path, n)


_PERF_LINE = re.compile(
    r"^\s*(?P<pid>-?\d+)/(?P<tid>-?\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<sec>\d+)\.(?P<frac>\d+):\s+"
    r"(?P<event>sched:sched_switch|sched:sched_wakeup):\s+(?P<trace>.*)$"
)
_FIELD = re.compile(r"(\w+)=(\S*)")


def perf_sched_events(lines: Iterable[bytes | str], path: str) -> Iterator[Event]:
    """``perf script --ns -F tid,pid,cpu,time,event,trace`` lines of ``sched:sched_switch`` and
    ``sched:sched_wakeup`` -> ``CSwitch`` / ``Wakeup`` events.

    ``CSwitch``: ``cpu``, ``prev_tid``, ``prev_state`` (``R``: preempted, ``S``/``D``: blocked),
    ``next_tid``; ``Wakeup``: ``cpu`` (the waker's), ``tid`` (the woken thread), ``target_cpu``.
    Other events and lines that are not perf samples (headers, blank lines) are skipped. The
    timestamp must have nanoseconds (``--ns``).

    Raises:
        ParseError: a sched line without nanoseconds or without its fields.
    """
    for n, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        m = _PERF_LINE.match(line)
        if m is None:
            continue
        if len(m["frac"]) != 9:
            raise ParseError(path, n, "perf times need nanoseconds: run perf script with --ns")
        ts = int(m["sec"]) * 1_000_000_000 + int(m["frac"])
        try:
            yield Event(ts, *_sched_attrs(m["event"], int(m["cpu"]), m["trace"]), n)
        except (KeyError, ValueError) as err:
            raise ParseError(path, n, f"{m['event']} without a usable field {err}") from None


def _sched_attrs(event: str, cpu: int, trace: str) -> tuple[str, dict[str, int | str]]:
    """The event name and attributes of one sched sample's trace fields.

    Raises:
        KeyError, ValueError: a field missing or not a number.
    """
    fields = dict(_FIELD.findall(trace))
    if event == "sched:sched_switch":
        return "CSwitch", {
            "cpu": cpu,
            "prev_tid": int(fields["prev_pid"]),
            "prev_state": fields.get("prev_state", ""),
            "next_tid": int(fields["next_pid"]),
        }
    return "Wakeup", {
        "cpu": cpu,
        "tid": int(fields["pid"]),
        "target_cpu": int(fields.get("target_cpu", cpu)),
    }


def event_json(e: Event) -> bytes:
    """An event as the JSON line :func:`parse_event_line` reads back (no newline)."""
    return orjson.dumps({"ts": e.ts_ns, "ev": e.ev, **e.attrs})
