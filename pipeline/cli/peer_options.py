"""Options shared by ``iolens diagnose`` and ``iolens train`` (defaults from the config)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import ValidationError

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
        "peer.metrics): await, tps, rkB/s, wkB/s, areq-sz, aqu-sz, %%util, svctm (derived "
        "from %%util and tps), rd_sec...",
    )
    p.add_argument("--downsample-s", type=float, help="downsampling interval (s)")
    p.add_argument("--ma-width", type=int, help="moving-average width (samples)")
    p.add_argument("--win-size", type=int, help="window (samples)")
    p.add_argument("--win-shift", type=int, help="shift between windows (samples)")
    p.add_argument("--k", type=int, help="faulty when anomalous in k of the last 2k-1 windows")
    p.add_argument("--bin-cap", type=int, help="most histogram bins per window")
    p.add_argument(
        "--groups",
        type=Path,
        help="YAML peer groups: 'host:device' glob -> group, or group -> list of 'host:device'",
    )
    p.add_argument(
        "--storage-map",
        type=Path,
        help="CSV of LUN-server attachments (host,device,array[,lun][,path]): one peer group "
        "per array (and path)",
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
        update |= _groups_file(args.groups)
    if args.storage_map is not None:
        update["storage_map"] = str(args.storage_map)
    merged = base.model_copy(update=update)
    try:
        return PeerSettings.model_validate(merged.model_dump())
    except ValidationError as err:
        where = f"--groups {args.groups}" if args.groups is not None else "peer options"
        problems = "; ".join(
            f"peer.{e['loc'][0]}: {e['msg'].removeprefix('Value error, ')}" for e in err.errors()
        )
        raise ConfigError(f"{where}: {problems}") from None


def _groups_file(path: Path) -> dict[str, object]:
    """``groups`` (glob: group) and ``members`` (group: [host:device, ...]) of a groups file.

    Raises:
        ConfigError: unreadable, not YAML, or not a mapping of those two kinds.
    """
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"--groups {path}: {err}") from None
    if not isinstance(loaded, dict):
        raise ConfigError(
            f"--groups {path}: expected a mapping of 'host:device' glob: group, or of "
            "group: [host:device, ...]"
        )
    globs = {str(k): str(v) for k, v in loaded.items() if not isinstance(v, list)}
    lists = {str(k): tuple(str(x) for x in v) for k, v in loaded.items() if isinstance(v, list)}
    return {"groups": globs, "members": lists}


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
