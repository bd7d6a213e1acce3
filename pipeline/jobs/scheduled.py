"""The scheduled jobs of the main job, wired to the cluster and the sink.

Every tick (``jobs.tick_s``) and once more at the end of a run: the latency job turns settled
dirty fio intervals into merged percentiles (:class:`~pipeline.jobs.fio_latency.FioLatencyJob`),
the peer job compares hosts (:class:`~pipeline.jobs.peer_job.PeerJob`, under a lease so one
process of a namespace runs it) and, once thresholds are trained, the incident job groups alerts
(:class:`~pipeline.jobs.incident_job.IncidentJob`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.jobs.fio_latency import FioLatencyJob
from pipeline.jobs.incident_job import IncidentJob
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.jobs.peer_job import PeerJob, load_thresholds
from pipeline.jobs.summary import RunSummary
from pipeline.records.core import Document
from pipeline.reducers.peer_thresholds import Thresholds
from pipeline.settings import Settings
from pipeline.sink.client import Client
from pipeline.sink.documents import DocContext
from pipeline.sink.fenced import FencedWriter
from pipeline.sink.lease import Lease
from pipeline.sink.search import count as count_docs
from pipeline.sink.search import delete_by_query, iter_hits, latest_per, refresh
from pipeline.sink.state_store import JobState


def _lease_ttl_s(settings: Settings) -> float:
    """``jobs.lease_ttl_s``, at least three ticks (a holder renews every tick)."""
    return max(settings.jobs.lease_ttl_s, 3 * settings.jobs.tick_s)


def _thresholds(settings: Settings) -> tuple[Path, Thresholds | None]:
    """The peer thresholds file and what it holds (None: not trained yet).

    Raises:
        ConfigError: it is not a thresholds file.
    """
    path = Path(settings.peer.thresholds_file or Path(settings.state_dir) / "thresholds.json")
    try:
        return path, load_thresholds(path)
    except (ValueError, KeyError) as err:
        raise ConfigError(f"{path}: not a thresholds file ({err}); run iolens train") from None


class ScheduledJobs:
    """The latency, peer and incident jobs of one main job.

    Args:
        settings: the configuration.
        client: the cluster.
        emit: where the latency job's documents go (the sink; the peer comparison writes its
            own, fenced by its lease: :mod:`pipeline.sink.fenced`).
        dirty: the fio intervals touched by acknowledged documents.
        ctx: the documents' namespace and writer (``agent.*``), for every job's documents.
        clock: wall-clock seconds.
        monotonic: monotonic seconds, for how long another instance's lease was seen unchanged.

    Raises:
        ConfigError: ``peer.thresholds_file`` (or ``<state>/thresholds.json``) is not a
            thresholds file.
    """

    def __init__(
        self,
        settings: Settings,
        client: Client,
        emit: Callable[[Document], object],
        dirty: DirtyIntervals,
        ctx: DocContext,
        clock: Callable[[], float],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._monotonic = monotonic
        self.latency = FioLatencyJob(
            search=lambda index, q, s: iter_hits(client, index, q, s),
            emit=emit,
            dirty=dirty,
            fio=settings.fio,
            ctx=ctx,
            clock=clock,
            refresh=lambda index: refresh(client, index),
            delete=lambda index, query: delete_by_query(client, index, query),
            count=lambda index, query: count_docs(client, index, query),
        )
        self.peer = self._peer_job(settings, client, ctx, clock)
        name = f"incident.{settings.elasticsearch.namespace}"
        self.incident_lease = Lease(
            client, name, _lease_ttl_s(settings), clock=clock, monotonic=monotonic
        )
        self.incident = IncidentJob(
            client,
            settings,
            self.incident_lease.acquire,
            clock,
            ctx=ctx,
            fence=self.incident_lease.fence,
        )

    def _peer_job(
        self,
        settings: Settings,
        client: Client,
        ctx: DocContext,
        clock: Callable[[], float],
    ) -> PeerJob:
        path, thresholds = _thresholds(settings)
        name = f"peer.{settings.elasticsearch.namespace}"
        self.lease = Lease(
            client, name, _lease_ttl_s(settings), clock=clock, monotonic=self._monotonic
        )
        store = JobState(client, name, clock=clock)
        self.peer_writer = FencedWriter(client, self.lease)
        return PeerJob(
            hits=lambda index, q, s: iter_hits(client, index, q, s),
            emit=self.peer_writer.add,
            settle=self.peer_writer.flush,
            peer=settings.peer,
            thresholds=thresholds,
            ctx=ctx,
            lease=self.lease.acquire,
            load_state=store.load,
            save_state=store.save,
            clock=clock,
            monotonic=self._monotonic,
            refresh=lambda index: refresh(client, index),
            sysstat_drops=any(d.type in ("sadf", "sadc") for d in settings.drops),
            thresholds_path=path,
            latest=lambda index, since_s: latest_per(client, index, "host.name", since_s),
        )

    def release(self) -> None:
        """Give up the leases this instance holds (peer comparison, incidents), so another
        instance takes the jobs over at once rather than after the leases' time to live."""
        self.lease.release()
        self.incident_lease.release()

    def tick(self, summary: RunSummary) -> None:
        """Run whatever is due (each job keeps its own schedule), counting into ``summary``."""
        summary.intervals += self.latency.run()
        summary.peer_windows += self.peer.run()
        if self.peer.thresholds is not None:
            summary.incidents += self.incident.run()

    def finish(self, summary: RunSummary, flush: Callable[[], None]) -> None:
        """Run every job on everything left (``flush`` the sink between them, so each reads
        what the one before wrote)."""
        summary.intervals += self.latency.run(force=True)
        flush()
        self.latency.supersede()
        summary.peer_windows += self.peer.run(force=True)
        if self.peer.thresholds is not None:
            flush()
            summary.incidents += self.incident.run(settle=True)
