"""Options shared by ``iolens diagnose`` and ``iolens train`` (defaults from the config)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import yaml

from pipeline.errors import ConfigError
from pipeline.reducers.peer_params import PeerParams
from pipeline.settings import PeerSettings


def add_peer_options(p: argparse.ArgumentParser) -> None:
    """``--metric``, ``--downsample-s``, the window parameters and ``--groups``."""
    p.add_argument(
        "FILE",
        nargs="+",
        type=Path,
        help="sadc binary files (converted with sadf) or sadf -d / -j outputs",
    )
    p.add_argument(
        "--metric",
        action="append",
        help="sysstat metric (repeatable; default "
        "peer.metrics): await, tps, rkB/s, wkB/s, areq-sz, aqu-sz, %%util, rd_sec...",
    )
    p.add_argument("--downsample-s", type=float, help="downsampling interval (s)")
    p.add_argument("--ma-width", type=int, help="moving-average width (samples)")
    p.add_argument("--win-size", type=int, help="window (samples)")
    p.add_argument("--win-shift", type=int, help="shift between windows (samples)")
    p.add_argument("--k", type=int, help="faulty when anomalous in k of the last 2k-1 windows")
    p.add_argument("--bin-cap", type=int, help="most histogram bins per window")
    p.add_argument(
        "--groups", type=Path, help="YAML mapping of 'host:device' globs to peer-group names"
    )


def peer_settings(base: PeerSettings, args: argparse.Namespace) -> PeerSettings:
    """The config's ``peer`` section with the command-line options applied.

    Raises:
        ConfigError: a groups file that is missing or not a mapping.
    """
    update: dict[str, object] = {}
    for opt in ("downsample_s", "ma_width", "win_size", "win_shift", "k", "bin_cap"):
        value = getattr(args, opt)
        if value is not None:
            update[opt] = value
    if args.metric:
        update["metrics"] = tuple(args.metric)
    if args.groups is not None:
        try:
            groups = yaml.safe_load(args.groups.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as err:
            raise ConfigError(f"--groups {args.groups}: {err}") from None
        if not isinstance(groups, dict):
            raise ConfigError(f"--groups {args.groups}: expected a mapping of glob: group")
        update["groups"] = {str(k): str(v) for k, v in groups.items()}
    merged = base.model_copy(update=update)
    return PeerSettings.model_validate(merged.model_dump())


def params_of(peer: PeerSettings) -> PeerParams:
    """The detector parameters of the settings.

    Raises:
        ConfigError: an impossible combination (e.g. a shift larger than the window).
    """
    try:
        return PeerParams(peer.ma_width, peer.win_size, peer.win_shift, peer.k, peer.bin_cap)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def parse_time(text: str) -> float:
    """ISO 8601 (``2026-01-05T06:00Z``, UTC when no zone) or Unix seconds -> Unix seconds.

    Raises:
        ConfigError: neither.
    """
    try:
        return float(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{text!r} is not an ISO 8601 time or Unix seconds") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()
