"""``iolens requests``: Magpie request extraction from event logs (seed 002).

``iolens requests extract --schema FILE [--kernel FILE] [--cluster] [--threshold X] [--json]
EVENTS...`` reads JSON-lines event logs (and, with ``--kernel``, the ``perf script --ns``
output of ``sched:sched_switch`` events), joins the events into requests with the schema's
temporal joins and prints each request: the join attribute values it bound, its resources, its
events and its canonical form, in order of start. ``--cluster`` adds behavioural clustering:
each request's cluster (the one it was placed in as it completed, as an ``events`` drop places
it) and outlier flag (against the final model), then the workload model (clusters, their
frequencies, diameters and separations, and the model error per resource). The rows wait in a
temporary file for their turn, so memory does not grow with the log.

Files of several machines (each with its own clock) are named ``MACHINE=PATH``, in EVENTS and
in ``--kernel``: files with the same label are one machine's, unlabelled files are machine
``default``'s. Each machine's events are then joined on their own, and the fragments of
requests are stitched across machines where the schema's sync events of two machines match
(``RpcCall rpc=X`` on one, ``RpcServe rpc=X`` on the other), with each machine's clock offset
estimated from those messages (:mod:`pipeline.reducers.stitch`). Each request then also gives
the machines it spans and their clocks' offsets; fragments that joined no request are listed
with the reason. A label is letters, digits, ``_``, ``.`` and ``-``: write ``./a=b.jsonl`` for
a file whose name holds ``=``.

``iolens requests model [--model NAME] [--json]`` shows the workload models as indexed by the
``events`` drops: per model and cluster the requests it holds, its outliers and incomplete
requests, their mean duration and critical path (counted from the request documents) beside
the representative, its resources, diameter and separation (from the latest snapshot).

``iolens requests convert-perf [FILE]`` turns ``perf script --ns -F
tid,pid,cpu,time,event,trace`` output of ``sched:sched_switch`` / ``sched:sched_wakeup`` (FILE,
or standard input) into event lines, written as they come, to append to an event log that an
``events`` drop tails.

A bad event line is reported (file, line, reason) and skipped; the exit status is then 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from pipeline.cli.request_spool import RequestSpool, json_text
from pipeline.cli.subcommand import Subparsers, add_actions, add_command
from pipeline.errors import ConfigError
from pipeline.formats.events.decode import event_json, parse_event_line, perf_sched_events
from pipeline.parsers.errors import ParseError
from pipeline.records.event_schema import EventSchema, load_event_schema
from pipeline.records.events import Event
from pipeline.records.json import JsonObject
from pipeline.reducers.canonical import canonical
from pipeline.reducers.event_order import merge_streams
from pipeline.reducers.request_cluster import (
    Assignment,
    Clusterer,
    cluster_all,
    total_resources,
)
from pipeline.reducers.request_join import RequestParser, extract
from pipeline.reducers.request_record import Request
from pipeline.reducers.stitch import stitch
from pipeline.report.request_rows import (
    model_dict,
    offset_dict,
    request_dict,
    stitch_dict,
    unattached_dict,
)
from pipeline.report.request_text import (
    print_indexed_models,
    print_model,
    print_requests,
    stitch_summary,
)

DEFAULT_MACHINE = "default"
"""The machine of unlabelled files."""

_LABELLED = re.compile(r"(?P<machine>[A-Za-z0-9_.-]+)=(?P<path>.+)", re.DOTALL)


@dataclass(frozen=True)
class Source:
    """An input file and the machine whose clock stamped it."""

    machine: str
    path: Path


def source(text: str) -> Source:
    """``MACHINE=PATH``, or ``PATH`` of machine ``default`` (the text before the first ``=`` is
    a label when it is only letters, digits, ``_``, ``.`` and ``-``)."""
    m = _LABELLED.fullmatch(text)
    if m is None:
        return Source(DEFAULT_MACHINE, Path(text))
    return Source(m["machine"], Path(m["path"]))


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand and its action."""
    p = add_command(
        sub, name, "extract requests from event logs (Magpie) and cluster them", __doc__
    )
    acts = add_actions(p)
    _add_extract(acts.add_parser("extract", help="requests of event logs, offline"))
    m = acts.add_parser("model", help="the workload models as indexed")
    m.add_argument("--model", help="only this model (its schema file's name)")
    m.add_argument("--json", action="store_true", help="one JSON object per model")
    c = acts.add_parser("convert-perf", help="perf script sched events -> event lines")
    c.add_argument("FILE", nargs="?", default="-", help="perf script output (default: stdin)")


