"""Benchmark ``iolens fio-hist`` against fio's ``fiologparser_hist.py`` on the same inputs.

For each input set (the real fio 3.33 logs and synthetic sets made from them, see
:mod:`synth_hist`), both tools run as separate processes with the same files and options; the
table shows whole-process wall time and peak RSS of each, the ratios, and whether the two
outputs are byte-identical. Then ``iolens fio-hist`` alone runs on a large set (64 files x
600 s by default) to show throughput and that its memory does not grow with the input.

Usage::

    .venv/bin/python bench/fio_hist.py                 # default ladder + 64 x 600 s
    .venv/bin/python bench/fio_hist.py --quick         # real logs and 8 x 30 s only
    .venv/bin/python bench/fio_hist.py --sizes real,8x60 --options "-i 100 --directions rwm"

Inputs and outputs go to ``bench/out/`` (git-ignored); generated sets are reused.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import importlib.util
import itertools
import json
import shlex
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from proc_measure import Measurement, measure
from report import Comparison, markdown_tables, print_comparisons, print_scaling
from rich.console import Console
from synth_hist import REAL_SET, DataSet, SetSpec, ensure_set

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out"
REFERENCE_GZ = Path("/usr/share/doc/fio/fiologparser_hist.py.gz")
REFERENCE = OUT_DIR / "fiologparser_hist.py"
DEFAULT_SIZES = "real,8x30,8x60,16x60,16x120,32x300"
QUICK_SIZES = "real,8x30"
BYTES_PER_ROW = 5_610  # measured size of a 1,859-field synthetic line, for the disk check

console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)


@dataclass(frozen=True)
class Tool:
    """A command that takes ``[options] FILE...`` and prints fiologparser_hist.py's report."""

    name: str
    argv_prefix: tuple[str, ...]

    def argv(self, options: Sequence[str], paths: Sequence[Path]) -> list[str]:
        """Full command line for ``paths`` with ``options``."""
        return [*self.argv_prefix, *options, *map(str, paths)]


