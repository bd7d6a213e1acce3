"""``iolens`` command line: global options, logging setup, one module per subcommand.

Subcommand modules are imported only when needed, so ``iolens fio-hist`` starts without loading
the Elasticsearch client or the configuration machinery.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

from pipeline import __version__
from pipeline.cli.logs import setup_logging
from pipeline.errors import ConfigError
from pipeline.parsers.errors import ParseError

COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("pipeline.cli.run_cmd", "run the pipeline on the drop directories"),
    "ingest": ("pipeline.cli.ingest_cmd", "ingest the given files once"),
    "setup": ("pipeline.cli.setup_cmd", "install templates and ILM policy into the cluster"),
    "status": ("pipeline.cli.status_cmd", "show registry, spool, dead letters and the cluster"),
    "fio-hist": (
        "pipeline.cli.fio_hist_cmd",
        "percentiles of fio histogram logs (fiologparser_hist.py compatible)",
    ),
    "deadletter": ("pipeline.cli.deadletter_cmd", "list, show or replay dead letters"),
    "dlq": ("pipeline.cli.deadletter_cmd", "the same as deadletter"),
    "train": ("pipeline.cli.train_cmd", "train peer-comparison thresholds on fault-free data"),
    "diagnose": ("pipeline.cli.diagnose_cmd", "peer-compare LUNs in sysstat data and rank them"),
    "sadc-cycle": ("pipeline.cli.sadc_cycle_cmd", "record daily sadc files into a drop directory"),
    "darshan": (
        "pipeline.cli.darshan_cmd",
        "diagnose Darshan logs (IOMiner) and print first-order statistics",
    ),
    "requests": (
        "pipeline.cli.requests_cmd",
        "extract requests from event logs (Magpie) and cluster them",
    ),
    "servicerate": (
        "pipeline.cli.servicerate_cmd",
        "online service-rate estimates and how far to trust them",
    ),
    "report": (
        "pipeline.cli.report_cmd",
        "the dashboards' views as one self-contained HTML file",
    ),
    "kibana": (
        "pipeline.cli.kibana_cmd",
        "pack the Kibana saved objects into import NDJSON, or unpack an export",
    ),
    "demo": (
        "pipeline.cli.demo_cmd",
        "every stream once on bundled real data, and what it found",
    ),
    "lab": (
        "pipeline.cli.lab_cmd",
        "build a small real storage system, slow one LUN, watch the incident (root)",
    ),
    "server": ("pipeline.cli.server_cmd", "stop the embedded server left running"),
    "config": (
        "pipeline.cli.config_cmd",
        "print the example configuration or its schema; check one",
    ),
    "service": ("pipeline.cli.service_cmd", "print the systemd unit for iolens run"),
}


COLLECTOR_THRESHOLDS = (50_000, 10, 10)
"""The cyclic garbage collector's thresholds (:func:`gc.set_threshold`) in every command: the
youngest generation is collected after 50,000 net allocations of container objects rather than
Python's 700, the older ones as often relative to it as by default. The pipeline makes many
short-lived objects (a parsed line, an event, a document) and few reference cycles; at the
default the collector cost about a tenth of the CPU of shipping an event log
(``bench/requests.py``). A cycle is then freed by the youngest collection after at most 50,000
allocations, or, once it survived one, by an older collection (every 500,000, and the full one
every 5,000,000 at most, Python delaying it further while the heap is mostly old)."""


def tune_collector() -> None:
    """Set :data:`COLLECTOR_THRESHOLDS` (``iolens`` does so before any command runs)."""
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


def command_module(name: str) -> ModuleType:
    """The module implementing subcommand ``name``."""
    return importlib.import_module(COMMANDS[name][0])


def build_parser(wanted: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; only ``wanted``'s options are loaded (all when None)."""
    p = argparse.ArgumentParser(
        prog="iolens",
        description="Storage and HPC I/O performance telemetry into Elasticsearch.",
    )
    p.add_argument("--version", action="version", version=f"iolens {__version__}")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="pipeline YAML (default: $IOLENS_CONFIG, else ./config/pipeline.yaml, else "
        "built-in defaults)",
    )
    p.add_argument("--es-url", metavar="URL", help="Elasticsearch URL (overrides the config)")
    p.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    p.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log the routine steps too (the same as --log-level DEBUG; -vv is the same)",
    )
    p.add_argument("--log-json", action="store_true", help="log as ECS JSON lines")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        if wanted is None or name == wanted:
            command_module(name).add_parser(sub, name)
        else:
            sub.add_parser(name, help=help_text)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``iolens`` console script; returns the exit status."""
    tune_collector()
    args_in = list(sys.argv[1:] if argv is None else argv)
    wanted = next((a for a in args_in if a in COMMANDS), None)
    args = build_parser(wanted).parse_args(args_in)
    setup_logging("DEBUG" if args.verbose else args.log_level, args.log_json)
    try:
        return int(command_module(args.command).run(args))
    except (ConfigError, ParseError) as err:
        logging.getLogger("iolens").error("%s", err)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
