"""Tables of the site benchmark (``bench/site.py``): per stream per host-day, site totals for a
mix of hosts, a suggested cluster, and what the embedded server holds.

Units: CPU in seconds per host-day, memory in MiB (2^20 bytes), index sizes in MB/GB (10^6 /
10^9 bytes) of ``store.size``, documents per day.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from site_measure import is_wall
from site_streams import DAY_S, span_note

MIB = 2**20
FOUR_GIB = 4 * 2**30
SITE_SIZES = (100, 1000)
DEFAULT_MIX = "fio=0.1,sysstat=0.05,darshan=0.01,slurm=0.01,events=0.2"
MIX_ROLES = {
    "fio": "fio clients (histogram probes)",
    "sysstat": "file servers (sadc)",
    "darshan": "login nodes (Darshan logs)",
    "slurm": "login nodes (sacct)",
    "events": "instrumented application hosts",
}


@dataclass(frozen=True)
class Cluster:
    """Assumptions of the suggested cluster (not measured here)."""

    retention_days: float = 90.0  # the shipped ILM policy deletes 90 days after rollover
    replicas: int = 1
    disk_per_node_gb: float = 2000.0
    disk_watermark: float = 0.85  # Elasticsearch's default low disk watermark
    docs_per_s_per_node: float = 5000.0


@dataclass(frozen=True)
class HostDay:
    """One stream's cost per host-day (CPU s, bytes, documents) and how it was scaled."""

    stream: str
    cpu_s: float
    work_cpu_s: float
    idle_cpu_s: float
    peak_rss_bytes: int
    docs: float
    store_bytes: float
    span_s: float
    scale: float


def _per_day(run: dict[str, Any], values: dict[str, int]) -> float:
    """Sum of ``values`` per host-day: data streams by span, wall-clock ones by wall time."""
    wall_s = run["life_wall_s"]
    total = 0.0
    for index, v in values.items():
        if is_wall(index):
            total += v * DAY_S / max(wall_s, 1.0)
        else:
            total += v * DAY_S / run["span_s"] / run["hosts"]
    return total


def host_day(run: dict[str, Any]) -> HostDay:
    """Scale one run (a ``StreamRun`` as a dict) to one host-day."""
    scale = DAY_S / run["span_s"] / run["hosts"]
    work = run["work_cpu_s"] * scale
    idle = run["idle_cpu_per_s"] * DAY_S
    return HostDay(
        stream=run["stream"],
        cpu_s=work + idle,
        work_cpu_s=work,
        idle_cpu_s=idle,
        peak_rss_bytes=run["peak_rss_bytes"],
        docs=_per_day(run, run["docs"]),
        store_bytes=_per_day(run, run["store_bytes"]),
        span_s=run["span_s"],
        scale=scale,
    )


@dataclass(frozen=True)
class Mix:
    """Which share of a site's hosts runs each stream's drop."""

    shares: dict[str, float]

    @classmethod
    def parse(cls, text: str) -> Mix:
        """``stream=share,...`` (shares in [0, 1]).

        Raises:
            ValueError: an unknown stream or a share outside [0, 1].
        """
        shares = {}
        for part in filter(None, text.split(",")):
            name, _, share = part.partition("=")
            if name not in MIX_ROLES or not 0 <= float(share) <= 1:
                raise ValueError(f"--mix {part!r}: expected STREAM=SHARE, share in [0, 1]")
            shares[name] = float(share)
        return cls(shares)

    def hosts(self, stream: str, site_hosts: int) -> int:
        """Hosts of a ``site_hosts`` site running ``stream`` (at least one if its share > 0)."""
        share = self.shares.get(stream, 0.0)
        return math.ceil(share * site_hosts) if share > 0 else 0


def site_totals(days: Sequence[HostDay], mix: Mix, site_hosts: int, c: Cluster) -> dict[str, Any]:
    """Documents and bytes per day of a site, and a cluster that holds ``c.retention_days``."""
    docs = sum(d.docs * mix.hosts(d.stream, site_hosts) for d in days)
    size = sum(d.store_bytes * mix.hosts(d.stream, site_hosts) for d in days)
    stored = size * c.retention_days * (1 + c.replicas)
    by_disk = math.ceil(stored / (c.disk_per_node_gb * 1e9 * c.disk_watermark))
    by_rate = math.ceil(docs / DAY_S / c.docs_per_s_per_node)
    nodes = max(1, by_disk, by_rate)
    return {
        "hosts": site_hosts,
        "docs_per_day": docs,
        "store_bytes_per_day": size,
        "docs_per_s": docs / DAY_S,
        "stored_bytes": stored,
        "data_nodes": max(3, nodes) if nodes > 1 else 1,
    }


