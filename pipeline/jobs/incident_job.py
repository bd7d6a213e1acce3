"""Scheduled job: incidents, correlated across streams on one time axis.

Each run (on the one instance holding the ``incident.<namespace>`` lease) reads what the other
stages indexed since the earliest open incident or ``incident.lookback_s`` ago, whichever is
earlier:

* ``metrics-iolens.peer_anomaly``: the windows of every LUN that was faulty in that time;
* ``metrics-iolens.persistence``: those LUNs' latest rank in the persistence ranking;
* ``metrics-fio.latency`` (job scope): intervals whose SLA percentile is over the limit;
* ``logs-iolens.io_diagnosis``: diagnosed Darshan jobs with critical files on those LUNs;

and writes one ``logs-iolens.incident`` document per incident
(:func:`pipeline.reducers.incident.spans` and :func:`~pipeline.reducers.incident.correlate`),
updated in place while it changes. Incidents are recomputed from the indexed data on every run,
so a failed run is simply repeated; a Darshan log written when a long job ends, after its
incident closed, still joins it within the look-back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from pipeline.formats.fio.window import percentile_key
from pipeline.jobs.darshan_evidence import mount_table
from pipeline.records.json import Query, Response
from pipeline.records.sources import IolensIncidentSource
from pipeline.reducers.incident import (
    INCIDENT_DATASET,
    Breach,
    Incident,
    JobOnLun,
    LunWindow,
    Span,
    StoredIncident,
    continued,
    correlate,
    spans,
)
from pipeline.settings import Settings
from pipeline.sink.client import Client
from pipeline.sink.documents import DocContext
from pipeline.sink.incident_documents import incident_source, write_incidents
from pipeline.sink.lease import LeaseLost, LeaseStamp
from pipeline.sink.search import ClusterUnavailable, RequestRejected, iter_hits, refresh

log = logging.getLogger(__name__)

REFRESHED = ("metrics-iolens.peer_anomaly", "logs-iolens.io_diagnosis")
"""The streams refreshed before every run: an incident starts from their latest documents."""
SETTLED = ("metrics-iolens.persistence", "metrics-fio.latency")
"""The other streams an incident is correlated from, refreshed too when the run settles what
the stages before it just wrote (:meth:`IncidentJob.run` with ``settle``); a live job, run
every tick, sees them once the cluster refreshes them itself, within a second."""


def _epoch_s(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def latest_ranking(
    rankings: Iterable[tuple[float, str, int, float]], span: Span, until_s: float
) -> tuple[int, float] | None:
    """``(rank, value)`` of the span's LUN in the latest ranking from its start to ``until_s``
    (the ranking period after its end: the ranking that closes the period it ended in)."""
    found = None
    for t, lun, rank, value in rankings:
        if lun == span.lun and span.start_s <= t <= until_s:
            found = (rank, value)
    return found


def _range(since_s: float) -> Query:
    return {"range": {"@timestamp": {"gte": int(since_s * 1000), "format": "epoch_millis"}}}


@dataclass
class IncidentJob:
    """One scheduled incident job.

    Args:
        client: the cluster (reads, and the in-place writes of the incident documents).
        settings: the configuration (``incident``, ``alerts``-independent SLA, ``darshan``
            mount table, namespace).
        lease: takes or renews the job's lease.
        clock: wall-clock seconds.
        ctx: the documents' context, the writer's ``agent.*`` with it (None: the namespace of
            ``settings``, this host's name, no ``agent.id``).
        fence: checks the lease is still ours before the writes and returns its stamp
            (:meth:`pipeline.sink.lease.Lease.fence`; raises ``LeaseLost`` when it is not);
            None writes unfenced.
    """

    client: Client
    settings: Settings
    lease: Callable[[], bool]
    clock: Callable[[], float] = time.time
    written: int = 0
    ctx: DocContext | None = None
    fence: Callable[[], LeaseStamp] | None = None

    @property
    def ns(self) -> str:
        """The data streams' namespace."""
        return self.settings.elasticsearch.namespace

    def run(self, settle: bool = False) -> int:
        """Recompute the incidents of the look-back; returns documents written (new or
        changed). A cluster that cannot answer postpones the run.

        Args:
            settle: the stages before have just written what this run must see (``iolens run
                --once``, the end of a run): every stream read is refreshed first, so that an
                incident gets its persistence rank and fio breaches now rather than next tick.
        """
        if not self.settings.incident.enabled:
            return 0
        try:
            if not self.lease():
                return 0
            for stream in SETTLED if settle else ():
                refresh(self.client, f"{stream}-{self.ns}")
            incidents = self.incidents()
            docs = self._documents(incidents)
            stamp = self.fence() if self.fence is not None and docs else None
            n = write_incidents(self.client, self.ns, docs, stamp)
        except ClusterUnavailable as err:
            log.warning("incident job postponed: %s", err)
            return 0
        except LeaseLost as err:
            log.warning("incidents left to the instance that holds them now: %s", err)
            return 0
        except RequestRejected as err:  # a refused search or write: said, tried again next tick
            log.error("incident job failed (%s): %s", err.status_code, err)
            return 0
        self.written += n
        return n

    def incidents(self) -> list[Incident]:
        """Every incident that started within the look-back (or is still open), correlated.

        Windows are read from far enough before that for the streak that made a LUN faulty
        (up to ``2k - 1`` windows and the moving average before the first faulty one), so an
        incident's start, and with it its id, is the same on every run; incidents that started
        before the look-back are left as they are.
        """
        now = self.clock()
        found = self._spans(now)
        if not found:
            return []
        return self._correlate(found, now)

    def _correlate(self, found: Sequence[Span], now: float) -> list[Incident]:
        """The incidents of the stretches ``found``: the fio breaches, Darshan jobs, rankings
        and mount points of their LUNs from the earliest start (less the margin) on."""
        cfg = self.settings.incident
        luns = sorted({s.lun for s in found})
        earliest = min(s.start_s for s in found) - cfg.margin_s
        breaches = list(self._breaches(earliest))
        jobs = list(self._jobs(earliest, luns))
        rankings = self._persistence(earliest, luns)
        mounts = self._mount_points(luns)
        sla = self._sla_text()
        every = self.settings.peer.ranking_every_s
        return [
            correlate(
                s,
                breaches,
                jobs,
                margin_s=cfg.margin_s,
                now_s=now,
                mount_point=mounts.get(s.lun),
                persistence=latest_ranking(rankings, s, (s.last_s if s.closed else now) + every),
                sla=sla,
            )
            for s in found
        ]

    def _spans(self, now: float) -> list[Span]:
        """The stretches that started within the look-back, or are still open (windows read
        from far enough before for the streaks that made their LUNs faulty); one that is an
        incident already stored keeps its id (:func:`~pipeline.reducers.incident.continued`)."""
        cfg = self.settings.incident
        stored = self._stored_incidents(now - cfg.lookback_s - cfg.gap_s)
        opened = [i.start_s for i in stored if i.open]
        since = min([now - cfg.lookback_s, *opened]) - cfg.gap_s
        for stream in REFRESHED:
            refresh(self.client, f"{stream}-{self.ns}")
        peer = self.settings.peer
        lead = peer.ma_width * peer.downsample_s
        reach = (peer.win_size + 2 * peer.k * peer.win_shift) * peer.downsample_s + lead
        windows = self._windows(since - reach)
        found = [
            s
            for s in spans(windows, cfg.gap_s, lead, now_s=now, stale_s=cfg.lookback_s)
            if s.start_s >= since
        ]
        return continued(found, stored, cfg.gap_s)

    def _documents(self, incidents: Iterable[Incident]) -> list[tuple[str, IolensIncidentSource]]:
        ctx = self.ctx or DocContext(namespace=self.ns)
        sla = self.settings.incident.sla
        limits = (sla.percentile, sla.under_s * 1000)
        created = self.clock() * 1000
        return [(i.span.id, incident_source(ctx, i, limits, created)) for i in incidents]

    def _sla_text(self) -> str:
        sla = self.settings.incident.sla
        return f"the SLA ({percentile_key(sla.percentile)} under {sla.under_s * 1000:g} ms)"

    def _hits(
        self, stream: str, filters: Sequence[Query], sort: Sequence[Query]
    ) -> Iterator[Response]:
        index = f"{stream}-{self.ns}"
        yield from iter_hits(self.client, index, {"bool": {"filter": list(filters)}}, sort)

    def _stored_incidents(self, since: float) -> list[StoredIncident]:
        """The incidents stored (by this instance or another) that are open or started
        since ``since`` (Unix s)."""
        either: Query = {
            "bool": {
                "should": [{"term": {"iolens.incident.status": "open"}}, _range(since)],
                "minimum_should_match": 1,
            }
        }
        return [
            StoredIncident(inc["id"], inc["lun"], _epoch_s(inc["start"]), inc["status"] == "open")
            for h in self._hits(
                f"logs-{INCIDENT_DATASET}",
                [either],
                [{"@timestamp": "asc"}, {"iolens.incident.id": "asc"}],
            )
            for inc in (h["_source"]["iolens"]["incident"],)
        ]

    def _windows(self, since: float) -> Iterator[LunWindow]:
        """Every window since ``since`` of the LUNs faulty in that time."""
        stream = "metrics-iolens.peer_anomaly"
        sort: list[Query] = [
            {"@timestamp": "asc"},
            {"iolens.peer.lun": "asc"},
            {"iolens.peer.metric": "asc"},
        ]
        faulty = {
            h["_source"]["iolens"]["peer"]["lun"]
            for h in self._hits(stream, [_range(since), {"term": {"iolens.faulty": True}}], sort)
        }
        if not faulty:
            return
        filters = [_range(since), {"terms": {"iolens.peer.lun": sorted(faulty)}}]
        for h in self._hits(stream, filters, sort):
            src = h["_source"]["iolens"]
            peer = src["peer"]
            yield LunWindow(
                peer["lun"],
                peer["group"],
                peer["metric"],
                float(peer["window"]["start_s"]),
                float(peer["window"]["end_s"]),
                bool(src["anomalous"]),
                bool(src["faulty"]),
                float(src.get("record_score") or 0.0),
            )

    def _breaches(self, since: float) -> Iterator[Breach]:
        """fio job-scope intervals since ``since`` over the SLA."""
        sla = self.settings.incident.sla
        field = f"fio.clat_ns.{percentile_key(sla.percentile)}"
        filters: list[Query] = [
            _range(since),
            {"term": {"iolens.scope": "job"}},
            {"range": {field: {"gt": sla.under_s * 1e9}}},
        ]
        sort: list[Query] = [
            {"@timestamp": "asc"},
            {"host.name": "asc"},
            {"fio.prefix": "asc"},
            {"fio.job": "asc"},
            {"fio.ddir": "asc"},
            {"fio.records": "asc"},
        ]
        for h in self._hits("metrics-fio.latency", filters, sort):
            src = h["_source"]
            fio = src["fio"]
            value = fio["clat_ns"][percentile_key(sla.percentile)]
            job = f"{fio['prefix']}.{fio['job']}" if fio.get("prefix") else str(fio["job"])
            yield Breach(src["host"]["name"], job, fio["interval"]["start_ms"] / 1000, value / 1e6)

    def _jobs(self, since: float, luns: list[str]) -> Iterator[JobOnLun]:
        """Diagnosed Darshan jobs still running at ``since`` with critical files on ``luns``."""
        filters: list[Query] = [
            {"terms": {"iolens.io_diagnosis.critical_files.lun": luns}},
            {"range": {"iolens.io_diagnosis.end": {"gte": int(since * 1000)}}},
        ]
        sort: list[Query] = [
            {"@timestamp": "asc"},
            {"iolens.io_diagnosis.log_id": "asc"},
        ]
        for h in self._hits("logs-iolens.io_diagnosis", filters, sort):
            src = h["_source"]
            diag = src["iolens"]["io_diagnosis"]
            files: dict[str, list[tuple[str, str | None]]] = {}
            for cf in diag.get("critical_files", []):
                if cf.get("lun") in luns:
                    files.setdefault(cf["lun"], []).append((cf["name"], cf.get("mount_point")))
            for lun, named in files.items():
                yield JobOnLun(
                    str(diag["job_id"]),
                    _epoch_s(src["@timestamp"]),
                    _epoch_s(diag["end"]),
                    lun,
                    named[0][1],
                    tuple(name for name, _ in named),
                )

    def _persistence(self, since: float, luns: list[str]) -> list[tuple[float, str, int, float]]:
        """``(time, LUN, rank, value)`` of the rankings of ``luns`` since ``since``, by time."""
        out = []
        filters = [_range(since), {"terms": {"iolens.persistence.lun": luns}}]
        sort: list[Query] = [
            {"@timestamp": "asc"},
            {"iolens.persistence.lun": "asc"},
            {"iolens.persistence.metric": "asc"},
        ]
        for h in self._hits("metrics-iolens.persistence", filters, sort):
            p = h["_source"]["iolens"]["persistence"]
            out.append((float(p["hour_end_s"]), p["lun"], int(p["rank"]), float(p["value"])))
        return out

    def _mount_points(self, luns: list[str]) -> dict[str, str]:
        """LUN -> its mount point in the mount table (configured, then /proc/mounts)."""
        table = mount_table(self.settings.darshan)
        return {m.lun: m.mount_point for m in table.mounts() if m.lun in luns}
