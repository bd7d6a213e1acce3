"""``iolens darshan``: IOMiner's root-cause analysis of Darshan logs, and first-order statistics.

``iolens darshan diagnose [--json] LOG...`` reads each log (binary, or a ``darshan-parser``
text dump) and prints, per job: its bandwidths (critical path, naive, Darshan's, per
direction), whether the thresholds select it as low-bandwidth, the critical files with their
exclusive times and OSTs, the five contributing factors (seed 004 II-D), the causes found and
the Drishti-style insights. With ``--cluster`` the diagnosis also uses what the cluster holds
for the job's run: its Slurm node count, the LMT load of its OSTs and peer-comparison results.

``iolens darshan stats [--start T] [--end T] [--json]`` prints the seed's first-order
statistics (III-C..E) over the ``logs-darshan.job`` documents indexed in that time range.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pipeline.cli.common import Cluster, settings_from_args
from pipeline.errors import ConfigError
from pipeline.parsers.errors import ParseError
from pipeline.reducers.io_diagnosis import Diagnosis, Thresholds, diagnose
from pipeline.settings import Settings

MiB = 2**20


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str) -> None:
    """Register the subcommand and its two actions."""
    p = sub.add_parser(
        name,
        help="diagnose Darshan logs (IOMiner) and print first-order statistics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    d = acts.add_parser("diagnose", help="critical files, factors, causes and insights per log")
    d.add_argument("LOG", nargs="+", help="Darshan logs or darshan-parser text dumps")
    d.add_argument("--json", action="store_true", help="one JSON object per job")
    d.add_argument("--cluster", action="store_true", help="use Slurm, LMT and peer data indexed")
    d.add_argument("--top", type=int, default=5, help="critical files printed per job")
    d.add_argument("--min-nprocs", type=int, help="low bandwidth: more processes than this")
    d.add_argument("--min-bytes-per-proc", type=float, help="... bytes per process at least")
    d.add_argument("--max-bytes-per-s", type=float, help="... and bandwidth below (bytes/s)")
    s = acts.add_parser("stats", help="first-order statistics of the indexed jobs")
    s.add_argument("--start", help="jobs starting at or after (ISO time or epoch s)")
    s.add_argument("--end", help="jobs starting before (ISO time or epoch s)")
    s.add_argument("--top", type=int, default=10, help="applications per ranking")
    s.add_argument("--json", action="store_true", help="the statistics as one JSON object")


def thresholds_of(settings: Settings, args: argparse.Namespace) -> Thresholds:
    """The low-bandwidth cut: the configuration, overridden by the options."""
    ds = settings.darshan
    return Thresholds(
        ds.min_nprocs if args.min_nprocs is None else args.min_nprocs,
        ds.min_bytes_per_proc if args.min_bytes_per_proc is None else args.min_bytes_per_proc,
        ds.max_bytes_per_s if args.max_bytes_per_s is None else args.max_bytes_per_s,
    )


def diagnosis_dict(d: Diagnosis, top: int | None = None) -> dict[str, Any]:
    """A diagnosis as JSON-able values (bandwidths in bytes/s, times in s)."""
    a = d.analysis
    job = a.job
    return {
        "log": a.log.path,
        "job_id": a.log.jobid,
        "exe": job["exe"],
        "nprocs": job["nprocs"],
        "pattern": job["pattern"],
        "interface": job["interface"],
        "bytes_read": job["bytes_read"],
        "bytes_written": job["bytes_written"],
        "run_time_s": job["run_time_s"],
        "io_time_s": a.cover.union,
        "span_s": a.cover.span,
        "bandwidth_bytes_per_s": {
            "critical_path": job["critical_bytes_per_s"],
            "naive": job["naive_bytes_per_s"],
            "darshan": job["darshan_bytes_per_s"],
            "read": job["read_bytes_per_s"],
            "write": job["write_bytes_per_s"],
        },
        "low_bandwidth": list(d.low),
        "direction": a.direction,
        "critical_files": [
            {
                "name": cf.name,
                "exclusive_s": cf.exclusive_s,
                "share": cf.share,
                "osts": list(cf.osts),
                "nprocs": cf.nprocs,
                "stripe_count": cf.stripe_count,
            }
            for cf in a.critical[:top]
        ],
        "critical_file_count": len(a.critical),
        "factors": dict(a.factors),
        "slow_osts": [o.ost for o in a.osts if o.slow],
        "causes": [
            {"kind": c.kind, "message": c.message, "ost": c.ost, "source": c.source}
            for c in d.causes
        ],
        "insights": [
            {"code": i.code, "level": i.level, "message": i.message, "files": list(i.files)}
            for i in d.insights
        ],
    }


def _bw(v: float | None) -> str:
    return "-" if v is None else f"{v / MiB:.1f}"


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def format_diagnosis(d: Diagnosis, t: Thresholds, top: int) -> str:
    """The text block of one job."""
    a = d.analysis
    j = a.job
    gib = 2**30
    name = a.log.path.rsplit("/", 1)[-1]
    lines = [
        f"job {a.log.jobid}  {j['exe'] or '(no exe)'}  {j['nprocs']} procs  "
        f"{j['pattern'] or '-'}  {j['interface'] or 'no I/O'}  ({name})",
        f"  bytes: {j['bytes_written'] / gib:.3f} GiB written, {j['bytes_read'] / gib:.3f} GiB "
        f"read; run {j['run_time_s']:.1f} s, I/O on the critical path {a.cover.union:.3f} s "
        f"(span {a.cover.span:.3f} s)",
        f"  bandwidth MiB/s: critical path {_bw(j['critical_bytes_per_s'])}, naive "
        f"{_bw(j['naive_bytes_per_s'])}, Darshan {_bw(j['darshan_bytes_per_s'])}, write "
        f"{_bw(j['write_bytes_per_s'])}, read {_bw(j['read_bytes_per_s'])}",
        f"  low bandwidth: {', '.join(d.low) or 'no'}  (more than {t.min_nprocs} procs, at "
        f"least {t.min_bytes_per_proc / MiB:g} MiB/proc, under {t.max_bytes_per_s / MiB:g} MiB/s)",
        f"  critical files ({len(a.critical)}):",
    ]
    for cf in a.critical[:top]:
        osts = ",".join(map(str, cf.osts[:8])) + ("..." if len(cf.osts) > 8 else "")
        lines.append(
            f"    {cf.exclusive_s:10.3f} s {cf.share:6.1%}  OST {osts or '-':<8} "
            f"{cf.nprocs:6d} procs  {cf.name}"
        )
    f = a.factors
    lines.append(
        f"  factors ({a.direction}): Small {_f(f['small'])}  Small<1KiB {_f(f['small_1k'])}  "
        f"Non-consec {_f(f['non_consec'])}  Coll {_f(f['coll'], '.0f')}  "
        f"OST# {_f(f['ost_count'], '.0f')}  Proc/OST {_f(f['proc_per_ost'], '.1f')}"
    )
    if d.causes:
        lines.append("  causes:")
        lines += [f"    {c.kind} [{c.source}]: {c.message}" for c in d.causes]
    if d.insights:
        lines.append("  insights:")
        lines += [f"    {i.code} {i.level}: {i.message}" for i in d.insights]
    return "\n".join(lines) + "\n"


def _diagnose(args: argparse.Namespace) -> int:
    from pipeline.shippers.darshan_tail import DarshanPool

    settings = settings_from_args(args)
    t = thresholds_of(settings, args)
    # one log is read here (a crash ends only this command); several in workers
    pool = DarshanPool(settings.darshan.workers, inline=len(args.LOG) == 1)
    for path in args.LOG:
        pool.submit(path)
    cluster = Cluster(settings, embedded=False) if args.cluster else None
    status = 0
    out = sys.stdout
    try:
        for path in args.LOG:
            try:
                a = pool.result(path)
            except (ParseError, FileNotFoundError) as err:
                sys.stderr.write(f"iolens: {err}\n")
                status = 2
                continue
            extra: dict[str, Any] = {}
            if cluster is not None:
                from pipeline.jobs.darshan_evidence import server_evidence

                extra = server_evidence(cluster.client, settings, a)
            d = diagnose(a, t, **extra)
            if args.json:
                out.write(json.dumps(diagnosis_dict(d, args.top)) + "\n")
            else:
                out.write(format_diagnosis(d, t, args.top) + "\n")
    finally:
        pool.close()
        if cluster is not None:
            cluster.__exit__()
    return status


def _stats(args: argparse.Namespace) -> int:
    from pipeline.query import IOMiner
    from pipeline.report.darshan_stats import first_order, format_text

    settings = settings_from_args(args)
    with Cluster(settings) as cluster:
        miner = IOMiner(cluster.client, namespace=settings.elasticsearch.namespace)
        if args.start or args.end:
            miner.init_stores(args.start, args.end)
        jobs = miner.load("darshan job").df
    stats = first_order(jobs, args.top)
    if args.json:
        sys.stdout.write(json.dumps(stats) + "\n")
    else:
        sys.stdout.write(format_text(stats))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run the action; returns 0, or 2 when a log could not be read.

    Raises:
        ConfigError: bad configuration or options.
    """
    if args.action == "diagnose":
        return _diagnose(args)
    if args.action == "stats":
        return _stats(args)
    raise ConfigError(f"unknown action {args.action!r}")
