"""A drop of fio histogram logs of many hosts, the configuration ``iolens run`` reads it with,
and what it must yield: shared by ``test_full_disk.py`` and ``bench/full_disk.py``.

Each host directory ``fio/nodeNN/`` holds copies of the test data's two real logs
(``tests/data/fio/samples/node01``, about 0.9 MB); the host name is part of each document's
id, so every host gives other documents. One histogram document is made per data line of a
log (a line is one interval of one direction of one job thread)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.sink.search import refresh

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "fio" / "samples" / "node01"
HISTOGRAMS = "metrics-fio.histogram"


def build_drop(drop: Path, hosts: int, first: int = 1) -> int:
    """Copy the sample logs into ``drop/fio/nodeNNN`` for ``hosts`` hosts from number ``first``
    (each log written to a hidden name, then renamed: it appears whole).

    Returns:
        The histogram documents these hosts' logs must yield (their data lines).
    """
    lines = 0
    for log in sorted(SAMPLE.glob("*.log")):
        lines += sum(1 for line in log.read_bytes().splitlines() if line.strip())
    for n in range(first, first + hosts):
        host = drop / "fio" / f"node{n:03d}"
        host.mkdir(parents=True)
        for log in sorted(SAMPLE.glob("*.log")):
            shutil.copyfile(log, host / f".{log.name}")
            (host / f".{log.name}").rename(host / log.name)
    return lines * hosts


def config(es_url: str, ns: str, drop: Path, state: Path, **sink: Any) -> dict[str, Any]:
    """The configuration of a run on the drop; ``sink`` overrides sink settings."""
    return {
        "elasticsearch": {"url": es_url, "namespace": ns},
        "state_dir": str(state),
        "drops": [{"type": "fio-hist", "path": str(drop / "fio")}],
        "shipper": {"observer": "polling", "poll_interval_s": 0.2},
        "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0.2},
        "jobs": {"tick_s": 0.2},
        "sink": sink,
    }


def write_config(path: Path, es_url: str, ns: str, drop: Path, state: Path, **sink: Any) -> None:
    """:func:`config` written as YAML to ``path``."""
    path.write_text(yaml.safe_dump(config(es_url, ns, drop, state, **sink)))


def iolens(config_path: Path, *args: str) -> list[str]:
    """The command line of ``iolens`` with ``config_path`` and ``args``."""
    return [sys.executable, "-m", "pipeline.cli.main", "--config", str(config_path), *args]


def histogram_count(client: Elasticsearch, ns: str) -> int:
    """How many histogram documents namespace ``ns`` holds (0 before the first)."""
    index = f"{HISTOGRAMS}-{ns}"
    try:
        refresh(client, index)
        return int(client.count(index=index)["count"])
    except NotFoundError:
        return 0


def histogram_ids(client: Elasticsearch, ns: str, hosts: int) -> list[str]:
    """The ids of every histogram document in namespace ``ns`` (sorted; duplicates kept),
    searched host by host (each host's documents fit one page)."""
    index = f"{HISTOGRAMS}-{ns}"
    refresh(client, index)
    out: list[str] = []
    for n in range(1, hosts + 1):
        query = {"term": {"host.name": f"node{n:03d}"}}
        try:
            resp = client.search(index=index, query=query, size=10_000, source=False)
        except NotFoundError:  # nothing indexed yet
            return []
        out.extend(str(hit["_id"]) for hit in resp["hits"]["hits"])
    return sorted(out)
