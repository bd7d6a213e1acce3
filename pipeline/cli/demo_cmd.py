"""``iolens demo``: every stream of iolens once, on real data, and what it found.

Lays out drop directories of every type from the real recordings shipped with iolens and the
``darshan`` wheel (``pipeline/demo/data.py`` says where each file comes from), trains the peer-
comparison thresholds on the fault-free sysstat recording, runs the main job once (starting the
embedded server when no cluster answers, and leaving it running), then prints per stream what a
storage engineer looks at first: the fio latency percentiles, the LUN the peer comparison
indicted, the slowest Darshan job's diagnosis and the workload model of the event log; then
writes the HTML report and says where to look next.

Where it puts things: under ``--dir DIR`` when given (its configuration written to
``DIR/iolens.yaml``); in a checkout, drops and report under ``var/demo`` and the state and server
of ``config/pipeline.yaml``, so ``iolens status``, ``report``, ``deadletter list`` and ``darshan
stats`` show the demo's data with no flags; elsewhere under the user's data and state
directories (``~/.local/share/iolens/demo``, ``~/.local/state/iolens/demo``), with the
configuration written beside the drops. Run again, it finds every file delivered already and
says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

from pipeline.cli.common import Cluster
from pipeline.cli.report_cmd import DEFAULT_SPAN, write_report
from pipeline.cli.run_cmd import add_redeliver
from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.demo import findings
from pipeline.demo.data import lay_out, recording, sysstat_recording
from pipeline.demo.layout import DemoLayout, choose_layout, demo_settings, refuse_config
from pipeline.demo.show import (
    fio_table,
    print_diagnosis,
    print_incidents,
    print_indicted,
    print_next,
    workload_table,
)
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.lab.observe import incidents
from pipeline.report.summary import cluster_latency_rows, print_summary
from pipeline.settings import Settings
from pipeline.sink.client import Client
from pipeline.sink.search import refresh


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "every stream once on bundled real data, and what it found", __doc__)
    p.add_argument(
        "--dir",
        type=Path,
        help="put drops, state, server data and the configuration here "
        "(default: var/demo in a checkout, else the user's data and state directories)",
    )
    p.add_argument(
        "--report", type=Path, help="the HTML report (default: report.html beside the drops)"
    )
    add_redeliver(p)


def train_thresholds(settings: Settings, console: Console) -> None:
    """Peer thresholds trained on the warm-up of the incident recording (what precedes the
    fault's onset, as the lab trains them), unless the file is there already."""
    from pipeline.cli.peer_options import params_of
    from pipeline.jobs.peer_diagnosis import train
    from pipeline.jobs.peer_recording import load

    peer = settings.peer
    path = Path(peer.thresholds_file or Path(settings.state_dir) / "thresholds.json")
    if path.exists():
        return
    until_s = recording().onset_s
    rec = load([sysstat_recording()], peer.downsample_s)
    thresholds = train(rec, peer.metrics, peer.groups, params_of(peer), until_s)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.new")
    tmp.write_text(json.dumps(thresholds.to_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    warm_up = datetime.fromtimestamp(until_s, UTC).strftime("%H:%M:%S UTC")
    for e in thresholds.entries:
        console.print(
            f"peer thresholds trained on the incident recording's warm-up (until {warm_up}): "
            f"group {e.group!r}, {e.metric} {e.threshold:.3g} over {e.windows} windows",
            highlight=False,
        )


def run(args: argparse.Namespace) -> int:
    """Lay out, train, run once, show; 0 when the run delivered everything."""
    refuse_config(args.config)
    layout = choose_layout(args.dir, Path.cwd())
    settings = demo_settings(layout, args.es_url)
    report = args.report or layout.report
    console = Console(soft_wrap=True)
    placed = lay_out(layout.drops)
    new = sum(p.copied for p in placed)
    console.print(
        f"demo data: {len(placed)} files of {len({p.drop for p in placed})} drop types "
        f"under {layout.drops}" + (f" ({new} copied now)" if new else ""),
        highlight=False,
    )
    train_thresholds(settings, console)
    with Cluster(settings, detach=True) as cluster:
        with MainJob(settings, cluster.client, redeliver=args.redeliver) as job:
            summary = job.run_once()
        print_summary(summary, [], console)
        if not any(c["indexed"] for c in summary.docs.values()):
            console.print(nothing_new(summary, layout), highlight=False)
        show(cluster.client, settings.elasticsearch.namespace, console)
        now = datetime.now(UTC)
        write_report(
            cluster.client,
            settings.elasticsearch.namespace,
            report,
            (now - DEFAULT_SPAN, now),
            DEFAULT_SPAN,
        )
        print_next(
            console, str(report), settings.elasticsearch.namespace, layout.config, cluster.url
        )
        if cluster.server is not None:
            console.print(f"  the embedded server keeps running at {cluster.url}", highlight=False)
    return 0 if not summary.unsent else 75


def nothing_new(summary: RunSummary, layout: DemoLayout) -> str:
    """Why a run indexed nothing: delivered to this cluster before, or to another one."""
    if summary.elsewhere:
        return (
            f"nothing new indexed: {summary.elsewhere} of the demo's files were delivered to "
            f"another cluster (the registry in {layout.state_dir}), so the findings below may "
            "be empty. To read them into this cluster: iolens demo --redeliver"
        )
    paths = [shlex.quote(str(p)) for p in (layout.root, layout.state_dir, layout.server_dir)]
    return (
        f"nothing new indexed: the demo's files were delivered to this cluster already "
        f"(the registry in {layout.state_dir}); the findings below are those indexed then. "
        f"To start over: iolens server stop --data-dir {paths[2]}; rm -rf {' '.join(paths)}"
    )


def show(client: Client, namespace: str, console: Console) -> None:
    """Each stream's findings, as indexed."""
    refresh(client, f"logs-*-{namespace},metrics-*-{namespace}")
    console.print()
    print_incidents(console, incidents(client, namespace, 0.0), recording().jobs)
    console.print()
    console.print(fio_table(cluster_latency_rows(client, namespace)))
    print_indicted(console, findings.indicted(client, namespace))
    console.print()
    print_diagnosis(console, findings.slowest_job(client, namespace))
    console.print()
    console.print(workload_table(findings.workload(client, namespace)))
