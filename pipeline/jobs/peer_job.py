"""Scheduled job: peer comparison of LUNs over the indexed sysstat data (seed 001, 4.2-4.3).

Each run (on the one instance holding the ``peer.<namespace>`` lease) reads the
``metrics-sysstat.diskio`` documents that arrived since its watermark and are older than
``peer.settle_s`` (so every server's data for a moment is in), lines each peer group up on the
common time grid, feeds the streaming detectors and the persistence accumulators, and indexes one
``metrics-iolens.peer_anomaly`` document per LUN x window and, at each UTC hour's end, one
``metrics-iolens.persistence`` document per LUN with a positive accumulator. Detector and
accumulator state, and the watermark, are saved in Elasticsearch only after every document of the
run was acknowledged; a run that fails is repeated from the old state with the same document ids.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

import numpy as np

from pipeline.formats.sysstat.encode import DISKIO_DATASET
from pipeline.jobs.peer_diagnosis import group_of, metric_field
from pipeline.jobs.peer_groups import PeerGroups
from pipeline.jobs.peer_samples import SYSSTAT_FIELDS, diskio_query, epoch_s, metric_values
from pipeline.records.core import Document
from pipeline.records.json import JsonObject, Query, Response, Source
from pipeline.reducers.peer_flags import WindowResult, skip_reason
from pipeline.reducers.peer_params import PeerParams
from pipeline.reducers.peer_stream import PeerDetector
from pipeline.reducers.peer_thresholds import Thresholds
from pipeline.reducers.persistence import Persistence
from pipeline.settings import PeerSettings
from pipeline.sink.documents import (
    DocContext,
    PeerVerdict,
    peer_anomaly_document,
    persistence_document,
    stream_name,
)
from pipeline.sink.lease import LeaseLost
from pipeline.sink.search import ClusterUnavailable

log = logging.getLogger(__name__)

Hits = Callable[[str, Query, list[Query]], Iterable[Response]]

Grid = dict[str, tuple[list[float], dict[str, dict[float, Source]]]]
"""Per peer group: its sorted sample times (epoch s) and, per LUN (``host/device``), its
``sysstat.disk`` objects by sample time."""


class PersistenceState(TypedDict):
    """One metric's persistence accumulator as saved in the job's state.

    Attributes:
        metric: the metric (:attr:`Persistence.metric`).
        values: accumulator per qualified LUN name (``group:host/device``), never negative;
            absent before the metric's first run.
    """

    metric: str | None
    values: NotRequired[dict[str, int]]


def load_thresholds(path: Path) -> Thresholds | None:
    """Thresholds from ``iolens train``, or None when the file does not exist.

    Raises:
        ValueError: the file is not a thresholds file.
    """
    if not path.exists():
        return None
    return Thresholds.from_dict(json.loads(path.read_text(encoding="utf-8")))


@dataclass
class PeerJob:
    """One scheduled peer-comparison job.

    Args:
        hits: paged search ``(index, query, sort) -> hits``.
        emit: adds a document to the sink.
        settle: flushes the sink; returns True when every document was acknowledged.
        peer: peer settings (metrics, parameters, groups, downsampling interval, settle time).
        thresholds: trained thresholds (None: the job waits for ``iolens train``).
        ctx: document context.
        lease: takes or renews the job's lease.
        load_state / save_state: the job's durable state (Elasticsearch ``iolens-state``).
        clock: wall-clock seconds (``event.created``; and where the settle cutoff starts).
        monotonic: monotonic seconds. The data taken is that older than ``peer.settle_s`` by
            the wall clock read at the first run and advanced by the monotonic clock since, so
            a wall clock stepped forward while iolens runs does not take windows whose samples
            are still arriving (and move the watermark past them), nor one stepped back stop
            the comparison for hours.
        refresh: makes a data stream's recent writes searchable.
        sysstat_drops: this instance ships sysstat data (say once that thresholds are missing).
        thresholds_path: where ``iolens train`` writes thresholds; while ``thresholds`` is None
            the job looks there on every run, so training during a run starts the comparison.
        groups: the peer groups; default: those of ``peer`` (reads ``peer.storage_map``).
        latest: ``(index, since_s) -> {host: its latest sample time, s}`` over the samples
            after ``since_s``: the comparison waits for a server that fell behind (at most
            ``peer.max_wait_s``); None: it does not wait.

    Raises:
        ConfigError: a bad ``peer.storage_map`` (when ``groups`` is not given).
    """

    hits: Hits
    emit: Callable[[Document], object]
    settle: Callable[[], bool]
    peer: PeerSettings
    thresholds: Thresholds | None
    ctx: DocContext
    lease: Callable[[], bool]
    load_state: Callable[[], JsonObject | None]
    save_state: Callable[[JsonObject], None]
    clock: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    refresh: Callable[[str], None] = lambda index: None
    sysstat_drops: bool = True
    thresholds_path: Path | None = None
    groups: PeerGroups | None = None
    latest: Callable[[str, float], Mapping[str, float]] | None = None
    windows: int = 0
    _warned: bool = field(default=False, repr=False)
    _anchor: tuple[float, float] | None = field(default=None, repr=False)
    """(wall, monotonic) seconds at the first run: see ``monotonic``."""

    def __post_init__(self) -> None:
        if self.groups is None:
            self.groups = PeerGroups.from_settings(self.peer)

    def _steady_now(self) -> float:
        """Wall-clock seconds that follow the monotonic clock since the first run."""
        if self._anchor is None:
            self._anchor = (self.clock(), self.monotonic())
        wall, mono = self._anchor
        return wall + self.monotonic() - mono

    @staticmethod
    def _load_new_thresholds(path: Path) -> Thresholds | None:
        """Thresholds trained while the job waited for them (``iolens train`` during a run)."""
        try:
            found = load_thresholds(path)
        except (ValueError, KeyError, OSError) as err:
            log.warning("%s: not a thresholds file yet (%s); the peer comparison waits", path, err)
            return None
        if found is not None:
            log.info("peer comparison starts with the thresholds in %s", path)
        return found

    @property
    def params(self) -> PeerParams:
        """The detector parameters."""
        p = self.peer
        return PeerParams(p.ma_width, p.win_size, p.win_shift, p.k, p.bin_cap)

    def run(self, force: bool = False) -> int:
        """Process the data that settled since the last run; returns windows evaluated.

        ``force`` also takes data younger than ``peer.settle_s`` (end of a ``--once`` run).
        """
        if self.thresholds is None and self.thresholds_path is not None:
            self.thresholds = self._load_new_thresholds(self.thresholds_path)
        if self.thresholds is None:
            if not self._warned:
                level = logging.WARNING if self.sysstat_drops else logging.DEBUG
                log.log(level, "peer comparison waits for thresholds: run iolens train")
                self._warned = True
            return 0
        try:
            if not self.lease():
                return 0
            return self._run(force)
        except ClusterUnavailable as err:
            log.warning("peer comparison postponed: %s", err)
            return 0
        except LeaseLost as err:
            log.warning("peer comparison left to the instance that holds it now: %s", err)
            return 0

    def _run(self, force: bool) -> int:
        state = self.load_state() or {}
        until = (
            math.inf if force else self._wait_for_servers(self._steady_now() - self.peer.settle_s)
        )
        grid = self._read(state.get("watermark_s"), until)
        if not grid:
            return 0
        created = self.clock() * 1000
        detectors: dict[str, JsonObject] = dict(state.get("detectors", {}))
        accumulators: dict[str, PersistenceState] = dict(state.get("persistence", {}))
        hours: dict[str, float | None] = dict(state.get("hour", {}))
        n = 0
        for metric in self.peer.metrics:
            results = self._detect(metric, grid, detectors)
            n += self._rank(metric, results, accumulators, hours, created)
        if not self.settle():
            log.warning("peer comparison: documents not all acknowledged; the run is repeated")
            return 0
        last = max(t for times, _ in grid.values() for t in times)
        self.save_state(
            {
                "watermark_s": last,
                "detectors": detectors,
                "persistence": accumulators,
                "hour": hours,
            }
        )
        self.windows += n
        return n

    def _wait_for_servers(self, until: float) -> float:
        """``until``, or earlier: the latest sample of the server furthest behind among those
        that sent any within ``peer.max_wait_s`` (a server cut off from the cluster delivers
        its samples late; the windows wait for them rather than skip them)."""
        if self.latest is None:
            return until
        index = stream_name("metrics", DISKIO_DATASET, self.ctx.namespace)
        latest = self.latest(index, until - self.peer.max_wait_s)
        behind = {host: t for host, t in latest.items() if t < until}
        if not behind:
            return until
        host = min(behind, key=lambda h: behind[h])
        log.debug("peer comparison waits for %s (samples up to %s)", host, behind[host])
        return behind[host]

    def _rank(
        self,
        metric: str,
        results: list[WindowResult],
        accumulators: dict[str, PersistenceState],
        hours: dict[str, float | None],
        created: float,
    ) -> int:
        """Emit the windows of ``metric`` and feed its persistence accumulator, emitting the
        ranking at the end of each ranking period; returns the windows."""
        acc = Persistence(**accumulators.get(metric, {"metric": metric}))
        hour = hours.get(metric)
        every = self.peer.ranking_every_s
        for r in results:
            hour_end = math.ceil(r.end_s / every) * every
            if hour is not None and hour_end > hour:
                self._emit_hour(metric, acc, hour, created)
            hour = hour_end
            acc.update(r)
            self._emit_window(r, created)
        accumulators[metric] = {"metric": metric, "values": acc.values}
        hours[metric] = hour
        return len(results)

    def _read(self, watermark: float | None, until: float) -> Grid:
        """Per peer group: sorted sample times and, per LUN, its samples by time."""
        index = stream_name("metrics", DISKIO_DATASET, self.ctx.namespace)
        sort: list[Query] = [
            {"@timestamp": "asc"},
            {"host.name": "asc"},
            {"system.diskio.name": "asc"},
        ]
        groups: dict[str, tuple[set[float], dict[str, dict[float, Source]]]] = {}
        self.refresh(index)
        query = diskio_query(self.peer.downsample_s, watermark, until)
        for hit in self.hits(index, query, sort):
            src = hit["_source"]
            host, device = src["host"]["name"], src["system"]["diskio"]["name"]
            end_s = epoch_s(src["@timestamp"])
            group = group_of(host, device, self.groups or self.peer.groups)
            times, luns = groups.setdefault(group, (set(), defaultdict(dict)))
            times.add(end_s)
            luns[f"{host}/{device}"][end_s] = src["sysstat"]["disk"]
        return {g: (sorted(t), luns) for g, (t, luns) in groups.items()}

    def _detect(
        self,
        metric: str,
        grid: Grid,
        detectors: dict[str, JsonObject],
    ) -> list[WindowResult]:
        field_name = SYSSTAT_FIELDS[metric_field(metric)[0]]
        scale = metric_field(metric)[1]
        out: list[WindowResult] = []
        for group, (times, samples) in sorted(grid.items()):
            key = f"{group}\x1f{metric}"
            det = self._detector(group, metric, set(samples), detectors.get(key))
            if det is None:
                continue
            values, present = metric_values(det.luns, times, samples, field_name, scale)
            keep = np.asarray(times) > det.last_time_s
            out += det.add(np.asarray(times)[keep], values[:, keep], present[:, keep])
            detectors[key] = det.state()
        out.sort(key=lambda r: (r.end_s, r.group))
        return out

    def _detector(
        self, group: str, metric: str, seen: set[str], saved: JsonObject | None
    ) -> PeerDetector | None:
        """The group's detector: the saved one while no new LUN appeared in ``seen``, else a
        new one (None for fewer than 3 LUNs or a group without a threshold)."""
        assert self.thresholds is not None
        known = set(saved["luns"]) if saved is not None else set()
        if saved is not None and seen <= known:
            # a LUN without a sample in this batch is missing there, as in the offline path
            return PeerDetector.restore(group, metric, saved)
        luns = tuple(sorted(known | seen))
        if len(luns) < 3:
            return None
        if saved is not None:
            log.info("peer group %s has new LUNs: its comparison starts over", group)
        try:
            threshold = self.thresholds.get(group, metric)
        except KeyError as err:
            log.warning("%s", err.args[0])
            return None
        return PeerDetector(group, metric, luns, threshold, self.params)

    def _emit_window(self, r: WindowResult, created: float) -> None:
        span = r.end_s - r.start_s + self.peer.downsample_s
        for i, lun in enumerate(r.luns):
            host, device = lun.split("/", 1)
            self.emit(
                peer_anomaly_document(
                    self.ctx,
                    PeerVerdict(
                        group=r.group,
                        metric=r.metric,
                        host=host,
                        device=device,
                        window_index=r.index,
                        start_s=r.start_s,
                        end_s=r.end_s,
                        span_s=span,
                        score=float(r.scores[i]),
                        distance=None if lun in r.skipped else float(r.majority_distances[i]),
                        threshold=r.threshold,
                        bins=r.bins,
                        anomalous=lun in r.anomalous,
                        faulty=lun in r.faulty,
                        samples=r.samples[i] if r.samples else None,
                        skipped=skip_reason(r, lun, self.params.min_samples),
                    ),
                    created,
                )
            )

    def _emit_hour(self, metric: str, acc: Persistence, hour_end: float, created: float) -> None:
        for rank, (name, value) in enumerate(acc.ranking(), start=1):
            group, lun = name.split(":", 1)
            host, device = lun.split("/", 1)
            self.emit(
                persistence_document(
                    self.ctx,
                    metric=metric,
                    group=group,
                    host=host,
                    device=device,
                    hour_end_s=hour_end,
                    value=value,
                    rank=rank,
                    created_ms=created,
                )
            )