def parse_size(text: str, seed: int) -> SetSpec:
    """``real`` or ``<files>x<seconds>`` (e.g. ``16x60``) as a set spec.

    Raises:
        argparse.ArgumentTypeError: anything else.
    """
    if text == "real":
        return REAL_SET
    files, sep, seconds = text.partition("x")
    if not (sep and files.isdigit() and seconds.isdigit() and int(files) and int(seconds)):
        raise argparse.ArgumentTypeError(f"size {text!r}: expected 'real' or FILESxSECONDS")
    return SetSpec(files=int(files), seconds=int(seconds), seed=seed)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", help=f"comma-separated ladder (default {DEFAULT_SIZES})")
    p.add_argument("--quick", action="store_true", help=f"ladder {QUICK_SIZES}, no big run")
    p.add_argument("--big", default="64x600", help="set for the iolens-only run (default 64x600)")
    p.add_argument("--no-big", action="store_true", help="skip the iolens-only run")
    p.add_argument(
        "--options", default="", help='options for both tools, e.g. "-i 100 --directions rwm"'
    )
    p.add_argument(
        "--timeout", type=float, default=600.0, help="reference timeout, s (default 600)"
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per tool and set; medians reported")
    p.add_argument("--seed", type=int, default=1, help="seed of the synthetic sets (default 1)")
    p.add_argument(
        "--results", type=Path, default=OUT_DIR / "results.json", help="JSON results file"
    )
    args = p.parse_args(argv)
    sizes = QUICK_SIZES if args.quick and not args.sizes else args.sizes or DEFAULT_SIZES
    try:
        args.specs = sorted(
            {parse_size(s.strip(), args.seed) for s in sizes.split(",")},
            key=lambda s: (s.files * s.seconds, s.files),
        )
        args.big_spec = None if args.no_big or args.quick else parse_size(args.big, args.seed)
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    if args.repeat < 1:
        p.error("--repeat must be >= 1")
    return args


def ensure_reference() -> Path:
    """Unpack fio's ``fiologparser_hist.py`` into ``bench/out``; check that pandas is there.

    Raises:
        SystemExit: the Debian ``fio`` package or pandas is missing (with the fix).
    """
    if importlib.util.find_spec("pandas") is None:
        raise SystemExit("fiologparser_hist.py needs pandas: .venv/bin/pip install pandas")
    if not REFERENCE.is_file():
        if not REFERENCE_GZ.is_file():
            raise SystemExit(f"{REFERENCE_GZ} not found: apt-get install -y fio")
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_bytes(gzip.decompress(REFERENCE_GZ.read_bytes()))
    return REFERENCE


def iolens_command() -> tuple[str, ...]:
    """The ``iolens`` console script next to this interpreter.

    Raises:
        SystemExit: it is not installed in this environment.
    """
    script = Path(sys.executable).parent / "iolens"
    if not script.is_file():
        raise SystemExit(f"{script} not found: run with the project's .venv/bin/python")
    return (str(script), "fio-hist")


def prepare(spec: SetSpec) -> DataSet:
    """Generate (or reuse) ``spec``'s files, showing progress."""
    with console.status(f"[bold]{spec.name}[/]: generating {spec.files} files") as status:
        data = ensure_set(
            spec, OUT_DIR, on_file=lambda d, n: status.update(f"{spec.name}: {d}/{n} files written")
        )
    console.log(
        f"{spec.name}: {data.rows:,} rows, {data.bytes / 1e6:,.1f} MB in {data.paths[0].parent}"
    )
    return data


def run_tool(
    tool: Tool, data: DataSet, options: Sequence[str], timeout_s: float | None, repeat: int
) -> Measurement:
    """Run ``tool`` on ``data`` ``repeat`` times (stops at a failure); medians of wall and RSS."""
    runs: list[Measurement] = []
    run_dir = OUT_DIR / "runs" / data.spec.name
    for i in range(repeat):
        with console.status(f"{data.spec.name}: {tool.name} run {i + 1}/{repeat}"):
            m = measure(
                tool.argv(options, data.paths),
                run_dir / f"{tool.name}.out",
                run_dir / f"{tool.name}.err",
                timeout_s=timeout_s,
            )
        runs.append(m)
        console.log(f"{data.spec.name}: {tool.name} {describe(m)}")
        if not m.ok:
            return m
    return dataclasses.replace(
        runs[-1],
        wall_s=statistics.median(m.wall_s for m in runs),
        max_rss_bytes=int(statistics.median(m.max_rss_bytes for m in runs)),
        user_s=statistics.median(m.user_s for m in runs),
        sys_s=statistics.median(m.sys_s for m in runs),
    )


def describe(m: Measurement) -> str:
    """One-line summary of a run for the log."""
    state = "did not finish" if m.timed_out else f"exit {m.exit_code}"
    return f"{state}, {m.wall_s:.2f} s wall, {m.max_rss_bytes / 2**20:,.1f} MiB peak RSS"


def first_difference(a: Path, b: Path) -> str | None:
    """None if the files are byte-identical, else where they first differ (1-based line)."""
    with open(a, "rb") as fa, open(b, "rb") as fb:
        for line_no, (la, lb) in enumerate(itertools.zip_longest(fa, fb), start=1):
            if la != lb:
                return f"line {line_no}: {la and la[:80]!r} vs {lb and lb[:80]!r}"
    return None


def compare(data: DataSet, ref: Tool | None, iolens: Tool, args: argparse.Namespace) -> Comparison:
    """Run both tools on ``data`` (the reference only if ``ref`` is given) and compare outputs."""
    options = shlex.split(args.options)
    rm = run_tool(ref, data, options, args.timeout, args.repeat) if ref else None
    im = run_tool(iolens, data, options, None, args.repeat)
    if rm is None or not rm.ok or not im.ok:
        return Comparison(data, rm, im, None, None)
    diff = first_difference(rm.stdout, im.stdout)
    if diff:
        console.log(f"[red]{data.spec.name}: outputs differ[/]: {diff}")
    return Comparison(data, rm, im, diff is None, diff)


def run_ladder(args: argparse.Namespace, ref: Tool, iolens: Tool) -> list[Comparison]:
    """Both tools on every ladder set; after the reference misses the timeout, larger sets
    (more rows) run iolens only."""
    results: list[Comparison] = []
    reference: Tool | None = ref
    for spec in args.specs:
        result = compare(prepare(spec), reference, iolens, args)
        results.append(result)
        if result.reference is not None and result.reference.timed_out:
            reference = None
    return results


def disk_allows(spec: SetSpec) -> bool:
    """True if ``bench/out`` has room for ``spec`` (or it is already there); logs why not."""
    need = spec.files * spec.seconds * 20 * BYTES_PER_ROW
    present = OUT_DIR / spec.name
    have = sum(p.stat().st_size for p in present.glob("*.log")) if present.is_dir() else 0
    free = shutil.disk_usage(OUT_DIR).free
    if need - have > free:
        console.log(
            f"[red]{spec.name} needs ~{need / 1e9:.1f} GB, only {free / 1e9:.1f} GB free in"
            f" {OUT_DIR}[/]: skipped; choose a smaller --big"
        )
        return False
    return True


def source_state(repo: Path = REPO_DIR) -> str:
    """The iolens source being measured: short commit, and whether ``pipeline/`` has
    uncommitted changes (the tree may be edited while the benchmark runs)."""

    def git(*argv: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *argv], capture_output=True, text=True)
        return done.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = git("status", "--porcelain", "--", "pipeline")
    return commit + (" + uncommitted changes in pipeline/" if dirty else "")


