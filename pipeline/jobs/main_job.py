"""The main job: shippers on the drop directories, reducers, the sink and the scheduled jobs.

Data flow per file: identify (device+inode+fingerprint) -> registry state -> tail complete lines
-> parse -> place in windows -> histogram documents -> bulk sink. When Elasticsearch acknowledges
every document of a prefix of lines, the intervals they touched are marked dirty and the file's
offset (with the reader's cursor) is committed. The latency job turns settled dirty intervals into
merged percentiles. Nothing is committed before it is acknowledged, so a crash repeats work (a
409 on replay) and never loses it.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import logging
import os
import shutil
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from zoneinfo import ZoneInfo

from pipeline.jobs.darshan_evidence import server_evidence
from pipeline.jobs.fio_latency import JOB_KEY, FioLatencyJob
from pipeline.jobs.incident_job import IncidentJob
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.jobs.peer_job import PeerJob, load_thresholds
from pipeline.jobs.service_monitor import ServiceMonitor, StageState
from pipeline.parsers.errors import ParseError
from pipeline.parsers.event_schema import EventSchema, load_event_schema
from pipeline.records import Document, LineRef
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import Thresholds
from pipeline.settings import ConfigError, DropSettings, Settings
from pipeline.shippers.acks import AckTracker
from pipeline.shippers.darshan_tail import DarshanPool, DarshanTail
from pipeline.shippers.events_tail import EventsTail, Released, WorkloadModel
from pipeline.shippers.fio_tail import FioTail, fio_path_parts, last_time_ms
from pipeline.shippers.hosts import host_for, unrotated
from pipeline.shippers.identity import find_renamed, identify
from pipeline.shippers.registry import FileState, Registry
from pipeline.shippers.sysstat_tail import SysstatTail
from pipeline.shippers.table_tail import TableKind, TableTail
from pipeline.shippers.tailer import LineTooLong, TailChunk
from pipeline.shippers.watcher import DropWatcher, FileEvent
from pipeline.sink.capabilities import detect
from pipeline.sink.client import Client
from pipeline.sink.documents import DocContext, FioSource
from pipeline.sink.lease import Lease
from pipeline.sink.rate_documents import pipeline_document, service_rate_document
from pipeline.sink.search import count as count_docs
from pipeline.sink.search import delete_by_query, iter_hits, refresh
from pipeline.sink.sender import AsyncSink
from pipeline.sink.state_store import JobState
from pipeline.sink.templates import install, load_templates

log = logging.getLogger(__name__)

Tail = FioTail | SysstatTail | DarshanTail | TableTail | EventsTail
"""A file being read: fio histogram log, sysstat data, a Darshan log, Slurm or LMT records, an
event log."""

WHOLE_FILE_TYPES = ("sadc", "darshan")
"""Drop types whose files are read whole (binary), so any non-empty head identifies them."""

ANCHOR_SNAP_MS = 5_000
"""Logs of one host whose estimated run starts lie this close share one start (one fio run)."""


@dataclass
class RunSummary:
    """What one run did: files and lines read, bad lines, documents per data stream."""

    files: int = 0
    lines: int = 0
    bad_lines: int = 0
    bad_files: int = 0
    intervals: int = 0
    peer_windows: int = 0
    incidents: int = 0
    """Incident documents written (new or changed)."""
    docs: dict[str, dict[str, int]] = field(default_factory=dict)
    dead_letters: dict[str, int] = field(default_factory=dict)
    spooled: int = 0
    unsent: int = 0
    """Documents let go unacknowledged because the spool was full; their lines are read
    again on the next run."""


class MainJob:
    """Runs the pipeline against one cluster.

    Args:
        settings: the configuration.
        client: Client client (already pointed at the cluster or embedded server).
        clock: wall-clock seconds.
        install_templates: install (idempotently) the index templates first, as ``iolens setup``
            does; what the cluster lacks is logged once.
    """

    def __init__(
        self,
        settings: Settings,
        client: Client,
        *,
        clock: Callable[[], float] = time.time,
        install_templates: bool = True,
    ) -> None:
        state = Path(settings.state_dir)
        state.mkdir(parents=True, exist_ok=True)
        self._lock = lock_state_dir(state)
        if install_templates:
            install(client, load_templates(), detect(client))
        self.settings = settings
        self.client = client
        self.clock = clock
        self.state_dir = state
        self.registry = Registry(state / "registry.sqlite")
        self.acks = AckTracker()
        self.ctx = DocContext(namespace=settings.elasticsearch.namespace)
        # The sink owns its retry loop with backoff: no transport-level retries underneath it.
        self.sink = AsyncSink(
            client.options(max_retries=0),
            settings.sink,
            state,
            on_ack=self._on_ack,
            target_bulk_s=settings.service_rate.target_bulk_s,
        )
        self._rate_docs: deque[Document] = deque()
        letters = self.sink.deadletters.count()
        self._letters_seen = letters["documents"] + letters["inputs"]
        self.monitor: ServiceMonitor | None = None
        if settings.service_rate.enabled:
            q = self.sink.queue
            self.monitor = ServiceMonitor(
                [("produce", "sink", q, "tail"), ("sink", "sink", q, "head")],
                settings.service_rate,
                state,
                self._rate_estimated,
            )
            self.monitor.start()
        self.dirty = DirtyIntervals(state / "jobs.sqlite", clock=clock)
        self.latency = FioLatencyJob(
            search=lambda index, q, s: iter_hits(self.client, index, q, s),
            emit=self.sink.add,
            dirty=self.dirty,
            fio=settings.fio,
            ctx=self.ctx,
            clock=clock,
            refresh=lambda index: refresh(self.client, index),
            delete=lambda index, query: delete_by_query(self.client, index, query),
            count=lambda index, query: count_docs(self.client, index, query),
        )
        self.peer = self._peer_job(settings, client, clock)
        self.incident = IncidentJob(
            client,
            settings,
            Lease(
                client,
                f"incident.{settings.elasticsearch.namespace}",
                ttl_s=max(120.0, 6 * settings.jobs.tick_s),
                clock=clock,
            ).acquire,
            clock,
        )
        self.tails: dict[str, Tail] = {}
        self._retired: dict[str, Tail] = {}
        self._drops: dict[str, DropSettings] = {}
        self._by_path: dict[str, str] = {}
        self._unidentified: dict[str, DropSettings] = {}
        self._refused: set[str] = set()
        self._truncated: dict[str, FileState] = {}
        """Path -> the state of the file there before it was truncated (see
        :meth:`_adopt_rotated`)."""
        self._stopping = threading.Event()
        self.sink.stop = self._stopping
        self._anchors: dict[str, list[int]] = {}
        self._hostname = socket.gethostname()
        self.summary = RunSummary()
        self._read_keys: set[str] = set()
        self.darshan_pool = DarshanPool(settings.darshan.workers, inline=settings.darshan.inline)
        self._models: dict[str, tuple[EventSchema, WorkloadModel]] = {}
        self.once = False
        """Whole-file inputs are complete as found (no wait for them to be stable)."""
        self._load_anchors()

    def _peer_job(self, settings: Settings, client: Client, clock: Callable[[], float]) -> PeerJob:
        path = Path(settings.peer.thresholds_file or Path(settings.state_dir) / "thresholds.json")
        try:
            thresholds = load_thresholds(path)
        except (ValueError, KeyError) as err:
            raise ConfigError(f"{path}: not a thresholds file ({err}); run iolens train") from None
        name = f"peer.{settings.elasticsearch.namespace}"
        lease = Lease(client, name, ttl_s=max(120.0, 6 * settings.jobs.tick_s), clock=clock)
        self._lease = lease
        store = JobState(client, name, clock=clock)
        return PeerJob(
            hits=lambda index, q, s: iter_hits(self.client, index, q, s),
            emit=self.sink.add,
            settle=self._settle,
            peer=settings.peer,
            thresholds=thresholds,
            ctx=self.ctx,
            lease=lease.acquire,
            load_state=store.load,
            save_state=store.save,
            clock=clock,
            refresh=lambda index: refresh(self.client, index),
            sysstat_drops=any(d.type in ("sadf", "sadc") for d in settings.drops),
            thresholds_path=path,
        )

    def _rate_estimated(self, st: StageState) -> None:
        """A stage's service rate converged (on the monitor's thread): size bulk requests by
        the sink's, and queue the estimate's document for the main thread."""
        assert self.monitor is not None and st.estimate is not None
        if st.stage == "sink":
            self.sink.set_rate(st.estimate.rate_per_s)
        bottleneck = self.monitor.bottleneck()
        values = {
            "queue": st.queue,
            "end": st.end,
            "method": "online_estimate",
            "rate_per_s": st.estimate.rate_per_s,
            "mean_per_s": st.estimate.mean_per_s,
            "quantile_per_s": st.estimate.quantile_per_s,
            "converged": st.estimate.converged,
            "usable_fraction": st.estimate.usable_fraction,
            "confidence": st.estimate.confidence,
            "period_s": st.estimate.period_s,
            "samples": st.estimate.samples,
            "throughput_per_s": st.throughput(),
            "blocked_share": st.blocked_share(),
            "utilisation": st.utilisation(),
            "bottleneck": bottleneck == st.stage,
        }
        now_ms = self.clock() * 1000
        doc = service_rate_document(self.ctx, self._hostname, st.stage, values, now_ms, now_ms)
        self._rate_docs.append(doc)
        if st.stage != "produce":
            return
        # the produce stage's parts, measured by their working time
        snap = self.monitor.snapshot()
        for name in ("read", "parse"):
            part = snap["stages"].get(name)
            if part is None or part["estimate"] is None:
                continue
            values = {
                "method": "busy_time",
                "rate_per_s": part["estimate"]["rate_per_s"],
                "confidence": "exact",
                "busy_s": part["busy_s"],
                "bottleneck": bottleneck == "produce" and snap["within"] == name,
            }
            doc = service_rate_document(self.ctx, self._hostname, name, values, now_ms, now_ms)
            self._rate_docs.append(doc)

    def _health(self) -> None:
        """A ``metrics-iolens.pipeline`` document: lag, queue, spool and dead letters (every
        tick of :meth:`run_forever`)."""
        acknowledged, lag_mean, lag_max = self.sink.take_lag()
        letters = self.sink.deadletters.count()
        total = letters["documents"] + letters["inputs"]
        values: dict[str, Any] = {
            "acknowledged": acknowledged,
            "queued": len(self.sink.queue),
            "spooled": self.sink.spool.pending(),
            "spool_bytes": self.sink.spool.size(),
            "spool_full": self.sink.sink.full(),
            "dead_letters": total,
            "dead_letters_new": max(0, total - self._letters_seen),
            "files": len(self._read_keys),
        }
        self._letters_seen = total
        if lag_mean is not None:
            values |= {"lag_mean_s": lag_mean, "lag_max_s": lag_max}
        if self.monitor is not None and (limit := self.monitor.bottleneck()) is not None:
            values["bottleneck"] = limit
        now_ms = self.clock() * 1000
        self.sink.add(pipeline_document(self.ctx, self._hostname, values, now_ms))

    def _ship_rates(self) -> None:
        """Send the service-rate documents the monitor made (on this, the main, thread)."""
        while self._rate_docs:
            self.sink.add(self._rate_docs.popleft())

    def _settle(self) -> bool:
        """Flush the sink; True when nothing is left unacknowledged (no spooled documents,
        none let go because the spool was full)."""
        self.sink.flush()
        return self.sink.pending() == 0 and not self.snapshot().unsent

    # -- discovery -------------------------------------------------------------------------

    def _load_anchors(self) -> None:
        for st in self.registry.all():
            if st.anchor_ms is not None and st.cursor:
                host = json.loads(st.cursor).get("host")
                if host:
                    self._anchors.setdefault(host, []).append(st.anchor_ms)

    def _anchor_for(self, host: str, path: str) -> int:
        """Wall-clock ms of time 0 of a job-relative log (see ``fio.run_start``)."""
        if self.settings.fio.run_start is not None:
            return int(self.settings.fio.run_start.timestamp() * 1000)
        mtime_ms = int(Path(path).stat().st_mtime * 1000)
        estimate = mtime_ms - (last_time_ms(path) or 0)
        for known in self._anchors.get(host, []):
            if abs(known - estimate) <= ANCHOR_SNAP_MS:
                return known
        self._anchors.setdefault(host, []).append(estimate)
        return estimate

    def _identify(self, p: str, whole_file: bool = False) -> str | None:
        ident = identify(
            p,
            self.settings.shipper.fingerprint_bytes,
            whole_file=whole_file or p.endswith(".gz"),
        )
        return None if ident is None else ident.key

    def discover(self, path: Path, drop: DropSettings | None) -> Tail | None:
        """Start (or resume) tailing ``path``.

        Returns None while it cannot be identified yet (no complete first line), when it is gone,
        hidden (``.name``: rsync and editors write such temporary files and rename them when
        done), or was quarantined before.
        """
        p = str(path)
        if path.name.startswith("."):
            return None
        drop = drop or DropSettings(type="fio-hist", path=str(path.parent))
        if not self._inside(path, drop):
            return None
        try:
            key = self._identify(p, whole_file=drop.type in WHOLE_FILE_TYPES)
        except FileNotFoundError:
            self._unidentified.pop(p, None)
            return None
        except OSError as err:
            log.warning("%s cannot be read (%s); will retry", p, err)
            self._unidentified[p] = drop
            return None
        if key is None:
            self._unidentified[p] = drop
            return None
        self._unidentified.pop(p, None)
        previous = self._by_path.get(p)
        if previous is not None and previous != key and not self._follow(previous):
            log.info("%s now holds another file: the old one is no longer read", p)
            self._retire(previous)
        tail = self.tails.get(key)
        if tail is not None:
            if tail.path != p:
                self._moved(tail, p)
            return tail
        state = self.registry.get(key)
        if state is not None and state.done:
            return None  # quarantined earlier: it stays in the dead-letter area
        if state is None and drop.type != "darshan":
            state = self._adopt_rotated(key, path)
        named = unrotated(path)  # a rotated file is named as the file it was rotated from
        if drop.type == "darshan":
            if state is None:
                state = self.registry.upsert_new(key, p)
            elif state.path != p:
                self.registry.set_path(key, p)
            ds = self.settings.darshan
            dtail = DarshanTail(
                key,
                p,
                self.darshan_pool,
                stable_s=0.0 if self.once else ds.stable_s,
                thresholds=Thresholds(ds.min_nprocs, ds.min_bytes_per_proc, ds.max_bytes_per_s),
                evidence=self._darshan_evidence,
                clock=self.clock,
            )
            dtail.resume(state.offset, state.line_no, state.cursor)
            return self._track(dtail, drop)
        if drop.type in ("slurm", "lmt"):
            if state is None:
                state = self.registry.upsert_new(key, p)
            elif state.path != p:
                self.registry.set_path(key, p)
            kind: TableKind = "slurm" if drop.type == "slurm" else "lmt"
            ttail = TableTail(key, p, kind, ZoneInfo(drop.tz))
            ttail.resume(state.offset, state.line_no, state.cursor)
            return self._track(ttail, drop)
        if drop.type == "events":
            schema, model = self._model_for(drop)
            if state is None:
                state = self.registry.upsert_new(key, p)
            elif state.path != p:
                self.registry.set_path(key, p)
            host = host_for(named, Path(drop.path), drop.host, self._hostname)
            etail = EventsTail(key, p, host, schema, model)
            etail.resume(state.offset, state.line_no, state.cursor)
            return self._track(etail, drop)
        if drop.type in ("sadf", "sadc"):
            if state is None:
                state = self.registry.upsert_new(key, p)
            elif state.path != p:
                self.registry.set_path(key, p)
            sys_tail = SysstatTail(
                key, p, "sadc" if drop.type == "sadc" else "sadf", self.settings.peer.downsample_s
            )
            sys_tail.resume(state.offset, state.line_no, state.cursor)
            return self._track(sys_tail, drop)
        try:
            prefix, job = fio_path_parts(named)
        except ValueError as err:
            log.warning("skipping %s: %s", p, err)
            return None
        host = host_for(named, Path(drop.path), drop.host, self._hostname)
        if state is None:
            state = self.registry.upsert_new(key, p, self._anchor_for(host, p))
        elif state.path != p:
            self.registry.set_path(key, p)
        offset_ms = self.settings.fio.host_offsets_ms.get(host, 0)
        anchor = state.anchor_ms if state.anchor_ms is not None else self._anchor_for(host, p)
        src = FioSource(host, job, prefix, p, key.rsplit(":", 1)[-1])
        fio_tail = FioTail(key, p, src, self.settings.fio, anchor + offset_ms)
        fio_tail.resume(state.offset, state.line_no, state.cursor)
        return self._track(fio_tail, drop)

    def _moved(self, tail: Tail, path: str) -> None:
        """``tail``'s file is now at ``path`` (renamed): follow it there."""
        log.info("%s was renamed to %s", tail.path, path)
        self.registry.set_path(tail.key, path)
        if self._by_path.get(tail.path) == tail.key:
            del self._by_path[tail.path]
        tail.path = path
        self._by_path[path] = tail.key

    def _follow(self, key: str) -> bool:
        """Find file ``key``, no longer at its path, under another name in the same directory
        (a rotation by rename to a name the drop's pattern may not match) and keep reading it
        there: the lines written before the rename are still read. False if it is not there."""
        tail = self.tails.get(key)
        if tail is None:
            return False
        found = find_renamed(key, Path(tail.path))
        if found is None or self._identify(str(found)) != key:
            return False
        self._moved(tail, str(found))
        tail.exhausted = False
        return True

    def _adopt_rotated(self, key: str, path: Path) -> FileState | None:
        """Register a new file that is a rotated *copy* (logrotate ``copytruncate``) of a file
        already read, at the offset that file was committed to, so what was read is not read
        again.

        The original is a file registered at the copy's name without its rotation suffix
        (:func:`~pipeline.shippers.hosts.unrotated`), newest first, or the one truncated there
        by this process. The copy must begin with the same bytes (the fingerprint of its
        identity) and hold, up to that offset, exactly as many lines as were committed, the
        last one ending there. Otherwise it is read from its start: its documents are
        already there (409s). Returns the new file's state, or None when ``path`` is not such
        a copy.
        """
        stem = unrotated(path)
        if stem == path:
            return None
        fingerprint = key.rsplit(":", 1)[-1]
        for orig in (self._truncated.get(str(stem)), *self.registry.by_path(stem)):
            if (
                orig is None
                or orig.key == key
                or orig.key.rsplit(":", 1)[-1] != fingerprint
                or orig.offset <= 0
                or not _lines_up_to(path, orig.offset, orig.line_no)
            ):
                continue
            log.info(
                "%s is a rotated copy of %s: reading it from byte %s (line %s), where that "
                "was read to",
                path,
                orig.path,
                orig.offset,
                orig.line_no,
            )
            self.registry.upsert_new(key, path, orig.anchor_ms)
            return self.registry.commit(key, orig.offset, orig.line_no, orig.cursor)
        return None

    def _inside(self, path: Path, drop: DropSettings) -> bool:
        """Whether ``path`` really lies in its drop directory: a symbolic link (or a linked
        directory) that leads elsewhere is refused, once, with a warning, so a drop directory
        cannot be used to read files it does not hold."""
        try:
            real = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return True  # gone, or a loop: identification reports it
        root = Path(drop.path).resolve()
        if real == root or root in real.parents:
            return True
        if str(path) not in self._refused:
            self._refused.add(str(path))
            log.warning("%s leads to %s, outside the drop directory %s: not read", path, real, root)
        return False

    def _model_for(self, drop: DropSettings) -> tuple[EventSchema, WorkloadModel]:
        """The schema and workload model of an events drop (loaded once per drop).

        Raises:
            ConfigError: the schema cannot be loaded, or the saved model cannot be read.
        """
        root = str(Path(drop.path))
        if root not in self._models:
            assert drop.schema_file is not None  # the settings require it for events drops
            schema = load_event_schema(Path(drop.schema_file))
            name = Path(drop.schema_file).stem
            digest = hashlib.sha1(root.encode(), usedforsecurity=False).hexdigest()[:10]
            path = self.state_dir / "models" / f"{name}.{digest}.json"
            try:
                model = WorkloadModel(name, path, self.settings.requests)
            except ValueError as err:
                raise ConfigError(f"{err}; move it away to start a new model") from None
            self._models[root] = (schema, model)
        return self._models[root]

    def _track(self, tail: Tail, drop: DropSettings) -> Tail:
        self.tails[tail.key] = tail
        self._drops[tail.key] = drop
        self._by_path[tail.path] = tail.key
        self._retired.pop(tail.key, None)
        return tail

    def _retire(self, key: str) -> None:
        """Stop reading a file (gone or replaced); its in-flight lines still get committed."""
        tail = self.tails.pop(key, None)
        if tail is None:
            return
        if self._by_path.get(tail.path) == key:
            del self._by_path[tail.path]
        self._retired[key] = tail

    def _still_there(self, tail: Tail) -> bool:
        """Whether ``tail.path`` still holds the tail's file; if another file replaced it, that
        one is discovered (and read by the caller's next pass)."""
        try:
            whole = isinstance(tail, SysstatTail | DarshanTail) and tail.kind in WHOLE_FILE_TYPES
            key = self._identify(tail.path, whole_file=whole)
        except FileNotFoundError:
            if self._follow(tail.key):
                return True
            log.info("%s is gone", tail.path)
            self._retire(tail.key)
            return False
        except OSError as err:
            log.warning("%s cannot be read (%s); will retry", tail.path, err)
            return False
        if key == tail.key:
            return True
        old_path = tail.path
        if self._follow(tail.key):  # renamed, and another file took its name
            self._unidentified[old_path] = self._drops[tail.key]
            return True
        drop = self._drops.get(tail.key)
        self._retire(tail.key)
        if key is None:
            self._unidentified[tail.path] = drop or DropSettings(
                type="fio-hist", path=str(Path(tail.path).parent)
            )
        return False

    # -- reading ---------------------------------------------------------------------------

    def pump(self, tail: Tail) -> int:
        """Read and ship every complete line now in the file; returns lines read.

        A file that is not a line log (no line end within 1 MiB, damaged gzip data) is
        quarantined whole; a ``.gz`` still being written is tried again later. Reading stops
        between chunks once :meth:`run_forever` is asked to stop (the rest is read next time).
        """
        n = 0
        if not self._still_there(tail):
            return n
        while not self._stopping.is_set() and not self.sink.refusing():
            started = time.perf_counter()
            try:
                chunk = tail.read(self.settings.shipper.read_chunk_bytes)
            except FileNotFoundError:
                self._retire(tail.key)
                return n
            except EOFError:
                log.info("%s: not complete yet; will retry", tail.path)
                return n
            except (LineTooLong, gzip.BadGzipFile, zlib.error) as err:
                self._quarantine_file(tail, ParseError(tail.path, tail.line_no + 1, str(err)))
                return n
            except OSError as err:
                log.warning("%s: cannot be read (%s); will retry", tail.path, err)
                return n
            if chunk.truncated:
                self._restart_truncated(tail)
                continue
            if not chunk.lines:
                tail.exhausted = tail.compressed
                return n
            n += len(chunk.lines)
            self._read_keys.add(tail.key)
            read_s = time.perf_counter() - started
            waited = self.sink.put_wait_s
            try:
                self._ship(tail, chunk)
            except ParseError as err:
                self._quarantine_file(tail, err)
                return n
            if self.monitor is not None:
                parse_s = time.perf_counter() - started - read_s - (self.sink.put_wait_s - waited)
                self.monitor.busy("read", len(chunk.lines), read_s)
                self.monitor.busy("parse", len(chunk.lines), max(parse_s, 0.0))
            if tail.compressed:
                tail.exhausted = True
                return n
        return n

    def _ship(self, tail: Tail, chunk: TailChunk) -> None:
        now_ms = self.clock() * 1000
        if isinstance(tail, EventsTail):
            tail.last_read_s = now_ms / 1000
        for res in tail.process(chunk, self.ctx, now_ms):
            self.summary.lines += 1
            if res.bad is not None:
                self.summary.bad_lines += 1
                log.warning("%s (kept in the dead-letter area)", res.bad.error)
                self.sink.deadletters.write_input(
                    res.ref.path, res.ref.line_no, res.bad.error.reason, res.bad.raw, "parse"
                )
            waits = len(res.docs) if res.pending is None else res.pending
            self.acks.track(tail.key, res.ref.line_no, res.ref.end_offset, waits)
            self._settle_lines(tail.key, res.holds, res.releases)
            for doc in res.docs:
                self.sink.add(doc)
            if not waits or res.releases:
                self._commit(tail.key)
            if self.sink.refusing():  # the rest of the chunk is read again next time
                break
        self.sink.poll()
        self._ship_rates()

    def _settle_lines(self, key: str, holds: Sequence[int], releases: Sequence[int]) -> None:
        """Lines that wait for one more acknowledgement each, then lines given one."""
        for end in holds:
            self.acks.hold(key, end)
        for end in releases:
            self.acks.ack(key, end)

    def _idle_events(self, final: bool = False) -> None:
        """Let quiet event logs flush what they hold; snapshot the workload models that are
        due (every one that changed, when ``final``)."""
        now = self.clock()
        for tail in list(self.tails.values()):
            if isinstance(tail, EventsTail):
                rel: Released = tail.idle(now, self.ctx, final=final)
                self._settle_lines(tail.key, rel.holds, rel.releases)
                for doc in rel.docs:
                    self.sink.add(doc)
                if rel.releases:
                    self._commit(tail.key)
        for _schema, model in self._models.values():
            if model.changed and (final or model.due(now)):
                for doc in model.snapshot(self.ctx, self._hostname, now):
                    self.sink.add(doc)

    def _restart_truncated(self, tail: Tail) -> None:
        log.warning("%s was truncated: reading it again from the start", tail.path)
        before = self.registry.get(tail.key)
        if before is not None and before.offset:
            self._truncated[tail.path] = before  # a copy of it may turn up (copytruncate)
        self.registry.reset(tail.key)
        self.acks.forget(tail.key)
        tail.restart()

    def _quarantine_file(self, tail: Tail, err: ParseError) -> None:
        """Copy a file that cannot be read at all to ``deadletter/files/`` (under its name, or
        ``name.N`` when another file of that name is there), note it with the reason, and
        read it no more."""
        self.summary.bad_files += 1
        dest = self.state_dir / "deadletter" / "files"
        dest.mkdir(parents=True, exist_ok=True)
        name = Path(tail.path).name
        kept, n = dest / name, 0
        while kept.exists():
            n += 1
            kept = dest / f"{name}.{n}"
        with contextlib.suppress(FileNotFoundError):
            shutil.copy2(tail.path, kept)
        self.sink.deadletters.write_input(tail.path, err.line_no, err.reason, b"", "parse")
        log.error("%s; the file is kept as %s and skipped", err, kept)
        self.registry.mark_done(tail.key)
        self._retire(tail.key)

    # -- acknowledgements ------------------------------------------------------------------

    def _on_ack(self, docs: Sequence[Document]) -> None:
        keys: set[str] = set()
        intervals: set[tuple[int, int]] = set()
        job_refs: list[LineRef] = []
        for doc in docs:
            if doc.index.startswith("metrics-fio.histogram-"):
                iv = doc.source["fio"]["interval"]
                intervals.add((int(iv["ms"]), int(iv["start_ms"])))
            for ref in doc.refs:
                if ref.file_key == JOB_KEY:
                    job_refs.append(ref)
                else:
                    try:
                        self.acks.ack(ref.file_key, ref.end_offset)
                    except (KeyError, ValueError):
                        # Delivered from the spool of an earlier process, or a second copy of
                        # a line read again after a restart: the line is settled either way.
                        log.debug("ack for %s:%s not tracked here", ref.path, ref.line_no)
                        continue
                    keys.add(ref.file_key)
        if job_refs:
            self.latency.acknowledged(job_refs)
        self.dirty.touch(intervals)
        for key in keys:
            self._commit(key)

    def _commit(self, key: str) -> None:
        tail = self.tails.get(key) or self._retired.get(key)
        while (c := self.acks.committable(key)) is not None:
            offset, line_no = c
            cursor = tail.take_snapshot(offset) if tail else None
            self.registry.commit(key, offset, line_no, cursor)

    # -- running ---------------------------------------------------------------------------

    def _drop_files(self) -> list[tuple[Path, DropSettings]]:
        """The drops' files, and files read before that were renamed (rotated) since to names
        the drops' patterns do not match (see :meth:`_renamed_while_away`)."""
        files = [
            (p, drop) for drop in self.settings.drops for p in self._watcher(drop).initial_scan()
        ]
        return files + self._renamed_while_away({str(p) for p, _ in files})

    def _renamed_while_away(self, scanned: set[str]) -> list[tuple[Path, DropSettings]]:
        """Files of the registry, not read to their end, that were renamed while iolens was not
        running to a name outside the drop's pattern (a rotation by rename): their remaining
        lines are still read. One ``scandir`` per directory that held such a file."""
        roots = [(Path(d.path), d) for d in self.settings.drops]
        by_dir: dict[Path, list[tuple[FileState, DropSettings]]] = {}
        for st in self.registry.all():
            path = Path(st.path)
            if st.done:
                continue
            drop = next((d for root, d in roots if root in path.parents), None)
            if drop is not None:
                by_dir.setdefault(path.parent, []).append((st, drop))
        found: list[tuple[Path, DropSettings]] = []
        for directory, states in by_dir.items():
            try:
                with os.scandir(directory) as entries:
                    inodes = {e.inode(): e.path for e in entries if e.is_file()}
            except OSError:
                continue
            for st, drop in states:
                new = inodes.get(int(st.key.split(":")[1]))
                if new is None or new in scanned:
                    continue
                with contextlib.suppress(OSError):
                    if self._identify(new) == st.key:
                        log.info("%s was renamed to %s while iolens was away", st.path, new)
                        found.append((Path(new), drop))
        return found

    def _watcher(self, drop: DropSettings) -> DropWatcher:
        """A watcher of one drop directory.

        Raises:
            ConfigError: the directory does not exist (the message names ``drops[].path``).
        """
        try:
            return DropWatcher(
                [Path(drop.path)],
                drop.glob,
                self.settings.shipper.observer,
                self.settings.shipper.poll_interval_s,
            )
        except FileNotFoundError as err:
            raise ConfigError(err.strerror) from None

    def ingest(self, files: Iterable[tuple[Path, DropSettings | None]]) -> None:
        """Discover and read the given files to their current end.

        Darshan logs are all handed to the worker pool first, so they are analysed in parallel
        while the files before them are shipped.
        """
        self.sink.queue.producer_idle(False)
        tails = [t for path, drop in files if (t := self.discover(path, drop)) is not None]
        for t in tails:
            if isinstance(t, DarshanTail):
                t.prefetch()
        for t in tails:
            self.pump(t)

    def _darshan_evidence(self, a: JobAnalysis) -> dict[str, Any]:
        return server_evidence(self.client, self.settings, a)

    def finish(self) -> RunSummary:
        """Flush, compute every dirty interval, flush again; returns the summary."""
        self._idle_events(final=True)
        self._ship_rates()
        self.sink.flush()
        for p in sorted(self._unidentified):
            log.warning("%s has no complete first line yet; it was not read", p)
        self._unidentified.clear()
        self.summary.intervals += self.latency.run(force=True)
        self.sink.flush()
        self.latency.supersede()
        self.summary.peer_windows += self.peer.run(force=True)
        if self.peer.thresholds is not None:
            self.sink.flush()
            self.summary.incidents += self.incident.run()
        self.sink.queue.producer_idle(True)
        return self.snapshot()

    def run_once(self, extra: Sequence[tuple[Path, DropSettings | None]] = ()) -> RunSummary:
        """Process what is in the drop directories (and ``extra``), flush and return.

        Whole-file inputs are read as they are (no wait for them to be stable). When the spool
        fills up (cluster away), reading stops and what found no room is let go unacknowledged
        (``RunSummary.unsent``), to be read again on the next run.
        """
        self.once = True
        self.sink.wait_when_full = False
        self.ingest([*self._drop_files(), *extra])
        return self.finish()

    def run_forever(self, stop: threading.Event) -> RunSummary:
        """Watch the drop directories until ``stop`` is set (reading stops at the next chunk;
        what was read is delivered before it returns).

        While the spool is full (cluster away), reading waits until the cluster takes
        documents again; a stop then lets what found no room go unacknowledged
        (``RunSummary.unsent``), to be read again on the next run.
        """
        self._stopping = stop
        self.sink.stop = stop
        drops = {str(Path(d.path)): d for d in self.settings.drops}
        watchers = [self._watcher(d) for d in self.settings.drops]
        for w in watchers:
            w.start()
        try:
            self.ingest(self._drop_files())
            next_tick = self.clock()
            while not stop.is_set():
                events: list[FileEvent] = []
                self.sink.queue.producer_idle(True)
                for w in watchers:
                    events += w.drain(timeout_s=0.2 / max(1, len(watchers)))
                self.sink.queue.producer_idle(False)
                self._handle(events, drops)
                for p, drop in list(self._unidentified.items()):
                    tail = self.discover(Path(p), drop)
                    if tail is not None:
                        self.pump(tail)
                self.sink.maybe_flush()
                if self.clock() >= next_tick:
                    for tail in list(self.tails.values()):
                        if not tail.exhausted:
                            self.pump(tail)
                    self._idle_events()
                    self._ship_rates()
                    self._health()
                    self.summary.intervals += self.latency.run()
                    self.summary.peer_windows += self.peer.run()
                    if self.peer.thresholds is not None:
                        self.summary.incidents += self.incident.run()
                    next_tick = self.clock() + self.settings.jobs.tick_s
        finally:
            for w in watchers:
                w.stop()
            self.sink.flush()
            self.latency.supersede()
        return self.snapshot()

    def _handle(self, events: Sequence[FileEvent], drops: dict[str, DropSettings]) -> None:
        for ev in events:
            path = ev.dest if ev.kind == "moved" and ev.dest is not None else ev.path
            if ev.kind == "deleted":
                key = self._by_path.get(str(ev.path))
                if key is not None:
                    self._retire(key)
                self._unidentified.pop(str(ev.path), None)
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
        s = self.summary
        s.files = len(self._read_keys)
        s.docs = {
            index: {
                "indexed": st.indexed,
                "duplicate": st.duplicate,
                "dead_lettered": st.dead_lettered,
            }
            for index, st in self.sink.stats().items()
        }
        s.dead_letters = dict(self.sink.deadletters.count())
        s.spooled = self.sink.spool.pending()
        s.unsent = self.sink.unsent + sum(st.unsent for st in self.sink.stats().values())
        return s

    def __enter__(self) -> MainJob:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Flush and release the registry and job state (also on leaving a ``with`` block)."""
        for _schema, model in self._models.values():
            model.save()
        if self.monitor is not None:
            self.monitor.stop()
        self.sink.stop.set()  # nothing waits for a full spool any more: the rest is let go
        self._ship_rates()
        self.sink.close()
        self.snapshot()  # the documents close() let go (spool full) count as unsent
        self.darshan_pool.close()
        self._lease.release()
        self.registry.close()
        self.dirty.close()
        self._lock.close()


def _lines_up_to(path: Path, offset: int, lines: int) -> bool:
    """Whether the first ``offset`` bytes of ``path`` are ``lines`` whole lines (the last one
    ending at ``offset``); False when the file is shorter or compressed, or cannot be read."""
    if path.suffix in (".gz", ".bz2", ".xz", ".zst"):
        return False
    try:
        with path.open("rb") as fh:
            count, left = 0, offset
            while left > 0:
                block = fh.read(min(left, 1 << 20))
                if not block:
                    return False
                count += block.count(b"\n")
                left -= len(block)
                last = block[-1:]
    except OSError:
        return False
    return count == lines and last == b"\n"


def lock_state_dir(state: Path) -> IO[str]:
    """Hold an exclusive lock on ``<state>/lock`` for the life of the process.

    Raises:
        ConfigError: another iolens process uses the state directory (two processes would
            commit each other's offsets).
    """
    fh = (state / "lock").open("a+")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        holder = fh.read().strip() or "unknown"
        fh.close()
        raise ConfigError(
            f"state directory {state} is in use by another iolens process (pid {holder}); "
            "stop it or pass another --state-dir"
        ) from None
    fh.seek(0)
    fh.truncate()
    fh.write(f"{os.getpid()}\n")
    fh.flush()
    return fh
