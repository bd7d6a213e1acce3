"""sysstat disk statistics as ``sadf -j FILE -- -d`` prints them: JSON bytes -> records.

One disk object of a ``statistics`` entry (verbatim from a real sadc file of a 2-vCPU VM)::

    "timestamp": {"date": "2026-11-22", "time": "04:14:23", "utc": 1, "interval": 1},
    "disk": [{"disk-device": "vda", "tps": 195.00, "rd_sec": 2184.00, "wr_sec": 204704.00,
              "dc_sec": 8.00, "rkB": 1092.00, "wkB": 102352.00, "dkB": 4.00,
              "avgrq-sz": 1061.01, "areq-sz": 530.50, "avgqu-sz": 0.35, "aqu-sz": 0.35,
              "await": 1.78, "util-percent": 7.60}]

The kB keys (``rkB``, which is a rate despite its name) are read, falling back to the sector
keys halved (sector = 512 B). Timestamps are interval ends, in UTC: ``"utc": 1`` before
sysstat 12.7.1, ``"tz": "UTC"`` since (:func:`_json_time`). Restarts are listed apart from the
statistics and are put back in time order. Pure: bad parts become
:class:`~pipeline.parsers.errors.ParseError` values whose reason holds a JSON path like
``hosts[0].statistics[3].disk[1]``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from typing import Any

from pipeline.formats.sysstat.values import (
    MAX_INTERVAL_S,
    OPTIONAL_FIELDS,
    SysstatRecord,
    parse_timestamp,
)
from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import MAX_EXACT
from pipeline.records.core import DiskSample, RestartMark

JSON_METRICS: tuple[tuple[str, tuple[tuple[str, float], ...]], ...] = (
    ("tps", (("tps", 1.0),)),
    ("read_kb_per_s", (("rkB", 1.0), ("rd_sec", 0.5))),
    ("write_kb_per_s", (("wkB", 1.0), ("wr_sec", 0.5))),
    ("discard_kb_per_s", (("dkB", 1.0), ("dc_sec", 0.5))),
    ("areq_sz_kb", (("areq-sz", 1.0), ("avgrq-sz", 0.5))),
    ("aqu_sz", (("aqu-sz", 1.0), ("avgqu-sz", 1.0))),
    ("await_ms", (("await", 1.0),)),
    ("util_pct", (("util-percent", 1.0),)),
)
"""DiskSample field -> candidate (key of a ``sadf -j`` disk object, factor to the field's
unit), preferred first."""


UTC_ZONES = frozenset({"UTC", "GMT", "UCT", "Etc/UTC"})
"""``tz`` values of a ``sadf -j`` timestamp that are UTC: sadf 12.7.1+ prints ``"UTC"`` unless
``-T``/``-t`` asked for local time (then the zone's abbreviation, which may still be one of
these when the host itself runs in UTC)."""


def _json_time(stamp: Any, where: str, path: str) -> float:
    """Unix seconds of a ``sadf -j`` timestamp or boot object.

    Two forms exist (reference/sysstat.md 1.5): sysstat before 12.7.1 prints ``"utc": 1`` for
    UTC and ``"utc": 0`` with ``-T``/``-t``; 12.7.1 and later print ``"tz": "UTC"`` for UTC and
    the zone's abbreviation (``"CET"``) with ``-T``/``-t``.

    Raises:
        ParseError: not an object, local time (either form), or neither key.
    """
    if not isinstance(stamp, Mapping):
        raise ParseError(path, 0, f"{where}: no timestamp object")
    if "tz" in stamp:
        if stamp["tz"] not in UTC_ZONES:
            raise ParseError(
                path,
                0,
                f"{where}: timestamp is local time (tz={stamp['tz']!r}, sadf -T/-t); "
                "convert without -T/-t",
            )
    elif "utc" in stamp:
        if stamp["utc"] != 1:
            raise ParseError(
                path,
                0,
                f"{where}: timestamp is local time (utc={stamp['utc']!r}, sadf -T/-t); "
                "convert without -T/-t",
            )
    else:
        raise ParseError(
            path,
            0,
            f"{where}: timestamp has neither 'tz' (sadf 12.7.1 and later) nor 'utc' (older): "
            "not sadf -j output",
        )
    return parse_timestamp(f"{stamp.get('date')} {stamp.get('time')} UTC", path, 0)


def _json_disk(
    obj: Any, host: str, end_s: float, interval_s: float, where: str, path: str
) -> DiskSample:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("disk-device"), str):
        raise ParseError(path, 0, f"{where}: not a disk object with a 'disk-device'")
    values: dict[str, float] = {}
    for field_name, candidates in JSON_METRICS:
        found = next(((obj[k], f) for k, f in candidates if k in obj), None)
        if found is None:
            if field_name in OPTIONAL_FIELDS:
                continue
            raise ParseError(path, 0, f"{where}: no {candidates[0][0]!r} key")
        value, factor = found
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ParseError(path, 0, f"{where}: {field_name} is not a number: {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ParseError(path, 0, f"{where}: {field_name} must be finite and >= 0: {value}")
        if value >= MAX_EXACT:
            raise ParseError(path, 0, f"{where}: {field_name} is out of range (>= 2^53): {value}")
        values[field_name] = float(value) * factor
    return DiskSample(
        host=host,
        device=obj["disk-device"],
        end_s=end_s,
        interval_s=interval_s,
        discard_kb_per_s=values.pop("discard_kb_per_s", 0.0),
        **values,
    )


def _json_interval(stamp: Any, where: str, path: str) -> int:
    """The ``interval`` of a timestamp object, s.

    Raises:
        ParseError: not an integer in ``[1, MAX_INTERVAL_S]``.
    """
    interval = stamp.get("interval") if isinstance(stamp, Mapping) else None
    if (
        isinstance(interval, bool)
        or not isinstance(interval, int)
        or not 1 <= interval <= MAX_INTERVAL_S
    ):
        raise ParseError(
            path, 0, f"{where}: interval must be an integer in [1, 2^31 - 1], got {interval!r}"
        )
    return interval


def _json_statistic(
    stat: Any, host: str, where: str, path: str
) -> tuple[float, list[DiskSample | ParseError]]:
    """End time and disk records of one ``statistics`` entry.

    Raises:
        ParseError: the entry's timestamp, interval or ``disk`` array is unusable.
    """
    if not isinstance(stat, Mapping):
        raise ParseError(path, 0, f"{where}: not a statistics object")
    stamp = stat.get("timestamp")
    end_s = _json_time(stamp, where, path)
    interval = _json_interval(stamp, where, path)
    disks = stat.get("disk")
    if not isinstance(disks, list):
        raise ParseError(path, 0, f"{where}: no 'disk' array (convert with sadf -j -- -d)")
    records: list[DiskSample | ParseError] = []
    for j, obj in enumerate(disks):
        try:
            records.append(
                _json_disk(obj, host, end_s, float(interval), f"{where}.disk[{j}]", path)
            )
        except ParseError as err:
            records.append(err)
    return end_s, records


def _json_host(h: int, host_obj: Any, path: str) -> Iterator[SysstatRecord | ParseError]:
    where = f"hosts[{h}]"
    if not isinstance(host_obj, Mapping) or not isinstance(host_obj.get("nodename"), str):
        yield ParseError(path, 0, f"{where}: not a host object with a 'nodename'")
        return
    host: str = host_obj["nodename"]
    restarts: list[float] = []
    for r, boot in enumerate(host_obj.get("restarts") or []):
        try:
            stamp = boot.get("boot") if isinstance(boot, Mapping) else None
            restarts.append(_json_time(stamp, f"{where}.restarts[{r}]", path))
        except ParseError as err:
            yield err
    restarts.sort()
    stats = host_obj.get("statistics")
    if not isinstance(stats, list):
        yield ParseError(path, 0, f"{where}: no 'statistics' array")
        stats = []
    for s, stat in enumerate(stats):
        try:
            end_s, records = _json_statistic(stat, host, f"{where}.statistics[{s}]", path)
        except ParseError as err:
            yield err
            continue
        while restarts and restarts[0] < end_s:
            yield RestartMark(host, restarts.pop(0))
        yield from records
    for t in restarts:
        yield RestartMark(host, t)


def _decode(data: bytes, path: str) -> Any:
    """The JSON document, or the :class:`ParseError` saying why ``data`` is not one."""
    try:
        return json.loads(data)
    except UnicodeDecodeError as err:
        return ParseError(path, 0, f"not UTF-8 text: {err.reason}")
    except json.JSONDecodeError as err:
        return ParseError(
            path, err.lineno, f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        )
    except RecursionError:
        return ParseError(path, 0, "invalid JSON: nested too deeply (not sadf -j output)")


def parse_sadf_json(data: bytes, path: str) -> Iterator[SysstatRecord | ParseError]:
    """Parse ``sadf -j FILE -- -d`` output into records, or errors for bad parts.

    JSON lists restarts apart from the statistics; each RestartMark is placed before the first
    statistics record later than it (a restart printed at the time of a record follows it, as
    in the CSV). ``comments`` are ignored. Errors carry line 0 (the place is in the reason as a
    JSON path like ``hosts[0].statistics[3].disk[1]``), except for invalid JSON.

    Args:
        data: the whole JSON document.
        path: the file, for errors.

    Yields:
        DiskSample and RestartMark records in time order per host; a ParseError per bad part
        (a bad document yields one ParseError and nothing else).
    """
    doc = _decode(data, path)
    if isinstance(doc, ParseError):
        yield doc
        return
    top = doc.get("sysstat") if isinstance(doc, dict) else None
    hosts = top.get("hosts") if isinstance(top, dict) else None
    if not isinstance(hosts, list):
        yield ParseError(path, 0, "not sadf -j output: no sysstat.hosts array")
        return
    for h, host_obj in enumerate(hosts):
        yield from _json_host(h, host_obj, path)
