"""Soak: hours of input compressed into minutes, through ``iolens run`` as users run it.

A writer appends to the drop directories while ``iolens run`` (a child process, polling
observer) ships them into an embedded noida-db: fio histogram logs of several hosts (the test
data's real records, time-shifted, one record per host and direction every simulated second),
and an event log of the test suite's HTTP server (its real requests, repeated with new ids).
``--speedup`` simulated seconds pass per second of wall time. Every ``--sample-s`` the script
records the process's resident memory (``/proc/<pid>/status``), the documents searchable, and
the end-to-end lag: how long the newest fio record written so far took to become searchable.
At the end it stops the writer, waits for the pipeline to drain, stops it with SIGTERM and
checks the counts: one histogram document per fio record, one request document per request.

Usage::

    .venv/bin/python bench/soak.py                    # 3 minutes of writing, 15 simulated
    .venv/bin/python bench/soak.py --minutes 1 --speedup 10
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))

from pipeline.sink.embedded import EmbeddedServer, free_port  # noqa: E402
from pipeline.sink.search import refresh  # noqa: E402

SAMPLE = ROOT / "tests" / "data" / "fio" / "samples" / "node01" / "randrw_clat_hist.1.log"
SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
HOSTS = ("node01", "node02", "node03", "node04")
console = Console()


@dataclass
class Written:
    """What the writer has appended so far."""

    fio_records: int = 0
    requests: int = 0
    newest_ms: int = 0
    """Job-relative time of the newest fio record written."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def fio_lines() -> list[tuple[int, bytes]]:
    """The sample's records as (time ms, line without the time)."""
    out = []
    for line in SAMPLE.read_bytes().splitlines():
        t, rest = line.split(b",", 1)
        out.append((int(t), rest))
    return out


