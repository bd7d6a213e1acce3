"""``iolens ingest``: one-shot ingestion of given files through the main job's path."""

from __future__ import annotations

import argparse
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.run_cmd import add_redeliver
from pipeline.cli.subcommand import Subparsers
from pipeline.errors import ConfigError
from pipeline.formats.registry import FORMATS
from pipeline.jobs.drain import EX_TEMPFAIL
from pipeline.jobs.main_job import MainJob
from pipeline.report.summary import report_run
from pipeline.settings import DropSettings


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(name, help="ingest the given files once", description=__doc__)
    p.add_argument("--type", required=True, choices=sorted(FORMATS), help="input format")
    p.add_argument("--tz", default="UTC", help="time zone of local times (slurm, lmt)")
    p.add_argument("--schema", help="the event schema (YAML) of events files")
    p.add_argument("--state-dir", help="registry, spool and dead letters (default: config)")
    add_redeliver(p)
    p.add_argument("FILE", nargs="+", type=Path)


def run(args: argparse.Namespace) -> int:
    """Ingest, flush, compute what the files feed (merged percentiles) and print a summary.

    Raises:
        ConfigError: a file is missing, or a bad ``--tz``.
    """
    settings = settings_from_args(args)
    if args.state_dir:
        settings = settings.model_copy(update={"state_dir": args.state_dir})
    _check_inputs(args)
    with Cluster(settings) as cluster:
        with MainJob(settings, cluster.client, redeliver=args.redeliver) as job:
            job.once = True
            job.sink.wait_when_full = False  # as run --once: the rest is for the next time
            drops = [
                DropSettings(
                    type=args.type, path=str(f.parent), tz=args.tz, schema_file=args.schema
                )
                for f in args.FILE
            ]
            job.ingest(list(zip(args.FILE, drops, strict=True)))
            summary = job.finish()
        report_run(cluster.client, settings.elasticsearch.namespace, summary, Console())
    return EX_TEMPFAIL if summary.unsent else 0


def _check_inputs(args: argparse.Namespace) -> None:
    """Refuse missing files, ``--schema`` without ``--type events`` (or the reverse) and a bad
    ``--tz``.

    Raises:
        ConfigError: naming the option or the files.
    """
    missing = [str(f) for f in args.FILE if not f.is_file()]
    if missing:
        raise ConfigError(f"no such file: {', '.join(missing)}")
    if (args.type == "events") != bool(args.schema):
        raise ConfigError("--schema FILE goes with --type events, and only with it")
    try:
        DropSettings(type=args.type, path=".", tz=args.tz, schema_file=args.schema)
    except ValidationError as err:
        raise ConfigError(f"--tz: {err.errors()[0]['msg']}") from None
