"""Tables of the fio-hist benchmark: reference vs iolens per set, and iolens scaling.

Times are whole-process wall seconds, memory is peak RSS in MiB (2^20 bytes), sizes in MB
(10^6 bytes). When the reference was killed at the timeout its figures are lower bounds, shown
as ``> N`` for time and ``>= N`` for the ratios.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proc_measure import Measurement
from rich.console import Console
from rich.table import Table
from synth_hist import DataSet

MIB = 2**20
COMPARISON_HEADERS = (
    "files x span", "rows", "MB", "ref wall s", "ref peak MiB", "iolens wall s",
    "iolens peak MiB", "speed ref/iolens", "memory ref/iolens", "identical",
)  # fmt: skip
SCALING_HEADERS = ("files x span", "rows", "MB", "wall s", "cpu s", "peak MiB", "rows/s", "MB/s")


@dataclass(frozen=True)
class Comparison:
    """Both tools on one set.

    Attributes:
        data: the input set.
        reference: the reference's measurement, None if it was not run.
        iolens: iolens's measurement.
        identical: outputs byte-identical; None if not compared (a run failed or was skipped).
        difference: where the outputs first differ, if they do.
    """

    data: DataSet
    reference: Measurement | None
    iolens: Measurement
    identical: bool | None
    difference: str | None


def _wall(m: Measurement | None) -> str:
    """Wall time cell, or what happened instead."""
    if m is None:
        return "skipped"
    if m.timed_out:
        return f"did not finish in {m.wall_s:,.0f} s"
    return f"{m.wall_s:,.2f}" if m.exit_code == 0 else f"failed (exit {m.exit_code})"


def _mib(m: Measurement | None) -> str:
    """Peak RSS cell (at the kill, if killed)."""
    if m is None:
        return "-"
    return f"{m.max_rss_bytes / MIB:,.0f}" + (" at kill" if m.timed_out else "")


def _ratio(num: float, den: float, lower_bound: bool) -> str:
    """``num / den`` as ``12.3x``, prefixed ``≥`` if it is a lower bound."""
    return ("≥ " if lower_bound else "") + f"{num / den:,.1f}x"


def _identical(c: Comparison) -> str:
    """yes / no / n/a."""
    return {True: "yes", False: "no", None: "n/a"}[c.identical]


def _size_cells(c: Comparison) -> list[str]:
    """Set label, rows and MB."""
    return [c.data.spec.label, f"{c.data.rows:,}", f"{c.data.bytes / 1e6:,.1f}"]


def comparison_row(c: Comparison) -> list[str]:
    """One row of the side-by-side table."""
    ref, io = c.reference, c.iolens
    cells = [*_size_cells(c), _wall(ref), _mib(ref), _wall(io), _mib(io)]
    if ref is None or not io.ok or not (ref.ok or ref.timed_out):
        cells += ["-", "-"]
    else:
        cells += [
            _ratio(ref.wall_s, io.wall_s, ref.timed_out),
            _ratio(ref.max_rss_bytes, io.max_rss_bytes, ref.timed_out),
        ]
    return [*cells, _identical(c)]


def scaling_row(c: Comparison) -> list[str]:
    """One row of the iolens-only table: wall, CPU, peak RSS, rows/s and MB/s."""
    m = c.iolens
    if not m.ok:
        return [*_size_cells(c), _wall(m), "", "", "", ""]
    return [
        *_size_cells(c),
        f"{m.wall_s:,.2f}",
        f"{m.user_s + m.sys_s:,.2f}",
        f"{m.max_rss_bytes / MIB:,.1f}",
        f"{c.data.rows / m.wall_s:,.0f}",
        f"{c.data.bytes / 1e6 / m.wall_s:,.1f}",
    ]


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """A rich table with right-aligned columns."""
    table = Table(title=title)
    for header in headers:
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def print_comparisons(out: Console, rows: Sequence[Comparison], options: str) -> None:
    """The side-by-side table, plus where outputs differ."""
    title = f"fiologparser_hist.py vs iolens fio-hist — options: {options or '(defaults)'}"
    out.print(_table(title, COMPARISON_HEADERS, [comparison_row(c) for c in rows]))
    for c in rows:
        if c.difference:
            out.print(f"{c.data.spec.label}: outputs differ at {c.difference}")


def memory_note(rows: Sequence[Comparison]) -> str | None:
    """iolens peak RSS on the smallest vs the largest set, or None with fewer than two runs."""
    done = [c for c in rows if c.iolens.ok]
    if len(done) < 2:
        return None
    small = min(done, key=lambda c: c.data.rows)
    large = max(done, key=lambda c: c.data.rows)
    return (
        f"iolens peak RSS: {small.iolens.max_rss_bytes / MIB:,.1f} MiB on {small.data.spec.label}"
        f" ({small.data.rows:,} rows) vs {large.iolens.max_rss_bytes / MIB:,.1f} MiB on"
        f" {large.data.spec.label} ({large.data.rows:,} rows,"
        f" {large.data.rows / small.data.rows:,.0f}x as many)"
    )


def print_scaling(out: Console, rows: Sequence[Comparison]) -> None:
    """iolens alone on every set: throughput and peak RSS against input size."""
    title = "iolens fio-hist: throughput and memory vs input size"
    out.print(_table(title, SCALING_HEADERS, [scaling_row(c) for c in rows]))
    note = memory_note(rows)
    if note:
        out.print(note)


def _md(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def markdown_tables(rows: Sequence[Comparison], options: str, source: str) -> str:
    """Both tables (and the memory note) as markdown, for bench/README.md."""
    compared = [c for c in rows if c.reference is not None]
    return (
        f"Options: {options or '(defaults)'}; iolens source: {source}\n\n"
        + _md(COMPARISON_HEADERS, [comparison_row(c) for c in compared])
        + "\n"
        + _md(SCALING_HEADERS, [scaling_row(c) for c in rows])
        + (f"\n{memory_note(rows)}\n" if memory_note(rows) else "")
    )
