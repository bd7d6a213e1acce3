"""Values of sacct columns: Slurm hostlists, durations, times and counts.

Each function reads one field as ``sacct --parsable2`` prints it (sacct(1), "Job Accounting
Fields"); :mod:`pipeline.formats.slurm.decode` applies them to the columns of a row. Samples::

    nid0[5301-5428]          NodeList, a Slurm hostlist (``scontrol show hostnames`` expands it)
    00:12:36                 Elapsed, [D-]HH:MM:SS
    2017-03-20T01:59:02      Start/End, local time of the host that ran sacct
    128                      NNodes
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, tzinfo

from pipeline.parsers.limits import MAX_EXACT, epoch_digits, epoch_problem, zoned_epoch

NO_TIME = frozenset({"", "unknown", "none"})
NO_NODES = frozenset({"", "none assigned", "(null)", "none"})
MAX_HOSTS = 1_000_000
"""A hostlist expanding to more names than this is refused (a typo like ``n[1-999999999]``)."""


def _split_top(text: str) -> list[str]:
    """Split a hostlist at the commas outside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError("nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("']' without '['")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError("'[' without ']'")
    parts.append("".join(cur))
    return parts


def _expand_range(body: str) -> list[str]:
    """``0008,0012-0013`` -> ``['0008', '0012', '0013']`` (width of each lower bound kept)."""
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad range {item!r} (expected N or N-M)")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"range {item!r} runs backwards")
        if len(out) + b - a + 1 > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
        out.extend(f"{n:0{len(lo)}d}" for n in range(a, b + 1))
    return out


_PIECE = re.compile(r"([^\[\]]*)(?:\[([^\[\]]*)\])?")


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist into host names, as ``scontrol show hostnames`` does.

    ``nid0[5301-5303,5310],login1`` -> ``nid05301 nid05302 nid05303 nid05310 login1``. A
    range keeps the width of its lower bound (``[08-10]`` -> ``08 09 10``; ``[8-10]`` ->
    ``8 9 10``), as Slurm's hostlist.c does. Several bracket groups in one name expand to their
    product (``r[1-2]n[1-2]`` -> ``r1n1 r1n2 r2n1 r2n2``); text after a bracket is a suffix.
    Duplicates are kept, in order. ``None assigned``, ``(null)`` and ``""`` give ``[]``.

    Raises:
        ValueError: unbalanced or nested brackets, a range that is not ``N`` or ``N-M`` or
            runs backwards, an empty name, or more than ``MAX_HOSTS`` names.
    """
    text = text.strip()
    if text.lower() in NO_NODES:
        return []
    hosts: list[str] = []
    for expr in _split_top(text):
        if not expr:
            raise ValueError(f"empty host name in {text!r}")
        hosts.extend(_expand_name(expr, len(hosts)))
    return hosts


def _expand_name(expr: str, before: int) -> list[str]:
    """The names of one hostlist item (``r[1-2]n[1-2]``), ``before`` names already expanded.

    Raises:
        ValueError: empty brackets, a bad range, or more than ``MAX_HOSTS`` names in all.
    """
    names = [""]
    for m in _PIECE.finditer(expr):
        literal, body = m.group(1), m.group(2)
        if body == "":
            raise ValueError(f"empty brackets in {expr!r}")
        choices = _expand_range(body) if body is not None else [""]
        names = [n + literal + c for n in names for c in choices]
        if len(names) + before > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
    return names


def parse_elapsed(text: str) -> float:
    """Seconds from a Slurm duration: ``[D-]HH:MM:SS``, ``MM:SS[.mmm]``, ``D-HH[:MM]``.

    sacct prints ``Elapsed`` as ``HH:MM:SS`` or ``D-HH:MM:SS``; the CPU-time columns
    (``TotalCPU``) as ``MM:SS.mmm`` below an hour (sacct(1), "Job Accounting Fields").

    Raises:
        ValueError: not a duration, or one of 2^53 s or more.
    """
    days, parts = _duration_parts(text)
    try:
        seconds = float(parts[2])
    except ValueError:
        raise ValueError(f"not a duration: {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or parts[2].startswith(("+", "-")):
        raise ValueError(f"not a duration: {text!r}")
    try:
        whole = (int(days or 0) * 24 + int(parts[0])) * 3600 + int(parts[1]) * 60
    except ValueError:  # more digits than int() converts
        raise ValueError(f"duration out of range: {text[:40]!r}") from None
    if whole >= MAX_EXACT or whole + seconds >= MAX_EXACT:
        raise ValueError(f"duration out of range: {text[:40]!r}")
    return whole + seconds


def _duration_parts(text: str) -> tuple[str, list[str]]:
    """``(days, [hours, minutes, seconds])`` of a duration, as text (days possibly empty).

    Raises:
        ValueError: not a duration.
    """
    days, sep, clock = text.strip().rpartition("-")
    if sep and not days.isdigit():
        raise ValueError(f"not a duration: {text!r}")
    parts = clock.split(":")
    if sep:
        parts += ["0"] * (3 - len(parts))
    elif len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"not a duration: {text!r}")
    return days, parts


def parse_time(text: str, tz: tzinfo = UTC) -> float | None:
    """Unix seconds from a sacct time: ``2017-03-20T01:59:02`` in ``tz``, or Unix seconds.

    ``Unknown``, ``None`` and ``""`` give None. A value with its own offset
    (``...+02:00``) keeps that offset.

    Raises:
        ValueError: anything else, or a time before 1970 or beyond the year 9999.
    """
    text = text.strip()
    if text.lower() in NO_TIME:
        return None
    seconds = epoch_digits(text)
    if seconds is None:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not a sacct time: {text[:40]!r}") from None
        if "T" not in text:
            raise ValueError(f"not a sacct time: {text[:40]!r}")
        seconds = zoned_epoch(when, tz)
    problem = epoch_problem(seconds)
    if problem is not None:
        raise ValueError(f"time {text[:40]!r} is {problem}")
    return seconds


def parse_count(value: str | None, name: str) -> int | None:
    """A whole-number column (``NNodes``, ``NTasks``...); None when missing or empty.

    Raises:
        ValueError: not a whole number >= 0, or one of 2^53 or more.
    """
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()):
        raise ValueError(f"{name} is not a whole number >= 0: {value[:40]!r}")
    digits = value.lstrip("0") or "0"
    if len(digits) > 16 or int(digits) >= MAX_EXACT:
        raise ValueError(f"{name} is out of range (>= 2^53): {value[:40]!r}")
    return int(digits)
