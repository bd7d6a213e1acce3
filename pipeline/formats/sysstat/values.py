"""What both ``sadf`` formats (CSV and JSON) share: timestamps, intervals, markers, records.

Timestamps are the END of the interval a row averages over, in UTC, whole seconds (truncated):
``YYYY-MM-DD HH:MM:SS UTC`` by default, Unix seconds with ``-U``, e.g. ``1795320862`` or
``2026-11-22 04:14:22 UTC``. Times without ``UTC`` come from ``-T``/``-t`` (reader's or creator's
local time, and ``-t`` is buggy across time zones in 12.6.1) and are refused
(reference/sysstat.md 1.5). An interval of ``-1`` marks a ``LINUX-RESTART`` or (with
``sadf -- -C``) a ``COM`` comment row.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import epoch_digits, epoch_problem
from pipeline.records.core import DiskSample, RestartMark

SysstatRecord = DiskSample | RestartMark

OPTIONAL_FIELDS = frozenset({"discard_kb_per_s"})
"""Fields older sysstat versions do not print; they are 0 when absent."""

RESTART = "LINUX-RESTART"
COMMENT = "COM "

MAX_INTERVAL_S = 2**31 - 1
"""Longest interval a row may report, s (68 years: more is a damaged field)."""


def parse_timestamp(text: str, path: str, line_no: int) -> float:
    """Unix seconds from a sadf timestamp: ``1795320862`` (``-U``) or ``2026-11-22 04:14:22 UTC``.

    Raises:
        ParseError: local time (no ``UTC``: ``-T``/``-t``), not a timestamp, or a Unix time
            beyond the year 9999.
    """
    text = text.strip()
    seconds = epoch_digits(text)
    if seconds is not None:
        problem = epoch_problem(seconds)
        if problem is not None:
            raise ParseError(path, line_no, f"timestamp {text[:40]!r} is {problem}")
        return seconds
    if not text.endswith(" UTC"):
        raise ParseError(
            path,
            line_no,
            f"timestamp {text!r} is not UTC (sadf -T or -t prints local time); "
            f"convert with sadf -d -U (or without -T/-t)",
        )
    try:
        when = datetime.strptime(text[:-4], "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        raise ParseError(path, line_no, f"not a sadf timestamp: {text!r}") from None
    return when.timestamp()
