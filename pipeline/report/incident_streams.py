"""The streams the report's Incidents view draws around an incident, each searched once.

Tables (pandas, one row per document, times UTC) of fio's job-scope merged latencies
(``metrics-fio.latency``, each interval's latest revision), sysstat's await per LUN
(``metrics-sysstat.diskio``), the peer comparison's record scores (``metrics-iolens.peer_anomaly``,
at each window's end) and the Darshan jobs (``logs-darshan.job``), through the report's plain
searches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd  # type: ignore[import-untyped]

from pipeline.records.json import Source

Fetch = Callable[[str, Sequence[str], Sequence[str]], list[Source]]
"""``(data stream, fields, sort fields) -> _source`` in range, as ``pipeline.report.html.Fetch``."""


@dataclass(frozen=True)
class Streams:
    """The streams of the report's range as tables, one row per document, times UTC: ``fio``
    (job scope, ``mixed``, each interval's latest revision): ``time, match`` (``host/prefix.job``
    as incidents name fio jobs), ``name`` (the same), ``records``, a column per SLA
    percentile (ns); ``disk``: ``time, name`` (host/device), ``await`` (ms); ``peer``: ``time``
    (the window's end), ``name`` (LUN), ``group, metric, score`` (0-100); ``darshan``:
    ``job, exe, start, end``."""

    fio: pd.DataFrame
    disk: pd.DataFrame
    peer: pd.DataFrame
    darshan: pd.DataFrame


def _table(
    fetch: Fetch, stream: str, fields: Mapping[str, str], sort: Sequence[str]
) -> pd.DataFrame:
    """The stream's documents as a table: column -> dotted field; dates parsed (UTC)."""
    docs = fetch(stream, list(fields.values()), sort)
    df = pd.json_normalize(list(docs)).reindex(columns=list(fields.values()))
    df.columns = list(fields)
    for col in ("time", "start", "end"):
        if col in df:
            df[col] = pd.to_datetime(df[col], utc=True)
    return df


def _fio(fetch: Fetch, percentiles: Iterable[str]) -> pd.DataFrame:
    fields = {
        "time": "@timestamp",
        "scope": "iolens.scope",
        "host": "host.name",
        "prefix": "fio.prefix",
        "job": "fio.job",
        "ddir": "fio.ddir",
        "start": "fio.interval.start_ms",
        "records": "fio.records",
        **{p: f"fio.clat_ns.{p}" for p in sorted(set(percentiles))},
    }
    sort = ["iolens.scope", "fio.ddir", "host.name", "fio.prefix", "fio.job", "fio.records"]
    df = _table(fetch, "metrics-fio.latency", fields, sort)
    df = df[(df["scope"] == "job") & (df["ddir"] == "mixed")]
    df = df.assign(prefix=df["prefix"].map(lambda p: p if isinstance(p, str) else ""))
    # each interval's latest revision: the one that merged the most records
    df = df.sort_values("records").drop_duplicates(["host", "prefix", "job", "start"], keep="last")
    # as incidents name fio jobs: host/prefix.job (host/job without a prefix)
    job = df["prefix"].map(lambda p: f"{p}." if p else "") + df["job"].astype(str)
    match = df["host"].astype(str) + "/" + job
    return df.assign(match=match, name=match)


def _disk(fetch: Fetch) -> pd.DataFrame:
    """Await per LUN (``name``: ``host/device``) of ``metrics-sysstat.diskio``."""
    disk = _table(
        fetch,
        "metrics-sysstat.diskio",
        {"time": "@timestamp", "host": "host.name", "dev": "system.diskio.name"}
        | {"await": "sysstat.disk.await"},
        ["host.name", "system.diskio.name"],
    )
    return disk.assign(name=disk["host"].astype(str) + "/" + disk["dev"].astype(str))


def _peer(fetch: Fetch) -> pd.DataFrame:
    """The peer comparison's record score per LUN and window, timed at the window's end."""
    peer = _table(
        fetch,
        "metrics-iolens.peer_anomaly",
        {"end_s": "iolens.peer.window.end_s", "name": "iolens.peer.lun"}
        | {"group": "iolens.peer.group", "metric": "iolens.peer.metric"}
        | {"score": "iolens.record_score"},
        ["iolens.peer.lun", "iolens.peer.metric"],
    )
    # a window's score is drawn at its end, when it is known (its start may be healthy)
    return peer.assign(time=pd.to_datetime(peer["end_s"], unit="s", utc=True))


def _darshan(fetch: Fetch) -> pd.DataFrame:
    """Darshan jobs (``job`` as text) with their executable, start and end."""
    darshan = _table(
        fetch,
        "logs-darshan.job",
        {"job": "darshan.job.id", "exe": "darshan.job.exe"}
        | {"start": "darshan.job.start", "end": "darshan.job.end"},
        ["darshan.log.id"],
    )
    darshan["job"] = darshan["job"].astype(str)
    return darshan


def fetch_streams(fetch: Fetch, percentiles: Iterable[str]) -> Streams:
    """The four streams, each searched once for all incidents (``percentiles``: the fields of
    their SLAs, ``p95``)."""
    fio = _fio(fetch, percentiles)
    return Streams(fio, _disk(fetch), _peer(fetch), _darshan(fetch))
