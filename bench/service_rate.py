"""The cost of measuring the pipeline's service rates (seed 003): throughput with and without.

The same input is read by ``iolens``'s main job and delivered to an embedded noida-db,
alternately with the service-rate monitor on (``service_rate.enabled: true``: a monitor thread
per end of the queue between the reading thread and the sink's sender thread, each sampling its
end once per period and running the estimator) and off (the queue's counters are still kept:
two increments and a flag per put or get, under the lock the queue takes anyway). Each run
uses a fresh state directory, namespace and embedded server. The input is a real fio
histogram log of the test data (``tests/data/fio/samples/node01``) repeated with its times
shifted, one document per line.

The seed reports "low overhead" without a figure; the target here is under 2 %.

Usage::

    .venv/bin/python bench/service_rate.py               # 19,750 lines, 4 runs each way
    .venv/bin/python bench/service_rate.py --reps 50 --runs 2
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rich.console import Console

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))

from pipeline.jobs.main_job import MainJob  # noqa: E402
from pipeline.settings import settings_from_mapping  # noqa: E402
from pipeline.sink.client import make_client  # noqa: E402
from pipeline.sink.embedded import EmbeddedServer, free_port  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "fio" / "samples" / "node01" / "randrw_clat_hist.1.log"
LOG_NAME = "bench_clat_hist.1.log"
console = Console()


def make_input(where: Path, reps: int) -> int:
    """The sample log repeated ``reps`` times, 8 s apart; returns its lines."""
    lines = SAMPLE.read_text().splitlines()
    where.mkdir(parents=True)
    with open(where / LOG_NAME, "w") as fh:
        for k in range(reps):
            for line in lines:
                t, rest = line.split(",", 1)
                fh.write(f"{int(t) + k * 8000},{rest}\n")
    return reps * len(lines)


def one_run(url: str, drop: Path, tmp: Path, enabled: bool) -> tuple[float, int]:
    """Read the log and deliver its documents once (the reading and sink stages; the merged
    percentiles a full run computes afterwards are left out); (wall seconds, histogram
    documents indexed)."""
    ns = f"b{uuid.uuid4().hex[:8]}"
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": url, "namespace": ns},
            "state_dir": str(tmp / ns),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "service_rate": {"enabled": enabled},
        }
    )
    client = make_client(settings.elasticsearch)
    start = time.perf_counter()
    with MainJob(settings, client) as job:
        job.ingest([(drop / LOG_NAME, settings.drops[0])])
        job.sink.flush()
        summary = job.snapshot()
    wall = time.perf_counter() - start
    client.close()
    return wall, summary.docs[f"metrics-fio.histogram-{ns}"]["indexed"]


def main(argv: list[str] | None = None) -> int:
    """Alternate runs with and without the monitor; print throughputs and their ratio."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--reps", type=int, default=250, help="copies of the 79-line sample log")
    p.add_argument("--runs", type=int, default=4, help="runs each way")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        n = make_input(tmp / "drop", args.reps)
        walls: dict[bool, list[float]] = {True: [], False: []}
        for i in range(2 * args.runs + 1):
            enabled = i % 2 == 1  # run 0 is a warm-up (imports, page cache), not counted
            # a fresh server each run: one that keeps the earlier runs' data slows down
            server = EmbeddedServer(tmp / f"db{i}", free_port())
            server.start(timeout_s=30)
            try:
                wall, docs = one_run(server.url, tmp / "drop", tmp, enabled)
            finally:
                server.stop()
            assert docs == n, f"{docs} documents for {n} lines"
            if i:
                walls[enabled].append(wall)
            console.log(f"monitor {'on ' if enabled else 'off'}: {wall:.2f} s")
    on, off = statistics.median(walls[True]), statistics.median(walls[False])
    console.print(f"\n[b]{n:,} lines (one document each), median of {args.runs} runs[/b]")
    console.print("| monitor | wall s | lines/s |")
    console.print("|---|---|---|")
    console.print(f"| off | {off:.2f} | {n / off:,.0f} |")
    console.print(f"| on | {on:.2f} | {n / on:,.0f} |")
    console.print(
        f"throughput with the monitor / without: {off / on:.3f} "
        f"(overhead {100 * (on - off) / off:+.1f} %; target under 2 %)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
