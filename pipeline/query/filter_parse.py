"""IOMiner's filter strings parsed into a tree of comparisons joined by ``and``/``or``, without
evaluating user text (seed 004, section II-A, Algorithm 1 lines 14 and 23).

The grammar is in :mod:`pipeline.query.expr`, which evaluates the tree against a DataFrame. A
tokenizer splits the string into words, quoted strings, operators and parentheses; a
recursive-descent :class:`Parser` builds :class:`Cmp` and :class:`Bool` nodes, and
:func:`check_units` rejects a malformed number or an unknown unit before any data is seen.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.query.quantity import NUMBER, _unit_list, unit_factor


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
class Token:
    """A piece of the filter string: its kind, text and character offset."""

    kind: str  # "atom", "string", "op", "(", ")"
    text: str
    pos: int


_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<string>'[^']*'|\"[^\"]*\")|(?P<op><=|>=|==|!=|<|>)"
    r"|(?P<paren>[()])|(?P<atom>[^\s()<>=!'\"]+)"
)
_KEYWORDS = frozenset({"and", "or"})


def _tokenize(expr: str) -> list[Token]:
    tokens: list[Token] = []
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
            tokens.append(Token(m.group(), m.group(), pos))
        elif kind != "ws":
            tokens.append(Token(kind, m.group(), pos))
        pos = m.end()
    return tokens


@dataclass(frozen=True)
class Cmp:
    """``column op value [unit]``; ``column_pos`` is where the column's first word starts."""

    column: str
    column_pos: int
    op: str
    value: Token
    unit: Token | None


@dataclass(frozen=True)
class Bool:
    """Comparisons (or nested groups) joined by one of ``and`` / ``or``."""

    op: str  # "and" / "or"
    parts: tuple[Node, ...]


Node = Cmp | Bool


class Parser:
    """The recursive-descent parser of one filter string (grammar: :mod:`pipeline.query.expr`).

    Raises:
        FilterSyntaxError: from the constructor (a bad character or an unterminated string)
            and from :meth:`parse`.
    """

    def __init__(self, expr: str) -> None:
        self.expr = expr
        self.tokens = _tokenize(expr)
        self.i = 0

    def fail(self, reason: str) -> FilterSyntaxError:
        """The error at the current token (or at the end)."""
        if self.i < len(self.tokens):
            tok = self.tokens[self.i]
            return FilterSyntaxError(self.expr, tok.text, tok.pos, reason)
        return FilterSyntaxError(self.expr, "", len(self.expr), reason)

    def peek(self) -> Token | None:
        """The current token; None at the end."""
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def keyword(self, word: str) -> bool:
        """Take the keyword ``word`` if it is next; whether it was."""
        tok = self.peek()
        if tok is not None and tok.kind == "atom" and tok.text.lower() == word:
            self.i += 1
            return True
        return False

    def parse(self) -> Node:
        """The whole string as one tree."""
        if not self.tokens:
            raise self.fail("empty filter")
        node = self.disjunction()
        if self.peek() is not None:
            raise self.fail("expected 'and', 'or' or the end")
        return node

    def disjunction(self) -> Node:
        """``conjunction ("or" conjunction)*``."""
        parts = [self.conjunction()]
        while self.keyword("or"):
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else Bool("or", tuple(parts))

    def conjunction(self) -> Node:
        """``comparison ("and" comparison)*``."""
        parts = [self.comparison()]
        while self.keyword("and"):
            parts.append(self.comparison())
        return parts[0] if len(parts) == 1 else Bool("and", tuple(parts))

    def comparison(self) -> Node:
        """``"(" expr ")"`` or ``column op value``."""
        tok = self.peek()
        if tok is not None and tok.kind == "(":
            return self.group()
        words: list[Token] = []
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
        column = "_".join(w.text for w in words)
        return Cmp(column, words[0].pos, op.text, value, self.unit(value))

    def group(self) -> Node:
        """A parenthesised expression, the ``(`` being next."""
        self.i += 1
        node = self.disjunction()
        close = self.peek()
        if close is None or close.kind != ")":
            raise self.fail("expected ')'")
        self.i += 1
        return node

    def unit(self, value: Token) -> Token | None:
        """The unit word after the number ``value`` (``10 GB``), taken when there is one."""
        nxt = self.peek()
        if (
            value.kind == "atom"
            and NUMBER.fullmatch(value.text)
            and nxt is not None
            and nxt.kind == "atom"
            and re.fullmatch(r"[A-Za-z]+(/s)?", nxt.text)
            and unit_factor(nxt.text.removesuffix("/s")) is not None
        ):
            self.i += 1
            return nxt
        return None


def check_units(expr: str, node: Node) -> None:
    """Reject a malformed number or an unknown unit before any data is seen (``1Gbit``)."""
    if isinstance(node, Bool):
        for p in node.parts:
            check_units(expr, p)
        return
    tok = node.value
    if tok.kind != "atom" or node.unit is not None:
        return
    m = NUMBER.fullmatch(tok.text)
    if m is None and re.match(r"[+-]?(\d|\.\d)", tok.text):
        raise FilterSyntaxError(
            expr, tok.text, tok.pos, "not a number with a known unit (quote text values)"
        )
    if m is not None and m["unit"] and unit_factor(m["unit"]) is None:
        raise FilterSyntaxError(
            expr, tok.text, tok.pos, f"unknown unit {m['unit']!r} (units: {_unit_list()})"
        )
