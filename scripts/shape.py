"""Print the shape of the code in ``pipeline/`` and fail when it leaves the project's targets.

The numbers ``make lint`` holds the code to:

- no module over 400 lines (physical lines of the file);
- no function or method over 60 lines (``def`` line to last line, docstring included);
- median function length at most 10 lines, 90th percentile at most 30;
- no run of 6 or more identical statement lines repeated inside ``pipeline/`` (lines compared
  with white space folded; blank lines, comments, imports, docstrings and lone punctuation are
  passed over).

Usage: ``python scripts/shape.py [ROOT]`` (default ``pipeline``); exit status 1 when a target is
missed, with each offender named by file and line.
"""

from __future__ import annotations

import ast
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_MEDIAN = 10
MAX_P90 = 30
DUPLICATE_RUN = 6

_PUNCTUATION_ONLY = set("()[]{},:;")


@dataclass(frozen=True)
class Function:
    """One ``def``: where it stands and how many lines it spans."""

    path: Path
    line: int
    name: str
    length: int


def functions(path: Path, tree: ast.AST) -> Iterator[Function]:
    """Every function and method in ``tree``, nested ones included."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            end = node.end_lineno or node.lineno
            yield Function(path, node.lineno, node.name, end - node.lineno + 1)


def percentile(values: list[int], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values`` by the nearest-rank method."""
    ordered = sorted(values)
    rank = max(1, int(-(-q * len(ordered) // 1)))
    return float(ordered[rank - 1])


def docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers covered by docstrings of modules, classes and functions."""
    covered: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            first = body[0] if body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if first and isinstance(value, ast.Constant) and isinstance(value.value, str):
                covered.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return covered


def significant_lines(text: str, tree: ast.AST) -> list[tuple[int, str]]:
    """``(line number, folded text)`` of the lines a duplicate run is made of."""
    skipped = docstring_lines(tree)
    kept: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = " ".join(raw.split())
        if not line or number in skipped or line.startswith("#"):
            continue
        if line.startswith(("import ", "from ")) or set(line) <= _PUNCTUATION_ONLY:
            continue
        kept.append((number, line))
    return kept


def duplicate_runs(sources: dict[Path, tuple[str, ast.AST]]) -> list[tuple[Path, int, Path, int]]:
    """Places where ``DUPLICATE_RUN`` significant lines stand again elsewhere, one row a pair."""
    seen: dict[tuple[str, ...], tuple[Path, int]] = {}
    pairs: dict[tuple[Path, Path], tuple[Path, int, Path, int]] = {}
    for path, (text, tree) in sources.items():
        lines = significant_lines(text, tree)
        for start in range(len(lines) - DUPLICATE_RUN + 1):
            run = tuple(line for _, line in lines[start : start + DUPLICATE_RUN])
            here = (path, lines[start][0])
            first = seen.setdefault(run, here)
            if first is not here and (first[0] != path or abs(first[1] - here[1]) >= DUPLICATE_RUN):
                pairs.setdefault((first[0], path), (first[0], first[1], path, here[1]))
    return sorted(pairs.values())


def main(argv: list[str]) -> int:
    """Print the numbers and the offenders; 0 when every target holds, else 1."""
    root = Path(argv[1]) if len(argv) > 1 else Path("pipeline")
    sources: dict[Path, tuple[str, ast.AST]] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        sources[path] = (text, ast.parse(text, filename=str(path)))
    module_lines = {path: len(text.splitlines()) for path, (text, _) in sources.items()}
    defs = [f for path, (_, tree) in sources.items() for f in functions(path, tree)]
    lengths = [f.length for f in defs]
    median = statistics.median(lengths)
    p90 = percentile(lengths, 0.9)
    big_modules = {p: n for p, n in module_lines.items() if n > MAX_MODULE_LINES}
    long_defs = sorted((f for f in defs if f.length > MAX_FUNCTION_LINES), key=lambda f: -f.length)
    dupes = duplicate_runs(sources)

    print(
        f"{root}: {len(sources)} modules, {sum(module_lines.values())} lines, {len(defs)} functions"
    )
    figures = (
        ("largest module", max(module_lines.values()), MAX_MODULE_LINES),
        ("longest function", max(lengths), MAX_FUNCTION_LINES),
        ("median function", median, MAX_MEDIAN),
        ("p90 function", p90, MAX_P90),
    )
    for label, value, target in figures:
        print(f"  {label:<17} {value:6.1f} lines  (target <= {target})")
    print(f"  repeated runs of {DUPLICATE_RUN}+ lines: {len(dupes)}  (target 0)")
    by_kind: dict[str, list[str]] = defaultdict(list)
    for path, n in sorted(big_modules.items(), key=lambda item: -item[1]):
        by_kind["modules over the limit"].append(f"{path}: {n} lines")
    for f in long_defs:
        by_kind["functions over the limit"].append(f"{f.path}:{f.line} {f.name}: {f.length} lines")
    for a, a_line, b, b_line in dupes:
        by_kind["repeated runs"].append(f"{a}:{a_line} ~ {b}:{b_line}")
    for kind, rows in by_kind.items():
        print(f"{kind}:")
        for row in rows:
            print(f"  {row}")
    failed = bool(big_modules or long_defs or dupes) or median > MAX_MEDIAN or p90 > MAX_P90
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
