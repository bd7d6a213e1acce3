"""IOMiner's Algorithm 1 (seed 004, section II-A) run against an iolens cluster.

The analysis the paper uses to introduce IOMiner's query interface, line for line, over the
data streams iolens indexes (Darshan job and file tables, Slurm, LMT), with ``pipeline.query``::

    python examples/iominer_algorithm1.py --es http://localhost:9200 [--namespace default]
        [--start 2024-03-05 --end 2024-03-06]

It prints each result: the jobs writing less than 1 GB, the workload bins, each job's OST
count, the percentile list of bytes written, Darshan jobs joined with their Slurm allocation,
and the contributing factors of the jobs that write more than 10 GB at less than 1 GB/s.
The functions are importable: :func:`algorithm1` returns every result as
:class:`pipeline.query.Tuples`.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
from elasticsearch import Elasticsearch

from pipeline.query import IOMiner, TimeLike, Tuples

GB = 1e9


def classify_workload(bytes_written: float) -> int | None:
    """Seed 004 §II-A, line 15: [0, 1) GB is workload 0, [1, 10) GB workload 1, [10, inf) GB
    workload 2 (GB = 10^9 bytes); None when the job has no value."""
    if bytes_written is None or math.isnan(bytes_written):
        return None
    if bytes_written < 1 * GB:
        return 0
    return 1 if bytes_written < 10 * GB else 2


def calculate_ost_count(files: pd.DataFrame) -> int:
    """Seed 004 §II-A, line 17: the number of distinct OSTs of one job's files, the union of
    their OST lists (IOMiner's per-file OST bitmaps)."""
    osts: set[int] = set()
    for ids in files["osts"]:
        if isinstance(ids, list | tuple):
            osts.update(int(i) for i in ids)
    return len(osts)


def is_allocation(row: dict[str, Any]) -> bool:
    """A Slurm record of the job itself, not one of its steps (JobIDRaw = job id)."""
    return bool(row["slurm_id"] == row["job_id"])


@dataclass(frozen=True)
class Algorithm1:
    """The results of :func:`algorithm1`, named as in the seed's listing."""

    selected_tuples: Tuples
    binned_tuples: Tuples
    grouped_tuples: Tuples
    percents: Tuples
    joined_tuples: Tuples
    low_bw_tuples: Tuples
    perf_factors: Tuples
    lmt_tuples: Tuples


def algorithm1(
    client: Elasticsearch, namespace: str, start_date: TimeLike, end_date: TimeLike
) -> Algorithm1:
    """Seed 004 Algorithm 1, lines 2-25, on the data streams of ``namespace``.

    Args:
        client: the cluster.
        namespace: data stream namespace (``logs-darshan.job-<namespace>``...).
        start_date: first instant of the period (datetime, ISO-8601 or epoch seconds).
        end_date: end of the period, exclusive.

    Returns:
        Every result as Tuples. Line 21 joins each Darshan job with its Slurm allocation
        record (Slurm also records each step of a job under the same job id).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    # Instantiate an IOMiner instance
    miner = IOMiner(client, namespace=namespace)
    # construct IOMiner's storage format (in iolens: the period loads read)
    miner.init_stores(start_date, end_date)
    # load Darshan's job-level statistics as tuples
    job_tuples = miner.load("darshan job")
    # load Darshan's file-level statistics
    file_tuples = miner.load("darshan file")
    # load Slurm job scheduler statistics
    slurm_tuples = miner.load("slurm")
    # load Lustre Monitoring Tools (LMT) traces
    lmt_tuples = miner.load("lmt")
    # filter jobs that write less than 1GB data and bin them
    selected_tuples = job_tuples.project("job id", "bytes written").filter("bytes written < 1GB")
    binned_tuples = job_tuples.bin("workload", classify_workload, "bytes written")
    # select a list of tuples containing each job's ID and the number of OSTs used
    grouped_tuples = file_tuples.group("job id", calculate_ost_count)
    # generate a percentile list for Bytes Written
    percents = job_tuples.percentile("bytes written")
    # return each job's node count (in Slurm log) and write/read size (in Darshan log)
    joined_tuples = job_tuples.join(slurm_tuples.filter(is_allocation), "job id").project(
        "job id", "node count", "bytes read", "bytes written"
    )
    # return the jobs that write more than 10GB data
    low_bw_tuples = job_tuples.filter("bytes written > 10GB").join(file_tuples, "job id")
    # extract contributing factors for poor write performance
    perf_factors = low_bw_tuples.extract_perf_factors("0", "1GB", "write")
    return Algorithm1(
        selected_tuples=selected_tuples,
        binned_tuples=binned_tuples,
        grouped_tuples=grouped_tuples,
        percents=percents,
        joined_tuples=joined_tuples,
        low_bw_tuples=low_bw_tuples,
        perf_factors=perf_factors,
        lmt_tuples=lmt_tuples,
    )


TITLES = {
    "selected_tuples": "line 14: jobs that write less than 1 GB",
    "binned_tuples": "line 15: workload bins by bytes written ([0,1) GB: 0, [1,10) GB: 1, else 2)",
    "grouped_tuples": "line 17: distinct OSTs per job",
    "percents": "line 19: percentiles of bytes written (every 10th of the list)",
    "joined_tuples": "line 21: node count (Slurm) and bytes read/written (Darshan) per job",
    "low_bw_tuples": "line 23: jobs writing more than 10 GB, joined with their files",
    "perf_factors": "line 25: jobs writing at [0, 1 GB/s) and their contributing factors",
    "lmt_tuples": "line 12: LMT rows loaded (bytes written per OST shown)",
}


def render(results: Algorithm1) -> str:
    """The results as text, one titled table each (the LMT and job x file tables summarised)."""
    out: list[str] = []
    for f in fields(results):
        t: Tuples = getattr(results, f.name)
        out.append(f"== {TITLES[f.name]} ({len(t)} rows)")
        if f.name == "percents":
            df = t.df.iloc[::10]
        elif f.name == "binned_tuples":
            df = t.project("job id", "bytes written", "workload").df
        elif f.name == "low_bw_tuples":
            df = t.project(
                "job id", "name", "bytes written file", "write start s", "write end s"
            ).df
        elif f.name == "lmt_tuples":
            df = t.group(["ost name"], lambda g: int(g["write_bytes"].sum()), "write_bytes").df
        else:
            df = t.df
        out.append(df.to_string(index=False) if len(df) else "(none)")
        out.append("")
    return "\n".join(out)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--es", required=True, metavar="URL", help="Elasticsearch URL")
    p.add_argument("--namespace", default="default", help="data stream namespace")
    p.add_argument("--start", help="period start, ISO-8601 (default: 30 days before --end)")
    p.add_argument("--end", help="period end, exclusive, ISO-8601 (default: now)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run Algorithm 1 against ``--es`` and print each result; returns the exit status."""
    args = _parser().parse_args(argv)
    end = args.end or datetime.now(UTC).isoformat()
    start = args.start or (pd.Timestamp(end) - timedelta(days=30)).isoformat()
    pd.set_option("display.width", 200)
    pd.set_option("display.max_colwidth", 120)
    client = Elasticsearch(args.es, request_timeout=60)
    try:
        print(render(algorithm1(client, args.namespace, start, end)))
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
