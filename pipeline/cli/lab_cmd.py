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
from pathlib import Path

from pipeline.lab.params import LabParams
from pipeline.lab.run import Lab
from pipeline.lab.storage import LabError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """Register the subcommand."""
    d = LabParams()
    p = sub.add_parser(
        name, help="break a small real storage system and watch", description=__doc__
    )
    p.add_argument("--dir", type=Path, default=d.lab_dir, help="lab directory (%(default)s)")
    p.add_argument("--luns", type=int, default=d.luns, help="LUNs (%(default)s)")
    p.add_argument("--slow", type=int, default=d.slow, help="the LUN slowed, 1-based (%(default)s)")
    p.add_argument(
        "--delay-ms", type=float, default=d.delay_ms, help="its delay per I/O, ms (%(default)s)"
    )
    p.add_argument(
        "--onset", type=float, default=d.onset_s, help="fault on after S s (warm-up) (%(default)s)"
    )
    p.add_argument(
        "--duration", type=float, default=d.duration_s, help="fault lasts S s (%(default)s)"
    )
    p.add_argument(
        "--recovery", type=float, default=d.recovery_s, help="healthy S s after it (%(default)s)"
    )
    p.add_argument(
        "--segment", type=int, default=d.segment_s, help="fio segment length, s (%(default)s)"
    )
    p.add_argument(
        "--rate-iops", type=int, default=d.rate_iops, help="fio's rate per LUN (%(default)s)"
    )
    p.add_argument(
        "--sla-ms", type=float, default=d.sla_ms, help="fio SLA: p95 under this (%(default)s)"
    )
    p.add_argument(
        "--mpi-ranks", type=int, default=d.mpi_ranks, help="MPI-IO job's ranks (%(default)s)"
    )
    p.add_argument("--namespace", default=d.namespace, help="data stream namespace (%(default)s)")
    p.add_argument(
        "--port", type=int, default=d.port, help="embedded server's port if free (%(default)s)"
    )
    p.add_argument("--darshan-tarball", type=Path, help="Darshan 3.4.7 source (else download)")
    p.add_argument("--json", action="store_true", help="print the incident documents as indexed")


def run(args: argparse.Namespace) -> int:
    """Run the lab; 0 when it ran (whatever it found), 2 on bad parameters, 1 when it could
    not run here."""
    try:
        params = LabParams(
            lab_dir=args.dir,
            luns=args.luns,
            slow=args.slow,
            delay_ms=args.delay_ms,
            onset_s=args.onset,
            duration_s=args.duration,
            recovery_s=args.recovery,
            segment_s=args.segment,
            rate_iops=args.rate_iops,
            sla_ms=args.sla_ms,
            mpi_ranks=args.mpi_ranks,
            es_url=args.es_url,
            port=args.port,
            namespace=args.namespace,
            darshan_tarball=args.darshan_tarball,
        )
        lab = Lab(params, say=lambda m: print(m, file=sys.stderr if args.json else sys.stdout))
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
    if args.json:
        print(json.dumps(result.incidents, indent=2))
    else:
        from pipeline.lab.text import render

        print(render(result))
    return 0
