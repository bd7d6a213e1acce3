"""``iolens server stop``: stop the embedded server that ``iolens demo``, ``iolens lab`` or
``iolens run --keep-server`` left running.

Without ``--data-dir`` it stops the server of the configuration's ``embedded.data_dir`` (with
``--config``, or the default configuration); ``--data-dir DIR`` names another one, e.g. the
lab's (``<lab dir>/noida-db``). A server that is not running is said, not an error.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli.subcommand import Subparsers, add_actions, add_command


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = add_command(sub, name, "stop the embedded server left running", __doc__)
    actions = add_actions(p)
    stop = actions.add_parser("stop", help="stop it (SIGTERM, then SIGKILL after --timeout)")
    stop.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        help="the server's data directory (default: embedded.data_dir); repeatable",
    )
    stop.add_argument("--timeout", type=float, default=10.0, help="seconds before SIGKILL")


def run(args: argparse.Namespace) -> int:
    """Stop each named server; 0 whether or not one was running."""
    from pipeline.cli.common import settings_from_args
    from pipeline.sink.embedded import stop_detached

    dirs = args.data_dir or [Path(settings_from_args(args).embedded.data_dir)]
    for d in dirs:
        stopped = stop_detached(d, args.timeout)
        print(f"{d}: " + ("embedded server stopped" if stopped else "no embedded server running"))
    return 0
