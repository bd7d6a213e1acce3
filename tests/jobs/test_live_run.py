"""``iolens run`` as users start it: logs dropped while it runs, then a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.sink.search import iter_hits, refresh

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples" / "node01"
RUN_START_MS = 1767225600000  # 2026-01-01T00:00:00Z
DEADLINE_S = 60.0

pytestmark = pytest.mark.integration


def wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[str]) -> None:
    """Poll ``check`` until it holds (a deadline, not a fixed sleep); fail if iolens died."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if check():
            return
        if proc.poll() is not None:
            pytest.fail(f"iolens exited with {proc.returncode} while waiting for {what}")
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def count(client: Elasticsearch, index: str, query: dict | None = None) -> int:
    refresh(client, index)
    try:
        return int(client.count(index=index, query=query or {"match_all": {}})["count"])
    except NotFoundError:  # the stream does not exist yet
        return 0


def offline_window(files: list[Path]) -> dict[tuple[int, str], list[float]]:
    """``iolens fio-hist --method window`` for the same files: (end ms, dir) -> values."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli.main",
            "fio-hist",
            "--method",
            "window",
            "--directions",
            "rwm",
            "--percentiles",
            "90:99",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    rows = {}
    for line in out[1:]:
        cells = [c.strip() for c in line.split(",")]
        rows[(int(cells[0]), cells[1])] = [float(c) for c in cells[2:]]
    return rows


def test_live_run_drop_restart(es_url: str, tmp_path: Path) -> None:
    ns = f"live{uuid.uuid4().hex[:8]}"
    drop, state = tmp_path / "drop", tmp_path / "state"
    drop.mkdir()
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "elasticsearch": {"url": es_url, "namespace": ns},
                "state_dir": str(state),
                "drops": [{"type": "fio-hist", "path": str(drop), "host": "node01"}],
                "shipper": {"observer": "polling", "poll_interval_s": 0.2},
                "fio": {"run_start": "2026-01-01T00:00:00Z", "settle_s": 1.0},
                "sink": {"flush_interval_s": 0.2},
                "jobs": {"tick_s": 0.5},
            }
        )
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), "run"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    client = Elasticsearch(es_url)
    hist, lat = f"metrics-fio.histogram-{ns}", f"metrics-fio.latency-{ns}"
    sources = sorted(SAMPLES.glob("*.log"))
    lines = {p.name: p.read_bytes().splitlines(keepends=True) for p in sources}
    total = sum(len(v) for v in lines.values())
    try:
        # first the first half of each log, one of them ending in a partial line ...
        for p in sources:
            half = lines[p.name][: len(lines[p.name]) // 2]
            (drop / p.name).write_bytes(b"".join(half) + lines[p.name][len(half)][:50])
        wait_for("the first half", lambda: count(client, hist) >= total // 2 - 2, proc)
        # ... then the rest, appended while iolens runs
        for p in sources:
            n = len(lines[p.name]) // 2
            with (drop / p.name).open("ab") as fh:
                fh.write(lines[p.name][n][50:] + b"".join(lines[p.name][n + 1 :]))
        wait_for("every record", lambda: count(client, hist) == total, proc)
        expected = offline_window(sources)
        n_cluster = len(expected)
        wait_for(
            "the merged percentiles",
            lambda: count(client, lat, {"term": {"iolens.scope": "cluster"}}) == n_cluster,
            proc,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output

    docs = {
        (h["_source"]["fio"]["interval"]["end_ms"] - RUN_START_MS, h["_source"]["fio"]["ddir"]): h[
            "_source"
        ]["fio"]["clat_ns"]
        for h in iter_hits(
            client,
            lat,
            {"term": {"iolens.scope": "cluster"}},
            [{"fio.interval.end_ms": "asc"}, {"fio.ddir": "asc"}],
        )
    }
    names = {"m": "mixed", "r": "read", "w": "write"}
    assert {(end, names[d]) for end, d in expected} == set(docs)
    for (end, d), (samples, mn, mean, p50, p90, p99, mx) in expected.items():
        got = docs[(end, names[d])]
        assert got["samples"] == samples
        for key, want in (
            ("min", mn),
            ("mean", mean),
            ("p50", p50),
            ("p90", p90),
            ("p99", p99),
            ("max", mx),
        ):
            assert got[key] == pytest.approx(want, abs=0.0006), (end, d, key)

    # the running pipeline wrote its health every tick: lag from reading to acknowledgement
    health_index = f"metrics-iolens.pipeline-{ns}"
    refresh(client, health_index)
    health = [
        h["_source"]["iolens"]["pipeline"]
        for h in iter_hits(client, health_index, {"match_all": {}}, [{"@timestamp": "asc"}])
    ]
    assert health and all(h["dead_letters"] == h["dead_letters_new"] == 0 for h in health)
    assert sum(h["acknowledged"] for h in health) > 0
    lagged = [h for h in health if h["acknowledged"]]
    assert lagged and all(0 <= h["lag_mean_s"] <= h["lag_max_s"] < 60 for h in lagged)
    # and how far this host's clock is from the cluster's (one machine here: within 50 ms)
    offsets = [h["clock_offset_s"] for h in health]
    assert offsets and all(abs(o) < 0.05 for o in offsets)

    # A restart reads nothing new and indexes no duplicate.
    again = subprocess.run([*cmd, "--once"], capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "lines: 0 " in again.stdout
    assert count(client, hist) == total
    assert count(client, lat, {"term": {"iolens.scope": "cluster"}}) == n_cluster
    client.close()


def test_live_run_reads_a_darshan_log_once_it_is_complete(
    es_url: str, tmp_path: Path, darshan_inputs: Path
) -> None:
    # A log copied in two steps is not read half-written: only once it has been still for
    # darshan.stable_s; the worker pool (2 processes) analyses it inside `iolens run`.
    ns = f"livedar{uuid.uuid4().hex[:6]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "elasticsearch": {"url": es_url, "namespace": ns},
                "state_dir": str(tmp_path / "state"),
                "drops": [{"type": "darshan", "path": str(drop)}],
                "shipper": {"observer": "polling", "poll_interval_s": 0.2},
                "darshan": {"workers": 2, "stable_s": 1.0},
                "sink": {"flush_interval_s": 0.2},
                "jobs": {"tick_s": 0.3},
            }
        )
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), "run"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    client = Elasticsearch(es_url)
    jobs, files = f"logs-darshan.job-{ns}", f"logs-darshan.file-{ns}"
    data = (darshan_inputs / "sample-goodost.darshan").read_bytes()
    target = drop / "goodost.darshan"
    try:
        target.write_bytes(data[: len(data) // 2])
        time.sleep(0.5)
        with target.open("ab") as fh:
            fh.write(data[len(data) // 2 :])
        wait_for("the job document", lambda: count(client, jobs) == 1, proc)
        wait_for("the file documents", lambda: count(client, files) == 48, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, output
    assert "quarantine" not in output and "not a readable Darshan log" not in output
