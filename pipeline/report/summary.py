"""The end-of-run summary: files read, documents per data stream, cluster-wide percentiles."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from rich.console import Console
from rich.table import Table

from pipeline.jobs.summary import RunSummary
from pipeline.sink.client import Client
from pipeline.sink.search import ClusterUnavailable, iter_hits, refresh

log = logging.getLogger(__name__)


def _us(v: object) -> str:
    return f"{float(v) / 1000:,.1f}" if isinstance(v, int | float) else "-"


def _docs_table(summary: RunSummary) -> Table:
    """Documents indexed, already there and dead-lettered, per data stream."""
    docs = Table(title="documents by data stream")
    for col in ("data stream", "indexed", "already there", "dead-lettered"):
        docs.add_column(col, justify="right" if col != "data stream" else "left")
    for index, c in sorted(summary.docs.items()):
        docs.add_row(index, str(c["indexed"]), str(c["duplicate"]), str(c["dead_lettered"]))
    return docs


def _undelivered(summary: RunSummary) -> list[str]:
    """What was not indexed: spooled, unsent and dead-lettered documents (lines to print)."""
    lines = []
    if summary.spooled:
        lines.append(f"{summary.spooled} documents are spooled until the cluster answers")
    if summary.unsent:
        lines.append(
            f"{summary.unsent} documents were neither delivered nor spooled (the spool is full, "
            "sink.spool_max_bytes): their lines are read again on the next run"
        )
    if any(summary.dead_letters.values()):
        lines.append(
            "dead letters: " + ", ".join(f"{k} {v}" for k, v in summary.dead_letters.items())
        )
    return lines


def _latency_table(latency_rows: Sequence[Mapping[str, object]]) -> Table:
    """The cluster-wide p50/p95/p99/max per interval and direction (µs)."""
    lat = Table(title="cluster-wide completion latency (clat) per interval, µs")
    for col in ("interval end (UTC)", "ddir", "I/Os", "p50", "p95", "p99", "max"):
        lat.add_column(col, justify="right")
    for r in latency_rows:
        end = datetime.fromtimestamp(float(str(r["end_ms"])) / 1000, tz=UTC)
        lat.add_row(
            end.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3],
            str(r["ddir"]),
            str(r["samples"]),
            *(_us(r.get(k)) for k in ("p50", "p95", "p99", "max")),
        )
    return lat


def print_summary(
    summary: RunSummary, latency_rows: Sequence[Mapping[str, object]], console: Console
) -> None:
    """Print what a run did and the cluster-wide p50/p95/p99 per interval (µs)."""
    console.print(
        f"files read: {summary.files}   "
        + (f"skipped (delivered before): {summary.skipped}   " if summary.skipped else "")
        + (
            f"not read (delivered to another cluster): {summary.elsewhere}   "
            if summary.elsewhere
            else ""
        )
        + f"lines: {summary.lines}   bad lines: {summary.bad_lines}"
        f"   bad files: {summary.bad_files}   intervals merged: {summary.intervals}"
        + (f"   peer windows: {summary.peer_windows}" if summary.peer_windows else "")
    )
    console.print(_docs_table(summary))
    for line in _undelivered(summary):
        console.print(line)
    if latency_rows:
        console.print(_latency_table(latency_rows))


def cluster_latency_rows(
    client: Client, namespace: str, limit: int = 600
) -> list[dict[str, object]]:
    """Cluster-wide merged percentiles as indexed, oldest first; at most the last ``limit``
    documents (for summaries)."""
    index = f"metrics-fio.latency-{namespace}"
    refresh(client, index)
    rows: list[dict[str, object]] = []
    query = {"term": {"iolens.scope": "cluster"}}
    sort = [{"fio.interval.end_ms": "asc"}, {"fio.ddir": "asc"}]
    for hit in iter_hits(client, index, query, sort):
        src = hit["_source"]
        rows.append(
            {
                "end_ms": src["fio"]["interval"]["end_ms"],
                "ddir": src["fio"]["ddir"],
                **src["fio"]["clat_ns"],
            }
        )
    return rows[-limit:]


def report_run(client: Client, namespace: str, summary: RunSummary, console: Console) -> None:
    """Print the summary with the cluster-wide percentiles as indexed (without them when the
    cluster cannot be read now)."""
    try:
        rows = cluster_latency_rows(client, namespace)
    except ClusterUnavailable as err:
        log.warning("no latency table: %s", err)
        rows = []
    print_summary(summary, rows, console)