def server_events(tmp: Path) -> tuple[list[dict[str, Any]], int]:
    """A real run of the test server (4 clients x 25 requests): its events, and requests."""
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    from http_client import serve

    run = serve(tmp, 4, 25, 5)
    events = [{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in run.events if e.ev != "ClockSync"]
    return events, sum(run.sent.values())


def writer(
    drop: Path,
    speedup: float,
    stop: threading.Event,
    written: Written,
    events: list[dict[str, Any]],
    per_copy: int,
) -> None:
    """Append one fio record per host and direction per simulated second, and the recorded
    requests again every 50 simulated seconds."""
    records = fio_lines()
    step_ms = 1000
    logs = {h: drop / "fio" / h / "soak_clat_hist.1.log" for h in HOSTS}
    for p in logs.values():
        p.parent.mkdir(parents=True, exist_ok=True)
    elog = drop / "events" / "web1" / "server.jsonl"
    elog.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic_ns()
    with open(elog, "ab") as fh:
        fh.write(json.dumps({"ts": t0, "ev": "ClockSync", "wall_ns": time.time_ns()}).encode())
        fh.write(b"\n")
    sim_ms = 0
    k = 0
    start = time.monotonic()
    while not stop.is_set():
        sim_ms += step_ms
        _t, rest = records[k % len(records)]
        for p in logs.values():
            with open(p, "ab") as fh:
                for ddir in (b" 0", b" 1"):
                    fields = rest.split(b",", 1)
                    fh.write(str(sim_ms).encode() + b"," + ddir + b"," + fields[1] + b"\n")
        # every 50 simulated seconds, the server's recorded run again, with new ids
        if k % 50 == 0:
            copy = k // 50
            shift = time.monotonic_ns() - events[0]["ts"]
            lines = []
            for e in events:
                e2 = dict(e, ts=e["ts"] + shift)
                for a in ("conn", "_conn", "task", "rpc"):
                    if a in e2:
                        e2[a] = f"{e2[a]}#{copy}"
                if isinstance(e2.get("tid"), int):
                    e2["tid"] = e2["tid"] + 1_000_000 * (copy + 1)
                lines.append(json.dumps(e2, separators=(",", ":")).encode() + b"\n")
            with open(elog, "ab") as fh:
                fh.write(b"".join(lines))
            with written.lock:
                written.requests += per_copy
        with written.lock:
            written.fio_records += 2 * len(logs)
            written.newest_ms = sim_ms
        k += 1
        wait = start + sim_ms / 1000 / speedup - time.monotonic()
        if wait > 0:
            stop.wait(wait)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def count(
    client: Any, index: str, query: dict[str, Any] | None = None, *, fresh: bool = True
) -> int:
    """Documents of ``index`` matching ``query``; ``fresh=False`` counts what is searchable
    now (the cluster's own periodic refresh, about a second), without forcing a refresh that
    would load the cluster the pipeline is measured against."""
    try:
        if fresh:
            refresh(client, index)
        return int(client.count(index=index, query=query or {"match_all": {}})["count"])
    except Exception as err:  # not created yet, or the cluster too busy to answer in time
        console.log(f"count of {index} failed: {err}")
        return 0


def main(argv: list[str] | None = None) -> int:
    """Run the soak and print the table and the counts check."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--minutes", type=float, default=3.0, help="wall minutes of writing")
    p.add_argument("--speedup", type=float, default=5.0, help="simulated s per wall s")
    p.add_argument("--sample-s", type=float, default=10.0, help="seconds between samples")
    args = p.parse_args(argv)
    from elasticsearch import Elasticsearch

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        console.log("recording the test server's requests")
        events, per_copy = server_events(tmp / "server")
        drop = tmp / "drop"
        (drop / "fio").mkdir(parents=True)
        (drop / "events").mkdir()
        server = EmbeddedServer(tmp / "db", free_port())
        server.start(timeout_s=30)
        ns = "soak"
        config = tmp / "iolens.yaml"
        run_start = "2026-11-22T00:00:00Z"
        config.write_text(
            yaml.safe_dump(
                {
                    "elasticsearch": {"url": server.url, "namespace": ns},
                    "state_dir": str(tmp / "state"),
                    "drops": [
                        {"type": "fio-hist", "path": str(drop / "fio")},
                        {"type": "events", "path": str(drop / "events"), "schema": str(SCHEMA)},
                    ],
                    "shipper": {"observer": "polling", "poll_interval_s": 0.5},
                    "fio": {"run_start": run_start, "settle_s": 2.0},
                    "jobs": {"tick_s": 1.0},
                }
            )
        )
        # the cluster is loaded on purpose: the script's own requests wait for it
        client = Elasticsearch(server.url, request_timeout=300)
        proc = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), "run"],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "iolens.log", "wb"),  # noqa: SIM115
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        written = Written()
        stop = threading.Event()
        w = threading.Thread(
            target=writer, args=(drop, args.speedup, stop, written, events, per_copy)
        )
        w.start()
        hist = f"metrics-fio.histogram-{ns}"
        rows = []
        start = time.monotonic()
        try:
            while time.monotonic() - start < args.minutes * 60:
                time.sleep(args.sample_s)
                with written.lock:
                    newest = written.newest_ms
                    fio_written = written.fio_records
                # end-to-end lag: wait until the newest record written is searchable
                t_written = time.monotonic()
                query = {"range": {"fio.log.time_ms": {"gte": newest}}}
                while (
                    count(client, hist, query, fresh=False) < 2 * len(HOSTS)
                    and time.monotonic() - t_written < 60
                ):
                    time.sleep(0.5)
                lag = time.monotonic() - t_written
                rows.append(
                    (
                        time.monotonic() - start,
                        fio_written,
                        count(client, hist, fresh=False),
                        rss_mib(proc.pid),
                        lag,
                    )
                )
                console.log(
                    f"{rows[-1][0]:6.0f} s: written {fio_written:,}, searchable "
                    f"{rows[-1][2]:,}, RSS {rows[-1][3]:.0f} MiB, lag {lag:.1f} s"
                )
        finally:
            stop.set()
            w.join()
        # drain, then stop the pipeline
        deadline = time.monotonic() + 120
        while count(client, hist) < written.fio_records and time.monotonic() < deadline:
            time.sleep(1)
        old = time.time() - 3600  # the event log is finished: its last requests flush
        os.utime(drop / "events" / "web1" / "server.jsonl", (old, old))
        requests = f"logs-iolens.request-{ns}"
        while count(client, requests) < written.requests and time.monotonic() < deadline:
            time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=600)
            fio_docs, req_docs = count(client, hist), count(client, requests)
        finally:
            if proc.poll() is None:
                proc.kill()
            client.close()
            server.stop()
    simulated_h = written.newest_ms / 3.6e6
    wall = rows[-1][0] if rows else 0.0
    console.print(
        f"\n[b]{wall / 60:.1f} minutes of wall time, {simulated_h:.1f} hours simulated[/b]"
    )
    console.print("| t (s) | records written | searchable | RSS MiB | lag s |")
    console.print("|---|---|---|---|---|")
    for t, wr, se, rss, lag in rows:
        console.print(f"| {t:.0f} | {wr:,} | {se:,} | {rss:.0f} | {lag:.1f} |")
    rate = written.fio_records / wall if wall else 0.0
    console.print(f"throughput: {rate:,.0f} fio records/s written and shipped")
    ok = fio_docs == written.fio_records and req_docs == written.requests
    console.print(
        f"counts: fio {fio_docs:,} of {written.fio_records:,} records, requests {req_docs:,} "
        f"of {written.requests:,}: {'OK' if ok else 'MISMATCH'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
