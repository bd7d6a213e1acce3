"""``iolens run``: the main job (shippers, reducers, sink, scheduled jobs)."""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path

from rich.console import Console

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.subcommand import Subparsers
from pipeline.errors import ConfigError
from pipeline.formats.registry import FORMATS, check_drops
from pipeline.jobs.drain import EX_TEMPFAIL, BoundedDrain
from pipeline.jobs.main_job import MainJob
from pipeline.report.summary import report_run
from pipeline.settings import DropSettings, Settings

DROP_TYPES = tuple(FORMATS)

log = logging.getLogger("iolens")


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(name, help="run the pipeline on the drop directories", description=__doc__)
    p.add_argument(
        "--once",
        action="store_true",
        help="process what is present, flush, print a summary and exit",
    )
    p.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="TYPE=DIR",
        help=f"watch DIR for TYPE files ({', '.join(DROP_TYPES)}); overrides a drop with that path",
    )
    p.add_argument(
        "--schema",
        metavar="FILE",
        help="the event schema (YAML) of the events drops given with --drop",
    )
    p.add_argument("--state-dir", help="registry, spool and dead letters (default: config)")
    add_redeliver(p)
    p.add_argument(
        "--keep-server",
        action="store_true",
        help="leave a started embedded server running after exit (iolens server stop stops it)",
    )
    p.add_argument(
        "--no-embedded",
        action="store_true",
        help="never start the embedded server: a cluster that does not answer at the start is "
        "an error naming it (the same as embedded.enabled: false)",
    )


def add_redeliver(p: argparse.ArgumentParser) -> None:
    """The ``--redeliver`` option (``run`` and ``ingest``)."""
    p.add_argument(
        "--redeliver",
        action="store_true",
        help="read again the files the registry says were delivered to another cluster",
    )


def apply_overrides(
    settings: Settings, drops: list[str], state_dir: str | None, schema: str | None = None
) -> Settings:
    """Settings with ``--drop``, ``--schema`` and ``--state-dir`` applied.

    Raises:
        ConfigError: a ``--drop`` value is not ``TYPE=DIR`` with a known type, or an events
            drop comes without ``--schema``.
    """
    merged = {str(Path(d.path)): d for d in settings.drops}
    for spec in drops:
        kind, sep, path = spec.partition("=")
        if not sep or kind not in DROP_TYPES or not path:
            raise ConfigError(
                f"--drop {spec!r}: expected TYPE=DIR with TYPE one of {', '.join(DROP_TYPES)}"
            )
        if kind == "events" and not schema:
            raise ConfigError(f"--drop {spec}: an events drop needs --schema FILE")
        merged[str(Path(path))] = DropSettings(
            type=kind, path=path, schema_file=schema if kind == "events" else None
        )
    update: dict[str, object] = {"drops": tuple(merged.values())}
    if state_dir:
        update["state_dir"] = state_dir
    return settings.model_copy(update=update)


def run(args: argparse.Namespace) -> int:
    """Run until interrupted (or once with ``--once``); returns 0 on a clean finish and
    ``EX_TEMPFAIL`` (75) when documents were left for the next run because the spool was full.

    Without ``--once``, SIGTERM or SIGINT stops the run: it drains for at most
    ``sink.drain_timeout_s``, then (or at a second signal) the process exits at once with 75
    (:class:`~pipeline.jobs.drain.BoundedDrain`).
    """
    settings = apply_overrides(settings_from_args(args), args.drop, args.state_dir, args.schema)
    if not settings.drops:
        raise ConfigError(
            "no drop directories: add drops: to the config or pass --drop fio-hist=DIR"
        )
    check_drops(settings)  # before a server is started for nothing
    if args.once:
        return run_with(settings, args, None)
    with BoundedDrain(settings.sink.drain_timeout_s) as drain:
        return run_with(settings, args, drain.stop)


def run_with(settings: Settings, args: argparse.Namespace, stop: threading.Event | None) -> int:
    """The run with these settings: once when ``stop`` is None, else until it is set."""
    with Cluster(settings, detach=args.keep_server, embedded=not args.no_embedded) as cluster:
        with MainJob(settings, cluster.client, redeliver=args.redeliver) as job:
            if stop is None:
                summary = job.run_once()
            else:
                log.info("running; stop with Ctrl-C")
                summary = job.run_forever(stop)
        report_run(cluster.client, settings.elasticsearch.namespace, summary, Console())
        if cluster.server is not None and args.keep_server:
            print(
                f"the embedded server keeps running at {cluster.url} "
                f"(stop it with: iolens server stop --data-dir {settings.embedded.data_dir})"
            )
    return EX_TEMPFAIL if summary.unsent else 0
