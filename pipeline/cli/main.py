"""``iolens`` command line: global options, logging setup, one module per subcommand."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from pipeline import __version__
from pipeline.cli import (
    deadletter_cmd,
    fio_hist_cmd,
    ingest_cmd,
    run_cmd,
    setup_cmd,
    status_cmd,
)
from pipeline.cli.common import setup_logging
from pipeline.parsers.errors import ParseError
from pipeline.settings import ConfigError

COMMANDS: dict[str, ModuleType] = {
    "run": run_cmd,
    "ingest": ingest_cmd,
    "setup": setup_cmd,
    "status": status_cmd,
    "fio-hist": fio_hist_cmd,
    "deadletter": deadletter_cmd,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    p = argparse.ArgumentParser(
        prog="iolens",
        description="Storage and HPC I/O performance telemetry into Elasticsearch.",
    )
    p.add_argument("--version", action="version", version=f"iolens {__version__}")
    p.add_argument("--config", metavar="FILE", help="pipeline YAML (default: built-in defaults)")
    p.add_argument("--es-url", metavar="URL", help="Elasticsearch URL (overrides the config)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    p.add_argument("--log-json", action="store_true", help="log as ECS JSON lines")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in COMMANDS.items():
        mod.add_parser(sub, name)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``iolens`` console script; returns the exit status."""
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, args.log_json)
    try:
        return int(COMMANDS[args.command].run(args))
    except (ConfigError, ParseError) as err:
        logging.getLogger("iolens").error("%s", err)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