def _add_extract(x: argparse.ArgumentParser) -> None:
    x.add_argument(
        "EVENTS",
        nargs="+",
        type=source,
        help="JSON-lines event logs, PATH or MACHINE=PATH (several machines: stitched)",
    )
    x.add_argument("--schema", type=Path, required=True, help="the event schema (YAML)")
    x.add_argument(
        "--kernel",
        type=source,
        action="append",
        default=[],
        help="perf script --ns output of sched_switch events, PATH or MACHINE=PATH (repeatable)",
    )
    x.add_argument("--cluster", action="store_true", help="cluster the requests")
    x.add_argument("--threshold", type=float, default=2.0, help="new-cluster distance (2.0)")
    x.add_argument("--json", action="store_true", help="one JSON object per request")


def _events(path: Path, bad: list[ParseError]) -> Iterator[Event]:
    name = str(path)
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                e = parse_event_line(line, name, n)
            except ParseError as err:
                if line.strip():  # blank lines are skipped
                    bad.append(err)
                    sys.stderr.write(f"iolens: {err} (line skipped)\n")
                continue
            yield e


def _kernel(path: Path) -> Iterator[Event]:
    with open(path, "rb") as fh:
        yield from perf_sched_events(fh, str(path))


def _streams(
    events: list[Source], kernels: list[Source], bad: list[ParseError]
) -> dict[str, list[Iterator[Event]]]:
    """Per machine (in order of first mention), its files' event streams.

    Raises:
        ConfigError: a ``--kernel`` file of a machine that has no event log.
    """
    streams: dict[str, list[Iterator[Event]]] = {}
    for src in events:
        streams.setdefault(src.machine, []).append(_events(src.path, bad))
    for src in kernels:
        if src.machine not in streams:
            raise ConfigError(
                f"--kernel {src.path}: machine {src.machine!r} has no event log; label its "
                f"EVENTS {src.machine}=PATH (unlabelled files are machine {DEFAULT_MACHINE!r})"
            )
        streams[src.machine].append(_kernel(src.path))
    return streams


def _rows(
    reqs: list[Request], schema: EventSchema, args: argparse.Namespace
) -> tuple[list[JsonObject], JsonObject | None]:
    """Each request as JSON-able values (clustered with ``--cluster``), and the model."""
    forms = [canonical(r, schema) for r in reqs]
    assignments: list[Assignment | None] = [None] * len(reqs)
    outliers: list[bool | None] = [None] * len(reqs)
    model: JsonObject | None = None
    if args.cluster and forms:
        clusterer, final, flags = cluster_all(forms, args.threshold)
        assignments, outliers = list(final), list(flags)
        model = model_dict(clusterer, total_resources(forms))
    rows = [
        request_dict(r, c, n, a, o)
        for n, (r, c, a, o) in enumerate(zip(reqs, forms, assignments, outliers, strict=True))
    ]
    return rows, model


def _write(
    args: argparse.Namespace,
    rows: Iterable[JsonObject],
    model: JsonObject | None,
    extra: list[JsonObject],
    summary: str,
    lines: Iterable[str] | None = None,
) -> None:
    """The rows (``lines``: the same as JSON text, when already encoded), then ``extra`` and
    the model as JSON lines (``--json``), or as text with ``summary``."""
    out = sys.stdout
    if args.json:
        for line in map(json_text, rows) if lines is None else lines:
            out.write(line + "\n")
        for obj in extra:
            out.write(json_text(obj) + "\n")
        if model is not None:
            out.write(json_text({"model": model}) + "\n")
    else:
        print_requests(out, rows)
        if model is not None:
            print_model(out, model)
        out.write(summary)


