"""The demo's findings printed per stream, short, in the terms of each tool (fio's clat, sysstat's
await, Darshan's counters, Magpie's canonical requests), then where to look next."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipeline.demo.findings import Cluster, Diagnosis, Indicted
from pipeline.lab.text import incident_lines
from pipeline.records.json import Source

MIB = 2**20


def _utc(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def fio_table(rows: Sequence[Mapping[str, object]], ddir: str = "mixed") -> Table:
    """Cluster-wide clat percentiles per interval of one direction (µs), from the rows of
    :func:`pipeline.report.summary.cluster_latency_rows` (ns)."""
    t = Table(title=f"fio: cluster-wide completion latency (clat), {ddir} reads and writes, µs")
    for col in ("interval end (UTC)", "I/Os", "p50", "p95", "p99", "max"):
        t.add_column(col, justify="right")
    for r in rows:
        if r["ddir"] != ddir:
            continue
        end = datetime.fromtimestamp(float(str(r["end_ms"])) / 1000, tz=UTC)
        t.add_row(
            end.strftime("%H:%M:%S"),
            f"{r['samples']:,}",
            *(f"{float(str(r[k])) / 1000:,.1f}" for k in ("p50", "p95", "p99", "max")),
        )
    return t


def print_incidents(console: Console, docs: Sequence[Source], names: Mapping[str, str]) -> None:
    """The incidents (``logs-iolens.incident`` sources) as ``iolens lab`` prints them, the
    jobs named by ``names`` (job id -> name); or that there was none."""
    if not docs:
        console.print("[b]incidents[/b]: none (no LUN was persistently anomalous among its peers)")
        return
    console.print(f"[b]incidents[/b]: {len(docs)}, each across fio, sysstat and Darshan")
    for doc in docs:
        console.print(escape("\n".join(incident_lines(doc, names))), highlight=False)


def print_indicted(console: Console, found: Sequence[Indicted]) -> None:
    """The LUNs the peer comparison indicted, or that none was."""
    if not found:
        console.print("[b]sysstat peer comparison[/b]: no LUN indicted")
        return
    for i in found:
        rank = (
            f"persistence rank {i.rank} in the newest ranking (accumulator {i.value:g}), "
            f"first in {i.rank1_rankings} of {i.rankings} rankings"
            if i.rank is not None
            else "not ranked yet"
        )
        console.print(
            f"[b]sysstat peer comparison[/b]: [b red]{i.lun}[/b red] indicted among the LUNs of "
            f"peer group {i.group!r} on {i.metric}: anomalous from the window ending "
            f"{_utc(i.first_anomalous_s)} UTC, faulty from {_utc(i.first_faulty_s)} UTC "
            f"({i.faulty_windows} faulty windows); {rank}",
            highlight=False,
        )


def _factors(f: Mapping[str, float]) -> str:
    names = (
        ("small", "small I/O"),
        ("non_consec", "non-consecutive"),
        ("coll", "collective"),
        ("ost_count", "OSTs"),
        ("proc_per_ost", "processes/OST"),
    )
    return ", ".join(f"{label} {f[k]:g}" for k, label in names if k in f)


def print_diagnosis(console: Console, d: Diagnosis | None) -> None:
    """The slowest job's diagnosis: bandwidth, critical file, factors, causes."""
    if d is None:
        console.print("[b]Darshan[/b]: no low-bandwidth job to diagnose")
        return
    s = d.source
    console.print(
        f"[b]Darshan[/b]: {d.jobs} jobs, {d.diagnosed} diagnosed; the slowest, "
        f"job {d.job_id} ({d.exe}), {s['direction']}s at "
        f"{s['critical_bytes_per_s'] / MIB:,.1f} MiB/s on its critical path",
        highlight=False,
    )
    if s.get("critical_files"):
        top = s["critical_files"][0]
        where = f", on OST {', '.join(map(str, top['osts']))}" if top.get("osts") else ""
        console.print(
            f"  critical file {escape(top['name'])}: {top['share']:.1%} of the critical "
            f"path{where}",
            highlight=False,
        )
    console.print(f"  factors: {_factors(s.get('factors', {}))}", highlight=False)
    for c in s.get("causes", []):
        console.print(
            f"  cause [b]{c['kind']}[/b] ({c['source']}): {escape(c['message'])}", highlight=False
        )


def workload_table(clusters: Sequence[Cluster]) -> Table:
    """The workload model's clusters: share, requests, critical path, representative."""
    total = sum(c.size for c in clusters)
    t = Table(title=f"event log: {total} requests in {len(clusters)} clusters (workload model)")
    for col in ("share", "requests", "critical path ms", "representative request"):
        t.add_column(col, justify="left" if col.startswith("repr") else "right")
    for c in clusters:
        t.add_row(
            f"{c.share:.0%}", str(c.size), f"{c.critical_path_ms:.1f}", escape(c.representative)
        )
    return t


def print_next(
    console: Console,
    report: str | None,
    namespace: str,
    config: Path | None = None,
    url: str = "http://localhost:9200",
) -> None:
    """Where to look next: the report, the state, Kibana, queries, stopping the server.

    ``config``: the configuration the demo wrote (``None``: the one found by default, as in a
    checkout), which the commands below need; ``url``: the cluster the queries go to.
    """
    console.print("\n[b]Where next[/b]")
    if config is not None:
        console.print(
            f"  export IOLENS_CONFIG={shlex.quote(str(config))}   # the demo's configuration",
            highlight=False,
        )
    lines = [
        *([f"{report}: the dashboards' views as one HTML file (iolens report)"] if report else []),
        "iolens status: the registry, spool, dead letters and the cluster",
        "iolens darshan stats: the jobs' I/O statistics; iolens deadletter list: rejected input",
        "iolens setup --kibana-url http://localhost:5601: dashboards and alert rules in Kibana",
        f"curl -s '{url}/logs-iolens.io_diagnosis-{namespace}/_search?pretty'",
        f"curl -s '{url}/metrics-iolens.peer_anomaly-{namespace}/_search"
        "?q=iolens.faulty:true&pretty'",
        "iolens server stop: stop the embedded server"
        + (" (it reads IOLENS_CONFIG too)" if config is not None else ""),
    ]
    for line in lines:
        console.print(f"  {line}", highlight=False)
