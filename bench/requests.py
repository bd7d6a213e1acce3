"""Magpie request extraction and clustering on a million-event log, beside the seed's figures.

There is no Magpie to run (the toolchain was never released), so iolens is measured against
what seed 002 (section 3) reports for it: online, 1.2 M events parsed in two minutes with 3.5 %
of a CPU and an 8 MB footprint; offline, a 100 MB log parsed in 5.6 s with a 10 MB working set.

The log is real events multiplied: the test suite's instrumented HTTP server
(``tests/workloads/http_server.py``) serves 300 requests of the six types of the seed's Table 1
to six concurrent clients; its events are then repeated, each copy shifted in time and given
its own connections, threads, tasks and RPCs, until there are ``--events`` of them (default
1,000,000). Each stage runs in a child process (``proc_measure``: wall, CPU, peak RSS):

1. **extract**: read the JSON lines, reorder, join into requests (``RequestParser``);
2. **extract + cluster**: the same, the canonical form of each request placed in the
   incremental clustering (``Clusterer``) as it comes, then the outlier flags against the final
   model from each request's cluster and distance kept as they were computed (``--keep-forms``,
   used for a tree before ``cluster_stream``: every canonical form kept and clustered at the
   end, as the stage was first written);
3. **tail**: what the shipper does with an ``events`` drop (``ChunkTail`` running an
   ``EventsChain``; ``LineTail`` in trees before the chunks): read complete lines in 4 MiB
   chunks, parse, reorder, join with line holds, build and encode each request's document,
   place it in the workload model, and settle the chunks (lines, before) in an ``AckTracker``
   as if every document were acknowledged at once, committing (and popping the cursors) after
   each chunk as the delivery does after a bulk response (no Elasticsearch);
4. **cli**: ``iolens requests extract --schema S --cluster --json LOG`` in the child (its
   output to ``/dev/null``), CPU of the whole process, imports included.

Every stage runs on this tree's ``pipeline`` and on that of the commit ``--before`` (default:
the one before the event path was made faster), checked out with ``git worktree`` under
``bench/out/requests/``, so the two are measured in the same run on the same log; the two take
turns, ``--rounds`` times (3), and the run of median CPU time is reported.

The online figures are derived: CPU per event times the seed's online rate (1.2 M events in
120 s) gives the share of one CPU iolens would need for that stream, for the parser alone and
for the whole shipping path.

Usage::

    .venv/bin/python bench/requests.py                  # 1,000,000 events, before and after, x3
    .venv/bin/python bench/requests.py --events 200000  # quicker
    .venv/bin/python bench/requests.py --before none    # this tree only
    .venv/bin/python bench/requests.py --phases         # the shipping path's time by phase
    .venv/bin/python bench/requests.py --profile tail   # cProfile of one stage, then stop

Everything it writes goes to ``bench/out/requests/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from proc_measure import measure
from rich.console import Console

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
OUT_DIR = BENCH_DIR / "out" / "requests"
SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
SEED = {
    "offline_mb": 100.0,
    "offline_s": 5.6,
    "offline_ws_mb": 10.0,
    "online_events": 1_200_000,
    "online_s": 120.0,
    "online_cpu": 0.035,
    "online_mb": 8.0,
}
"""Seed 002, section 3: Magpie's parser, online and offline."""
ID_ATTRS = ("conn", "task", "rpc", "_conn")
BEFORE = "3bba851"
"""The commit before the event path was made faster (bench/README.md)."""
TARGET_US = 5.0
"""CPU per event the whole shipping path should cost at most (us)."""
MIB = 2**20
console = Console(width=250)


