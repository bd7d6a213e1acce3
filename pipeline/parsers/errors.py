"""The one error type parsers raise for bad input."""

from __future__ import annotations


class ParseError(ValueError):
    """Bad input: names the file, the place and the reason.

    Attributes:
        path: the input file.
        line_no: 1-based line number (0 when the problem is not tied to a line).
        reason: what is wrong, in words a user can act on.
    """

    def __init__(self, path: str, line_no: int, reason: str) -> None:
        self.path = path
        self.line_no = line_no
        self.reason = reason
        where = f"{path}:{line_no}" if line_no else path
        super().__init__(f"{where}: {reason}")
