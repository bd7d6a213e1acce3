"""Server-side evidence for the diagnosis of a Darshan job, from what Elasticsearch holds.

For one job: its Slurm node count (``logs-slurm.job``), the LMT load of the OSTs during its run
(``metrics-lmt.ost``) and the LUNs the peer comparison marked anomalous during its run
(``metrics-iolens.peer_anomaly``), matched to OSTs through ``darshan.ost_luns`` and to the
critical files of any file system through the mount table (``darshan.mounts`` and this host's
``/proc/mounts``). The result is passed to :func:`pipeline.reducers.io_diagnosis.diagnose`.
"""

from __future__ import annotations

import logging
import socket
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from pipeline.parsers.mounts import MountTable, configured_mounts, parse_proc_mounts
from pipeline.records.json import Query, Source
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import Evidence, lmt_window
from pipeline.settings import DarshanSettings, Settings
from pipeline.sink.client import Client
from pipeline.sink.search import ClusterUnavailable, iter_hits

log = logging.getLogger(__name__)


def server_evidence(client: Client, settings: Settings, a: JobAnalysis) -> Evidence:
    """Server-side data for the diagnosis of a low-bandwidth job: the Slurm node count, the
    LMT load of the OSTs during the job, where its critical files are mounted and the LUNs
    the peer comparison marked anomalous during its run (whatever of it is indexed; a cluster
    that cannot answer gives what was found before it failed).

    Returns:
        The evidence for :func:`pipeline.reducers.io_diagnosis.diagnose`.
    """
    window = _run_window(a)
    placement = critical_placement(a, settings.darshan)
    found = Evidence(placement=placement or None)
    try:
        found = _slurm_and_lmt(client, settings, a, window, found)
        found = _peer_evidence(client, settings, window, found)
    except ClusterUnavailable as err:
        log.warning("server-side evidence for job %s unavailable: %s", a.log.jobid, err)
    return found


class RunWindow(NamedTuple):
    """A job's run, as the span its server-side evidence is searched in.

    Attributes:
        start_ms: Start of the run, epoch milliseconds (rounded from the log's ``start_s``).
        end_ms: End of the run, epoch milliseconds (rounded from the log's ``end_s``).
    """

    start_ms: int
    end_ms: int

    def on_timestamp(self) -> Query:
        """The run as a ``range`` query on ``@timestamp`` (epoch ms)."""
        return {
            "range": {
                "@timestamp": {"gte": self.start_ms, "lte": self.end_ms, "format": "epoch_millis"}
            }
        }

    def on_window_ends(self) -> Query:
        """The run as a range of peer windows' ends (s): a window is evidence for the job
        when it ends inside the run (the detector saw the fault by then; its start may be
        healthy)."""
        span = {"gte": self.start_ms / 1000, "lte": self.end_ms / 1000}
        return {"range": {"iolens.peer.window.end_s": span}}


def _run_window(a: JobAnalysis) -> RunWindow:
    """The job's run (epoch ms)."""
    return RunWindow(round(a.log.start_s * 1000), round(a.log.end_s * 1000))


def _peer_evidence(
    client: Client,
    settings: Settings,
    window: RunWindow,
    found: Evidence,
) -> Evidence:
    """``found`` with ``anomalous_osts`` (through ``darshan.ost_luns``) and ``anomalous_luns``
    (of the critical files' mounts) from the peer comparison during the job's run."""
    placement = found.placement or {}
    ost_luns = {lun: int(o) for o, lun in settings.darshan.ost_luns.items()}
    wanted = set(ost_luns) | {lun for _, lun in placement.values()}
    if not wanted:
        return found
    index = f"metrics-iolens.peer_anomaly-{settings.elasticsearch.namespace}"
    scores = anomalous_luns(client, index, window, wanted)
    if ost_luns:
        osts = {ost_luns[lun]: lun for lun in scores if lun in ost_luns}
        found = replace(found, anomalous_osts=osts)
    return replace(found, anomalous_luns=scores) if placement else found


def _slurm_and_lmt(
    client: Client, settings: Settings, a: JobAnalysis, window: RunWindow, found: Evidence
) -> Evidence:
    """``found`` with the job's Slurm node count and the LMT load of the OSTs during its run."""
    ns = settings.elasticsearch.namespace
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
        found = replace(found, node_count=int(nodes) if nodes else None)
    rows = _lmt_rows(client, settings, window)
    return replace(found, lmt=lmt_window(rows)) if rows else found


def _lmt_rows(client: Client, settings: Settings, window: RunWindow) -> list[Source]:
    """``metrics-lmt.ost`` sources within ``window`` (of ``darshan.lmt_fs`` when set)."""
    lmt_q: list[Query] = [window.on_timestamp()]
    if settings.darshan.lmt_fs:
        lmt_q.append({"term": {"lmt.ost.fs": settings.darshan.lmt_fs}})
    return [
        h["_source"]
        for h in iter_hits(
            client,
            f"metrics-lmt.ost-{settings.elasticsearch.namespace}",
            {"bool": {"filter": lmt_q}},
            [{"@timestamp": "asc"}, {"lmt.ost.name": "asc"}],
        )
    ]


def anomalous_luns(
    client: Client, index: str, window: RunWindow, luns: set[str]
) -> dict[str, float]:
    """LUN -> highest ``iolens.record_score`` of its windows marked anomalous that end within
    ``window`` (the job's run), for ``luns``."""
    scores: dict[str, float] = {}
    query = {
        "bool": {
            "filter": [
                window.on_window_ends(),
                {"term": {"iolens.anomalous": True}},
                {"terms": {"iolens.peer.lun": sorted(luns)}},
            ]
        }
    }
    for h in iter_hits(client, index, query, [{"@timestamp": "asc"}, {"iolens.peer.lun": "asc"}]):
        src = h["_source"]["iolens"]
        lun = src["peer"]["lun"]
        scores[lun] = max(scores.get(lun, 0.0), float(src.get("record_score") or 0.0))
    return scores


def mount_table(darshan: DarshanSettings, host: str | None = None) -> MountTable:
    """The configured mount points (``darshan.mounts``), then this host's ``/proc/mounts``
    as it is now (unless ``darshan.proc_mounts`` is off or the file is unreadable)."""
    host = host or socket.gethostname()
    tables = [configured_mounts(darshan.mounts, host)]
    if darshan.proc_mounts:
        try:
            text = Path("/proc/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            log.debug("no /proc/mounts here (%s); only darshan.mounts is used", err)
        else:
            tables.append(parse_proc_mounts(text, host))
    return MountTable(*tables)


def critical_placement(a: JobAnalysis, darshan: DarshanSettings) -> dict[str, tuple[str, str]]:
    """Critical file name -> ``(mount point, LUN)`` for the critical files whose mount point
    is on a known block device."""
    if not a.critical:
        return {}
    table = mount_table(darshan)
    out = {}
    for cf in a.critical:
        m = table.lookup(cf.name)
        if m is not None and m.lun is not None:
            out[cf.name] = (m.mount_point, m.lun)
    return out
