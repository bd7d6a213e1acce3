"""Darshan log ingestion: iolens beside pydarshan's raw read and Drishti, in one run.

Compared on the same logs:

1. **pydarshan raw read** (the baseline; the "needed" mode of reference/darshan-iominer.md 3):
   per log ``darshan.DarshanReport(path, read_all=False)``, then
   ``mod_read_all_records(m, dtype="numpy")`` for each of POSIX, MPI-IO and STDIO present and
   ``mod_read_all_lustre_records(dtype="numpy")`` if LUSTRE is present. Its record count
   (those four modules) is the "records" of every rate below.
2. **iolens ingestion, one core**: per log ``analyze_path`` (read + IOMiner analysis), then
   ``log_documents`` (the job and file documents, and the diagnosis document of a
   low-bandwidth job, exactly as the shipper makes them) and ``ndjson`` (the bulk body the
   sink sends): everything but the network. Then the same with
   ``DarshanPool(workers=os.cpu_count())`` (submit every log, collect every result, documents
   in the calling process).
3. **Drishti** (``drishti LOG``, default options, reference/darshan-iominer.md 6) against
   ``iolens darshan diagnose LOG``: one whole process per log, as users run them, the two
   interleaved log by log; then ``iolens darshan diagnose LOG1 ... LOGn`` once. A failing
   Drishti run is counted (and its last error line kept), not fatal.

Modes 1 and 2 (and iolens's reader alone, ``read_darshan``, to show what reading costs it)
each run in a child process of their own: the import is timed apart, a first pass warms up
(and starts the pool), then the whole set is read again and again: ``--repeat`` passes in all,
or by default until ~10 s per mode (~2 s with ``--quick``). The modes take turns over
``--rounds`` children each (default 3), so that load from elsewhere on the machine falls on all
of them; rates use the median pass. Whole-process figures (wall, CPU, peak RSS from
``os.wait4``) come from :mod:`proc_measure`.

Inputs: the logs bundled in the darshan wheel (``site-packages/darshan``) and every
``*.darshan`` under ``/work/shared/data/darshan-logs/``, deduplicated by MD5.

Usage::

    .venv/bin/python bench/darshan_ingest.py             # all logs, ~10 s per in-process mode
    .venv/bin/python bench/darshan_ingest.py --quick     # bundled logs only, ~2 s per mode
    .venv/bin/python bench/darshan_ingest.py --repeat 50 --logs-dir DIR
    .venv/bin/python bench/darshan_ingest.py --profile   # cProfile of analyze_path, no runs

Everything it writes goes to ``bench/out/darshan/`` (git-ignored): each run's output in
``runs/``, ``results.json`` and ``results.md``.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import importlib.metadata
import importlib.util
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fio_hist import source_state
from proc_measure import Measurement, measure
from report import _md, _table
from rich.console import Console

BENCH_DIR = Path(__file__).resolve().parent
OUT_DIR = BENCH_DIR / "out" / "darshan"
BIN_DIR = Path(sys.executable).parent
LOGS_DIR = Path("/work/shared/data/darshan-logs")
NEEDED = ("POSIX", "MPI-IO", "STDIO")
MODES = ("pydarshan", "reader", "iolens", "pool")
MIB = 2**20
TARGET_S, QUICK_TARGET_S = 10.0, 2.0
OUTLIERS = 5
SMALL_RECORDS = 1_000  # --profile: logs under this many records are "small"

console = Console(stderr=True, width=None if sys.stderr.isatty() else 120)


@dataclass(frozen=True)
class Log:
    """One distinct input log: its path, a short name and where it came from."""

    path: str
    name: str
    source: str


def bundled_dir() -> Path:
    """The darshan wheel's package directory (found without importing it)."""
    spec = importlib.util.find_spec("darshan")
    if spec is None or spec.origin is None:
        raise SystemExit("darshan is not installed: run with the project's .venv/bin/python")
    return Path(spec.origin).parent


