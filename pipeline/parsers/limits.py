"""Bounds the parsers put on numbers read from their inputs, so that what they accept can be
turned into documents and indexed.

* Times: Python's ``datetime`` (which formats ``@timestamp``) and Elasticsearch's ``date``
  end at the year 9999, and no input iolens reads predates the Unix epoch; a time outside
  ``[0, MAX_EPOCH_S]`` is a damaged field, not a date.
* Measurements (rates, sizes, counts) must stay below ``MAX_EXACT`` = 2^53: JSON numbers hold
  integers exactly up to there, and sums over many of them (downsampling) stay finite.
* Counters that Elasticsearch stores as ``long`` must stay below 2^63 (``MAX_LONG``).

Pure functions; the callers turn a returned reason into a
:class:`~pipeline.parsers.errors.ParseError` naming the file and the line.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, tzinfo

MAX_EPOCH_S = 253402300799.0
"""9999-12-31T23:59:59Z in Unix seconds: the last second a ``datetime`` can format."""

MAX_EXACT = float(2**53)
"""Measurements must be below this (exact in JSON; sums of them stay finite)."""

MAX_LONG = 2**63 - 1
"""The largest value of an Elasticsearch ``long`` field."""


def epoch_problem(value: float) -> str | None:
    """Why ``value`` (Unix seconds, UTC) cannot be a timestamp of an input, or None.

    Returns:
        ``"not a number"`` (NaN), ``"before 1970"`` or ``"beyond the year 9999"`` (``inf``
        too); None when ``0 <= value <= MAX_EPOCH_S``.
    """
    if math.isnan(value):
        return "not a number"
    if value < 0:
        return "before 1970"
    if value > MAX_EPOCH_S:
        return "beyond the year 9999"
    return None


def epoch_digits(text: str) -> float | None:
    """Unix seconds from an all-ASCII-digit string, or None when it is not one.

    Strings of more than 12 digits are beyond the year 9999 and are returned as ``inf``
    without converting them (``int()`` refuses more than 4,300 digits; a float of more than
    308 would overflow), so :func:`epoch_problem` names the problem.
    """
    if not (text.isascii() and text.isdigit()):
        return None
    return math.inf if len(text) > 12 else float(int(text))


def utc_text(ts_s: float) -> str:
    """``2018-01-28 00:05:00 UTC`` for Unix seconds, for messages (the number itself when it
    is no date ``datetime`` can show)."""
    try:
        return datetime.fromtimestamp(ts_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"{ts_s:g} s"


def zoned_epoch(when: datetime, tz: tzinfo) -> float:
    """Unix seconds of ``when``, read in ``tz`` when it has no offset of its own; NaN when no
    timestamp can hold it (so :func:`epoch_problem` names the problem)."""
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    try:
        return when.timestamp()
    except (OverflowError, ValueError):
        return math.nan
