"""IOMiner's first-order statistics over the Darshan job table (seed 004 III-C, III-D, III-E).

* top I/O-intensive applications: jobs grouped by executable, ranked by bytes read and by
  bytes written, with their share of all traffic (Figures 5 and 6);
* the distribution of the sequential-I/O ratio ``P_seq`` (Equation 3, Figure 7) as percentiles
  over jobs;
* the read ratio ``P_read`` (Equation 4, Figure 8): jobs per bin (write-only, (0, 10 %], ...,
  (90 %, 100 %), read-only);
* file-sharing patterns (Figure 9): jobs per N-1 / N-N / N-M, one-process jobs left out;
* I/O interfaces by job size (Figure 10): per size class (One, Small, Medium, Large), the share
  of jobs using POSIX, MPI-IO independent and MPI-IO collective.

Input is the ``darshan job`` table of :mod:`pipeline.query` (columns ``exe``, ``bytes_read``,
``bytes_written``, ``seq_ratio``, ``read_ratio``, ``pattern``, ``nprocs``, ``size_class``,
``interfaces``, ``interface``, ``no_io``). When no job matched, :func:`searched` says what was
searched (the data stream, the period, the filters) and what the data stream holds.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NotRequired, TypedDict

import numpy as np
import pandas as pd  # type: ignore[import-untyped]

from pipeline.sink.client import Client
from pipeline.sink.search import count, newest, oldest

PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)
SIZE_ORDER = ("One", "Small", "Medium", "Large")
READ_BINS = ("0", *(f"({i}, {i + 10}]" for i in range(0, 90, 10)), "(90, 100)", "100")


class TopApplication(TypedDict):
    """One executable of a ranking by bytes (Figures 5 and 6).

    Attributes:
        exe: the executable (``(unknown)`` when the log names none).
        bytes: its jobs' bytes read (or written), summed.
        jobs: how many jobs ran it.
        share: ``bytes`` as a fraction (0-1) of all jobs' bytes; 0.0 when there are none.
    """

    exe: str
    bytes: int
    jobs: int
    share: float


SizeInterfaces = TypedDict(
    "SizeInterfaces",
    {"jobs": int, "POSIX": float, "MPI-IO independent": float, "MPI-IO collective": float},
)
"""One size class of Figure 10: its ``jobs`` and the fraction (0-1) of them using POSIX,
MPI-IO independent and MPI-IO collective."""


class Searched(TypedDict):
    """What a search for jobs that found none covered (:func:`searched`).

    Attributes:
        data_stream: the job table's data stream; field: the time field (``@timestamp``).
        start, end: the period searched (ISO, UTC); None: unbounded on that side.
        filters: the filters besides the period (none).
        indexed_jobs: jobs in the data stream at any time (0 when it does not exist).
        first_start, last_start: the earliest/latest job start there (ISO; None without jobs).
    """

    data_stream: str
    field: str
    start: str | None
    end: str | None
    filters: list[str]
    indexed_jobs: int
    first_start: str | None
    last_start: str | None


class DarshanStats(TypedDict):
    """The first-order statistics of a job table (:func:`first_order`).

    Attributes:
        jobs: jobs (Darshan logs); jobs_with_io: of them, jobs that did I/O.
        top_read, top_write: the applications ranked by bytes read / written.
        seq_ratio_percentiles: percentile (``"50"``) -> sequential-I/O ratio (0-1); empty
            without any job with I/O.
        read_ratio_bins: :data:`READ_BINS` bin -> jobs.
        sharing_patterns: file-sharing pattern (``N-1``) -> jobs of more than one process.
        interfaces_by_size: size class (:data:`SIZE_ORDER`) with jobs -> its interfaces.
        searched: with no job, what was searched (added by the caller).
    """

    jobs: int
    jobs_with_io: int
    top_read: list[TopApplication]
    top_write: list[TopApplication]
    seq_ratio_percentiles: dict[str, float]
    read_ratio_bins: dict[str, int]
    sharing_patterns: dict[str, int]
    interfaces_by_size: dict[str, SizeInterfaces]
    searched: NotRequired[Searched]


def _read_bin(r: float) -> str:
    if r <= 0:
        return "0"
    if r >= 1:
        return "100"
    if r > 0.9:
        return "(90, 100)"
    lo = int(np.ceil(r * 100 / 10) - 1) * 10
    return f"({lo}, {lo + 10}]"


def first_order(jobs: pd.DataFrame, top: int = 10) -> DarshanStats:
    """The statistics of the module docstring, as plain values.

    Args:
        jobs: the job table (one row per Darshan log).
        top: applications listed per ranking.

    Returns:
        the :class:`DarshanStats` (without ``searched``); shares are fractions (0-1).
    """
    n = len(jobs)
    if n == 0:
        return _empty_stats()
    df = jobs.copy()
    df["exe"] = df["exe"].fillna("(unknown)") if "exe" in df else "(unknown)"
    io = df[~df["no_io"].astype(bool)] if "no_io" in df else df
    return {
        "jobs": n,
        "jobs_with_io": len(io),
        "top_read": top_applications(df, "bytes_read", top),
        "top_write": top_applications(df, "bytes_written", top),
        "seq_ratio_percentiles": seq_ratio_percentiles(io),
        "read_ratio_bins": read_ratio_bins(io),
        "sharing_patterns": sharing_patterns(io),
        "interfaces_by_size": interfaces_by_size(io),
    }


def _empty_stats() -> DarshanStats:
    """The statistics of an empty job table (new containers each time)."""
    return {
        "jobs": 0,
        "jobs_with_io": 0,
        "top_read": [],
        "top_write": [],
        "seq_ratio_percentiles": {},
        "read_ratio_bins": {},
        "sharing_patterns": {},
        "interfaces_by_size": {},
    }


def top_applications(df: pd.DataFrame, col: str, top: int) -> list[TopApplication]:
    """Executables ranked by the sum of ``col`` (``bytes_read``/``bytes_written``), the first
    ``top`` with any bytes: ``exe``, ``bytes``, ``jobs`` and ``share`` of all jobs' bytes
    (Figures 5 and 6)."""
    total = float(df[col].sum())
    g = df.groupby("exe")[col].agg(["sum", "count"]).sort_values("sum", ascending=False)
    g = g[g["sum"] > 0].head(top)
    return [
        {
            "exe": str(exe),
            "bytes": int(r["sum"]),
            "jobs": int(r["count"]),
            "share": float(r["sum"]) / total if total > 0 else 0.0,
        }
        for exe, r in g.iterrows()
    ]


def seq_ratio_percentiles(io: pd.DataFrame) -> dict[str, float]:
    """:data:`PERCENTILES` of the jobs' sequential-I/O ratio (Figure 7); empty without any."""
    seq = pd.to_numeric(io.get("seq_ratio"), errors="coerce").dropna()
    return {str(p): float(np.percentile(seq, p)) for p in PERCENTILES} if len(seq) else {}


