"""What the event-log path makes of the test server's log: requests, canonical forms and
cluster assignments, as digests to compare with ``tests/data/events/http_server_6x50.golden.json``.

The golden file was written by :func:`outcome` with the code before the clustering was made
faster (``python tests/reducers/events_golden.py``); the test compares today's code with it.
The log is repeated ``COPIES`` times as ``bench/requests.py`` does (each copy shifted in time,
its connections, threads, tasks and RPCs renamed), so clusters grow past their recentring sizes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import yaml

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "tests" / "data" / "events" / "http_server_6x50.jsonl"
GOLDEN = LOG.with_suffix(".golden.json")
SCHEMA_PATH = ROOT / "config" / "schemas" / "http_server.yaml"
COPIES = 20
ID_ATTRS = ("conn", "task", "rpc", "_conn")


def copies(path: Path, n: int) -> Iterator[bytes]:
    """The log's lines repeated ``n`` times, each copy after the previous one with its own ids
    and each ``cpu_ns`` of a later copy scaled by a factor in [0.99, 1.01] that depends on the
    copy and the line, so that no two copies have the same canonical forms (copy 0 as it is)."""
    events = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    t0 = min(e["ts"] for e in events)
    span = max(e["ts"] for e in events) - t0 + 1_000_000
    for k in range(n):
        for i, e in enumerate(events):
            if k and e["ev"] == "ClockSync":
                continue
            copy = dict(e)
            if k:
                copy["ts"] = e["ts"] + k * span
                if "tid" in copy:
                    copy["tid"] = e["tid"] + k * 1_000_000
                for a in ID_ATTRS:
                    if a in copy:
                        copy[a] = f"{e[a]}@{k}"
                if isinstance(e.get("cpu_ns"), int):
                    copy["cpu_ns"] = e["cpu_ns"] * (10_000 + (k * 7919 + i) % 201 - 100) // 10_000
            yield orjson.dumps(copy)


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def _dist(d: float) -> float:
    """Distances to 1e-6 (1 ns of CPU, 0.001 byte): the same up to the order of float sums."""
    return round(d, 6)


def outcome(n: int = COPIES, batched: bool = False) -> dict[str, Any]:
    """Extract, canonicalise and cluster (online with ``cluster_stream``, then each request
    against the final model) the log repeated ``n`` times; counts, per-cluster figures and
    digests of every request's lines, resources, canonical form, assignments and outlier flag.
    ``batched``: the events joined a batch at a time (``extract``), not one by one."""
    from pipeline.formats.events.decode import parse_events
    from pipeline.records.event_schema import event_schema
    from pipeline.reducers.canonical import canonical
    from pipeline.reducers.event_order import merge_streams
    from pipeline.reducers.request_cluster import cluster_stream
    from pipeline.reducers.request_join import RequestParser, extract

    schema = event_schema(yaml.safe_load(SCHEMA_PATH.read_text()), str(SCHEMA_PATH))
    events = merge_streams([parse_events(copies(LOG, n), str(LOG))], schema)
    if batched:
        reqs = list(extract(events, schema))
    else:
        parser = RequestParser(schema)
        reqs = [r for e in events for r in parser.feed(e)] + parser.close()
    forms = [canonical(r, schema) for r in reqs]
    model, clusters, distances = cluster_stream(iter(forms))
    online = list(zip(clusters, distances, strict=True))
    final = [model.nearest(f) for f in forms]
    types = [str(r.seed.attrs.get("_type")) for r in reqs]
    return {
        "copies": n,
        "requests": len(reqs),
        "incomplete": sum(not r.complete for r in reqs),
        "sizes": [cl.size for cl in model.clusters],
        "representatives": [cl.representative.text() for cl in model.clusters],
        "diameters": [_dist(cl.diameter) for cl in model.clusters],
        "cluster_types": [
            sorted({t for t, (n, _d) in zip(types, online, strict=True) if n == cl.id})
            for cl in model.clusters
        ],
        "requests_sha256": _digest(
            [[r.start_ns, r.end_ns, list(r.lines), r.complete, r.resources] for r in reqs]
        ),
        "forms_sha256": _digest([f.to_json() for f in forms]),
        "texts_sha256": _digest([f.text() for f in forms]),
        "online_sha256": _digest([[n, _dist(d)] for n, d in online]),
        "final_sha256": _digest([[a.cluster, _dist(a.distance)] for a in final]),
        "outliers_sha256": _digest([model.is_outlier(n, d) for n, d in online]),
    }


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    GOLDEN.write_text(json.dumps(outcome(), indent=1) + "\n")
