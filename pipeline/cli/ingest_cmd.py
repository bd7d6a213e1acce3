"""``iolens ingest``: one-shot ingestion of given files through the main job's path."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.jobs.main_job import MainJob
from pipeline.report.summary import report_run
from pipeline.settings import ConfigError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(name, help="ingest the given files once", description=__doc__)
    p.add_argument("--type", required=True, choices=["fio-hist"], help="input format")
    p.add_argument("--state-dir", help="registry, spool and dead letters (default: config)")
    p.add_argument("FILE", nargs="+", type=Path)


def run(args: argparse.Namespace) -> int:
    """Ingest, flush, compute the merged percentiles and print a summary."""
    settings = settings_from_args(args)
    if args.state_dir:
        settings = settings.model_copy(update={"state_dir": args.state_dir})
    missing = [str(f) for f in args.FILE if not f.is_file()]
    if missing:
        raise ConfigError(f"no such file: {', '.join(missing)}")
    with Cluster(settings) as cluster:
        job = MainJob(settings, cluster.client)
        try:
            job.ingest([(f, None) for f in args.FILE])
            summary = job.finish()
        finally:
            job.close()
        report_run(cluster.client, settings.elasticsearch.namespace, summary, Console())
    return 0
