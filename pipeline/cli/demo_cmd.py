"""``iolens demo``: every stream of iolens once, on real data, and what it found.

Lays out drop directories of every type under ``var/demo/drops`` from the data bundled with the
repository and the ``darshan`` wheel (``pipeline/demo/data.py`` says where each file comes
from), trains the peer-comparison thresholds on the fault-free sysstat recording, runs the main
job once (starting the embedded server when no cluster answers, and leaving it running), then
prints per stream what a storage engineer looks at first: the fio latency percentiles, the LUN
the peer comparison indicted, the slowest Darshan job's diagnosis and the workload model of the
event log; then writes the HTML report and says where to look next.

Without ``--config`` it reads ``config/demo.yaml`` of the checkout, which shares the default
state directory (``var/state``) and server with ``config/pipeline.yaml``: ``iolens status``,
``iolens report``, ``iolens deadletter list`` and ``iolens darshan stats`` then show the demo's
data with no flags. Run again, it finds every file delivered already and says so.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.cli.report_cmd import DEFAULT_SPAN, write_report
from pipeline.cli.run_cmd import add_redeliver
from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.demo import findings
from pipeline.demo.data import CLEAN_RECORDING, REPO, lay_out
from pipeline.demo.show import (
    fio_table,
    print_diagnosis,
    print_indicted,
    print_next,
    workload_table,
)
from pipeline.errors import ConfigError
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.report.summary import cluster_latency_rows, print_summary
from pipeline.settings import Settings
from pipeline.sink.client import Client
from pipeline.sink.search import refresh

DEMO_CONFIG = Path("config/demo.yaml")
DROPS = Path("var/demo/drops")
REPORT = Path("var/demo/report.html")


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "every stream once on bundled real data, and what it found", __doc__)
    p.add_argument("--report", type=Path, default=REPORT, help=f"the HTML report ({REPORT})")
    add_redeliver(p)


def demo_settings(args: argparse.Namespace) -> Settings:
    """``--config``, or ``config/demo.yaml`` when none is given.

    Raises:
        ConfigError: not run from the checkout's top directory, or a bad configuration.
    """
    if args.config is None:
        if Path.cwd().resolve() != REPO:
            raise ConfigError(f"the demo runs from the checkout: cd {REPO} first")
        args.config = DEMO_CONFIG
    return settings_from_args(args)


def train_thresholds(settings: Settings, console: Console) -> None:
    """Peer thresholds trained on the fault-free recording, unless the file is there already."""
    from pipeline.cli.peer_options import params_of
    from pipeline.jobs.peer_diagnosis import load, train

    peer = settings.peer
    path = Path(peer.thresholds_file or Path(settings.state_dir) / "thresholds.json")
    if path.exists():
        return
    rec = load([REPO / CLEAN_RECORDING], peer.downsample_s)
    thresholds = train(rec, peer.metrics, peer.groups, params_of(peer), None)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.new")
    tmp.write_text(json.dumps(thresholds.to_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    for e in thresholds.entries:
        console.print(
            f"peer thresholds trained on the fault-free recording ({CLEAN_RECORDING.name}): "
            f"group {e.group!r}, {e.metric} {e.threshold:.3g} over {e.windows} windows",
            highlight=False,
        )


def run(args: argparse.Namespace) -> int:
    """Lay out, train, run once, show; 0 when the run delivered everything."""
    settings = demo_settings(args)
    console = Console(soft_wrap=True)
    placed = lay_out(DROPS)
    new = sum(p.copied for p in placed)
    console.print(
        f"demo data: {len(placed)} files in {len({p.drop for p in placed})} drop directories "
        f"under {DROPS}" + (f" ({new} copied now)" if new else ""),
        highlight=False,
    )
    train_thresholds(settings, console)
    with Cluster(settings, detach=True) as cluster:
        with MainJob(settings, cluster.client, redeliver=args.redeliver) as job:
            summary = job.run_once()
        print_summary(summary, [], console)
        if not any(c["indexed"] for c in summary.docs.values()):
            console.print(nothing_new(summary, settings.state_dir), highlight=False)
        show(cluster.client, settings.elasticsearch.namespace, console)
        now = datetime.now(UTC)
        write_report(
            cluster.client,
            settings.elasticsearch.namespace,
            args.report,
            (now - DEFAULT_SPAN, now),
            DEFAULT_SPAN,
        )
        print_next(console, str(args.report), settings.elasticsearch.namespace)
        if cluster.server is not None:
            console.print(f"  the embedded server keeps running at {cluster.url}", highlight=False)
    return 0 if not summary.unsent else 75


def nothing_new(summary: RunSummary, state_dir: str) -> str:
    """Why a run indexed nothing: delivered to this cluster before, or to another one."""
    if summary.elsewhere:
        return (
            f"nothing new indexed: {summary.elsewhere} of the demo's files were delivered to "
            f"another cluster (the registry in {state_dir}), so the findings below may be "
            "empty. To read them into this cluster: iolens demo --redeliver"
        )
    return (
        f"nothing new indexed: the demo's files were delivered to this cluster already "
        f"(the registry in {state_dir}); the findings below are those indexed then. "
        "To start over: make stop; rm -rf var/"
    )


def show(client: Client, namespace: str, console: Console) -> None:
    """Each stream's findings, as indexed."""
    refresh(client, f"logs-*-{namespace},metrics-*-{namespace}")
    console.print()
    console.print(fio_table(cluster_latency_rows(client, namespace)))
    print_indicted(console, findings.indicted(client, namespace))
    console.print()
    print_diagnosis(console, findings.slowest_job(client, namespace))
    console.print()
    console.print(workload_table(findings.workload(client, namespace)))