def record(tmp: Path, again: bool) -> list[dict[str, Any]]:
    """A real run of the test server: 6 clients x 50 requests; its events as dicts, kept in
    ``recorded.jsonl`` and reused unless ``again``."""
    kept = OUT_DIR / "recorded.jsonl"
    if kept.exists() and not again:
        return [orjson.loads(line) for line in kept.read_bytes().splitlines()]
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    from http_client import serve  # the test suite's client

    console.log("recording the test server: 6 clients x 50 requests")
    run = serve(tmp, 6, 50, 7)
    events = [{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in run.events]
    kept.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return events


def multiply(events: list[dict[str, Any]], total: int, path: Path) -> tuple[int, int]:
    """Write ``total`` events: copies of ``events``, each shifted past the previous one and
    given its own ids. Returns (events, bytes) written."""
    t0 = min(e["ts"] for e in events)
    span = max(e["ts"] for e in events) - t0 + 1_000_000
    written = size = 0
    with open(path, "wb") as fh:
        for k in range(total // len(events) + 1):
            for e in events:
                if written == total:
                    return written, size
                if k and e["ev"] == "ClockSync":
                    continue
                copy = dict(e)
                copy["ts"] = e["ts"] + k * span
                if "tid" in copy:
                    copy["tid"] = e["tid"] + k * 1_000_000
                for a in ID_ATTRS:
                    if a in copy:
                        copy[a] = f"{e[a]}#{k}"
                line = orjson.dumps(copy) + b"\n"
                fh.write(line)
                written += 1
                size += len(line)
    return written, size


STAGES = ("extract", "cluster", "tail", "cli")
"""The stages measured (see the module docstring)."""


def worker(stage: str, path: Path, root: Path, keep_forms: bool = False) -> int:
    """Child process: one stage over the log with the ``pipeline`` of ``root``; prints its
    counts and stage times as JSON."""
    sys.path.insert(0, str(root))
    if stage == "cli":
        print(json.dumps(cli_worker(path)))
        return 0
    import yaml

    _tune_collector()
    event_schema = _first("event_schema", "records.event_schema", "parsers.event_schema")
    schema = event_schema(yaml.safe_load(SCHEMA.read_text()), str(SCHEMA))
    if stage == "tail":
        out = tail_worker(schema, path)
    elif keep_forms and stage == "cluster":
        out = cluster_kept(schema, path)
    else:
        out = extract_worker(schema, path, cluster=stage == "cluster")
    print(json.dumps(out))
    return 0


def cli_worker(path: Path) -> dict[str, Any]:
    """``iolens requests extract --cluster --json`` on the log, its output thrown away; the
    process's CPU time so far (interpreter start and imports included)."""
    import contextlib
    import os

    from pipeline.cli.main import main as iolens

    argv = ["requests", "extract", "--schema", str(SCHEMA), "--cluster", "--json", str(path)]
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        status = iolens(argv)
    return {"status": status, "extract_cpu_s": time.process_time()}


def extract_worker(schema: Any, path: Path, cluster: bool) -> dict[str, Any]:
    """Extract (and, with ``cluster``, place each request in the model as it comes with
    ``cluster_stream``, which keeps its cluster and distance only)."""
    parse_events = _first("parse_events", "formats.events.decode", "parsers.events")
    from pipeline.reducers.canonical import canonical
    from pipeline.reducers.event_order import merge_streams
    from pipeline.reducers.request_join import RequestParser

    start = time.process_time()
    parser = RequestParser(schema)

    def requests() -> Iterator[Any]:
        with open(path, "rb") as fh:
            events = merge_streams([parse_events(fh, str(path))], schema)
            if not hasattr(parser, "feed_many"):  # a tree before the join over a batch
                for e in events:
                    yield from parser.feed(e)
                return
            while batch := list(itertools.islice(events, 4096)):
                yield from parser.feed_many(batch)

    out: dict[str, Any] = {}
    if cluster:
        from pipeline.reducers.request_cluster import cluster_stream

        model, clusters, distances = cluster_stream(canonical(r, schema) for r in requests())
        n = len(clusters)
        out = {
            "clusters": len(model.clusters),
            "sizes": [cl.size for cl in model.clusters],
            "outliers": sum(map(model.is_outlier, clusters, distances)),
        }
    else:
        n = sum(1 for _r in requests())
    n += len(parser.close())
    return out | {
        "events": parser.stats.events,
        "requests": n,
        "incomplete": parser.stats.incomplete,
        "extract_cpu_s": time.process_time() - start,
    }


def cluster_kept(schema: Any, path: Path) -> dict[str, Any]:
    """The cluster stage as first written: every canonical form kept, clustered at the end."""
    from pipeline.reducers.canonical import canonical
    from pipeline.reducers.event_order import merge_streams
    from pipeline.reducers.request_cluster import Clusterer
    from pipeline.reducers.request_join import RequestParser

    parse_events = _first("parse_events", "formats.events.decode", "parsers.events")
    start = time.process_time()
    parser = RequestParser(schema)
    forms = []
    with open(path, "rb") as fh:
        for e in merge_streams([parse_events(fh, str(path))], schema):
            forms += [canonical(r, schema) for r in parser.feed(e)]
    closed = len(parser.close())
    model = Clusterer()
    assignments = [model.add(c) for c in forms]
    outliers = sum(model.is_outlier(a.cluster, a.distance) for a in assignments)
    return {
        "events": parser.stats.events,
        "requests": len(forms) + closed,
        "incomplete": parser.stats.incomplete,
        "extract_cpu_s": time.process_time() - start,
        "clusters": len(model.clusters),
        "sizes": [cl.size for cl in model.clusters],
        "outliers": outliers,
    }


def _tune_collector() -> None:
    """The garbage collector as the ``iolens`` command sets it, in a tree that does."""
    import importlib

    tune = getattr(importlib.import_module("pipeline.cli.main"), "tune_collector", None)
    if tune is not None:
        tune()


def _first(name: str, *modules: str) -> Any:
    """``name`` from the first of ``pipeline.<module>`` that holds it: the ``--before`` tree may
    predate a move."""
    import importlib

    for module in modules:
        try:
            return getattr(importlib.import_module(f"pipeline.{module}"), name)
        except ImportError:
            continue
    raise ImportError(f"{name} is in none of {', '.join(modules)}")


def events_tail(path: Path, schema: Any, model: Any) -> tuple[Any, Any]:
    """The ``events`` drop's tail of the tree measured, and what flushes it when the file is
    quiet and counts its events (its chain; in a tree before the chains, the tail itself)."""
    try:
        from pipeline.formats.events.chain import EventsChain
        from pipeline.shippers.line_tail import LineTail
    except ImportError:
        tail_type = _first("EventsTail", "formats.events.tail", "shippers.events_tail")
        tail = tail_type("bench", str(path), "bench", schema, model)
        return tail, tail
    chain = EventsChain(str(path), "bench", schema, model)
    try:
        from pipeline.shippers.chunk_tail import ChunkTail as tail_type
    except ImportError:  # a tree before the chunks
        tail_type = LineTail
    return tail_type("bench", str(path), chain), chain


def tail_worker(schema: Any, path: Path) -> dict[str, Any]:
    """Child process: the ``events`` drop's shipping path over the log (module docstring)."""
    from pipeline.delivery.acks import AckTracker
    from pipeline.settings import RequestsSettings
    from pipeline.shippers.tailer import read_complete_lines
    from pipeline.sink.documents import DocContext

    model_path = OUT_DIR / "model.json"
    model_path.unlink(missing_ok=True)
    start = time.process_time()
    model_type = _first("WorkloadModel", "formats.events.workload_model", "shippers.workload_model")
    model = model_type("http_server", model_path, RequestsSettings())
    tail, chain = events_tail(path, schema, model)
    acks, ctx = AckTracker(), DocContext(namespace="bench")
    docs = encoded = 0
    committed = (0, 0)

    def settle(found: Any, holds: Any, releases: Any) -> None:
        nonlocal docs, encoded, committed
        for end in holds:
            acks.hold("bench", end)
        for end in releases:
            acks.ack("bench", end)
        for doc in found:
            docs += 1
            encoded += len(orjson.dumps(doc.source))
            for ref in doc.refs:
                acks.ack("bench", ref.end_offset)

    def commit() -> None:
        nonlocal committed
        while (c := acks.committable("bench")) is not None:
            committed = c
            tail.take_snapshot(c[0])

    offset = 0
    while (chunk := read_complete_lines(path, offset, 4 << 20)).lines:
        for res in tail.process(chunk, ctx, 0.0):
            waits = len(res.docs) if res.pending is None else res.pending
            acks.track("bench", res.ref.line_no, res.ref.end_offset, waits)
            settle(res.docs, res.holds, res.releases)
        commit()
        offset = chunk.next_offset
    chain.monotonic = lambda: time.monotonic() + 1e6  # then the file stays quiet for long
    rel = chain.idle(time.time() + 1e6, ctx, final=True)
    settle(rel.docs, rel.holds, rel.releases)
    commit()
    cpu = time.process_time() - start
    return {
        "events": chain.stats.events,
        "requests": docs,
        "document_bytes": encoded,
        "committed_lines": committed[1],
        "clusters": len(model.clusterer.clusters),
        "sizes": [cl.size for cl in model.clusterer.clusters],
        "forms": [cl.representative.text() for cl in model.clusterer.clusters],
        "extract_cpu_s": cpu,
    }


def before_tree(rev: str) -> Path:
    """A checkout of ``rev`` (``git worktree add --detach``) beside the outputs, made once."""
    tree = OUT_DIR / f"before-{rev}"
    if not (tree / "pipeline").is_dir():
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
            check=True,
            capture_output=True,
        )
    return tree


def run_stage(stage: str, log: Path, root: Path, tag: str) -> dict[str, Any] | None:
    """One stage in a child process; its JSON output with wall, CPU and peak RSS."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", stage, "--log", str(log)]
    streams = (root / "pipeline" / "reducers" / "request_cluster.py").read_text()
    kept = "def cluster_stream" not in streams  # a tree whose clustering kept every form
    cmd += ["--root", str(root)] + (["--keep-forms"] if kept else [])
    m = measure(cmd, OUT_DIR / f"{stage}-{tag}.out", OUT_DIR / f"{stage}-{tag}.err", timeout_s=1800)
    if not m.ok:
        console.print(f"[red]{stage} ({tag}) failed[/red]: {m.stderr.read_text()[-2000:]}")
        return None
    got: dict[str, Any] = json.loads(m.stdout.read_text())
    return got | {
        "wall_s": m.wall_s,
        "cpu_s": m.user_s + m.sys_s,
        "peak_rss_bytes": m.max_rss_bytes,
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median CPU time, with every run's CPU and wall time beside it."""
    ordered = sorted(runs, key=lambda r: r["extract_cpu_s"])
    return ordered[len(ordered) // 2] | {
        "cpu_s_runs": [r["extract_cpu_s"] for r in runs],
        "wall_s_runs": [r["wall_s"] for r in runs],
    }


def report(results: dict[str, Any], n: int, size: int) -> None:
    """The side-by-side table and the ratios against the seed's figures."""
    mb = size / 1e6
    seed_rate = SEED["online_events"] / SEED["online_s"]
    seed_mbs = SEED["offline_mb"] / SEED["offline_s"]
    tags = [t for t in ("before", "after") if t in results]
    console.print(f"\n[b]{n:,} events ({mb:.0f} MB), CPU per event of each stage[/b]")
    console.print(
        "| stage | "
        + " | ".join(f"{t} us/event | {t} MB/s | {t} peak MiB" for t in tags)
        + " |"
        + (" before/after |" if len(tags) == 2 else "")
    )
    console.print("|---" * (1 + 3 * len(tags) + (len(tags) == 2)) + "|")
    for stage in STAGES:
        cells = []
        for t in tags:
            r = results[t][stage]
            cells += [
                f"{r['extract_cpu_s'] / n * 1e6:.1f}",
                f"{mb / r['wall_s']:.1f}",
                f"{r['peak_rss_bytes'] / MIB:.0f}",
            ]
        if len(tags) == 2:
            b, a = (results[t][stage]["extract_cpu_s"] for t in tags)
            cells.append(f"{b / a:.2f}x")
        console.print(f"| {stage} | " + " | ".join(cells) + " |")
    for t in tags:
        ex, tl, cl = (results[t][s] for s in ("extract", "tail", "cluster"))
        ex_us, tail_us = ex["extract_cpu_s"] / n * 1e6, tl["extract_cpu_s"] / n * 1e6
        mbs = mb / ex["wall_s"]
        console.print(
            f"{t}: offline extraction {mbs:.1f} MB/s = {mbs / seed_mbs:.2f}x Magpie's "
            f"{seed_mbs:.1f} (target 2x); extraction {ex_us:.1f} us/event = "
            f"{seed_rate * ex_us / 1e6:.1%} of a CPU at the seed's 10,000 events/s (Magpie "
            f"3.5 %); shipping path {tail_us:.1f} us/event = {seed_rate * tail_us / 1e6:.1%} "
            f"of a CPU, {tail_us / TARGET_US:.1f}x the {TARGET_US:.0f} us target; clusters "
            f"{cl['sizes']}, outliers {cl['outliers']}; {tl['requests']:,} documents, every "
            f"line committed: {tl['committed_lines'] == n}"
        )


PHASES = (
    ("parse (JSON line -> event)", "pipeline.formats.events.chain", ("parse_event_line",)),
    (
        "reorder queue",
        "pipeline.reducers.event_order",
        ("ReorderQueue.push_many", "ReorderQueue.push"),
    ),
    (
        "join (temporal join, requests built)",
        "pipeline.reducers.request_join",
        ("RequestParser.feed_many", "RequestParser.feed"),
    ),
    ("canonical form", "pipeline.formats.events.chain", ("canonical",)),
    (
        "clustering (workload model)",
        "pipeline.formats.events.workload_model",
        ("WorkloadModel.place",),
    ),
    ("document built", "pipeline.formats.events.chain", ("request_document",)),
)
"""The shipping path's phases timed by ``--phases``: (label, module, functions or methods);
the first of them a tree has is timed (the batch form, which calls the other when it falls
back, so that nothing is timed twice)."""


def phases_worker(path: Path, root: Path) -> int:
    """Child process: the tail stage with each phase of :data:`PHASES` wrapped in a timer;
    prints the time of each (wall clock, the process being single-threaded) and the CPU time
    of the whole stage as JSON. What the phases leave is the
    per-line work (line holds, cursors, results) and the benchmark's delivery (encoding the
    documents, acknowledging and committing lines)."""
    import importlib
    from collections.abc import Callable

    sys.path.insert(0, str(root))
    import yaml

    from pipeline.records.event_schema import event_schema

    _tune_collector()

    spent: dict[str, float] = {}
    clock = time.perf_counter  # the thread is alone: wall ~ CPU, and far cheaper to read

    def timed(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + clock() - t

        return wrapper

    for label, module, names in PHASES:
        for name in names:
            owner: Any = importlib.import_module(module)
            if "." in name:
                cls, name = name.split(".")
                owner = getattr(owner, cls)
            if hasattr(owner, name):
                setattr(owner, name, timed(label, getattr(owner, name)))
                break
    schema = event_schema(yaml.safe_load(SCHEMA.read_text()), str(SCHEMA))
    out = tail_worker(schema, path)
    print(json.dumps(out | {"phases_cpu_s": spent}))
    return 0


def print_phases(results: dict[str, dict[str, Any]], n: int) -> None:
    """Where each us of the shipping path goes, per tree (``--phases``)."""
    tags = list(results)
    console.print("\n[b]The shipping path, us per event by phase[/b] (each phase timed where the")
    console.print(
        "shipper calls it, wall clock of a single-threaded process; ~0.3 us a call added)"
    )
    console.print("| phase | " + " | ".join(tags) + " |")
    console.print("|---" * (1 + len(tags)) + "|")
    for label in dict.fromkeys(label for label, _module, _names in PHASES):
        cells = [f"{results[t]['phases_cpu_s'].get(label, 0.0) / n * 1e6:.2f}" for t in tags]
        console.print(f"| {label} | " + " | ".join(cells) + " |")
    rest = [
        (results[t]["extract_cpu_s"] - sum(results[t]["phases_cpu_s"].values())) / n * 1e6
        for t in tags
    ]
    console.print(
        "| the rest (line holds, cursors, results; encoding, acks, commits) | "
        + " | ".join(f"{r:.2f}" for r in rest)
        + " |"
    )
    totals = [f"{results[t]['extract_cpu_s'] / n * 1e6:.2f}" for t in tags]
    console.print("| whole stage (timers included) | " + " | ".join(totals) + " |")


def profile_stage(stage: str, log: Path) -> int:
    """cProfile of one stage in this process (this tree's code): the 40 costliest functions
    by cumulative time, then by own time."""
    prof = cProfile.Profile()
    prof.runcall(worker, stage, log, ROOT)
    stats = pstats.Stats(prof)
    stats.sort_stats("cumulative").print_stats(40)
    stats.sort_stats("tottime").print_stats(25)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Record, multiply, run every stage before and after, print them beside the seed's."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    p.add_argument("--before", default=BEFORE, help="commit to compare with ('none': skip)")
    p.add_argument("--record", action="store_true", help="record the test server again")
    p.add_argument("--profile", choices=STAGES, help="profile a stage")
    p.add_argument("--phases", action="store_true", help="time the shipping path's phases")
    p.add_argument("--rounds", type=int, default=3, help="runs of each stage (the median)")
    p.add_argument("--worker", choices=[*STAGES, "phases"], help=argparse.SUPPRESS)
    p.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    p.add_argument("--keep-forms", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker == "phases":
        return phases_worker(args.log, args.root)
    if args.worker:
        return worker(args.worker, args.log, args.root, args.keep_forms)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = record(Path(tmp), args.record)
    log = OUT_DIR / "events.jsonl"
    n, size = multiply(base, args.events, log)
    console.log(f"{n:,} events ({size / MIB:.1f} MiB) from {len(base):,} recorded ones: {log}")
    if args.profile:
        return profile_stage(args.profile, log)
    roots = {"after": ROOT} if args.before == "none" else {}
    if args.before != "none":
        roots = {"before": before_tree(args.before), "after": ROOT}
    results: dict[str, Any] = {"events": n, "bytes": size, "recorded": len(base)}
    if args.phases:
        phase_runs: dict[str, list[dict[str, Any]]] = {}
        for _k in range(args.rounds):
            for tag, root in roots.items():
                one = run_stage("phases", log, root, tag)
                if one is None:
                    return 1
                phase_runs.setdefault(tag, []).append(one)
        got = {tag: median_run(rs) for tag, rs in phase_runs.items()}
        print_phases(got, n)
        (OUT_DIR / "phases.json").write_text(json.dumps(got, indent=2))
        return 0
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for k in range(args.rounds):
        for stage in STAGES:
            for tag, root in roots.items():  # before and after take turns: drift hits both
                got = run_stage(stage, log, root, tag)
                if got is None:
                    return 1
                runs.setdefault((tag, stage), []).append(got)
                console.log(f"round {k + 1}: {tag} {stage}: {got['extract_cpu_s']:.1f} s of CPU")
    for (tag, stage), got_runs in runs.items():
        results.setdefault(tag, {})[stage] = median_run(got_runs)
    report(results, n, size)
    (OUT_DIR / "results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
