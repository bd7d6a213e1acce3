"""Column names, quantities with size units, and IOMiner's filter strings.

Seed 004, section II-A (Algorithm 1, lines 14 and 23): users name columns as they read,
``"bytes written"``, and write conditions as text, ``"bytes written < 1GB"``. This module turns
both into something pandas can use, without evaluating user text:

* :func:`normalize` maps a column name to its stored spelling (``"Bytes Written"`` ->
  ``"bytes_written"``): lower case, runs of spaces and dashes become one ``_``
  (:mod:`pipeline.query.quantity`).
* :func:`parse_quantity` reads ``"1GB"``, ``"1.5 GiB"``, ``"0"``, ``"2G"``, ``"1GB/s"``
  (:mod:`pipeline.query.quantity`).
* :func:`compile_filter` parses a condition (:mod:`pipeline.query.filter_parse`) into a
  function from a DataFrame to a boolean mask, evaluated here.

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

import operator
from collections.abc import Callable
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

from pipeline.query.filter_parse import (
    Bool,
    Cmp,
    FilterSyntaxError,
    Node,
    Parser,
    Token,
    check_units,
)
from pipeline.query.quantity import (
    normalize,
    parse_quantity,
)

__all__ = [
    "compile_filter",
]

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}


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

    def fail(self, tok: Token, reason: str) -> FilterSyntaxError:
        return FilterSyntaxError(self.expr, tok.text, tok.pos, reason)

    def run(self, node: Node) -> pd.Series:
        if isinstance(node, Bool):
            masks = [self.run(p) for p in node.parts]
            out = masks[0]
            for m in masks[1:]:
                out = (out & m) if node.op == "and" else (out | m)
            return out
        return self.compare(node)

    def value(self, cmp: Cmp, s: pd.Series) -> Any:
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

    def compare(self, cmp: Cmp) -> pd.Series:
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
    node = Parser(expr).parse()
    check_units(expr, node)

    def mask(df: pd.DataFrame) -> pd.Series:
        return _Evaluator(expr, df).run(node)

    return mask