def find_logs(dirs: Sequence[tuple[str, Path]]) -> list[Log]:
    """Every ``*.darshan`` under ``dirs`` (label, directory), the first of each MD5 kept."""
    seen: set[str] = set()
    logs: list[Log] = []
    for source, root in dirs:
        for path in sorted(root.rglob("*.darshan")):
            digest = hashlib.md5(path.read_bytes()).hexdigest()
            if digest not in seen:
                seen.add(digest)
                logs.append(Log(str(path), path.name, source))
    return logs


# -- in-process passes (run in a child process: --worker MODE) --------------------------------


@dataclass
class Pass:
    """What one pass over the logs measured.

    Attributes:
        log_s: seconds per log path (empty for the pool, whose logs overlap).
        stage_s: seconds per stage, summed over the logs.
        records: records read per log path (pydarshan only).
        docs: documents built; ndjson_bytes: their bulk body size.
    """

    log_s: dict[str, float] = field(default_factory=dict)
    stage_s: Counter[str] = field(default_factory=Counter)
    records: dict[str, int] = field(default_factory=dict)
    docs: int = 0
    ndjson_bytes: int = 0


PassFn = Callable[[], Pass]


def read_needed(darshan: Any, path: str) -> int:
    """pydarshan's "needed" read of one log; returns the records read."""
    with darshan.DarshanReport(path, read_all=False) as report:
        records = 0
        for mod in NEEDED:
            if mod in report.modules:
                report.mod_read_all_records(mod, dtype="numpy")
                records += len(report.records[mod])
        if "LUSTRE" in report.modules:
            report.mod_read_all_lustre_records(dtype="numpy")
            records += len(report.records["LUSTRE"])
    return records


@contextmanager
def pydarshan_mode(paths: Sequence[str]) -> Iterator[PassFn]:
    """Passes of the raw read, one log after another."""
    import darshan

    def one_pass() -> Pass:
        p = Pass()
        for path in paths:
            start = time.perf_counter()
            p.records[path] = read_needed(darshan, path)
            p.log_s[path] = time.perf_counter() - start
        p.stage_s["read"] = sum(p.log_s.values())
        return p

    yield one_pass


@contextmanager
def reader_mode(paths: Sequence[str]) -> Iterator[PassFn]:
    """Passes of iolens's reader alone (``read_darshan``: the same darshan-util calls but the
    mount table's, the records gathered into arrays), one log after another."""
    import darshan  # noqa: F401  (imported here so that its cost counts as import)

    from pipeline.formats.darshan.read import read_darshan

    def one_pass() -> Pass:
        p = Pass()
        for path in paths:
            start = time.perf_counter()
            read_darshan(path)
            p.log_s[path] = time.perf_counter() - start
        p.stage_s["read_darshan"] = sum(p.log_s.values())
        return p

    yield one_pass


def documents_ndjson() -> Callable[[Any, Pass], None]:
    """A function that turns an analysis into its documents as the shipper does
    (:func:`pipeline.formats.darshan.chain.log_documents`: job, files, and the diagnosis of a
    low-bandwidth job) and into the bulk NDJSON body the sink sends
    (:func:`pipeline.sink.bulk.ndjson`), and adds its times and counts to a :class:`Pass`."""
    from pipeline.formats.darshan.chain import log_documents
    from pipeline.reducers.io_diagnosis import Thresholds
    from pipeline.sink.actions import ndjson
    from pipeline.sink.documents import DocContext

    ctx = DocContext()
    thresholds = Thresholds()

    def build(a: Any, p: Pass) -> None:
        start = time.perf_counter()
        docs, _ = log_documents(a, ctx, (), time.time() * 1000, thresholds)
        built = time.perf_counter()
        body = ndjson(docs)
        p.stage_s["diagnose + documents"] += built - start
        p.stage_s["NDJSON"] += time.perf_counter() - built
        p.docs += len(docs)
        p.ndjson_bytes += len(body)

    return build


