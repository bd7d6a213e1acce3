"""What the lab reads back: when each stream first showed the fault, and the incidents.

The lab polls Elasticsearch (plain searches and counts, never writes) while the fault is on
and afterwards, and notes the wall-clock time at which each of these first became searchable:

* ``fio``: a job-scope ``metrics-fio.latency`` interval of the slowed LUN's fio job over the SLA;
* ``sysstat``: a ``metrics-sysstat.diskio`` sample of the slowed LUN with ``await`` over the SLA;
* ``peer``: a ``metrics-iolens.peer_anomaly`` window marking the LUN faulty;
* ``darshan``: a ``logs-iolens.io_diagnosis`` document with an ``anomalous_lun`` cause on it;
* ``incident``: a ``logs-iolens.incident`` document on it.

The lag of each is that time minus the fault's onset (``bench/lab_lag.py`` prints them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.lab.params import LabResult
from pipeline.records.json import Query, Source
from pipeline.sink.client import Client
from pipeline.sink.search import ClusterUnavailable, count, iter_hits, refresh

STREAMS = ("fio", "sysstat", "peer", "darshan", "incident")


@dataclass
class Observer:
    """Polls the cluster for the slowed LUN's signs in every stream.

    Args:
        client: the cluster; namespace: the lab's data stream namespace.
        lun: the slowed LUN as the peer comparison names it (``host/loop2``).
        fio_job: its fio job (``host``, ``prefix``, job number).
        sla_ms: the fio SLA (p95 under this) and the await level that counts as slow.
        since_s: the onset (Unix s): only documents about later times count (an earlier lab's
            in the same namespace do not).
    """

    client: Client
    namespace: str
    lun: str
    fio_job: tuple[str, str, str]
    sla_ms: float
    since_s: float
    seen: dict[str, float] = field(default_factory=dict)

    def _index(self, stream: str) -> str:
        return f"{stream}-{self.namespace}"

    def _after(self) -> Query:
        ms = int(self.since_s * 1000)
        return {"range": {"@timestamp": {"gte": ms, "format": "epoch_millis"}}}

    def queries(self) -> dict[str, tuple[str, Query]]:
        """Stream -> (data stream, query) of the first sign of the fault."""
        return {
            "fio": ("metrics-fio.latency", self._fio_query()),
            "sysstat": ("metrics-sysstat.diskio", self._sysstat_query()),
            "peer": ("metrics-iolens.peer_anomaly", self._peer_query()),
            "darshan": ("logs-iolens.io_diagnosis", self._darshan_query()),
            "incident": ("logs-iolens.incident", self._incident_query()),
        }

    def _fio_query(self) -> Query:
        """The slow LUN's fio job over the SLA (its job-scope p95 above ``sla_ms``)."""
        host, prefix, job = self.fio_job
        return _all(
            self._after(),
            {"term": {"iolens.scope": "job"}},
            {"term": {"host.name": host}},
            {"term": {"fio.prefix": prefix}},
            {"term": {"fio.job": job}},
            {"range": {"fio.clat_ns.p95": {"gt": self.sla_ms * 1e6}}},
        )

    def _sysstat_query(self) -> Query:
        """The slow LUN's device with an await above ``sla_ms``."""
        device = self.lun.split("/", 1)[1]
        return _all(
            self._after(),
            {"term": {"system.diskio.name": device}},
            {"range": {"sysstat.disk.await": {"gt": self.sla_ms}}},
        )

    def _peer_query(self) -> Query:
        """A window after ``since_s`` that marks the slow LUN faulty."""
        return _all(
            {"range": {"iolens.peer.window.end_s": {"gte": self.since_s}}},
            {"term": {"iolens.peer.lun": self.lun}},
            {"term": {"iolens.faulty": True}},
        )

    def _darshan_query(self) -> Query:
        """A job diagnosis that names the slow LUN as anomalous."""
        return _all(
            {"range": {"iolens.io_diagnosis.end": {"gte": int(self.since_s * 1000)}}},
            {"term": {"iolens.io_diagnosis.causes.kind": "anomalous_lun"}},
            {"term": {"iolens.io_diagnosis.causes.lun": self.lun}},
        )

    def _incident_query(self) -> Query:
        """An incident on the slow LUN that started at most a minute before ``since_s``."""
        start_ms = int(self.since_s * 1000) - 60_000
        return _all(
            {"range": {"iolens.incident.start": {"gte": start_ms}}},
            {"term": {"iolens.incident.lun": self.lun}},
        )

    def poll(self, now_s: float) -> None:
        """Note ``now_s`` for every stream that shows the fault for the first time."""
        for name, (stream, query) in self.queries().items():
            if name in self.seen:
                continue
            try:
                refresh(self.client, self._index(stream))
                if count(self.client, self._index(stream), query):
                    self.seen[name] = now_s
            except ClusterUnavailable:
                return

    def lags(self) -> dict[str, float | None]:
        """Stream -> seconds from the onset to the first sign searchable (None: never)."""
        return {s: (self.seen[s] - self.since_s if s in self.seen else None) for s in STREAMS}


def _all(*filters: Query) -> Query:
    return {"bool": {"filter": list(filters)}}


def incidents(client: Client, namespace: str, since_s: float) -> list[Source]:
    """The incident documents (``_source``) that started at or after ``since_s``, by start."""
    index = f"logs-iolens.incident-{namespace}"
    refresh(client, index)
    query = {"range": {"@timestamp": {"gte": int(since_s * 1000), "format": "epoch_millis"}}}
    return [
        dict(h["_source"])
        for h in iter_hits(
            client, index, query, [{"@timestamp": "asc"}, {"iolens.incident.id": "asc"}]
        )
    ]


def count_since(client: Client, stream: str, namespace: str, query: Query) -> int:
    """Documents of ``stream``'s namespace matching ``query`` (0 when it does not exist)."""
    index = f"{stream}-{namespace}"
    refresh(client, index)
    return count(client, index, query)


def settled(client: Client, r: LabResult, now_s: float) -> bool:
    """Whether the pipeline caught up with the lab's workload: the peer comparison evaluated
    windows past its end, every incident closed, and one found if there was a fault (a minute
    of grace if none comes)."""
    ns = r.params.namespace
    after = {"range": {"iolens.peer.window.end_s": {"gte": r.end_s}}}
    try:
        if not count_since(client, "metrics-iolens.peer_anomaly", ns, after):
            return False
        found = incidents(client, ns, r.t0_s)
    except ClusterUnavailable:
        return False
    if not all(i["iolens"]["incident"]["status"] == "closed" for i in found):
        return False
    return bool(found) or r.params.delay_ms == 0 or now_s > r.end_s + 60
