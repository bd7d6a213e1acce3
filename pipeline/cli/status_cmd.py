"""``iolens status``: registry, spool and dead letters, cluster reachability and capabilities."""

from __future__ import annotations

import argparse
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.cli.common import settings_from_args
from pipeline.cli.subcommand import Subparsers
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.jobs.service_monitor import RatesSnapshot, read_state
from pipeline.settings import ElasticsearchSettings
from pipeline.shippers.registry import Registry
from pipeline.sink.capabilities import detect
from pipeline.sink.client import make_client, ping_url
from pipeline.sink.clock_offset import measure as measure_offset
from pipeline.sink.cluster_id import cluster_id
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.disk import RESERVE_BYTES, free_bytes, too_full_to_open
from pipeline.sink.notices import said
from pipeline.sink.spool import Spool
from pipeline.state_files import is_damage


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        name, help="show registry, spool, dead letters and the cluster", description=__doc__
    )
    p.add_argument("--state-dir", help="state directory (default: state_dir of the config)")


def print_rates(console: Console, rates: RatesSnapshot | None) -> None:
    """The stages' service rates the pipeline last wrote (seed 003), with the bottleneck."""
    if rates is None:
        console.print("service rates: none measured yet (iolens run writes them)")
        return
    when = datetime.fromtimestamp(rates["time"], UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    table = Table(title=f"service rates (items/s), as of {when}")
    for col in ("stage", "service rate", "confidence", "throughput", "utilisation", "blocked"):
        table.add_column(col, justify="left" if col in ("stage", "confidence") else "right")
    for name, st in rates["stages"].items():
        est = st["estimate"]
        mark = " (bottleneck)" if rates.get("bottleneck") == name else ""
        if rates.get("bottleneck") == "produce" and rates.get("within") == name:
            mark = " (most of produce)"
        conf = "-" if est is None else str(est["confidence"])
        if st.get("method_failed"):
            conf = f"method failed ({st['failures']}x); last kept" if est else "method failed"
        table.add_row(
            f"{name}{mark}",
            "-" if est is None else f"{est['rate_per_s']:,.0f}",
            conf,
            _num(st["throughput_per_s"], "{:,.0f}"),
            _num(st["utilisation"], "{:.0%}"),
            _num(st["blocked_share"], "{:.0%}"),
        )
    console.print(table)


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else fmt.format(v)


def run(args: argparse.Namespace) -> int:
    """Print the status; exit 0 even when the cluster is down (that is what status is for)."""
    settings = settings_from_args(args)
    state = Path(args.state_dir or settings.state_dir)
    console = Console()
    print_local(console, state)
    print_rates(console, read_state(state))
    print_cluster(console, settings.elasticsearch, state)
    return 0


def print_local(console: Console, state: Path) -> None:
    """The registry's files, the spool, the dead letters and the due intervals in ``state``."""
    table = Table(title=f"registry {state / 'registry.sqlite'}")
    table.add_column("path", overflow="fold")
    for col in ("offset", "lines", "generation"):
        table.add_column(col, justify="right")
    table.add_column("delivered to", overflow="fold")
    path, problem = state / "registry.sqlite", ""
    try:
        if path.exists():
            reg = Registry(path)
            for st in reg.all():
                row = (st.path, str(st.offset), str(st.line_no), str(st.generation))
                table.add_row(*row, st.cluster or "-")
            reg.close()
    except sqlite3.Error as err:
        problem = unreadable(path, err, state)
    console.print(table)
    if problem:
        console.print(problem, highlight=False)
    console.print(disk_line(state))
    spool = Spool(state / "spool")
    dead = DeadLetters(state / "deadletter")
    console.print(f"spool: {spool.pending()} documents waiting for the cluster")
    counts = dead.count()
    console.print("dead letters: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    path = state / "jobs.sqlite"
    try:
        if path.exists():
            dirty = DirtyIntervals(path)
            console.print(f"intervals waiting for merged percentiles: {dirty.count()}")
            dirty.close()
    except sqlite3.Error as err:
        console.print(unreadable(path, err, state), highlight=False)


def unreadable(path: Path, err: sqlite3.Error, state: Path) -> str:
    """What ``status`` says of the registry or jobs file ``path`` it cannot read."""
    if is_damage(err):
        return (
            f"{path} is damaged ({err}): the next iolens run or ingest moves it aside and "
            "starts a new one"
        )
    return f"{path} cannot be read ({err}){_why(err, state)}"


def _why(err: sqlite3.Error, state: Path) -> str:
    """``"; the state directory's disk is full"`` when that is why a state database of ``state``
    cannot be opened; else nothing."""
    return (
        "; the state directory's disk is full" if too_full_to_open(err, free_bytes(state)) else ""
    )


def disk_line(state: Path) -> str:
    """The free bytes of the state directory's file system, and whether it is full: the spool
    has no room for one more segment as large as those it holds (it leaves
    :data:`~pipeline.sink.disk.RESERVE_BYTES` to the state databases), so reading waits."""
    free = free_bytes(state)
    line = f"state directory {state}: {'unknown' if free is None else free} bytes free"
    segments = [p.stat().st_size for p in (state / "spool").glob("seg-*.ndjson")]
    segment = sum(segments) // len(segments) if segments else 0
    if free is not None and free < RESERVE_BYTES + segment:
        line += (
            f", full (the spool leaves {RESERVE_BYTES} bytes to the state databases): iolens "
            "run reads no new input until the spool is delivered; free space there or move "
            "state_dir to a larger file system"
        )
    return line


def print_cluster(console: Console, es: ElasticsearchSettings, state: Path) -> None:
    """Whether the cluster answers, which cluster it is, what it can do, and the notices about
    what it lacks with when ``iolens run``/``ingest`` first said each in ``state``."""
    url = es.url
    if not ping_url(url, timeout=5.0):
        console.print(f"cluster: nothing answers at {url}")
        return
    client = make_client(es)
    caps = detect(client)
    ident = cluster_id(client, create=False)
    offset = measure_offset(client)
    client.close()
    console.print(f"cluster: {url} answers, Elasticsearch API {caps.version}")
    if offset is not None:
        console.print(f"  clock: {offset.text()}", highlight=False)
    console.print(f"  cluster id: {ident or 'unknown (nothing was delivered to it yet)'}")
    for name in ("ilm", "data_stream_admin", "percentiles_agg"):
        console.print(f"  {name}: {'yes' if getattr(caps, name) else 'no'}")
    first = said(state, ident)
    for msg in caps.messages:
        when = first.get(msg)
        console.print(f"  {msg} ({f'first said {when}' if when else 'not said yet'})")
