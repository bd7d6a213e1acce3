"""What the demo reads back from the cluster: per stream, what a storage engineer looks at first.

Every finding comes from the documents as indexed (plain searches, no aggregation, so the
embedded server answers them): the cluster-wide fio percentiles, the LUN the peer comparison
indicted with its persistence rank, the slowest Darshan job's diagnosis, and the latest snapshot
of the workload model. A stream with nothing indexed gives ``None`` (or an empty list).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.records.json import Query, Source
from pipeline.sink.client import Client
from pipeline.sink.search import iter_hits, refresh


@dataclass(frozen=True)
class Indicted:
    """A LUN the peer comparison found faulty (seed 001, 4.2: anomalous in k of 2k−1 windows).

    Attributes:
        lun: ``host/device``; group: its peer group; metric: the metric (``await``...).
        first_anomalous_s, first_faulty_s: end of the first anomalous and of the first faulty
            window, Unix s (the earliest the LUN could be known to be slow, and indicted).
        faulty_windows: windows in which it was faulty.
        rank, value: its rank and persistence accumulator in the newest ranking (None: not
            ranked); rank1_rankings: rankings it led, of ``rankings``.
    """

    lun: str
    group: str
    metric: str
    first_anomalous_s: float
    first_faulty_s: float
    faulty_windows: int
    rank: int | None
    value: float | None
    rank1_rankings: int
    rankings: int


@dataclass(frozen=True)
class Diagnosis:
    """The slowest diagnosed Darshan job (lowest critical-path bandwidth).

    Attributes:
        source: the ``iolens.io_diagnosis`` object as indexed; job_id, exe: from it.
        jobs: Darshan jobs indexed; diagnosed: of them, low-bandwidth jobs diagnosed.
    """

    source: Source
    job_id: str
    exe: str
    jobs: int
    diagnosed: int


@dataclass(frozen=True)
class Cluster:
    """One cluster of the newest workload-model snapshot (``iolens.workload_model``)."""

    cluster: int
    size: int
    share: float
    critical_path_ms: float
    representative: str


def _sources(
    client: Client, index: str, sort: Sequence[str], query: Query | None = None
) -> list[Source]:
    """Every ``_source`` of ``index`` in ``sort`` order (ascending)."""
    refresh(client, index)
    order = [{f: "asc"} for f in sort]
    hits = iter_hits(client, index, query or {"match_all": {}}, order)
    return [h["_source"] for h in hits]


def indicted(client: Client, namespace: str) -> list[Indicted]:
    """The LUNs found faulty in ``metrics-iolens.peer_anomaly``, the first indicted first.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """
    peer = [
        s["iolens"]
        for s in _sources(
            client,
            f"metrics-iolens.peer_anomaly-{namespace}",
            ("iolens.peer.window.end_s", "iolens.peer.lun", "iolens.peer.metric"),
        )
    ]
    ranks = _persistence(client, namespace)
    by_lun: dict[tuple[str, str], list[Source]] = {}
    for p in peer:
        by_lun.setdefault((p["peer"]["lun"], p["peer"]["metric"]), []).append(p)
    found = []
    for (lun, metric), windows in by_lun.items():
        faulty = [w["peer"]["window"]["end_s"] for w in windows if w["faulty"]]
        if not faulty:
            continue
        rank, value, led, rankings = ranks.get((lun, metric), (None, None, 0, 0))
        found.append(
            Indicted(
                lun=lun,
                group=windows[0]["peer"]["group"],
                metric=metric,
                first_anomalous_s=min(
                    w["peer"]["window"]["end_s"] for w in windows if w["anomalous"]
                ),
                first_faulty_s=min(faulty),
                faulty_windows=len(faulty),
                rank=rank,
                value=value,
                rank1_rankings=led,
                rankings=rankings,
            )
        )
    return sorted(found, key=lambda i: (i.first_faulty_s, i.lun, i.metric))


def _persistence(
    client: Client, namespace: str
) -> dict[tuple[str, str], tuple[int | None, float | None, int, int]]:
    """Per ``(lun, metric)``: rank and value in the newest ranking, rankings led, rankings."""
    rows = [
        s["iolens"]["persistence"]
        for s in _sources(
            client,
            f"metrics-iolens.persistence-{namespace}",
            (
                "iolens.persistence.hour_end_s",
                "iolens.persistence.metric",
                "iolens.persistence.lun",
            ),
        )
    ]
    out: dict[tuple[str, str], tuple[int | None, float | None, int, int]] = {}
    for metric in {r["metric"] for r in rows}:
        mine = [r for r in rows if r["metric"] == metric]
        ends = sorted({r["hour_end_s"] for r in mine})
        for r in mine:
            if r["hour_end_s"] == ends[-1]:
                led = sum(1 for q in mine if q["lun"] == r["lun"] and q["rank"] == 1)
                out[(r["lun"], metric)] = (int(r["rank"]), float(r["value"]), led, len(ends))
    return out


def slowest_job(client: Client, namespace: str) -> Diagnosis | None:
    """The diagnosed job with the lowest critical-path bandwidth (None: none diagnosed).

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """
    docs = _sources(
        client, f"logs-iolens.io_diagnosis-{namespace}", ("@timestamp", "darshan.log.id")
    )
    if not docs:
        return None
    jobs = _sources(client, f"logs-darshan.job-{namespace}", ("@timestamp", "darshan.log.id"))
    worst = min(docs, key=lambda s: s["iolens"]["io_diagnosis"]["critical_bytes_per_s"])
    diag = worst["iolens"]["io_diagnosis"]
    return Diagnosis(
        diag, str(worst["darshan"]["job"]["id"]), str(diag["exe"]), len(jobs), len(docs)
    )


def workload(client: Client, namespace: str) -> list[Cluster]:
    """The clusters of the newest workload-model snapshot, largest share first.

    Raises:
        ClusterUnavailable: the cluster cannot answer.
    """
    docs = [
        s["iolens"]["workload_model"]
        for s in _sources(
            client,
            f"metrics-iolens.workload_model-{namespace}",
            ("@timestamp", "iolens.workload_model.cluster"),
        )
    ]
    if not docs:
        return []
    newest = docs[-1]["snapshot"]
    rows = [
        Cluster(
            int(d["cluster"]),
            int(d["size"]),
            float(d["share"]),
            float(d["critical_path_ms"]),
            str(d["representative"]),
        )
        for d in docs
        if d["snapshot"] == newest
    ]
    return sorted(rows, key=lambda c: (-c.share, c.cluster))