@contextmanager
def iolens_mode(paths: Sequence[str]) -> Iterator[PassFn]:
    """Passes of the full ingestion on one core, one log after another."""
    import darshan  # noqa: F401  (imported here so that its cost counts as import)

    from pipeline.formats.darshan.pool import analyze_path

    documents = documents_ndjson()

    def one_pass() -> Pass:
        p = Pass()
        for path in paths:
            start = time.perf_counter()
            a = analyze_path(path)
            p.stage_s["analyze_path"] += time.perf_counter() - start
            documents(a, p)
            p.log_s[path] = time.perf_counter() - start
        return p

    yield one_pass


@contextmanager
def pool_mode(paths: Sequence[str]) -> Iterator[PassFn]:
    """Passes through ``DarshanPool(os.cpu_count())``: submit all, then collect all."""
    from pipeline.formats.darshan.pool import DarshanPool

    pool = DarshanPool(workers=os.cpu_count() or 1)
    documents = documents_ndjson()

    def one_pass() -> Pass:
        p = Pass()
        for path in paths:
            pool.submit(path)
        for path in paths:
            start = time.perf_counter()
            a = pool.result(path)
            p.stage_s["waiting for workers"] += time.perf_counter() - start
            documents(a, p)
        return p

    try:
        yield one_pass
    finally:
        pool.close()


def run_passes(one_pass: PassFn, repeat: int, target_s: float) -> dict[str, Any]:
    """A warm-up pass, then ``repeat`` timed passes (0: passes until ``target_s`` seconds).

    Returns:
        ``warmup_s``, ``passes_s`` (one per timed pass), ``log_s`` (per log, one per pass),
        ``stage_total_s`` (over all passes), ``records`` (per log), ``docs`` and
        ``ndjson_bytes`` (per pass).
    """
    start = time.perf_counter()
    one_pass()
    warmup_s = time.perf_counter() - start
    passes_s: list[float] = []
    log_s: dict[str, list[float]] = {}
    stage_s: Counter[str] = Counter()
    last = Pass()
    while len(passes_s) < repeat or (not repeat and sum(passes_s) < target_s):
        start = time.perf_counter()
        last = one_pass()
        passes_s.append(time.perf_counter() - start)
        for path, s in last.log_s.items():
            log_s.setdefault(path, []).append(s)
        stage_s.update(last.stage_s)
    return {
        "warmup_s": warmup_s,
        "passes_s": passes_s,
        "log_s": log_s,
        "stage_total_s": dict(stage_s),
        "records": last.records,
        "docs": last.docs,
        "ndjson_bytes": last.ndjson_bytes,
    }


def worker(args: argparse.Namespace) -> int:
    """Child process: one mode's passes over the logs listed in ``--logs``, to ``--result``."""
    paths = json.loads(Path(args.logs).read_text())
    mode = {
        "pydarshan": pydarshan_mode,
        "reader": reader_mode,
        "iolens": iolens_mode,
        "pool": pool_mode,
    }[args.worker]
    start = time.perf_counter()
    with mode(paths) as one_pass:
        import_s = time.perf_counter() - start
        result = run_passes(one_pass, args.repeat, args.target_s)
    result["import_s"] = import_s
    result["workers"] = (os.cpu_count() or 1) if args.worker == "pool" else 1
    Path(args.result).write_text(json.dumps(result))
    return 0


# -- whole processes ----------------------------------------------------------------------


@dataclass(frozen=True)
class InProcess:
    """One in-process mode over all its rounds: each child's figures and its whole-process
    measurement."""

    mode: str
    results: tuple[dict[str, Any], ...]
    processes: tuple[Measurement, ...]

    @property
    def passes_s(self) -> list[float]:
        """Seconds of every timed pass, all rounds."""
        return [s for r in self.results for s in r["passes_s"]]

    @property
    def pass_s(self) -> float:
        """Median seconds per pass over the whole set."""
        return statistics.median(self.passes_s)

    def median(self, key: str) -> float:
        """Median over the rounds of a per-child figure (``import_s``, ``warmup_s``)."""
        return statistics.median(r[key] for r in self.results)

    def log_s(self) -> dict[str, float]:
        """Median seconds per log over every pass (empty for the pool)."""
        per: dict[str, list[float]] = {}
        for r in self.results:
            for path, v in r["log_s"].items():
                per.setdefault(path, []).extend(v)
        return {path: statistics.median(v) for path, v in per.items()}

    def stage_s(self) -> dict[str, float]:
        """Mean seconds per pass of each stage."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r["stage_total_s"])
        return {k: v / len(self.passes_s) for k, v in total.items()}

    @property
    def first(self) -> dict[str, Any]:
        """The first round's result (records, documents, workers: the same in every round)."""
        return self.results[0]