def server_summary(
    server: dict[str, Any], runs: Sequence[dict[str, Any]], days: Sequence[HostDay]
) -> dict[str, Any]:
    """The embedded server's memory and disk per document held at the end, and, at that
    memory per document, how many hours of one host's stream 4 GiB of its memory hold.

    Memory is the server's RSS over every document it holds: its growth during one stream's
    run is not that stream's (memory one run grew and freed is reused by the next), so the
    run's ``server_rss_delta_bytes`` are kept in ``site.json`` but not used here.
    """
    docs = max(1, server["docs"])
    per_doc = max(0, server["rss_bytes"] - server["empty_rss_bytes"]) / docs
    streams = {}
    for run, day in zip(runs, days, strict=True):
        n = max(1, sum(run["docs"].values()))
        streams[run["stream"]] = {
            "docs": n,
            "store_bytes_per_doc": sum(run["store_bytes"].values()) / n,
            "docs_per_host_day": day.docs,
            "host_hours_in_4gib": 24 * FOUR_GIB / (per_doc * day.docs) if per_doc else math.inf,
        }
    return {
        **server,
        "rss_bytes_per_doc": per_doc,
        "disk_bytes_per_doc": server["disk_bytes"] / docs,
        "store_bytes_per_doc": server["store_bytes"] / docs,
        "streams": streams,
    }


def _gb(n: float) -> str:
    """Bytes as GB (10^9) from 1 GB up, else MB (10^6)."""
    return f"{n / 1e9:,.2f} GB" if n >= 1e9 else f"{n / 1e6:,.0f} MB"


def stream_rows(days: Sequence[HostDay]) -> list[list[str]]:
    """Rows of the per-host-day table."""
    return [
        [
            d.stream,
            f"{d.cpu_s:,.0f} ({d.work_cpu_s:,.0f} + {d.idle_cpu_s:,.0f})",
            f"{d.peak_rss_bytes / MIB:,.0f}",
            f"{d.docs:,.0f}",
            _gb(d.store_bytes),
            f"{span_note(d.span_s)} x {d.scale:,.1f}",
        ]
        for d in days
    ]


STREAM_HEADERS = (
    "stream",
    "CPU s/host-day (work + idle)",
    "peak RSS MiB",
    "documents/host-day",
    "index size/host-day",
    "measured span x scale",
)
SITE_HEADERS = ("site", "documents/day", "docs/s (mean)", "index size/day", "stored", "data nodes")


def site_rows(totals: Sequence[dict[str, Any]], c: Cluster) -> list[list[str]]:
    """Rows of the site table."""
    return [
        [
            f"{t['hosts']:,} hosts",
            f"{t['docs_per_day']:,.0f}",
            f"{t['docs_per_s']:,.0f}",
            _gb(t["store_bytes_per_day"]),
            f"{t['stored_bytes'] / 1e12:,.2f} TB ({c.retention_days:g} d x {1 + c.replicas})",
            str(t["data_nodes"]),
        ]
        for t in totals
    ]


def rich_table(title: str, headers: Sequence[str], rows: list[list[str]]) -> Table:
    """A rich table of ``rows``."""
    table = Table(title=title)
    for h in headers:
        table.add_column(h, justify="left" if h in ("stream", "site") else "right")
    for r in rows:
        table.add_row(*r)
    return table


