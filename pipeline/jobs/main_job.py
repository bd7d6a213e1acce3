"""The main job: shippers on the drop directories, reducers, the sink and the scheduled jobs.

Data flow per file: identify (device+inode+fingerprint) -> registry state -> tail complete lines
-> parse -> place in windows -> histogram documents -> bulk sink. When Elasticsearch acknowledges
every document of a prefix of lines, the intervals they touched are marked dirty and the file's
offset (with the reader's cursor) is committed. The latency job turns settled dirty intervals into
merged percentiles. Nothing is committed before it is acknowledged, so a crash repeats work (a
409 on replay) and never loses it.

Where each stage lives: the files being read, :mod:`pipeline.shippers.discovery`; each drop
format, :mod:`pipeline.formats.registry`; reading and shipping lines, :mod:`pipeline.jobs.pump`;
acknowledgements and commits, :mod:`pipeline.delivery`; the scheduled jobs,
:mod:`pipeline.jobs.scheduled`; the pipeline's own metrics, :mod:`pipeline.jobs.health`. This
module wires them together and runs the loop.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pipeline.delivery.commit import Delivery, sort_acknowledged
from pipeline.errors import ConfigError
from pipeline.formats.registry import build_shippers, check_drops
from pipeline.jobs.darshan_evidence import server_evidence
from pipeline.jobs.fio_latency import JOB_KEY
from pipeline.jobs.health import Health
from pipeline.jobs.pump import Pump
from pipeline.jobs.scheduled import ScheduledJobs
from pipeline.jobs.state_lock import lock_state_dir
from pipeline.jobs.state_open import open_state_dbs
from pipeline.jobs.summary import RunSummary
from pipeline.records.core import Document
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import Evidence
from pipeline.settings import DropSettings, Settings
from pipeline.shippers.discovery import FileSet
from pipeline.shippers.interface import ShipContext, Tail
from pipeline.shippers.watcher import DropWatcher, FileEvent
from pipeline.sink.agent_id import agent_id
from pipeline.sink.capabilities import detect
from pipeline.sink.client import Client
from pipeline.sink.clock_offset import ClockWatch
from pipeline.sink.clock_offset import measure as measure_offset
from pipeline.sink.cluster_id import cluster_id
from pipeline.sink.disk import DiskWatch
from pipeline.sink.documents import DocContext
from pipeline.sink.notices import announce
from pipeline.sink.sender import AsyncSink
from pipeline.sink.templates import install, load_templates

__all__ = ["MainJob"]

log = logging.getLogger(__name__)

REDELIVERED = "--redeliver: %s files delivered to another cluster are read again into this one (%s)"


class MainJob:
    """Runs the pipeline against one cluster.

    Args:
        settings: the configuration.
        client: Client client (already pointed at the cluster or embedded server).
        clock: wall-clock seconds, for timestamps (``event.created``, the pipeline's own
            metrics) and what is kept across runs.
        monotonic: monotonic seconds, for every wait and period (the jobs' tick, how long
            intervals and files have been quiet), so a stepped wall clock neither stalls nor
            hurries them.
        install_templates: install (idempotently) the index templates first, as ``iolens setup``
            does; what the cluster lacks is said once per cluster and state directory
            (:func:`~pipeline.sink.notices.announce`).
        redeliver: read again the files whose lines were delivered to another cluster
            (:meth:`Registry.redeliver <pipeline.shippers.registry.Registry.redeliver>`);
            without it they are not read, and :meth:`ingest` says so once.

    Raises:
        ConfigError: a drop names a format iolens does not read
            (:func:`~pipeline.formats.registry.check_drops`).
    """

    def __init__(
        self,
        settings: Settings,
        client: Client,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        install_templates: bool = True,
        redeliver: bool = False,
    ) -> None:
        check_drops(settings)
        state = Path(settings.state_dir)
        self._lock = lock_state_dir(state)
        self.disk = DiskWatch(state)
        self.cluster = cluster_id(client)
        if install_templates:
            caps = detect(client)
            announce(caps.messages, self.cluster, state, clock=clock)
            install(client, load_templates(), caps)
        self.settings, self.client, self.clock, self.state_dir = settings, client, clock, state
        self.monotonic = monotonic
        dbs = open_state_dbs(
            settings, client, self._lock, self.disk, self.cluster, clock, monotonic
        )
        self.registry, self.dirty, self._watch = dbs.registry, dbs.dirty, dbs.watch
        self._told_elsewhere = False
        if self.cluster is None:
            log.info(
                "cannot tell which cluster this is now: files are not checked against the "
                "cluster they were delivered to"
            )
        if redeliver:
            self._redeliver()
        host = socket.gethostname()  # agent.name of every document; host.name of our own metrics
        self.ctx = DocContext(settings.elasticsearch.namespace, host, agent_id(state))
        self.shipping = ShipContext(
            settings, state, host, clock, self._darshan_evidence, self.registry, self.ctx
        )
        self.shipping.monotonic = monotonic
        self.files = FileSet(settings, self.registry, build_shippers(self.shipping), self.disk)
        self.delivery = Delivery(self.registry, self.files.find, self.dirty.touch, self.disk)
        self.sink = self._sink(client, settings, state)
        self.summary = RunSummary()
        self.health = Health(
            self.sink, settings.service_rate, state, self.ctx, host, clock, self._files_read
        )
        probe = client.options(request_timeout=5, max_retries=0)
        self.health.clock_watch = ClockWatch(
            lambda: measure_offset(probe, clock),
            settings.jobs.max_clock_offset_s,
            settings.jobs.clock_check_s,
            monotonic,
        )
        self.jobs = ScheduledJobs(
            settings, client, self.sink.add, self.dirty, self.ctx, clock, monotonic
        )
        self.reader = self._reader()
        self.sink.stop = self.reader.stopping

    def _sink(self, client: Client, settings: Settings, state: Path) -> AsyncSink:
        # The sink owns its retry loop with backoff: no transport-level retries underneath it.
        return AsyncSink(
            client.options(max_retries=0),
            settings.sink,
            state,
            on_ack=self._on_ack,
            target_bulk_s=settings.service_rate.target_bulk_s,
            disk=self.disk,
        )

    def _redeliver(self) -> None:
        """``--redeliver``: forget what went to other clusters (read again into this one)."""
        if self.cluster is None:
            log.warning("--redeliver: cannot tell which cluster this is; nothing is read again")
            return
        log.info(REDELIVERED, self.registry.redeliver(), self.cluster)

    def _tell_elsewhere(self) -> None:
        """Say once per run how many files were not read because their lines went to another
        cluster, and what to do about it."""
        if self._told_elsewhere or not self.files.elsewhere:
            return
        self._told_elsewhere = True
        log.warning(
            "files already delivered to another cluster (%s), not to this one (%s), are not "
            "read: %s. To read them into this cluster, run the command again with --redeliver",
            ", ".join(sorted(set(self.files.elsewhere.values()))),
            self.cluster,
            len(self.files.elsewhere),
        )

    def _reader(self) -> Pump:
        chunk_bytes = self.settings.shipper.read_chunk_bytes
        health = self.health
        args = (self.files, self.delivery, self.sink, self.ctx, self.summary)
        return Pump(*args, chunk_bytes, self.clock, health.monitor, health.ship_rates)

    @property
    def tails(self) -> dict[str, Tail]:
        """The files being read, by registry key."""
        return self.files.tails

    @property
    def _unidentified(self) -> dict[str, DropSettings]:
        return self.files.unidentified

    @property
    def once(self) -> bool:
        """Whole-file inputs are complete as found (no wait for them to be stable)."""
        return self.shipping.once

    @once.setter
    def once(self, value: bool) -> None:
        self.shipping.once = value

    def _files_read(self) -> int:
        return len(self.reader.read_keys)

    def _darshan_evidence(self, a: JobAnalysis) -> Evidence:
        return server_evidence(self.client, self.settings, a)

    def _on_ack(self, docs: Sequence[Document]) -> None:
        """Documents were acknowledged: settle their lines, mark their intervals dirty, then
        commit the files concerned."""
        acked = sort_acknowledged(docs, JOB_KEY)
        keys = self.delivery.ack_lines(acked.file_refs)
        if acked.job_refs:
            self.jobs.latency.acknowledged(list(acked.job_refs))
        self.delivery.acknowledged(acked.intervals, keys)

    def discover(self, path: Path, drop: DropSettings | None) -> Tail | None:
        """Start (or resume) tailing ``path`` (see :meth:`FileSet.discover`)."""
        return self.files.discover(path, drop)

    def pump(self, tail: Tail) -> int:
        """Read and ship every complete line now in the file; returns lines read (see
        :meth:`Pump.pump`)."""
        return self.reader.pump(tail)

    def ingest(self, files: Iterable[tuple[Path, DropSettings | None]]) -> None:
        """Discover and read the given files to their current end.

        Darshan logs are all handed to the worker pool first, so they are analysed in parallel
        while the files before them are shipped.
        """
        self.sink.queue.producer_idle(False)
        tails = [t for path, drop in files if (t := self.discover(path, drop)) is not None]
        self._tell_elsewhere()
        for t in tails:
            self.reader.shipper_of(t).prefetch(t)
        for t in tails:
            self.pump(t)

    def finish(self) -> RunSummary:
        """Flush, compute every dirty interval, flush again; returns the summary.

        Raises:
            ConfigError: the state directory (or a database in it) went away meanwhile: what
                was delivered is not recorded (:meth:`StateWatch.check
                <pipeline.jobs.state_lock.StateWatch.check>`).
        """
        self._read_waiting()
        self.reader.idle(final=True)
        self.health.ship_rates()
        self.sink.flush()
        self.files.tell_not_read()
        self.jobs.finish(self.summary, self.sink.flush)
        self.sink.queue.producer_idle(True)
        self._watch.check()
        return self.snapshot()

    def run_once(self, extra: Sequence[tuple[Path, DropSettings | None]] = ()) -> RunSummary:
        """Process what is in the drop directories (and ``extra``), flush and return.

        Whole-file inputs are read as they are (no wait for them to be stable). When the spool
        fills up (cluster away), reading stops and what found no room is let go unacknowledged
        (``RunSummary.unsent``), to be read again on the next run.
        """
        self.once = True
        self.sink.wait_when_full = False
        self.ingest([*self.files.drop_files(), *extra])
        return self.finish()

    def run_forever(self, stop: threading.Event) -> RunSummary:
        """Watch the drop directories until ``stop`` is set (reading stops at the next chunk;
        what was read is delivered before it returns).

        While the spool is full (cluster away), reading waits until the cluster takes
        documents again; a stop then lets what found no room go unacknowledged
        (``RunSummary.unsent``), to be read again on the next run.
        """
        self.reader.stopping = stop
        self.sink.stop = stop
        drops = {str(Path(d.path)): d for d in self.settings.drops}
        watchers = [self.files.watcher(d) for d in self.settings.drops]
        for w in watchers:
            w.start()
        try:
            self.ingest(self.files.drop_files())
            next_tick = self.monotonic()
            while not stop.is_set():
                self._step(watchers, drops)
                if self.monotonic() >= next_tick:
                    self._tick()
                    next_tick = self.monotonic() + self.settings.jobs.tick_s
        finally:
            for w in watchers:
                w.stop()
            self.sink.flush()
            self.jobs.latency.supersede()
        return self.snapshot()

    def _step(self, watchers: Sequence[DropWatcher], drops: dict[str, DropSettings]) -> None:
        """Read what the watchers report, and the files that could not be identified before."""
        events: list[FileEvent] = []
        self.sink.queue.producer_idle(True)
        for w in watchers:
            events += w.drain(timeout_s=0.2 / max(1, len(watchers)))
        self.sink.queue.producer_idle(False)
        self._handle(events, drops)
        self._tell_elsewhere()
        self._read_waiting()
        self.sink.maybe_flush()

    def _read_waiting(self) -> None:
        """Try again the paths that could not be identified before (no complete first line,
        unreadable, or a file that replaced one being read), and read those that can be now."""
        for p, drop in list(self.files.unidentified.items()):
            tail = self.discover(Path(p), drop)
            if tail is not None:
                self.pump(tail)

    def _tick(self) -> None:
        """Every ``jobs.tick_s``: the state directory still there (or a ConfigError), commits
        a full disk held back, files not read to their end, quiet files, the pipeline's metrics
        and the scheduled jobs."""
        self._watch.check()
        if self.delivery.waiting():
            self.delivery.retry()  # commits a full disk held back
        for tail in list(self.files.tails.values()):
            if not tail.exhausted:
                self.pump(tail)
        self.reader.idle()
        self.health.ship_rates()
        self.health.report()
        self.jobs.tick(self.summary)

    def _handle(self, events: Sequence[FileEvent], drops: dict[str, DropSettings]) -> None:
        for ev in events:
            path = ev.dest if ev.kind == "moved" and ev.dest is not None else ev.path
            if ev.kind == "deleted":
                self.files.deleted(str(ev.path))
                continue
            drop = next((d for root, d in drops.items() if str(path).startswith(root)), None)
            try:
                tail = self.discover(path, drop)
            except FileNotFoundError:
                continue
            if tail is not None:
                tail.exhausted = False
                self.pump(tail)

    def snapshot(self) -> RunSummary:
        """The summary so far, with sink counters and dead-letter counts."""
        self.summary.skipped = len(self.files.resumed - self.reader.read_keys)
        self.summary.elsewhere = len(self.files.elsewhere)
        return self.summary.update(self.sink, len(self.reader.read_keys))

    def __enter__(self) -> MainJob:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close; when the state directory (or a database in it) went away while the job ran,
        the failure that caused (a spool segment gone) is reported as that instead.

        Raises:
            ConfigError: the state directory or a database in it went away, naming it.
        """
        try:
            self.close()
        except Exception:
            self._blame_state()
            raise
        if isinstance(exc[1], Exception) and not isinstance(exc[1], ConfigError):
            self._blame_state()

    def _blame_state(self) -> None:
        """Raise the state directory's :class:`ConfigError` if a file of it went away."""
        gone = self._watch.gone()
        if gone is not None:
            raise gone from None

    def close(self) -> None:
        """Flush and release the registry and job state (also on leaving a ``with`` block)."""
        for shipper in self.files.shippers.values():
            shipper.close()  # workload models saved, Darshan workers stopped
        self.health.stop()
        self.sink.stop.set()  # nothing waits for a full spool any more: the rest is let go
        self.health.ship_rates()
        self.sink.close()
        self.snapshot()  # the documents close() let go (spool full) count as unsent
        self.jobs.release()
        self.registry.close()
        self.dirty.close()
        self._lock.close()