def run_child(mode: str, logs_file: Path, repeat: int, target_s: float) -> tuple[Any, Measurement]:
    """One round of one in-process mode in a child process: its result and measurement.

    Raises:
        SystemExit: the child failed (its stderr file is named).
    """
    run_dir = logs_file.parent
    result_file = run_dir / f"{mode}.json"
    argv = [sys.executable, __file__, "--worker", mode, "--logs", str(logs_file)]
    argv += ["--repeat", str(repeat), "--target-s", str(target_s), "--result", str(result_file)]
    m = measure(argv, run_dir / f"{mode}.out", run_dir / f"{mode}.err")
    if not m.ok:
        raise SystemExit(f"{mode} run failed (exit {m.exit_code}): see {m.stderr}")
    return json.loads(result_file.read_text()), m


def run_modes(logs: Sequence[Log], rounds: int, repeat: int, target_s: float) -> list[InProcess]:
    """Every in-process mode, ``rounds`` times in turn (so that load from elsewhere on the
    machine falls on all of them); each round runs ``repeat / rounds`` passes (rounded up) or
    ``target_s / rounds`` seconds of passes."""
    run_dir = OUT_DIR / "runs"
    run_dir.mkdir(parents=True, exist_ok=True)
    logs_file = run_dir / "logs.json"
    logs_file.write_text(json.dumps([log.path for log in logs]))
    done: dict[str, list[tuple[Any, Measurement]]] = {mode: [] for mode in MODES}
    for i in range(rounds):
        for mode in MODES:
            with console.status(f"round {i + 1}/{rounds}: {mode} passes over {len(logs)} logs"):
                result, m = run_child(mode, logs_file, -(-repeat // rounds), target_s / rounds)
            done[mode].append((result, m))
            console.log(
                f"round {i + 1}/{rounds}: {mode} import {result['import_s']:.2f} s, warm-up"
                f" {result['warmup_s']:.2f} s, {len(result['passes_s'])} passes, median"
                f" {statistics.median(result['passes_s']):.3f} s"
            )
    return [
        InProcess(mode, tuple(r for r, _ in runs), tuple(m for _, m in runs))
        for mode, runs in done.items()
    ]


@dataclass(frozen=True)
class PerLog:
    """Drishti and iolens as whole processes on one log."""

    log: Log
    drishti: Measurement
    iolens: Measurement


def last_line(path: Path) -> str:
    """The last non-empty line of a text file ('' if none)."""
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def run_per_log(logs: Sequence[Log], timeout_s: float) -> list[PerLog]:
    """``drishti LOG`` and ``iolens darshan diagnose LOG`` for each log, interleaved (the one
    that goes first alternates from log to log). Drishti runs in its output directory."""
    out_dirs = {tool: OUT_DIR / "runs" / tool for tool in ("drishti", "iolens")}
    out_dirs["drishti"].mkdir(parents=True, exist_ok=True)
    rows: list[PerLog] = []
    with console.status("whole processes") as status:
        for i, log in enumerate(logs, start=1):
            status.update(f"whole processes: {i}/{len(logs)} {log.name}")
            argvs = {
                "drishti": [str(BIN_DIR / "drishti"), log.path],
                "iolens": [str(BIN_DIR / "iolens"), "darshan", "diagnose", log.path],
            }
            done: dict[str, Measurement] = {}
            for tool in ("drishti", "iolens") if i % 2 else ("iolens", "drishti"):
                stem = out_dirs[tool] / f"{i:03d}-{log.name}"
                done[tool] = measure(
                    argvs[tool],
                    stem.with_name(stem.name + ".out"),
                    stem.with_name(stem.name + ".err"),
                    timeout_s=timeout_s,
                    cwd=out_dirs["drishti"] if tool == "drishti" else None,
                )
            d, io_ = done["drishti"], done["iolens"]
            if not d.ok:
                console.log(f"drishti failed on {log.name}: {last_line(d.stderr)}")
            if not io_.ok:
                console.log(f"[red]iolens failed on {log.name}[/]: {last_line(io_.stderr)}")
            rows.append(PerLog(log, d, io_))
    return rows


def run_all_at_once(logs: Sequence[Log]) -> Measurement:
    """``iolens darshan diagnose LOG1 ... LOGn``, one process."""
    run_dir = OUT_DIR / "runs"
    with console.status(f"iolens darshan diagnose on {len(logs)} logs at once"):
        return measure(
            [str(BIN_DIR / "iolens"), "darshan", "diagnose", *(log.path for log in logs)],
            run_dir / "iolens-all.out",
            run_dir / "iolens-all.err",
        )


# -- tables ------------------------------------------------------------------------------


RATE_HEADERS = (
    "mode", "cores", "passes", "median pass s", "logs/s", "records/s", "iolens/pydarshan",
    "per core", "import s", "warm-up s", "CPU s", "peak MiB",
)  # fmt: skip
STAGE_HEADERS = ("mode", "stage", "s per pass", "share", "documents", "NDJSON MB")
PROCESS_HEADERS = (
    "command", "logs", "failed", "median wall s", "mean wall s", "total wall s",
    "median CPU s", "median peak MiB", "Drishti/iolens",
)  # fmt: skip
OUTLIER_HEADERS = ("tool", "#", "log", "records", "time")
LABELS = {
    "pydarshan": "pydarshan raw read",
    "reader": "iolens reader alone (read_darshan)",
    "iolens": "iolens ingestion, 1 core",
    "pool": "iolens ingestion, DarshanPool",
}


def rate_rows(runs: Sequence[InProcess], n_logs: int, records: int) -> list[list[str]]:
    """One row per in-process mode; ratios against the pydarshan row."""
    base = n_logs / runs[0].pass_s
    rows = []
    for r in runs:
        cores = r.first["workers"]
        logs_s = n_logs / r.pass_s
        ratio = "" if r.mode == "pydarshan" else f"{logs_s / base:.2f}"
        per_core = "" if r.mode == "pydarshan" else f"{logs_s / base / cores:.2f}"
        cpu_s = sum(m.user_s + m.sys_s for m in r.processes)
        peak = max(m.max_rss_bytes for m in r.processes)
        row = [
            LABELS[r.mode], str(cores), str(len(r.passes_s)), f"{r.pass_s:.3f}",
            f"{logs_s:,.0f}", f"{records / r.pass_s:,.0f}", ratio, per_core,
            f"{r.median('import_s'):.2f}", f"{r.median('warmup_s'):.2f}",
            f"{cpu_s:.1f}", f"{peak / MIB:,.0f}",
        ]  # fmt: skip
        rows.append(row)
    return rows


def stage_rows(runs: Sequence[InProcess]) -> list[list[str]]:
    """Where each iolens pass spends its time."""
    rows = []
    for r in runs:
        if r.mode in ("pydarshan", "reader"):
            continue
        docs, mb = r.first["docs"], r.first["ndjson_bytes"] / 1e6
        for i, (stage, s) in enumerate(r.stage_s().items()):
            rows.append(
                [LABELS[r.mode], stage, f"{s:.3f}", f"{s / r.pass_s:.0%}"]
                + ([f"{docs:,}", f"{mb:.2f}"] if i == 0 else ["", ""])
            )
    return rows


def _process_cells(ms: Sequence[Measurement]) -> list[str]:
    """Median / mean / total wall, median CPU and peak RSS of successful runs."""
    ok = [m for m in ms if m.ok]
    if not ok:
        return ["-"] * 5
    walls = [m.wall_s for m in ok]
    return [
        f"{statistics.median(walls):.3f}",
        f"{statistics.mean(walls):.3f}",
        f"{sum(walls):.1f}",
        f"{statistics.median(m.user_s + m.sys_s for m in ok):.3f}",
        f"{statistics.median(m.max_rss_bytes for m in ok) / MIB:,.0f}",
    ]


def drishti_ratios(rows: Sequence[PerLog]) -> tuple[float, float, int]:
    """Drishti wall / iolens wall: median per log, and total over total; both only on logs
    where both succeeded (their number is the third value)."""
    both = [r for r in rows if r.drishti.ok and r.iolens.ok]
    if not both:
        return float("nan"), float("nan"), 0
    median = statistics.median(r.drishti.wall_s / r.iolens.wall_s for r in both)
    total = sum(r.drishti.wall_s for r in both) / sum(r.iolens.wall_s for r in both)
    return median, total, len(both)


def process_rows(rows: Sequence[PerLog], at_once: Measurement) -> list[list[str]]:
    """Drishti and iolens per log, and iolens on all logs in one process."""
    median, total, n_both = drishti_ratios(rows)
    d_fail = sum(not r.drishti.ok for r in rows)
    i_fail = sum(not r.iolens.ok for r in rows)
    d_total = sum(r.drishti.wall_s for r in rows if r.drishti.ok)
    n = len(rows)
    once = "" if not at_once.ok else f"{d_total / at_once.wall_s:.1f}x (Drishti total / this)"
    drishti = [
        "drishti LOG", str(n), str(d_fail), *_process_cells([r.drishti for r in rows]),
        f"median {median:.2f}x, total {total:.2f}x ({n_both} logs)",
    ]  # fmt: skip
    iolens = [
        "iolens darshan diagnose LOG", str(n), str(i_fail),
        *_process_cells([r.iolens for r in rows]), "",
    ]  # fmt: skip
    all_at_once = [
        "iolens darshan diagnose LOG1 ... LOGn", str(n), "0" if at_once.ok else "exit != 0",
        f"{at_once.wall_s / n:.3f} (per log)", "", f"{at_once.wall_s:.1f}",
        f"{at_once.user_s + at_once.sys_s:.1f}", f"{at_once.max_rss_bytes / MIB:,.0f}", once,
    ]  # fmt: skip
    return [drishti, iolens, all_at_once]


def outlier_rows(
    runs: Sequence[InProcess], rows: Sequence[PerLog], logs: Sequence[Log]
) -> list[list[str]]:
    """The slowest logs of each tool (in-process medians in ms, whole processes in s)."""
    records = runs[0].first["records"]
    names = {log.path: log.name for log in logs}
    tables: list[tuple[str, dict[str, float], str]] = [
        (f"{LABELS[r.mode]} (in-process)", r.log_s(), "ms")
        for r in runs
        if r.mode in ("pydarshan", "iolens")
    ]
    tables.append(("drishti LOG", {r.log.path: r.drishti.wall_s for r in rows}, "s"))
    tables.append(("iolens darshan diagnose LOG", {r.log.path: r.iolens.wall_s for r in rows}, "s"))
    out = []
    for tool, times, unit in tables:
        slowest = sorted(times, key=times.__getitem__, reverse=True)[:OUTLIERS]
        for i, path in enumerate(slowest, start=1):
            t = times[path] * (1000 if unit == "ms" else 1)
            out.append([tool, str(i), names[path], f"{records[path]:,}", f"{t:,.2f} {unit}"])
    return out


def drishti_failures(rows: Sequence[PerLog]) -> list[str]:
    """``name: last stderr line`` for each log Drishti failed on."""
    return [
        f"{r.log.name}: "
        + ("timed out" if r.drishti.timed_out else last_line(r.drishti.stderr) or "(no message)")
        for r in rows
        if not r.drishti.ok
    ]


def machine() -> str:
    """CPU count and model, memory, and the versions measured."""
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = ", ".join(
        f"{d} {importlib.metadata.version(d)}" for d in ("darshan", "drishti-io", "numpy")
    )
    return (
        f"{os.cpu_count()} vCPU ({model}), {mem:.0f} GiB RAM; Python"
        f" {platform.python_version()}, {versions}"
    )


def verdicts(runs: Sequence[InProcess], rows: Sequence[PerLog]) -> list[str]:
    """The two targets, met or not."""
    by_mode = {r.mode: r for r in runs}
    per_core = by_mode["pydarshan"].pass_s / by_mode["iolens"].pass_s
    median, _, _ = drishti_ratios(rows)
    return [
        f"iolens per core / pydarshan raw read: {per_core:.2f} (target >= 0.5:"
        f" {'met' if per_core >= 0.5 else 'MISSED'})",
        f"Drishti / iolens per log (median): {median:.2f}x (target > 1, iolens faster:"
        f" {'met' if median > 1 else 'MISSED'})",
    ]


@dataclass(frozen=True)
class Results:
    """Everything one benchmark run measured."""

    logs: list[Log]
    runs: list[InProcess]
    per_log: list[PerLog]
    at_once: Measurement
    source: str

    def sections(self) -> list[tuple[str, Sequence[str], list[list[str]]]]:
        """(title, headers, rows) of each table."""
        records = sum(self.runs[0].first["records"].values())
        return [
            (
                f"In-process rates, import excluded ({len(self.logs)} logs, {records:,} records"
                " per pass)",
                RATE_HEADERS,
                rate_rows(self.runs, len(self.logs), records),
            ),
            ("Where iolens spends a pass", STAGE_HEADERS, stage_rows(self.runs)),
            (
                "Whole process per log: Drishti vs iolens (wall includes start-up and imports)",
                PROCESS_HEADERS,
                process_rows(self.per_log, self.at_once),
            ),
            (
                f"Slowest {OUTLIERS} logs per tool",
                OUTLIER_HEADERS,
                outlier_rows(self.runs, self.per_log, self.logs),
            ),
        ]

    def notes(self) -> list[str]:
        """Verdicts and Drishti's failures."""
        failures = drishti_failures(self.per_log)
        return verdicts(self.runs, self.per_log) + (
            [f"Drishti failed on {len(failures)} logs:", *(f"  {f}" for f in failures)]
            if failures
            else []
        )

    def print(self, out: Console) -> None:
        """Rich tables and notes."""
        for title, headers, rows in self.sections():
            out.print(_table(title, headers, rows))
        for note in self.notes():
            out.print(note)

    def markdown(self) -> str:
        """The same as markdown, with the machine and the iolens source."""
        parts = [f"Machine: {machine()}; iolens source: {self.source}\n"]
        for title, headers, rows in self.sections():
            parts.append(f"**{title}**\n\n" + _md(headers, rows))
        parts.append("\n".join(f"* {n.strip()}" for n in self.notes()) + "\n")
        return "\n".join(parts)


def write_results(res: Results) -> None:
    """``results.json`` (raw figures) and ``results.md`` in ``OUT_DIR``."""

    def meas(m: Measurement) -> dict[str, Any]:
        return {"wall_s": m.wall_s, "cpu_s": m.user_s + m.sys_s, "max_rss_bytes": m.max_rss_bytes}

    doc = {
        "machine": machine(),
        "iolens_source": res.source,
        "logs": [vars(log) for log in res.logs],
        "in_process": {
            r.mode: [{**x, "process": meas(m)} for x, m in zip(r.results, r.processes, strict=True)]
            for r in res.runs
        },
        "per_log": [
            {"log": r.log.path, "drishti": meas(r.drishti) | {"exit": r.drishti.exit_code}}
            | {"iolens": meas(r.iolens) | {"exit": r.iolens.exit_code}}
            for r in res.per_log
        ],
        "iolens_all_at_once": meas(res.at_once),
    }
    (OUT_DIR / "results.json").write_text(json.dumps(doc, indent=1) + "\n")
    (OUT_DIR / "results.md").write_text(res.markdown())
    console.log(f"results: {OUT_DIR / 'results.md'}, {OUT_DIR / 'results.json'}")


# -- profile ------------------------------------------------------------------------------


def profile(logs: Sequence[Log], top: int = 20) -> None:
    """cProfile of ``analyze_path`` on the log with the most records and on the logs under
    ``SMALL_RECORDS`` records (each set read until ~2 s), by own and by cumulative time."""
    import darshan  # noqa: F401

    from pipeline.formats.darshan.pool import analyze_path
    from pipeline.formats.darshan.read import read_darshan

    records = {log.path: read_darshan(log.path).records for log in logs}
    big = max(logs, key=lambda log: records[log.path])
    small = [log.path for log in logs if records[log.path] < SMALL_RECORDS]
    prefixes = (str(bundled_dir().parent) + "/", str(BENCH_DIR.parent) + "/")
    for title, paths in (
        (f"{big.name} ({records[big.path]:,} records)", [big.path]),
        (f"the {len(small)} logs under {SMALL_RECORDS:,} records", small),
    ):
        for p in paths:  # warm-up
            analyze_path(p)
        prof, start, passes = cProfile.Profile(), time.perf_counter(), 0
        while time.perf_counter() - start < QUICK_TARGET_S:
            prof.enable()
            for p in paths:
                analyze_path(p)
            prof.disable()
            passes += 1
        for order in ("tottime", "cumulative"):
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats(order).print_stats(top)
            report = text.getvalue().split("\n\n", 1)[-1]
            for prefix in prefixes:
                report = report.replace(prefix, "")
            print(f"== analyze_path on {title}: {passes} passes, by {order} ==")
            print(report)


# -- driver -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (see ``--help``)."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="bundled logs only, ~2 s per mode")
    p.add_argument(
        "--repeat", type=int, default=0, help="timed passes per in-process mode (default: ~10 s)"
    )
    p.add_argument(
        "--rounds", type=int, help="in-process runs per mode, in turn (default 3, --quick 2)"
    )
    p.add_argument("--logs-dir", type=Path, default=LOGS_DIR, help=f"default {LOGS_DIR}")
    p.add_argument("--timeout", type=float, default=300.0, help="per process, s (default 300)")
    p.add_argument("--profile", action="store_true", help="profile analyze_path and stop")
    p.add_argument("--worker", choices=MODES, help=argparse.SUPPRESS)
    p.add_argument("--logs", help=argparse.SUPPRESS)
    p.add_argument("--target-s", type=float, default=TARGET_S, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.repeat < 0:
        p.error("--repeat must be >= 0")
    args.rounds = args.rounds or (2 if args.quick else 3)
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; 0, or 1 if an iolens process failed."""
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    for tool in ("iolens", "drishti"):
        if not (BIN_DIR / tool).is_file():
            raise SystemExit(f"{BIN_DIR / tool} not found: run with the project's .venv/bin/python")
    dirs = [("bundled", bundled_dir())] + ([] if args.quick else [("logs", args.logs_dir)])
    logs = find_logs(dirs)
    if args.profile:
        profile(logs)
        return 0
    source = source_state()
    target_s = QUICK_TARGET_S if args.quick else TARGET_S
    console.log(f"{len(logs)} distinct logs; iolens source: {source}; {machine()}")
    runs = run_modes(logs, args.rounds, args.repeat, target_s)
    per_log = run_per_log(logs, args.timeout)
    at_once = run_all_at_once(logs)
    end_source = source_state()
    if end_source != source:
        console.log(f"[red]iolens source changed during the run[/]: {source} -> {end_source}")
        source = f"{source}, then {end_source}"
    res = Results(logs, runs, per_log, at_once, source)
    res.print(Console(width=None if sys.stdout.isatty() else 170))
    write_results(res)
    return 0 if at_once.ok and all(r.iolens.ok for r in per_log) else 1


if __name__ == "__main__":
    sys.exit(main())
