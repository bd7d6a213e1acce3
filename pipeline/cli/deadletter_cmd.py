"""``iolens deadletter list|show ID|replay`` (alias ``iolens dlq``): look at and re-send what was
dead-lettered.

``list`` numbers the rejected documents ``d1, d2...`` and the rejected input lines ``i1, i2...``;
``show ID`` prints one of them whole (an input line's bytes as they were read, a document's
source); ``replay`` re-sends the rejected documents.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.errors import ConfigError
from pipeline.sink.bulk import BulkSink
from pipeline.sink.deadletter import DeadDocument, DeadInput, DeadLetters


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "list, show or replay dead letters", __doc__)
    p.add_argument("action", choices=["list", "show", "replay"])
    p.add_argument("ID", nargs="?", help="show: an entry as list numbers it (d1, i3...)")
    p.add_argument("--state-dir", help="state directory (default: config)")


def run(args: argparse.Namespace) -> int:
    """``list`` prints rejected documents and inputs; ``replay`` re-sends the documents."""
    settings = settings_from_args(args)
    state = Path(args.state_dir or settings.state_dir)
    dead = DeadLetters(state / "deadletter")
    console = Console()
    if args.action == "list":
        docs = Table(title="rejected documents")
        for col in ("id", "time", "data stream", "status", "error"):
            docs.add_column(col)
        for n, d in enumerate(dead.iter_documents(), start=1):
            error = f"{d.error_type}: {d.reason}"
            docs.add_row(*_cells(f"d{n}", d.timestamp, d.doc.index, str(d.status), error))
        console.print(docs)
        inputs = Table(title="rejected input")
        for col in ("id", "time", "file:line", "reason"):
            inputs.add_column(col, overflow="fold")
        for n, i in enumerate(dead.iter_inputs(), start=1):
            inputs.add_row(*_cells(f"i{n}", i.timestamp, f"{i.path}:{i.line_no}", i.reason))
        console.print(inputs)
        return 0
    if args.action == "show":
        return _show(dead, args.ID)
    with Cluster(settings) as cluster:
        sink = BulkSink(cluster.client, settings.sink, state)
        n = dead.replay(sink)
        sink.close()
    console.print(f"replayed {n} documents")
    return 0


def _cells(*values: str) -> list[Text]:
    """Table cells shown as they are: reasons quote input and Elasticsearch's errors, whose
    ``[...]`` rich would otherwise take for markup (and drop, or fail on)."""
    return [Text(v) for v in values]


def _show(dead: DeadLetters, ident: str | None) -> int:
    """Print one entry whole.

    Raises:
        ConfigError: no ID, or no such entry.
    """
    if not ident or ident[0] not in "di" or not ident[1:].isdigit():
        raise ConfigError(f"show needs an ID as list prints it (d1, i1...), not {ident!r}")
    n = int(ident[1:])
    entries: Iterator[DeadDocument | DeadInput] = (
        dead.iter_documents() if ident[0] == "d" else dead.iter_inputs()
    )
    entry = next((e for k, e in enumerate(entries, start=1) if k == n), None)
    if entry is None:
        raise ConfigError(f"no dead letter {ident}")
    out = sys.stdout
    if isinstance(entry, DeadInput):
        out.write(
            f"{entry.path}:{entry.line_no}\nstage: {entry.stage}\ntime: {entry.timestamp}\n"
            f"reason: {entry.reason}\nline ({len(entry.raw_bytes)} bytes):\n"
        )
        out.write(entry.raw_bytes.decode("utf-8", "backslashreplace") + "\n")
    else:
        out.write(
            f"{entry.doc.index} {entry.doc.doc_id}\nstatus: {entry.status}\n"
            f"time: {entry.timestamp}\nerror: {entry.error_type}: {entry.reason}\n"
        )
        out.write(json.dumps(entry.doc.source, indent=2, default=str) + "\n")
    return 0