def read_ratio_bins(io: pd.DataFrame) -> dict[str, int]:
    """Jobs per :data:`READ_BINS` bin of their read ratio (Figure 8)."""
    rr = pd.to_numeric(io.get("read_ratio"), errors="coerce").dropna()
    counts = {b: 0 for b in READ_BINS}
    for r in rr.tolist():
        counts[_read_bin(float(r))] += 1
    return counts


def sharing_patterns(io: pd.DataFrame) -> dict[str, int]:
    """Jobs of more than one process per file-sharing pattern (Figure 9)."""
    multi = io[io["nprocs"] > 1]
    return {
        str(k): int(v) for k, v in multi["pattern"].dropna().value_counts().sort_index().items()
    }


def interfaces_by_size(io: pd.DataFrame) -> dict[str, SizeInterfaces]:
    """Per size class with jobs: ``jobs`` and the share of them using POSIX, MPI-IO independent
    and MPI-IO collective (Figure 10)."""
    by_size: dict[str, SizeInterfaces] = {}
    for cls in SIZE_ORDER:
        sub = io[io["size_class"] == cls]
        if not len(sub):
            continue
        ifaces = sub["interfaces"].apply(lambda v: set(v) if isinstance(v, list | tuple) else {v})
        iface = sub["interface"].fillna("")
        by_size[cls] = {
            "jobs": len(sub),
            "POSIX": float(ifaces.apply(lambda s: "POSIX" in s).mean()),
            "MPI-IO independent": float((iface == "MPI-IO independent").mean()),
            "MPI-IO collective": float((iface == "MPI-IO collective").mean()),
        }
    return by_size


