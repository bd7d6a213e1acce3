"""``iolens lab``: the incident lab (:mod:`pipeline.lab.run`), as root on Debian.

Builds N loop-device LUNs on a delaying FUSE file system, runs fio on every LUN and an MPI-IO
job under Darshan, slows one LUN for a while, runs ``iolens run`` on it all live, and prints
the incident (``--json``: the incident documents exactly as indexed).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline.cli.subcommand import Subparsers
from pipeline.lab.params import LabParams, LabResult
from pipeline.lab.run import Lab
from pipeline.lab.site import SiteLab
from pipeline.lab.storage import LabError

OPTIONS: tuple[tuple[str, str, Callable[[str], Any], str], ...] = (
    ("--dir", "lab_dir", Path, "lab directory"),
    ("--luns", "luns", int, "LUNs"),
    ("--slow", "slow", int, "the LUN slowed, 1-based"),
    ("--delay-ms", "delay_ms", float, "its delay per I/O, ms"),
    ("--onset", "onset_s", float, "fault on after S s (warm-up)"),
    ("--duration", "duration_s", float, "fault lasts S s"),
    ("--recovery", "recovery_s", float, "healthy S s after it"),
    ("--segment", "segment_s", int, "fio segment length, s"),
    ("--rate-iops", "rate_iops", int, "fio's rate per LUN"),
    ("--sla-ms", "sla_ms", float, "fio SLA: p95 under this"),
    ("--mpi-ranks", "mpi_ranks", int, "MPI-IO job's ranks"),
    ("--namespace", "namespace", str, "data stream namespace"),
    ("--port", "port", int, "embedded server's port if free"),
    ("--hosts", "hosts", int, "hosts (network namespaces) sharing the cluster"),
)
"""``(option, LabParams field, type, help)`` of each option with a default of :class:`LabParams`."""


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    d = LabParams()
    p = sub.add_parser(
        name, help="break a small real storage system and watch", description=__doc__
    )
    for option, field, kind, text in OPTIONS:
        p.add_argument(option, type=kind, default=getattr(d, field), help=f"{text} (%(default)s)")
    p.add_argument(
        "--kill-leader",
        type=float,
        metavar="S",
        help="S s after the onset, SIGKILL the peer comparison's lease holder (restarted 30 s on)",
    )
    p.add_argument(
        "--partition",
        type=_numbers(3),
        metavar="H:S:D",
        help="S s after the onset, cut host H (or the lease holder: leader) off for D s",
    )
    p.add_argument(
        "--skew", type=_numbers(2), metavar="H:SECONDS", help="host H's clock runs that far off"
    )
    p.add_argument("--darshan-tarball", type=Path, help="Darshan 3.4.7 source (else download)")
    p.add_argument("--json", action="store_true", help="print the incident documents as indexed")


def _numbers(n: int) -> Callable[[str], tuple[Any, ...]]:
    """A parser of ``n`` colon-separated numbers, the first a host number."""

    def parse(text: str) -> tuple[Any, ...]:
        parts = text.split(":")
        try:
            if len(parts) != n:
                raise ValueError
            host = 0 if n == 3 and parts[0] == "leader" else int(parts[0])
            return (host, *(float(x) for x in parts[1:]))
        except ValueError:
            shape = "H:S:D" if n == 3 else "H:SECONDS"
            raise argparse.ArgumentTypeError(f"{text!r} is not {shape}") from None

    return parse


def lab_params(args: argparse.Namespace) -> LabParams:
    """The parameters the command line gives (``--es-url`` included), not yet checked."""
    given = {field: getattr(args, option[2:].replace("-", "_")) for option, field, *_ in OPTIONS}
    return LabParams(
        **given,
        es_url=args.es_url,
        darshan_tarball=args.darshan_tarball,
        kill_leader_s=args.kill_leader,
        partition=args.partition,
        skew=args.skew,
    )


def run(args: argparse.Namespace) -> int:
    """Run the lab; 0 when it ran (whatever it found), 2 on bad parameters, 1 when it could
    not run here."""
    try:
        params = lab_params(args)
        kind = SiteLab if params.hosts > 1 else Lab
        lab = kind(params, say=lambda m: print(m, file=sys.stderr if args.json else sys.stdout))
    except ValueError as err:
        print(f"iolens lab: {err}", file=sys.stderr)
        return 2

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM undoes the lab as Ctrl-C does

    signal.signal(signal.SIGTERM, interrupted)
    try:
        result = lab.run()
    except LabError as err:
        print(f"iolens lab: {err}", file=sys.stderr)
        return 1
    save_result(result)
    if args.json:
        print(json.dumps(result.incidents, indent=2))
    else:
        from pipeline.lab.text import render

        print(render(result))
    return 0


def save_result(result: LabResult) -> Path:
    """Write the run (:meth:`LabResult.to_json`) to ``result.json`` in the lab directory, where
    ``scripts/record_incident.py`` reads it; returns the path."""
    path = result.params.lab_dir / "result.json"
    path.write_text(json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8")
    return path
