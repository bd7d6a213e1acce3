"""Column names and quantities with size units, as IOMiner users write them (seed 004, section
II-A, Algorithm 1 lines 14 and 23).

* :func:`normalize` maps a column name to its stored spelling (``"Bytes Written"`` ->
  ``"bytes_written"``); :func:`resolve` checks it against the columns there are.
* :func:`parse_quantity` reads ``"1GB"``, ``"1.5 GiB"``, ``"0"``, ``"2G"``, ``"1GB/s"``.

Units (:data:`UNITS`): ``B``; ``KB``/``kB``, ``MB``, ``GB``, ``TB``, ``PB`` are powers of 1000;
``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB`` powers of 1024 (both families in any letter case,
they are bytes, never bits); the bare prefixes ``k``/``K``, ``M``, ``G``, ``T``, ``P`` are powers
of 1000 and case-sensitive. A trailing ``/s`` (a rate) is accepted and ignored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

UNITS: dict[str, float] = {
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "pb": 1e15,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
    "pib": 2.0**50,
}
"""Byte units by lower-cased name (matched case-insensitively)."""

PREFIXES: dict[str, float] = {
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}
"""Bare decimal prefixes (matched case-sensitively: ``m`` is not ``M``)."""

NUMBER = re.compile(
    r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>[A-Za-z]+)?(?P<rate>/s)?"
)


def normalize(name: str) -> str:
    """The stored spelling of a column name: lower case, spaces/dashes -> ``_``.

    ``"Bytes Written"``, ``"bytes-written"`` and ``"bytes_written"`` all give
    ``"bytes_written"``; leading/trailing blanks are dropped.
    """
    return re.sub(r"[\s\-]+", "_", name.strip().lower())


class ColumnError(KeyError):
    """A column name that the tuples do not have; the message lists the ones they do.

    Attributes:
        column: the name as given.
        available: the columns there are.
    """

    def __init__(self, column: str, available: Iterable[str], context: str = "") -> None:
        self.column = column
        self.available = tuple(available)
        where = f" ({context})" if context else ""
        self.message = (
            f"unknown column {column!r}{where}; available: {', '.join(self.available) or 'none'}"
        )
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


def resolve(name: str, columns: Sequence[str], context: str = "") -> str:
    """``name`` normalised, checked against ``columns``.

    Raises:
        ColumnError: no such column (a ``KeyError``); ``context`` is added to the message.
    """
    col = normalize(name)
    if col not in columns:
        raise ColumnError(name, columns, context)
    return col


def unit_factor(unit: str) -> float | None:
    """The multiplier of a unit (``"GB"`` -> 1e9, ``"GiB"`` -> 2**30), None if unknown."""
    if unit in PREFIXES:
        return PREFIXES[unit]
    return UNITS.get(unit.lower())


def parse_quantity(text: str) -> float:
    """A number with an optional size unit and ``/s``: ``"1GB"`` -> 1e9, ``"2 KiB"`` -> 2048.0.

    Units as in :data:`UNITS` and :data:`PREFIXES` (SI powers of 1000, IEC powers of 1024);
    the seed's "1GB" (Algorithm 1) is 10^9 bytes, its "1GB" bandwidth 10^9 bytes/s.

    Raises:
        ValueError: not a number, or an unknown unit; the message names the text.
    """
    m = NUMBER.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"{text!r} is not a number with an optional unit (e.g. 10GB, 1.5GiB)")
    value = float(m["num"])
    if m["unit"]:
        factor = unit_factor(m["unit"])
        if factor is None:
            raise ValueError(f"unknown unit {m['unit']!r} in {text!r}; units: {_unit_list()}")
        value *= factor
    return value


def _unit_list() -> str:
    """The units a quantity may have, for error messages."""
    return "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB, k, M, G, T, P"


def finite_or_none(value: Any) -> float | None:
    """``float(value)``, or None for None/NaN/infinite values (pandas' missing markers)."""
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
