"""Server-side evidence for the diagnosis of a Darshan job, from what Elasticsearch holds.

For one job: its Slurm node count (``logs-slurm.job``), the LMT load of the OSTs during its run
(``metrics-lmt.ost``) and the LUNs the peer comparison marked anomalous during its run
(``metrics-iolens.peer_anomaly``, matched to OSTs through ``darshan.ost_luns``). The result is
passed to :func:`pipeline.reducers.io_diagnosis.diagnose`.
"""

from __future__ import annotations

import logging
from typing import Any

from elasticsearch import Elasticsearch

from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import lmt_window
from pipeline.settings import Settings
from pipeline.sink.search import ClusterUnavailable, iter_hits

log = logging.getLogger(__name__)


def server_evidence(client: Elasticsearch, settings: Settings, a: JobAnalysis) -> dict[str, Any]:
    """Server-side data for the diagnosis of a low-bandwidth job: the Slurm node count, the
    LMT load of the OSTs during the job and the LUNs the peer comparison marked anomalous
    (whatever of it is indexed; a cluster that cannot answer gives nothing)."""
    ns = settings.elasticsearch.namespace
    ds = settings.darshan
    window = {
        "range": {
            "@timestamp": {
                "gte": round(a.log.start_s * 1000),
                "lte": round(a.log.end_s * 1000),
                "format": "epoch_millis",
            }
        }
    }
    out: dict[str, Any] = {}
    try:
        slurm = list(
            iter_hits(
                client,
                f"logs-slurm.job-{ns}",
                {"bool": {"filter": [{"term": {"slurm.job.id": a.log.jobid}}]}},
                [{"@timestamp": "asc"}],
            )
        )
        if slurm:
            nodes = slurm[0]["_source"]["slurm"]["job"].get("node_count")
            out["node_count"] = int(nodes) if nodes else None
        lmt_q: list[dict[str, Any]] = [window]
        if ds.lmt_fs:
            lmt_q.append({"term": {"lmt.ost.fs": ds.lmt_fs}})
        rows = [
            h["_source"]
            for h in iter_hits(
                client,
                f"metrics-lmt.ost-{ns}",
                {"bool": {"filter": lmt_q}},
                [{"@timestamp": "asc"}, {"lmt.ost.name": "asc"}],
            )
        ]
        if rows:
            out["lmt"] = lmt_window(rows)
        if ds.ost_luns:
            luns = {lun: int(o) for o, lun in ds.ost_luns.items()}
            anomalous: dict[int, str] = {}
            for h in iter_hits(
                client,
                f"metrics-iolens.peer_anomaly-{ns}",
                {"bool": {"filter": [window, {"term": {"iolens.anomalous": True}}]}},
                [{"@timestamp": "asc"}],
            ):
                lun = h["_source"]["iolens"]["peer"]["lun"]
                if lun in luns:
                    anomalous[luns[lun]] = lun
            out["anomalous_osts"] = anomalous
    except ClusterUnavailable as err:
        log.warning("server-side evidence for job %s unavailable: %s", a.log.jobid, err)
    return out
