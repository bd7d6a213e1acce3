"""IOMiner's query interface over Elasticsearch, returning pandas DataFrames.

Seed 004, section II-A: tables of Darshan jobs, Darshan files, Slurm jobs and LMT OST
intervals are loaded as *tuples* and analysed with composable operators: ``project``,
``filter``, ``sort``, ``group`` and ``bin`` with user-defined functions, ``join``,
``percentile``, and ``extract_perf_factors`` (section II-D) for the root causes of low
bandwidth. Here the tables are the iolens data streams (:mod:`pipeline.query.tables`), loads
page through them with point-in-time ``search_after`` (:mod:`pipeline.query.reader`), and the
tuples wrap pandas DataFrames (:class:`Tuples`).

The seed's Algorithm 1, line for line (``examples/iominer_algorithm1.py`` runs it)::

    from pipeline.query import IOMiner

    def classify_workload(bytes_written):      # [0,1) GB -> 0, [1,10) GB -> 1, else 2
        return 0 if bytes_written < 1e9 else 1 if bytes_written < 1e10 else 2

    def calculate_ost_count(files):            # a job's files (a DataFrame) -> distinct OSTs
        return len({ost for osts in files["osts"] for ost in osts})

    def is_allocation(row):                    # the Slurm record of the job, not of a step
        return row["slurm_id"] == row["job_id"]

    # Instantiate an IOMiner instance
    miner = IOMiner(client, namespace="default")     # or IOMiner.from_settings(settings)
    # construct IOMiner's storage format (here: the period loads read)
    miner.init_stores("2024-03-05", "2024-03-06")
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
        "job id", "node count", "bytes read", "bytes written")
    # return the jobs that write more than 10GB data
    low_bw_tuples = job_tuples.filter("bytes written > 10GB").join(file_tuples, "job id")
    # extract contributing factors for poor write performance
    perf_factors = low_bw_tuples.extract_perf_factors("0", "1GB", "write")

Each result is a :class:`Tuples`; ``.df`` (or ``.to_pandas()``) is its DataFrame. Units in
filter strings and bandwidth bounds: ``GB`` is 10^9 bytes, ``GiB`` 2^30
(:mod:`pipeline.query.expr`); ``"1GB"`` as a bandwidth is 1 GB/s. ``percentile`` returns the
quantiles 0, 0.01, ..., 1 unless given ``q``.
"""

from __future__ import annotations

from pipeline.query.filter_parse import FilterSyntaxError
from pipeline.query.miner import IOMiner, TimeLike, to_timestamp
from pipeline.query.quantity import ColumnError, normalize, parse_quantity
from pipeline.query.tuples import Tuples

__all__ = [
    "ColumnError",
    "FilterSyntaxError",
    "IOMiner",
    "TimeLike",
    "Tuples",
    "normalize",
    "parse_quantity",
    "to_timestamp",
]