def write_results(args: argparse.Namespace, rows: Sequence[Comparison], source: str) -> None:
    """``results.json`` and ``results.md`` (same stem) for ``rows``."""
    args.results.parent.mkdir(parents=True, exist_ok=True)
    doc = {"options": args.options, "iolens_source": source, "sets": [to_json(c) for c in rows]}
    args.results.write_text(json.dumps(doc, indent=1) + "\n")
    markdown = args.results.with_suffix(".md")
    markdown.write_text(markdown_tables(rows, args.options, source))
    console.log(f"results: {args.results}, {markdown}; outputs: {OUT_DIR / 'runs'}")


def to_json(c: Comparison) -> dict[str, object]:
    """A comparison as plain data for the results file."""

    def run(m: Measurement | None) -> dict[str, object] | None:
        return (
            None
            if m is None
            else {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(m).items()}
        )

    return {
        "set": c.data.spec.name,
        "files": c.data.spec.files,
        "seconds": c.data.spec.seconds,
        "rows": c.data.rows,
        "bytes": c.data.bytes,
        "reference": run(c.reference),
        "iolens": run(c.iolens),
        "identical": c.identical,
        "difference": c.difference,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns 0, or 1 if iolens failed or an output differed."""
    args = parse_args(argv)
    ref = Tool("reference", (sys.executable, str(ensure_reference())))
    iolens = Tool("iolens", iolens_command())
    source = source_state()
    console.log(
        f"iolens source: {source}; options: {args.options or '(defaults)'};"
        f" reference timeout {args.timeout:g} s"
    )
    ladder = run_ladder(args, ref, iolens)
    out = Console(width=None if sys.stdout.isatty() else 150)
    print_comparisons(out, ladder, args.options)
    big: list[Comparison] = []
    if args.big_spec is not None and disk_allows(args.big_spec):
        big = [compare(prepare(args.big_spec), None, iolens, args)]
    print_scaling(out, [*ladder, *big])
    end_source = source_state()
    if end_source != source:
        console.log(f"[red]iolens source changed during the run[/]: {source} -> {end_source}")
        source = f"{source}, then {end_source}"
    write_results(args, [*ladder, *big], source)
    failed = any(not c.iolens.ok or c.identical is False for c in [*ladder, *big])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
