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
2. **extract + cluster**: the same, then the canonical form of every request and the
   incremental clustering (``Clusterer``), then the outlier flags against the final model;
3. **tail**: what the shipper does per line of an ``events`` drop (``EventsTail``): read
   complete lines in 4 MiB chunks, parse, reorder, join with line holds, build and encode each
   request's document, place it in the workload model, and settle lines in an
   ``AckTracker`` as if every document were acknowledged at once (no Elasticsearch).

The online figures are derived: CPU per event times the seed's online rate (1.2 M events in
120 s) gives the share of one CPU iolens would need for that stream, for the parser alone and
for the whole shipping path.

Usage::

    .venv/bin/python bench/requests.py                  # 1,000,000 events
    .venv/bin/python bench/requests.py --events 200000  # quicker

Everything it writes goes to ``bench/out/requests/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
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
MIB = 2**20
console = Console()


def record(tmp: Path) -> list[dict[str, Any]]:
    """A real run of the test server: 6 clients x 50 requests; its events as dicts."""
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    from http_client import serve  # the test suite's client

    run = serve(tmp, 6, 50, 7)
    return [{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in run.events]


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


def worker(stage: str, path: Path) -> int:
    """Child process: one stage over the log; prints its counts and stage times as JSON."""
    sys.path.insert(0, str(ROOT))
    import yaml

    from pipeline.parsers.event_schema import event_schema
    from pipeline.parsers.events import parse_events
    from pipeline.reducers.canonical import canonical
    from pipeline.reducers.request_cluster import Clusterer
    from pipeline.reducers.request_join import RequestParser, merge_streams

    schema = event_schema(yaml.safe_load(SCHEMA.read_text()), str(SCHEMA))
    if stage == "tail":
        return tail_worker(schema, path)
    start = time.process_time()
    parser = RequestParser(schema)
    requests = 0
    forms = []
    with open(path, "rb") as fh:
        for e in merge_streams([parse_events(fh, str(path))], schema):
            for r in parser.feed(e):
                requests += 1
                if stage == "cluster":
                    forms.append(canonical(r, schema))
    requests += len(parser.close())
    extract_cpu = time.process_time() - start
    out: dict[str, Any] = {
        "events": parser.stats.events,
        "requests": requests,
        "incomplete": parser.stats.incomplete,
        "extract_cpu_s": extract_cpu,
    }
    if stage == "cluster":
        start = time.process_time()
        model = Clusterer()
        assignments = [model.add(c) for c in forms]
        outliers = sum(model.is_outlier(a.cluster, a.distance) for a in assignments)
        out |= {
            "cluster_cpu_s": time.process_time() - start,
            "clusters": len(model.clusters),
            "sizes": [cl.size for cl in model.clusters],
            "outliers": outliers,
        }
    print(json.dumps(out))
    return 0


def tail_worker(schema: Any, path: Path) -> int:
    """Child process: the ``events`` drop's shipping path over the log (module docstring)."""
    from pipeline.delivery.acks import AckTracker
    from pipeline.settings import RequestsSettings
    from pipeline.shippers.events_tail import EventsTail, WorkloadModel
    from pipeline.shippers.tailer import read_complete_lines
    from pipeline.sink.documents import DocContext

    model_path = OUT_DIR / "model.json"
    model_path.unlink(missing_ok=True)
    start = time.process_time()
    model = WorkloadModel("http_server", model_path, RequestsSettings())
    tail = EventsTail("bench", str(path), "bench", schema, model)
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
        while (c := acks.committable("bench")) is not None:
            committed = c

    offset = 0
    while (chunk := read_complete_lines(path, offset, 4 << 20)).lines:
        for res in tail.process(chunk, ctx, 0.0):
            waits = len(res.docs) if res.pending is None else res.pending
            acks.track("bench", res.ref.line_no, res.ref.end_offset, waits)
            settle(res.docs, res.holds, res.releases)
        offset = chunk.next_offset
    rel = tail.idle(time.time() + 1e6, ctx, final=True)
    settle(rel.docs, rel.holds, rel.releases)
    cpu = time.process_time() - start
    print(
        json.dumps(
            {
                "events": tail.stats.events,
                "requests": docs,
                "document_bytes": encoded,
                "committed_lines": committed[1],
                "clusters": len(model.clusterer.clusters),
                "sizes": [cl.size for cl in model.clusterer.clusters],
                "forms": [cl.representative.text() for cl in model.clusterer.clusters],
                "extract_cpu_s": cpu,
            }
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    """Record, multiply, run both stages, print the table beside the seed's figures."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--events", type=int, default=1_000_000, help="events in the log")
    p.add_argument("--worker", choices=["extract", "cluster", "tail"], help=argparse.SUPPRESS)
    p.add_argument("--log", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.worker, args.log)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        console.log("recording the test server: 6 clients x 50 requests")
        base = record(Path(tmp))
    log = OUT_DIR / "events.jsonl"
    n, size = multiply(base, args.events, log)
    console.log(f"{n:,} events ({size / MIB:.1f} MiB) from {len(base):,} recorded ones: {log}")
    rows = []
    results: dict[str, Any] = {"events": n, "bytes": size, "recorded": len(base)}
    for stage in ("extract", "cluster", "tail"):
        m = measure(
            [sys.executable, str(Path(__file__).resolve()), "--worker", stage, "--log", str(log)],
            OUT_DIR / f"{stage}.out",
            OUT_DIR / f"{stage}.err",
            timeout_s=1800,
        )
        if not m.ok:
            console.print(f"[red]{stage} failed[/red]: {m.stderr.read_text()[-2000:]}")
            return 1
        got = json.loads(m.stdout.read_text())
        results[stage] = {**got, "wall_s": m.wall_s, "peak_rss_bytes": m.max_rss_bytes}
        rows.append((stage, got, m))
    ex = results["extract"]
    per_event_us = ex["extract_cpu_s"] / n * 1e6
    seed_rate = SEED["online_events"] / SEED["online_s"]
    online_share = seed_rate * per_event_us / 1e6
    mb = size / 1e6
    console.print(f"\n[b]Extraction and clustering, {n:,} events ({mb:.0f} MB)[/b]")
    console.print("| stage | wall s | CPU s (stage) | events/s | MB/s | requests | peak MiB |")
    console.print("|---|---|---|---|---|---|---|")
    for stage, got, m in rows:
        cpu = got["extract_cpu_s"] + got.get("cluster_cpu_s", 0.0)
        console.print(
            f"| {stage} | {m.wall_s:.1f} | {cpu:.1f} | {n / m.wall_s:,.0f} | {mb / m.wall_s:.1f} | "
            f"{got['requests']:,} | {m.max_rss_bytes / MIB:.0f} |"
        )
    cl = results["cluster"]
    seed_mbs = SEED["offline_mb"] / SEED["offline_s"]
    ours_mbs = mb / results["extract"]["wall_s"]
    console.print(
        f"\nclusters: {cl['clusters']} (sizes {cl['sizes']}), outliers {cl['outliers']}; "
        f"clustering {cl['requests'] / cl['cluster_cpu_s']:,.0f} requests/s of CPU"
    )
    console.print(
        f"offline: iolens {ours_mbs:.1f} MB/s, Magpie {seed_mbs:.1f} MB/s "
        f"(100 MB in 5.6 s): ratio {ours_mbs / seed_mbs:.2f}; peak RSS "
        f"{results['extract']['peak_rss_bytes'] / MIB:.0f} MiB against a 10 MB working set"
    )
    console.print(
        f"online: {per_event_us:.1f} us of CPU per event; the seed's stream (1.2 M events in "
        f"120 s) would need {online_share:.1%} of a CPU, Magpie used 3.5 %"
    )
    tl = results["tail"]
    tail_us = tl["extract_cpu_s"] / n * 1e6
    tail_share = seed_rate * tail_us / 1e6
    console.print(
        f"online, the whole shipping path (tail): {tail_us:.1f} us of CPU per event, "
        f"{tail_share:.1%} of a CPU for the seed's stream; {tl['requests']:,} documents "
        f"({tl['document_bytes'] / MIB:.0f} MiB of JSON), every line committed: "
        f"{tl['committed_lines'] == n}"
    )
    results["online_cpu_share"] = online_share
    results["online_tail_cpu_share"] = tail_share
    (OUT_DIR / "results.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
