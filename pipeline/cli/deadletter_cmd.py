"""``iolens deadletter list|replay``: look at and re-send what was dead-lettered."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.sink.bulk import BulkSink
from pipeline.sink.deadletter import DeadLetters


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(name, help="list or replay dead letters", description=__doc__)
    p.add_argument("action", choices=["list", "replay"])
    p.add_argument("--state-dir", help="state directory (default: config)")


def run(args: argparse.Namespace) -> int:
    """``list`` prints rejected documents and inputs; ``replay`` re-sends the documents."""
    settings = settings_from_args(args)
    state = Path(args.state_dir or settings.state_dir)
    dead = DeadLetters(state / "deadletter")
    console = Console()
    if args.action == "list":
        docs = Table(title="rejected documents")
        for col in ("time", "data stream", "status", "error"):
            docs.add_column(col)
        for d in dead.iter_documents():
            docs.add_row(d.timestamp, d.doc.index, str(d.status), f"{d.error_type}: {d.reason}")
        console.print(docs)
        inputs = Table(title="rejected input")
        for col in ("time", "file:line", "reason"):
            inputs.add_column(col, overflow="fold")
        for i in dead.iter_inputs():
            inputs.add_row(i.timestamp, f"{i.path}:{i.line_no}", i.reason)
        console.print(inputs)
        return 0
    with Cluster(settings) as cluster:
        sink = BulkSink(cluster.client, settings.sink, state)
        n = dead.replay(sink)
        sink.close()
    console.print(f"replayed {n} documents")
    return 0
