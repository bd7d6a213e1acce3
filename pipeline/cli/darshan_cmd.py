"""``iolens darshan``: IOMiner's root-cause analysis of Darshan logs, and first-order statistics.

``iolens darshan diagnose [--json] LOG...`` reads each log (binary, or a ``darshan-parser``
text dump) and prints, per job: its bandwidths (critical path, naive, Darshan's, per
direction), whether the thresholds select it as low-bandwidth, the critical files with their
exclusive times and OSTs, the five contributing factors (seed 004 II-D), the causes found and
the Drishti-style insights. With ``--cluster`` the diagnosis also uses what the cluster holds
for the job's run: its Slurm node count, the LMT load of its OSTs and peer-comparison results.

``iolens darshan stats [--start T] [--end T] [--json]`` prints the seed's first-order
statistics (III-C..E) over the ``logs-darshan.job`` documents indexed in that time range; when
none is, what it searched (data stream, period, filters) and what the data stream holds.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.subcommand import Subparsers, add_actions, add_command
from pipeline.errors import ConfigError
from pipeline.parsers.errors import ParseError
from pipeline.reducers.io_diagnosis import NO_EVIDENCE, Thresholds, diagnose
from pipeline.report.darshan_diagnosis import diagnosis_dict, format_diagnosis
from pipeline.settings import Settings

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped]

    from pipeline.formats.darshan.pool import DarshanPool


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand and its two actions."""
    p = add_command(
        sub, name, "diagnose Darshan logs (IOMiner) and print first-order statistics", __doc__
    )
    acts = add_actions(p)
    d = acts.add_parser("diagnose", help="critical files, factors, causes and insights per log")
    d.add_argument("LOG", nargs="+", help="Darshan logs or darshan-parser text dumps")
    d.add_argument("--json", action="store_true", help="one JSON object per job")
    d.add_argument("--cluster", action="store_true", help="use Slurm, LMT and peer data indexed")
    d.add_argument("--top", type=int, default=5, help="critical files printed per job")
    d.add_argument("--min-nprocs", type=int, help="low bandwidth: more processes than this")
    d.add_argument("--min-bytes-per-proc", type=float, help="... bytes per process at least")
    d.add_argument("--max-bytes-per-s", type=float, help="... and bandwidth below (bytes/s)")
    s = acts.add_parser("stats", help="first-order statistics of the indexed jobs")
    s.add_argument("--start", help="jobs starting at or after (ISO time or epoch s)")
    s.add_argument("--end", help="jobs starting before (ISO time or epoch s)")
    s.add_argument("--top", type=int, default=10, help="applications per ranking")
    s.add_argument("--json", action="store_true", help="the statistics as one JSON object")


def thresholds_of(settings: Settings, args: argparse.Namespace) -> Thresholds:
    """The low-bandwidth cut: the configuration, overridden by the options."""
    ds = settings.darshan
    return Thresholds(
        ds.min_nprocs if args.min_nprocs is None else args.min_nprocs,
        ds.min_bytes_per_proc if args.min_bytes_per_proc is None else args.min_bytes_per_proc,
        ds.max_bytes_per_s if args.max_bytes_per_s is None else args.max_bytes_per_s,
    )


def _diagnose(args: argparse.Namespace) -> int:
    from pipeline.formats.darshan.pool import DarshanPool

    settings = settings_from_args(args)
    t = thresholds_of(settings, args)
    # one log is read here (a crash ends only this command); several in workers
    pool = DarshanPool(settings.darshan.workers, inline=len(args.LOG) == 1)
    for path in args.LOG:
        pool.submit(path)
    cluster = Cluster(settings, embedded=False) if args.cluster else None
    status = 0
    try:
        for path in args.LOG:
            status = max(status, _diagnose_one(args, settings, t, pool, cluster, path))
    finally:
        pool.close()
        if cluster is not None:
            cluster.__exit__()
    return status


def _diagnose_one(
    args: argparse.Namespace,
    settings: Settings,
    t: Thresholds,
    pool: DarshanPool,
    cluster: Cluster | None,
    path: str,
) -> int:
    """Print the diagnosis of one log read by ``pool``; 2 when it could not be read, else 0."""
    try:
        a = pool.result(path)
    except (ParseError, FileNotFoundError) as err:
        sys.stderr.write(f"iolens: {err}\n")
        return 2
    found = NO_EVIDENCE
    if cluster is not None:
        from pipeline.jobs.darshan_evidence import server_evidence

        found = server_evidence(cluster.client, settings, a)
    d = diagnose(a, t, found)
    if args.json:
        sys.stdout.write(json.dumps(diagnosis_dict(d, args.top)) + "\n")
    else:
        sys.stdout.write(format_diagnosis(d, t, args.top) + "\n")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from pipeline.query import IOMiner
    from pipeline.report.darshan_stats import first_order, format_text, searched

    settings = settings_from_args(args)
    start, end = _period(args.start, args.end)
    with Cluster(settings) as cluster:
        miner = IOMiner(cluster.client, namespace=settings.elasticsearch.namespace)
        if start is not None or end is not None:
            miner.init_stores(start or EARLIEST, end or LATEST)
        jobs = miner.load("darshan job").df
        stats = first_order(jobs, args.top)
        if not stats["jobs"]:
            stats["searched"] = searched(cluster.client, miner.index("darshan job"), start, end)
    if args.json:
        sys.stdout.write(json.dumps(stats) + "\n")
    else:
        sys.stdout.write(format_text(stats))
    return 0


EARLIEST = "1970-01-01T00:00:00Z"
"""The start searched with ``--end`` alone."""
LATEST = "9999-12-31T23:59:59Z"
"""The end searched with ``--start`` alone."""


def _period(start: str | None, end: str | None) -> tuple[pd.Timestamp | None, pd.Timestamp | None]:
    """``--start`` and ``--end`` as UTC timestamps (None where not given; see
    :func:`_time_option`).

    Raises:
        ConfigError: a time that cannot be read, or an end not after the start.
    """
    lo, hi = _time_option("--start", start), _time_option("--end", end)
    if lo is not None and hi is not None and hi <= lo:
        raise ConfigError(f"--end {end!r} is not after --start {start!r}")
    return lo, hi


def _time_option(option: str, text: str | None) -> pd.Timestamp | None:
    """The time ``option`` gives: ISO 8601 (UTC unless it has an offset), else epoch seconds.

    Raises:
        ConfigError: neither.
    """
    from pipeline.query.miner import to_timestamp

    if not text:
        return None
    try:
        return to_timestamp(text)
    except ValueError as err:
        try:
            return to_timestamp(float(text))
        except (ValueError, OverflowError):
            raise ConfigError(
                f"{option} {text!r}: not an ISO 8601 time or epoch seconds ({err})"
            ) from None


def run(args: argparse.Namespace) -> int:
    """Run the action; returns 0, or 2 when a log could not be read.

    Raises:
        ConfigError: bad configuration or options.
    """
    if args.action == "diagnose":
        return _diagnose(args)
    if args.action == "stats":
        return _stats(args)
    raise ConfigError(f"unknown action {args.action!r}")