def md_table(headers: Sequence[str], rows: list[list[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def build(result: dict[str, Any]) -> dict[str, Any]:
    """Per host-day figures, site totals and the embedded server's summary of a result."""
    runs = sorted(result["runs"], key=lambda r: list(MIX_ROLES).index(r["stream"]))
    days = [host_day(r) for r in runs]
    mix, c = Mix(result["mix"]), Cluster(**result["cluster"])
    return {
        "host_days": [asdict(d) for d in days],
        "sites": [site_totals(days, mix, n, c) for n in SITE_SIZES],
        "server_summary": server_summary(result["server"], runs, days),
    }


def _days(report: dict[str, Any]) -> list[HostDay]:
    return [HostDay(**d) for d in report["host_days"]]


def mix_rows(mix: Mix) -> list[list[str]]:
    """Rows of the site-mix table: who runs each stream, and how many hosts at each size."""
    return [
        [name, role, f"{mix.shares.get(name, 0.0):g}"]
        + [f"{mix.hosts(name, n):,}" for n in SITE_SIZES]
        for name, role in MIX_ROLES.items()
    ]


MIX_HEADERS = ("stream", "hosts running it", "share", *(f"of {n:,}" for n in SITE_SIZES))


def server_lines(s: dict[str, Any]) -> list[str]:
    """What the embedded server held at the end of the run."""
    return [
        f"At the end it held {s['docs']:,} documents ({s['store_bytes'] / 1e6:,.1f} MB of "
        f"store.size) in {s['rss_bytes'] / MIB:,.0f} MiB resident (peak "
        f"{s['hwm_bytes'] / MIB:,.0f} MiB; {s['empty_rss_bytes'] / MIB:,.0f} MiB empty): "
        f"{s['rss_bytes_per_doc']:,.0f} bytes of memory per document held, the figure the last "
        f"column uses. Its data directory, written when it stops, took "
        f"{s['disk_bytes'] / 1e6:,.1f} MB: {s['disk_bytes_per_doc']:,.0f} bytes per document.",
    ]


def server_rows(s: dict[str, Any]) -> list[list[str]]:
    """Per stream: its documents' size and how long one host's stream fits in 4 GiB."""
    return [
        [
            name,
            f"{v['docs']:,}",
            f"{v['store_bytes_per_doc']:,.0f}",
            f"{v['docs_per_host_day']:,.0f}",
            f"{v['host_hours_in_4gib']:,.1f}",
        ]
        for name, v in s["streams"].items()
    ]


SERVER_HEADERS = (
    "stream",
    "documents indexed here",
    "store bytes/document",
    "documents/host-day",
    "hours of one host in 4 GiB",
)


def markdown(result: dict[str, Any], report: dict[str, Any]) -> str:
    """``site.md``: the sizing tables with the command, date, rates, mix and assumptions."""
    c = Cluster(**result["cluster"])
    rates = ", ".join(f"{k} {v:g}" for k, v in result["rates"].items())
    parts = [
        "# Site sizing\n",
        f"Measured {result['date']} with `.venv/bin/python {result['command'].strip()}` "
        f"(iolens {result['iolens_source']}; {result['machine']}; "
        f"{result['wall_s'] / 60:.1f} minutes).\n",
        f"Rates per host: {rates}.\n",
        "## Per stream, per host-day\n",
        md_table(STREAM_HEADERS, stream_rows(_days(report))),
        "CPU: user + system seconds of one `iolens run` (and its worker processes) per host-day: "
        "the work, measured on the span and scaled by the factor, plus the idle rate measured "
        "before the input came, over 86,400 s. Peak RSS: one instance catching up the span at "
        "the speed-up (an upper bound for steady state). Index size: `store.size` of "
        "`GET _cat/indices?bytes=b` on the embedded noida-db, which counts each document's "
        "`_source` JSON plus about 120 bytes, not a Lucene store.\n",
        "## Site totals\n",
        "The share of a site's hosts running each stream (`--mix`):\n",
        md_table(MIX_HEADERS, mix_rows(Mix(result["mix"]))),
        md_table(SITE_HEADERS, site_rows(report["sites"], c)),
        f"Assumptions: {c.retention_days:g} days kept (the shipped ILM policy), "
        f"{c.replicas} replica, data nodes of {c.disk_per_node_gb / 1000:g} TB filled to "
        f"{c.disk_watermark:.0%} (the default low disk watermark) and indexing at most "
        f"{c.docs_per_s_per_node:,.0f} documents/s each, at least three once more than one; "
        "the stored size is `store.size` x days x copies.\n",
        "## The embedded server\n",
        md_table(SERVER_HEADERS, server_rows(report["server_summary"])),
        "\n".join(server_lines(report["server_summary"])) + "\n",
    ]
    return "\n".join(parts)


def print_tables(console: Console, result: dict[str, Any], report: dict[str, Any]) -> None:
    """The same tables on the console."""
    c = Cluster(**result["cluster"])
    console.print(
        rich_table("per stream, per host-day", STREAM_HEADERS, stream_rows(_days(report)))
    )
    console.print(rich_table("site mix", MIX_HEADERS, mix_rows(Mix(result["mix"]))))
    console.print(rich_table("site totals", SITE_HEADERS, site_rows(report["sites"], c)))
    server = report["server_summary"]
    console.print(rich_table("the embedded server", SERVER_HEADERS, server_rows(server)))
    for line in server_lines(server):
        console.print(line)