def _extract(args: argparse.Namespace) -> int:
    schema = load_event_schema(args.schema)
    bad: list[ParseError] = []
    streams = _streams(args.EVENTS, args.kernel, bad)
    if len(streams) > 1:
        _extract_stitched(args, schema, streams)
        return 2 if bad else 0
    [sources] = streams.values()
    parser = RequestParser(schema)
    clusterer = Clusterer(args.threshold) if args.cluster else None
    measured: dict[str, float] = {}
    with RequestSpool(clusterer) as spool:
        for r in extract(merge_streams(sources, schema), schema, parser):
            c = canonical(r, schema)
            assignment = None
            if clusterer is not None:
                assignment = clusterer.add(c)
                for k, v in c.resources.items():
                    measured[k] = measured.get(k, 0.0) + v
            spool.add(r.start_ns, request_dict(r, c, None, None, None), assignment)
        model = None
        if clusterer is not None and len(spool):
            model = model_dict(clusterer, measured)
        st = parser.stats
        summary = (
            f"{st.requests} requests ({st.incomplete} incomplete) from {st.events} events; "
            f"{st.garbage_graphs} unseeded groups ({st.garbage_events} events) dropped, "
            f"{st.unknown} events of types the schema does not declare\n"
        )
        if args.json:
            _write(args, [], model, [], summary, spool.lines())
        else:
            _write(args, spool.rows(), model, [], summary)
    return 2 if bad else 0


def _extract_stitched(
    args: argparse.Namespace, schema: EventSchema, streams: dict[str, list[Iterator[Event]]]
) -> None:
    result = stitch({m: merge_streams(ss, schema) for m, ss in streams.items()}, schema)
    rows, model = _rows([s.request for s in result.requests], schema, args)
    for row, s in zip(rows, result.requests, strict=True):
        row |= stitch_dict(s)
    extra = [unattached_dict(u) for u in result.unattached]
    extra.append(
        {
            "stitch": {
                "machines": {m: dataclasses.asdict(st) for m, st in result.stats.items()},
                "clocks": [
                    {"machines": [a, b], **offset_dict(c)} for (a, b), c in result.clocks.items()
                ],
            }
        }
    )
    _write(args, rows, model, extra, stitch_summary(result))


def run(args: argparse.Namespace) -> int:
    """Run the action; 0, or 2 when event lines had to be skipped.

    Raises:
        ConfigError: a bad schema.
        ParseError: a bad kernel (perf) file.
    """
    if args.action == "extract":
        return _extract(args)
    if args.action == "model":
        return _model(args)
    if args.action == "convert-perf":
        return _convert_perf(args.FILE, sys.stdout.buffer)
    raise ConfigError(f"unknown action {args.action!r}")


def _model(args: argparse.Namespace) -> int:
    # the cluster's client and settings are loaded here only: extraction does not need them
    from pipeline.cli.common import Cluster, settings_from_args
    from pipeline.report.workload import indexed_models

    settings = settings_from_args(args)
    with Cluster(settings) as cluster:
        models = list(indexed_models(cluster.client, settings.elasticsearch.namespace, args.model))
    out = sys.stdout
    if args.json:
        for wm in models:
            out.write(json.dumps(wm) + "\n")
        return 0
    print_indexed_models(out, models, args.model)
    return 0


def _convert_perf(path: str, out: BinaryIO) -> int:
    """Write the event lines of a ``perf script`` output as they are read.

    Raises:
        ParseError: a sched line without nanoseconds or without its fields.
        ConfigError: the file cannot be read.
    """
    try:
        fh = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    except OSError as err:
        raise ConfigError(f"{path}: {err.strerror}") from None
    with fh:
        for e in perf_sched_events(fh, "<stdin>" if path == "-" else path):
            out.write(event_json(e) + b"\n")
            out.flush()
    return 0