def searched(
    client: Client, index: str, start: pd.Timestamp | None, end: pd.Timestamp | None
) -> Searched:
    """What a search for jobs that found none covered, and what ``index`` holds.

    Args:
        client: the cluster's client.
        index: the job table's data stream (``logs-darshan.job-<namespace>``).
        start, end: the period searched, ``start <= @timestamp < end`` (the job start), UTC;
            None: unbounded on that side.

    Returns:
        the :class:`Searched`: ``data_stream`` is ``index``, ``field`` ``@timestamp``,
        ``filters`` empty (no filter besides the period).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    indexed = count(client, index, {"match_all": {}})
    first = oldest(client, index) if indexed else None
    last = newest(client, index) if indexed else None
    return {
        "data_stream": index,
        "field": "@timestamp",
        "start": None if start is None else _iso(start),
        "end": None if end is None else _iso(end),
        "filters": [],
        "indexed_jobs": indexed,
        "first_start": None if first is None else _iso(_from_sort(first)),
        "last_start": None if last is None else _iso(_from_sort(last)),
    }


def _from_sort(value: Any) -> pd.Timestamp:
    """A date's sort value (epoch ms, or an ISO string) as a UTC timestamp."""
    if isinstance(value, int | float):
        return pd.Timestamp(datetime.fromtimestamp(value / 1000, tz=UTC))
    return pd.Timestamp(value).tz_convert("UTC")


def _iso(ts: pd.Timestamp) -> str:
    """``2018-01-28T00:00:00.000Z``."""
    return str(ts.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")


def format_searched(where: Searched) -> list[str]:
    """The lines that say what a search that found no job covered (see :func:`searched`)."""
    start, end = where["start"], where["end"]
    if start is None and end is None:
        period = "at any time (no --start or --end)"
    else:
        period = " ".join(
            [f"from {start} (--start)" if start else "", f"before {end} (--end)" if end else ""]
        ).strip()
    lines = [
        f"no job matched: searched data stream {where['data_stream']} for jobs whose "
        f"{where['field']} (the job's start) is {period}, with no other filter"
    ]
    n = where["indexed_jobs"]
    if n:
        lines.append(
            f"{where['data_stream']} holds {n} job(s) starting from {where['first_start']} to "
            f"{where['last_start']}: give --start/--end around them"
        )
    else:
        lines.append(
            f"{where['data_stream']} holds no job: index Darshan logs first (a darshan drop "
            "read by iolens run, or iolens ingest --type darshan LOG...), or check "
            "elasticsearch.namespace (the data stream's last part)"
        )
    return lines


def format_text(stats: DarshanStats) -> str:
    """The statistics as the text ``iolens darshan stats`` prints; with no job and
    ``stats["searched"]`` (:func:`searched`), what was searched instead of empty sections."""
    gib = 2**30
    lines = [f"jobs: {stats['jobs']} ({stats['jobs_with_io']} with I/O)"]
    if not stats["jobs"] and "searched" in stats:
        return "\n".join([*lines, *format_searched(stats["searched"])]) + "\n"
    for ranking, what in ((stats["top_read"], "read"), (stats["top_write"], "written")):
        lines.append(f"\ntop applications by bytes {what}:")
        for r in ranking:
            size = f"{r['bytes'] / gib:12.2f} GiB"
            lines.append(f"  {size}  {r['share']:6.1%}  {r['jobs']:5d} jobs  {r['exe']}")
    if stats["seq_ratio_percentiles"]:
        lines.append("\nsequential-I/O ratio over jobs (percentile: ratio):")
        lines.append(
            "  " + "  ".join(f"p{p}: {v:.2f}" for p, v in stats["seq_ratio_percentiles"].items())
        )
    lines.append("\nread ratio (% of bytes read): jobs")
    for b, c in stats["read_ratio_bins"].items():
        lines.append(f"  {b:>10}: {c}")
    lines.append("\nfile-sharing pattern (jobs with more than one process):")
    for pat, c in stats["sharing_patterns"].items():
        lines.append(f"  {pat:>4}: {c}")
    lines.append("\nI/O interface by job size (share of jobs):")
    for cls, row in stats["interfaces_by_size"].items():
        lines.append(
            f"  {cls:>6} ({row['jobs']} jobs): POSIX {row['POSIX']:.1%}, MPI-IO independent "
            f"{row['MPI-IO independent']:.1%}, MPI-IO collective {row['MPI-IO collective']:.1%}"
        )
    return "\n".join(lines) + "\n"
