"""Column names, quantities with size units, and IOMiner's filter strings.

Seed 004, section II-A (Algorithm 1, lines 14 and 23): users name columns as they read,
``"bytes written"``, and write conditions as text, ``"bytes written < 1GB"``. This module turns
both into something pandas can use, without evaluating user text:

* :func:`normalize` maps a column name to its stored spelling (``"Bytes Written"`` ->
  ``"bytes_written"``): lower case, runs of spaces and dashes become one ``_``.
* :func:`parse_quantity` reads ``"1GB"``, ``"1.5 GiB"``, ``"0"``, ``"2G"``, ``"1GB/s"``.
* :func:`compile_filter` parses a condition into a function from a DataFrame to a boolean mask.

Filter grammar (keywords ``and``, ``or``, ``true``, ``false``, ``null`` in any case)::

    expr       := conjunction ("or" conjunction)*
    conjunction:= comparison ("and" comparison)*
    comparison := "(" expr ")" | column op value
    column     := one or more words, e.g. bytes written, job id, node-count
    op         := "<" | "<=" | ">" | ">=" | "==" | "!="
    value      := number [unit] | 'text' | "text" | true | false | null | word

Units (:data:`UNITS`): ``B``; ``KB``/``kB``, ``MB``, ``GB``, ``TB``, ``PB`` are powers of 1000;
``KiB``, ``MiB``, ``GiB``, ``TiB``, ``PiB`` powers of 1024 (both families in any letter case,
they are bytes, never bits); the bare prefixes ``k``/``K``, ``M``, ``G``, ``T``, ``P`` are powers
of 1000 and case-sensitive. A trailing ``/s`` (a rate) is accepted and ignored.

Comparisons follow SQL on missing values: a missing value (None/NaN/NaT) satisfies no
comparison; ``== null`` and ``!= null`` test for it. Against a text column an unquoted value is
compared as written, so ``job id == 4478544`` matches the keyword ``"4478544"``; against a
datetime column a quoted value is read as an ISO-8601 time (UTC when it has no offset).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

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

_NUMBER = re.compile(
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
    m = _NUMBER.fullmatch(text.strip())
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
    return "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB, k, M, G, T, P"


class FilterSyntaxError(ValueError):
    """A filter string that cannot be parsed or applied.

    Attributes:
        expression: the whole filter string.
        token: the offending token (``""`` at the end of the string).
        position: its character offset in ``expression``.
    """

    def __init__(self, expression: str, token: str, position: int, reason: str) -> None:
        self.expression = expression
        self.token = token
        self.position = position
        at = f"{token!r} at position {position}" if token else f"end of input (position {position})"
        super().__init__(f"filter {expression!r}: {reason} at {at}")


@dataclass(frozen=True)
class _Token:
    kind: str  # "atom", "string", "op", "(", ")"
    text: str
    pos: int


_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<string>'[^']*'|\"[^\"]*\")|(?P<op><=|>=|==|!=|<|>)"
    r"|(?P<paren>[()])|(?P<atom>[^\s()<>=!'\"]+)"
)
_KEYWORDS = frozenset({"and", "or"})


def _tokenize(expr: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if m is None:
            bad = expr[pos]
            if bad in "'\"":
                raise FilterSyntaxError(expr, expr[pos:], pos, "unterminated quoted string")
            raise FilterSyntaxError(expr, bad, pos, "unexpected character")
        kind = m.lastgroup or ""
        if kind == "paren":
            tokens.append(_Token(m.group(), m.group(), pos))
        elif kind != "ws":
            tokens.append(_Token(kind, m.group(), pos))
        pos = m.end()
    return tokens


@dataclass(frozen=True)
class _Cmp:
    column: str
    column_pos: int
    op: str
    value: _Token
    unit: _Token | None


@dataclass(frozen=True)
class _Bool:
    op: str  # "and" / "or"
    parts: tuple[_Node, ...]


_Node = _Cmp | _Bool

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


class _Parser:
    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.tokens = _tokenize(expr)
        self.i = 0

    def fail(self, reason: str) -> FilterSyntaxError:
        if self.i < len(self.tokens):
            tok = self.tokens[self.i]
            return FilterSyntaxError(self.expr, tok.text, tok.pos, reason)
        return FilterSyntaxError(self.expr, "", len(self.expr), reason)

    def peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def keyword(self, word: str) -> bool:
        tok = self.peek()
        if tok is not None and tok.kind == "atom" and tok.text.lower() == word:
            self.i += 1
            return True
        return False

    def parse(self) -> _Node:
        if not self.tokens:
            raise self.fail("empty filter")
        node = self.disjunction()
        if self.peek() is not None:
            raise self.fail("expected 'and', 'or' or the end")
        return node

    def disjunction(self) -> _Node:
        parts = [self.conjunction()]
        while self.keyword("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else _Bool("or", tuple(parts))

    def conjunction(self) -> _Node:
        parts = [self.comparison()]
        while self.keyword("and"):
            parts.append(self.comparison())
        return parts[0] if len(parts) == 1 else _Bool("and", tuple(parts))

    def comparison(self) -> _Node:
        tok = self.peek()
        if tok is not None and tok.kind == "(":
            self.i += 1
            node = self.disjunction()
            close = self.peek()
            if close is None or close.kind != ")":
                raise self.fail("expected ')'")
            self.i += 1
            return node
        words: list[_Token] = []
        while (tok := self.peek()) is not None and tok.kind == "atom":
            if tok.text.lower() in _KEYWORDS:
                break
            words.append(tok)
            self.i += 1
        if not words:
            raise self.fail("expected a column name")
        op = self.peek()
        if op is None or op.kind != "op":
            raise self.fail("expected a comparison operator (< <= > >= == !=)")
        self.i += 1
        value = self.peek()
        if value is None or value.kind not in ("atom", "string") or value.text.lower() in _KEYWORDS:
            raise self.fail("expected a value")
        self.i += 1
        unit = None
        nxt = self.peek()
        if (
            value.kind == "atom"
            and _NUMBER.fullmatch(value.text)
            and nxt is not None
            and nxt.kind == "atom"
            and re.fullmatch(r"[A-Za-z]+(/s)?", nxt.text)
            and unit_factor(nxt.text.removesuffix("/s")) is not None
        ):
            unit = nxt
            self.i += 1
        column = "_".join(w.text for w in words)
        return _Cmp(column, words[0].pos, op.text, value, unit)


def _is_text(s: pd.Series) -> bool:
    if pd.api.types.is_string_dtype(s.dtype):
        return True
    if s.dtype == object:
        values = s.dropna()
        return len(values) > 0 and bool(values.map(lambda v: isinstance(v, str)).all())
    return False


class _Evaluator:
    def __init__(self, expr: str, df: pd.DataFrame) -> None:
        self.expr = expr
        self.df = df
        self.columns = [str(c) for c in df.columns]

    def fail(self, tok: _Token, reason: str) -> FilterSyntaxError:
        return FilterSyntaxError(self.expr, tok.text, tok.pos, reason)

    def run(self, node: _Node) -> pd.Series:
        if isinstance(node, _Bool):
            masks = [self.run(p) for p in node.parts]
            out = masks[0]
            for m in masks[1:]:
                out = (out & m) if node.op == "and" else (out | m)
            return out
        return self.compare(node)

    def value(self, cmp: _Cmp, s: pd.Series) -> Any:
        tok = cmp.value
        word = tok.text.lower()
        if tok.kind == "string":
            text = tok.text[1:-1]
            if pd.api.types.is_datetime64_any_dtype(s.dtype):
                try:
                    ts = pd.Timestamp(text)
                except ValueError:
                    raise self.fail(tok, "not an ISO-8601 time") from None
                return ts.tz_localize("UTC") if ts.tzinfo is None else ts
            return text
        if word in ("true", "false"):
            return word == "true"
        text = tok.text + (f" {cmp.unit.text}" if cmp.unit else "")
        if _is_text(s):
            return tok.text if cmp.unit is None else text
        try:
            return parse_quantity(text)
        except ValueError as err:
            raise self.fail(cmp.unit or tok, str(err)) from None

    def compare(self, cmp: _Cmp) -> pd.Series:
        column = normalize(cmp.column)
        if column not in self.columns:
            raise FilterSyntaxError(
                self.expr,
                cmp.column.replace("_", " "),
                cmp.column_pos,
                f"unknown column {column!r} (available: {', '.join(self.columns) or 'none'})",
            )
        s = self.df[column]
        if cmp.value.kind == "atom" and cmp.value.text.lower() == "null":
            if cmp.op not in ("==", "!="):
                raise self.fail(cmp.value, "null only compares with == or !=")
            return s.isna() if cmp.op == "==" else s.notna()
        value = self.value(cmp, s)
        try:
            result = _OPS[cmp.op](s, value)
        except TypeError as err:
            reason = f"cannot compare column {column!r} with it ({err})"
            raise self.fail(cmp.value, reason) from None
        mask = pd.Series(result, index=s.index)
        if mask.dtype != bool:
            mask = mask.fillna(False).astype(bool)
        return mask & s.notna()


def compile_filter(expr: str) -> Callable[[pd.DataFrame], pd.Series]:
    """Parse a filter string once; the result maps a DataFrame to its boolean row mask.

    Seed 004 Algorithm 1 lines 14 and 23 (``filter("bytes written < 1GB")``). The string is
    parsed by a recursive-descent parser into comparisons joined by ``and``/``or``; nothing
    of it is evaluated as Python.

    Args:
        expr: e.g. ``"bytes written > 10GB and (pattern == 'N-1' or nprocs >= 1k)"``; the
            grammar, units and missing-value rule are in the module docstring.

    Returns:
        A function of a DataFrame returning a boolean Series aligned with its index.

    Raises:
        FilterSyntaxError: (a ``ValueError``) at parse time for bad syntax or an unknown unit;
            when the function is applied, for an unknown column or a value that cannot be
            compared with its column. The message names the offending token and its position.
    """
    node = _Parser(expr).parse()
    _check_units(expr, node)

    def mask(df: pd.DataFrame) -> pd.Series:
        return _Evaluator(expr, df).run(node)

    return mask


def _check_units(expr: str, node: _Node) -> None:
    """Reject a malformed number or an unknown unit before any data is seen (``1Gbit``)."""
    if isinstance(node, _Bool):
        for p in node.parts:
            _check_units(expr, p)
        return
    tok = node.value
    if tok.kind != "atom" or node.unit is not None:
        return
    m = _NUMBER.fullmatch(tok.text)
    if m is None and re.match(r"[+-]?(\d|\.\d)", tok.text):
        raise FilterSyntaxError(
            expr, tok.text, tok.pos, "not a number with a known unit (quote text values)"
        )
    if m is not None and m["unit"] and unit_factor(m["unit"]) is None:
        raise FilterSyntaxError(
            expr, tok.text, tok.pos, f"unknown unit {m['unit']!r} (units: {_unit_list()})"
        )


def finite_or_none(value: Any) -> float | None:
    """``float(value)``, or None for None/NaN/infinite values (pandas' missing markers)."""
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None
