"""A mixed drop (fio, sysstat, Darshan, events) that grows as the tools write it, the
configuration ``iolens run`` reads it with, and the document ids it yields: shared by the
crash and outage tests."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.sink.search import refresh

ROOT = Path(__file__).resolve().parents[2]

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


def config(es_url: str, ns: str, drop: Path, state: Path, **sink: Any) -> dict[str, Any]:
    """The configuration of a run on the mixed drop: small requests and a short queue (many
    commits, and kills land inside them); ``sink`` overrides sink settings."""
    return {
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
        "sink": {"chunk_max_docs": 20, "flush_interval_s": 0.05, "queue_docs": 50, **sink},
        "jobs": {"tick_s": 0.2},
    }


def write_config(path: Path, es_url: str, ns: str, drop: Path, state: Path, **sink: Any) -> None:
    """:func:`config` written as YAML to ``path``."""
    path.write_text(yaml.safe_dump(config(es_url, ns, drop, state, **sink)))


def iolens(config: Path, *args: str) -> list[str]:
    """The command line of ``iolens`` with ``config`` and ``args``."""
    return [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), *args]


def ids(client: Elasticsearch, ns: str) -> dict[str, list[str]]:
    """The sorted document ids of each stream of :data:`DERIVED` in namespace ``ns``."""
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
