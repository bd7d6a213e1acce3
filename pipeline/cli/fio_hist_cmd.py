"""``iolens fio-hist``: offline percentiles of fio histogram logs.

With ``--method flp`` (default) the output is what fio's ``fiologparser_hist.py`` prints for the
same files and options, byte for byte; ``--method window`` prints the pipeline's completion-window
percentiles in the same layout.
"""

from __future__ import annotations

import argparse
import configparser
import re
import sys

from pipeline.cli.subcommand import Subparsers, add_command
from pipeline.errors import ConfigError
from pipeline.reducers.fio_flp import FlpOptions
from pipeline.report.fio_text import write_report


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand (options and defaults are fiologparser_hist.py's)."""
    p = add_command(
        sub, name, "percentiles of fio histogram logs (fiologparser_hist.py compatible)", __doc__
    )
    p.add_argument("FILE", nargs="+", help="histogram logs (*_clat_hist.*.log[.gz])")
    p.add_argument("--method", choices=["flp", "window"], default="flp")
    p.add_argument("-i", "--interval", type=int, help="interval width (ms), default 1000 ms")
    p.add_argument("--percentiles", default="90:95:99", help="comma or colon separated")
    p.add_argument("--directions", help='any of "rwtm"; adds a dir column')
    p.add_argument("--noweight", action="store_true", help="no weighting across intervals")
    p.add_argument("-d", "--divisor", type=int, default=1, help="divide the results by this")
    p.add_argument("--decimals", type=int, default=3, help="decimal places of floats")
    p.add_argument("--usbin", action="store_true", help="bins are in us (fio < 2.99)")
    p.add_argument("--group_nr", type=int, default=29, help="FIO_IO_U_PLAT_GROUP_NR")
    p.add_argument("--max_latency", type=float, default=20, help="look-ahead in seconds")
    p.add_argument("--job-file", help="fio job file: --interval defaults to its log_hist_msec")
    p.add_argument("--buff_size", type=int, default=10000, help=argparse.SUPPRESS)
    p.add_argument("--warn", action="store_true", help=argparse.SUPPRESS)


def interval_from_job_file(path: str) -> int | None:
    """``log_hist_msec`` from an fio job file (the last section that sets it wins)."""
    cp = configparser.ConfigParser(allow_no_value=True, interpolation=None)
    with open(path, encoding="utf-8") as fh:
        cp.read_file(fh)
    found = None
    for section in cp.sections():
        value = cp.get(section, "log_hist_msec", fallback=None)
        if value is not None:
            found = int(value)
    return found


def run(args: argparse.Namespace) -> int:
    """Print the report to standard output; returns 0."""
    for text in re.split("[,:]", args.percentiles):
        try:
            float(text)
        except ValueError:
            raise ConfigError(
                f"--percentiles {args.percentiles!r}: {text!r} is not a number "
                "(give numbers separated by ',' or ':', e.g. 90:99:99.9)"
            ) from None
    interval = args.interval
    if interval is None and args.job_file:
        interval = interval_from_job_file(args.job_file)
    opts = FlpOptions(
        interval_ms=interval if interval is not None else 1000,
        percentiles=args.percentiles,
        directions=args.directions,
        divisor=args.divisor,
        decimals=args.decimals,
        usbin=args.usbin,
        max_latency_s=args.max_latency,
        noweight=args.noweight,
    )
    write_report(args.FILE, opts, method=args.method, group_nr=args.group_nr, out=sys.stdout)
    return 0
