"""``iolens diagnose``: peer comparison of LUNs and the hourly persistence ranking (seed 001).

Prints, per UTC hour, the LUNs by decreasing persistence accumulator (``date.hour: value
group:LUN ...``, the seed's Figure 5); with ``--json``, one JSON object per window instead.
Thresholds come from ``--thresholds FILE``, from training on the same files up to
``--train-until TIME``, or from the configured thresholds file (``iolens train``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipeline.cli.common import settings_from_args
from pipeline.cli.peer_options import add_peer_options, params_of, parse_time, peer_settings
from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.cli.train_cmd import thresholds_path
from pipeline.errors import ConfigError
from pipeline.jobs.peer_diagnosis import diagnose, train
from pipeline.jobs.peer_groups import PeerGroups
from pipeline.jobs.peer_recording import load
from pipeline.records.json import JsonObject
from pipeline.reducers.peer_flags import WindowResult
from pipeline.reducers.peer_thresholds import Thresholds
from pipeline.reducers.persistence import Persistence, hourly_rows, qualified_name


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "peer-compare LUNs in sysstat recordings and rank them", __doc__)
    add_peer_options(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--train-until", help="train on these files up to TIME, diagnose after it")
    src.add_argument("--thresholds", type=Path, help="thresholds file (iolens train)")
    p.add_argument("--json", action="store_true", help="one JSON object per window")
    p.add_argument("--top", type=int, default=10, help="LUNs per hour in the ranking")


def load_thresholds(path: Path) -> Thresholds:
    """Read a thresholds file.

    Raises:
        ConfigError: missing, not JSON, or another format/version.
    """
    try:
        return Thresholds.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ConfigError(
            f"no thresholds at {path}: run iolens train, or pass --train-until or --thresholds"
        ) from None
    except (ValueError, KeyError) as err:
        raise ConfigError(f"{path}: not a thresholds file: {err}") from None


def run(args: argparse.Namespace) -> int:
    """Diagnose and print; returns 0."""
    settings = settings_from_args(args)
    peer = peer_settings(settings.peer, args)
    params = params_of(peer)
    groups = PeerGroups.from_settings(peer)
    rec = load(args.FILE, peer.downsample_s)
    since = None
    if args.train_until:
        since = parse_time(args.train_until)
        thresholds = train(rec, peer.metrics, groups, params, since)
    else:
        path = args.thresholds or thresholds_path(args, settings.state_dir, peer.thresholds_file)
        thresholds = load_thresholds(path)
    out = sys.stdout
    for metric in peer.metrics:
        results = diagnose(rec, metric, groups, params, thresholds, since)
        if args.json:
            out.writelines(json.dumps(w) + "\n" for w in window_dicts(metric, results))
            continue
        out.write(f"# {metric}: Date.Hour: Value PG:LUN ...\n")
        for row in hourly_rows(results, args.top):
            out.write(row.format() + "\n")
    return 0


def window_dicts(metric: str, results: Iterable[WindowResult]) -> Iterator[JsonObject]:
    """One JSON-able object per window: its LUNs marked anomalous and faulty, and the
    persistence ranking accumulated up to it; ``skipped`` (only when there are) lists the LUNs
    it left out (too few samples after a gap in their data)."""
    acc = Persistence()
    for r in results:
        acc.update(r)
        yield {
            "metric": metric,
            "group": r.group,
            "window_start": r.start_s,
            "window_end": r.end_s,
            "anomalous": [qualified_name(r.group, x) for x in r.anomalous],
            "faulty": [qualified_name(r.group, x) for x in r.faulty],
            "accumulator": dict(acc.ranking()),
            **({"skipped": [qualified_name(r.group, x) for x in r.skipped]} if r.skipped else {}),
        }
