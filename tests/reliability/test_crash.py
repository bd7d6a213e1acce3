"""Crash consistency (DESIGN.md, delivery promise): ``iolens run`` killed with SIGKILL at random
moments while it ingests a mixed drop, restarted each time, ends with exactly the documents of
a clean run: the same ids, none missing, none twice, and every file committed to its end."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.shippers.registry import Registry
from pipeline.sink.search import refresh

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "workloads"))
from http_client import serve  # noqa: E402

FIO = ROOT / "tests" / "data" / "fio" / "samples"
SADF = ROOT / "tests" / "data" / "sysstat" / "peer_clean_sadf_d.csv"
DARSHAN = (
    ROOT.parent
    / "shared"
    / "data"
    / "darshan-logs"
    / "mpi_io_test_with_dxt"
    / "treddy_mpi-io-test_id4373053_6-2-60198-9815401321915095332_1.darshan"
)
SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
KILLS = 20
DERIVED = (
    "metrics-fio.histogram",
    "metrics-fio.latency",
    "metrics-sysstat.diskio",
    "logs-darshan.job",
    "logs-darshan.file",
    "logs-iolens.request",
)
"""Data streams whose documents derive from the input alone (the workload model's snapshots,
the service rates and the pipeline's health are stamped with the time they were made)."""

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


def sources(events: bytes) -> dict[str, bytes]:
    """The drop's files (relative path -> content)."""
    out = {f"fio/{p.relative_to(FIO)}": p.read_bytes() for p in sorted(FIO.glob("*/*.log"))}
    out["sysstat/fs001_sadf_d.csv"] = SADF.read_bytes()
    out[f"darshan/{DARSHAN.name}"] = DARSHAN.read_bytes()
    out["events/web1/server.jsonl"] = events
    return out


def grow(root: Path, files: dict[str, bytes], part: int, parts: int) -> None:
    """Write the first ``part`` of ``parts`` of every text file (whole lines; everything at
    the last part), as tools append while they run; a Darshan log appears whole, midway."""
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".darshan"):
            if part >= parts // 2 and not path.exists():
                path.write_bytes(data)
            continue
        cut = len(data) if part >= parts else data.rfind(b"\n", 0, len(data) * part // parts) + 1
        have = path.stat().st_size if path.exists() else 0
        if cut > have:
            with path.open("ab") as fh:
                fh.write(data[have:cut])


def finished(root: Path) -> None:
    """The event log untouched for an hour: its open requests are flushed."""
    log = root / "events" / "web1" / "server.jsonl"
    old = time.time() - 3600
    os.utime(log, (old, old))


def write_config(path: Path, es_url: str, ns: str, drop: Path, state: Path) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "elasticsearch": {"url": es_url, "namespace": ns},
                "state_dir": str(state),
                "drops": [
                    {"type": "fio-hist", "path": str(drop / "fio")},
                    {"type": "sadf", "path": str(drop / "sysstat")},
                    {"type": "darshan", "path": str(drop / "darshan")},
                    {"type": "events", "path": str(drop / "events"), "schema": str(SCHEMA)},
                ],
                "shipper": {"observer": "polling", "poll_interval_s": 0.1},
                "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0.2},
                "darshan": {"workers": 1, "stable_s": 0.0},
                # small requests and a short queue: many commits, and kills land inside them
                "sink": {"chunk_max_docs": 20, "flush_interval_s": 0.05, "queue_docs": 50},
                "jobs": {"tick_s": 0.2},
            }
        )
    )


def iolens(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), *args]


def ids(client: Elasticsearch, ns: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for stream in DERIVED:
        index = f"{stream}-{ns}"
        refresh(client, index)
        try:
            resp = client.search(index=index, size=10_000, source=False, track_total_hits=True)
        except NotFoundError:  # nothing of that stream indexed yet
            out[stream] = []
            continue
        assert resp["hits"]["total"]["value"] < 10_000
        out[stream] = sorted(h["_id"] for h in resp["hits"]["hits"])
    return out


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    tmp = tmp_path_factory.mktemp("server")
    serve(tmp, 3, 20, 31)
    return (tmp / "events.jsonl").read_bytes()


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(
    es_url: str, client: Elasticsearch, tmp_path: Path, events: bytes
) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    rng = random.Random(8)
    before_last = 0
    results: dict[str, dict[str, list[str]]] = {}
    committed: dict[str, dict[str, tuple[int, int]]] = {}
    killed_while_busy = 0
    files = sources(events)
    for name, kills in (("clean", 0), ("crash", KILLS)):
        ns = f"{name}{uuid.uuid4().hex[:6]}"
        drop, state, config = tmp_path / name, tmp_path / f"{name}-state", tmp_path / f"{name}.yaml"
        write_config(config, es_url, ns, drop, state)
        for k in range(kills):
            grow(drop, files, k + 1, kills + 1)  # more input for every life of the process
            proc = subprocess.Popen(
                iolens(config, "run"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
            )
            time.sleep(rng.uniform(0.8, 2.5))  # start-up takes about a second
            killed_while_busy += proc.poll() is None
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        if kills:
            partial = ids(client, ns)
            before_last = sum(map(len, partial.values()))
        grow(drop, files, 1, 1)
        finished(drop)
        done = subprocess.run(
            iolens(config, "run", "--once"), capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        results[name] = ids(client, ns)
        reg = Registry(state / "registry.sqlite")
        committed[name] = {
            str(Path(st.path).relative_to(drop)): (st.offset, st.line_no) for st in reg.all()
        }
        reg.close()
        # fio and event logs are committed to their ends (a sadf CSV keeps its last interval,
        # still open, for lines to come)
        for rel, (offset, _n) in committed[name].items():
            if not rel.startswith(("sysstat", "darshan")):
                assert offset == (drop / rel).stat().st_size, rel
    assert killed_while_busy == KILLS
    clean, crash = results["clean"], results["crash"]
    # the killed processes did part of the work, the last run the rest
    assert 0 < before_last < sum(map(len, crash.values()))
    for stream in DERIVED:
        assert clean[stream], stream
        assert len(crash[stream]) == len(set(crash[stream])), stream
        assert crash[stream] == clean[stream], stream
    assert committed["crash"] == committed["clean"]  # the registries agree, file by file
    counts: dict[str, Any] = {s: len(v) for s, v in clean.items()}
    assert counts["logs-iolens.request"] == 60
