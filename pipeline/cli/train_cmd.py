"""``iolens train``: peer-comparison thresholds from fault-free sysstat recordings (seed 001 4.2.1).

The thresholds are written as a versioned JSON file (``peer.thresholds_file``, default
``<state_dir>/thresholds.json``); an existing file is kept as ``thresholds.json.<n>``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pipeline.cli.common import settings_from_args
from pipeline.cli.peer_options import add_peer_options, params_of, parse_time, peer_settings
from pipeline.cli.subcommand import Subparsers
from pipeline.jobs.peer_diagnosis import train
from pipeline.jobs.peer_groups import PeerGroups
from pipeline.jobs.peer_recording import load


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        name, help="train peer-comparison thresholds on fault-free recordings", description=__doc__
    )
    add_peer_options(p)
    p.add_argument("--until", help="train on samples up to this time (ISO 8601 or Unix s)")
    p.add_argument("-o", "--output", type=Path, help="thresholds file to write")


def thresholds_path(args: argparse.Namespace, state_dir: str, configured: str | None) -> Path:
    """Where thresholds are written and read by default."""
    if getattr(args, "output", None):
        return Path(args.output)
    return Path(configured) if configured else Path(state_dir) / "thresholds.json"


def keep_previous(path: Path) -> Path | None:
    """Rename an existing thresholds file to the next free ``<name>.<n>``."""
    if not path.exists():
        return None
    n = 1
    while path.with_name(f"{path.name}.{n}").exists():
        n += 1
    old = path.with_name(f"{path.name}.{n}")
    path.rename(old)
    return old


def run(args: argparse.Namespace) -> int:
    """Train and write the thresholds; prints one line per peer group and metric."""
    settings = settings_from_args(args)
    peer = peer_settings(settings.peer, args)
    params = params_of(peer)
    until = parse_time(args.until) if args.until else None
    groups = PeerGroups.from_settings(peer)
    rec = load(args.FILE, peer.downsample_s)
    thresholds = train(rec, peer.metrics, groups, params, until)
    out = thresholds_path(args, settings.state_dir, peer.thresholds_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    old = keep_previous(out)
    out.write_text(json.dumps(thresholds.to_dict(), indent=2) + "\n", encoding="utf-8")
    for e in thresholds.entries:
        print(f"{e.group}\t{e.metric}\tthreshold {e.threshold:g}\t({e.windows} windows)")
    print(f"thresholds written to {out}" + (f" (previous kept as {old})" if old else ""))
    return 0
