"""``iolens requests``: Magpie request extraction from event logs (seed 002).

``iolens requests extract --schema FILE [--kernel FILE] [--cluster] [--threshold X] [--json]
EVENTS...`` reads one machine's JSON-lines event logs (and, with ``--kernel``, the
``perf script --ns`` output of its ``sched:sched_switch`` events), joins the events into
requests with the schema's temporal joins and prints each request: the join attribute values
it bound, its resources, its events and its canonical form. ``--cluster`` adds behavioural
clustering: each request's cluster and outlier flag, then the workload model (clusters, their
frequencies, diameters and separations, and the model error per resource).

A bad event line is reported (file, line, reason) and skipped; the exit status is then 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import yaml

from pipeline.errors import ConfigError
from pipeline.parsers.errors import ParseError
from pipeline.parsers.event_schema import EventSchema, event_schema
from pipeline.parsers.events import Event, parse_event_line, perf_sched_events
from pipeline.reducers.canonical import Canonical, canonical
from pipeline.reducers.request_cluster import (
    Assignment,
    Clusterer,
    cluster_all,
    total_resources,
)
from pipeline.reducers.request_join import Request, RequestParser, merge_streams


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """Register the subcommand and its action."""
    p = sub.add_parser(
        name,
        help="extract requests from event logs (Magpie) and cluster them",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    x = acts.add_parser("extract", help="requests of event logs, offline")
    x.add_argument("EVENTS", nargs="+", type=Path, help="JSON-lines event logs of one machine")
    x.add_argument("--schema", type=Path, required=True, help="the event schema (YAML)")
    x.add_argument(
        "--kernel",
        type=Path,
        action="append",
        default=[],
        help="perf script --ns output of sched_switch events (repeatable)",
    )
    x.add_argument("--cluster", action="store_true", help="cluster the requests")
    x.add_argument("--threshold", type=float, default=2.0, help="new-cluster distance (2.0)")
    x.add_argument("--json", action="store_true", help="one JSON object per request")


def load_schema(path: Path) -> EventSchema:
    """The event schema in ``path``.

    Raises:
        ConfigError: unreadable, not YAML, or not a valid schema.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"event schema {path}: {err}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"event schema {path}: a mapping with 'events' is expected")
    return event_schema(data, str(path))


def _events(path: Path, bad: list[ParseError]) -> Iterator[Event]:
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield parse_event_line(line, str(path), n)
            except ParseError as err:
                bad.append(err)
                sys.stderr.write(f"iolens: {err} (line skipped)\n")


def _kernel(path: Path) -> Iterator[Event]:
    with open(path, "rb") as fh:
        yield from perf_sched_events(fh, str(path))


def request_dict(
    r: Request, c: Canonical, n: int, assignment: Assignment | None, outlier: bool | None
) -> dict[str, Any]:
    """One request as JSON-able values (times in ns and ms)."""
    out: dict[str, Any] = {
        "request": n,
        "start_ns": r.start_ns,
        "end_ns": r.end_ns,
        "duration_ms": (r.end_ns - r.start_ns) / 1e6,
        "complete": r.complete,
        "attributes": {k: list(v) for k, v in r.attributes.items()},
        "resources": r.resources,
        "events": [{"ts": e.ts_ns, "ev": e.ev, **e.attrs} for e in r.events],
        "canonical": c.text(),
        "critical_path_ms": c.critical_path_ns / 1e6,
        "threads": c.threads,
    }
    if assignment is not None:
        out |= {"cluster": assignment.cluster, "distance": assignment.distance, "outlier": outlier}
    return out


def model_dict(model: Clusterer, measured: dict[str, float]) -> dict[str, Any]:
    """The workload model: its clusters (:meth:`Clusterer.summary`), the model error per
    resource against ``measured`` and the threshold."""
    return {
        "clusters": model.summary(),
        "model_error": model.model_error(measured),
        "threshold": model.threshold,
    }


def _print_text(out: TextIO, rows: list[dict[str, Any]]) -> None:
    for row in rows:
        flag = ""
        if "cluster" in row:
            flag = f"  cluster {row['cluster']}{' OUTLIER' if row['outlier'] else ''}"
        attrs = " ".join(f"{k}={','.join(map(str, v))}" for k, v in row["attributes"].items())
        out.write(
            f"request {row['request']}: {row['duration_ms']:.2f} ms, critical path "
            f"{row['critical_path_ms']:.2f} ms, {len(row['events'])} events"
            f"{'' if row['complete'] else ' (incomplete)'}{flag}\n"
            f"  {attrs}\n  {row['canonical']}\n"
        )


def _print_model(out: TextIO, model: dict[str, Any]) -> None:
    out.write(f"workload model (threshold {model['threshold']:g}):\n")
    for cl in model["clusters"]:
        sep = cl["separation"]
        out.write(
            f"  cluster {cl['cluster']}: {cl['size']} requests ({cl['share']:.1%}), diameter "
            f"{cl['diameter']:.3f}, separation {'-' if sep is None else f'{sep:.3f}'}\n"
            f"    {cl['representative']}\n"
        )
    errs = ", ".join(
        f"{k} {'-' if v is None else f'{v:.2%}'}" for k, v in model["model_error"].items()
    )
    out.write(f"  model error: {errs}\n")


def _extract(args: argparse.Namespace) -> int:
    schema = load_schema(args.schema)
    bad: list[ParseError] = []
    sources: list[Iterator[Event]] = [_events(p, bad) for p in args.EVENTS]
    sources += [_kernel(p) for p in args.kernel]
    parser = RequestParser(schema)
    reqs: list[Request] = []
    for e in merge_streams(sources, schema):
        reqs += parser.feed(e)
    reqs += parser.close()
    reqs.sort(key=lambda r: r.start_ns)
    forms = [canonical(r, schema) for r in reqs]
    assignments: list[Assignment | None] = [None] * len(reqs)
    outliers: list[bool | None] = [None] * len(reqs)
    model: dict[str, Any] | None = None
    if args.cluster and forms:
        clusterer, final, flags = cluster_all(forms, args.threshold)
        assignments, outliers = list(final), list(flags)
        model = model_dict(clusterer, total_resources(forms))
    rows = [
        request_dict(r, c, n, a, o)
        for n, (r, c, a, o) in enumerate(zip(reqs, forms, assignments, outliers, strict=True))
    ]
    out = sys.stdout
    if args.json:
        for row in rows:
            out.write(json.dumps(row) + "\n")
        if model is not None:
            out.write(json.dumps({"model": model}) + "\n")
    else:
        _print_text(out, rows)
        if model is not None:
            _print_model(out, model)
        st = parser.stats
        out.write(
            f"{st.requests} requests ({st.incomplete} incomplete) from {st.events} events; "
            f"{st.garbage_graphs} unseeded groups ({st.garbage_events} events) dropped, "
            f"{st.unknown} events of types the schema does not declare\n"
        )
    return 2 if bad else 0


def run(args: argparse.Namespace) -> int:
    """Run the action; 0, or 2 when event lines had to be skipped.

    Raises:
        ConfigError: a bad schema.
        ParseError: a bad kernel (perf) file.
    """
    if args.action == "extract":
        return _extract(args)
    raise ConfigError(f"unknown action {args.action!r}")
