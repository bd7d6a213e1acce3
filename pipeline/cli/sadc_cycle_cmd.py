"""``iolens sadc-cycle``: record daily sadc activity files and hand them to a drop directory.

The ``cycle`` daemon of seed 001 4.1.1 (:mod:`pipeline.formats.sysstat.sadc_cycle`): sadc runs
``-S DISK`` into ``DIR/sa-YYYYMMDDTHHMMSSZ`` (ISO 8601 basic UTC start time), rolls over at
00:00:05 UTC, and moves each finished file into ``--drop``. SIGTERM or SIGINT stops sadc, hands
over its partial file and exits with status 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from datetime import time
from pathlib import Path
from types import FrameType

from pipeline.cli.subcommand import Subparsers
from pipeline.errors import ConfigError
from pipeline.formats.sysstat.sadc_cycle import ROLLOVER, SADC, CycleDaemon


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand."""
    p = sub.add_parser(
        name, help="record daily sadc activity files (rollover 00:00:05 UTC)", description=__doc__
    )
    p.add_argument("DIR", type=Path, help="directory sadc writes its activity files into")
    p.add_argument("--drop", type=Path, help="drop directory finished files are moved into")
    p.add_argument(
        "--interval", type=_interval, default=1, help="sadc interval, whole seconds (default 1)"
    )
    p.add_argument("--sadc", default=SADC, help=f"sadc executable (default {SADC})")
    p.add_argument(
        "--rollover",
        type=_rollover,
        default=ROLLOVER,
        help="daily rollover time of day, UTC, HH:MM:SS (default 00:00:05)",
    )


def _interval(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of seconds: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 s, got {value}")
    return value


def _rollover(text: str) -> time:
    try:
        return time.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time of day HH:MM:SS: {text!r}") from None


def run(args: argparse.Namespace) -> int:
    """Run the daemon in a worker thread until SIGTERM or SIGINT; returns 0.

    The signal handlers only set the stop event, which the main thread never waits on itself
    (it joins the worker), so they cannot deadlock on the event's lock.

    Raises:
        ConfigError: the sadc executable is missing.
        OSError: DIR or the drop directory cannot be created (from the worker).
    """
    if not os.access(args.sadc, os.X_OK):
        raise ConfigError(
            f"sadc not found at {args.sadc!r}: apt-get install sysstat, or pass --sadc PATH"
        )
    stop = threading.Event()
    daemon = CycleDaemon(
        args.DIR,
        drop=args.drop,
        interval_s=args.interval,
        stop=stop,
        sadc=args.sadc,
        rollover=args.rollover,
    )
    return _run_until_signalled(daemon, stop)


def _run_until_signalled(daemon: CycleDaemon, stop: threading.Event) -> int:
    """Run ``daemon`` in a worker thread while SIGTERM and SIGINT set ``stop``; its result
    (1 when it gave none), or what it raised, raised here."""
    outcome: list[int | Exception] = []

    def work() -> None:
        try:
            outcome.append(daemon.run())
        except Exception as err:  # re-raised in the main thread below
            outcome.append(err)
            stop.set()

    worker = threading.Thread(target=work, name="sadc-cycle")

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        worker.start()
        while worker.is_alive():
            worker.join(timeout=1.0)
    finally:
        stop.set()
        worker.join()
        for s, handler in previous.items():
            signal.signal(s, handler)
    result = outcome[0] if outcome else 1
    if isinstance(result, Exception):
        raise result
    return result
