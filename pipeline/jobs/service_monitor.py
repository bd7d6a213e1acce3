"""Online service rates of the pipeline's stages (seed 003, applied to iolens itself).

The main job's thread reads files, parses them and reduces them into documents (the *produce*
stage); the sender thread delivers them to Elasticsearch (the *sink* stage). Between them is
the bounded :class:`pipeline.sink.stage_queue.StageQueue`. A monitor thread per queue end
samples that end's counters once per sampling period and feeds a
:class:`pipeline.reducers.service_rate.ServiceRateEstimator`: the head (the sender's takes, in
periods when it never found the queue empty) estimates the sink's non-blocking service rate,
the tail (the main thread's puts, in periods when it never found the queue full) the produce
stage's. The queue also measures how long each end waited: the adaptive estimator then uses
periods with short waits too, over the time the stage worked (the seed method ignores it).
Each converged estimate is kept, written to ``<state_dir>/service_rates.json`` (what
``iolens status`` shows) and handed to the main job as a ``metrics-iolens.service_rate``
document.

The stages inside the main thread run back to back with no queue between them: reading
(``read``: complete lines out of the files) and parsing with reducing (``parse``: lines into
documents). Such a stage never waits for another while it works, so its non-blocking service
rate is measured exactly, as the lines it handled over the time it spent on them
(:meth:`ServiceMonitor.busy`; the time the parser waited for room in the sink's queue is not
its own). These rates are kept over the last ``THROUGHPUT_WINDOW_S`` of work.

*Utilisation* is a stage's throughput (items that went through its end per second over the
last ``THROUGHPUT_WINDOW_S``) over its estimated service rate; the *bottleneck* is the stage with
the highest utilisation. A stage whose end was blocked in most periods has few usable samples
(its estimate, if any, has low confidence): when the queue is full most of the time the sink
limits the pipeline, when it is empty most of the time the produce stage does, and that decides
when no utilisation is known.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from pipeline.reducers.seed_rate import SeedRateEstimator
from pipeline.reducers.service_rate import Estimate, RateEstimator, ServiceRateEstimator
from pipeline.settings import ServiceRateSettings
from pipeline.sink.disk import is_disk_full
from pipeline.sink.stage_queue import End, StageQueue

log = logging.getLogger(__name__)

THROUGHPUT_WINDOW_S = 10.0
"""Seconds of samples the throughput (and the blocked share) is taken over."""

STATE_FILE = "service_rates.json"
"""Where the current rates are written in the state directory."""

EstimateValues = dict[str, float | str | None]
"""An estimate as plain values: the fields of :class:`Estimate` (rates in items/s, periods in
s, ``confidence`` and ``estimator`` as strings), or for a measured stage only ``rate_per_s``
and ``confidence``."""


class StageRow(TypedDict):
    """One stage in a :class:`RatesSnapshot` (rates in items/s, shares in [0, 1]).

    Attributes:
        queue / end: the queue end a monitored stage is measured at; None for a stage of the
            main thread (measured, not estimated).
        estimate: its latest estimate (:data:`EstimateValues`); None before the first.
        estimates: converged estimates so far (0 for a measured stage).
        failures / method_failed: times the seed method failed at this end, and whether the
            latest outcome was such a failure (monitored stages only).
        throughput_per_s / blocked_share / utilisation: over the last
            ``THROUGHPUT_WINDOW_S``; None for a measured stage or while unknown.
        busy_s: seconds a measured stage spent working (measured stages only).
    """

    queue: str | None
    end: str | None
    estimate: EstimateValues | None
    estimates: int
    failures: NotRequired[int]
    method_failed: NotRequired[bool]
    throughput_per_s: float | None
    blocked_share: float | None
    utilisation: float | None
    busy_s: NotRequired[float]


class RatesSnapshot(TypedDict):
    """The current rates as plain values, as written to :data:`STATE_FILE` (JSON).

    Attributes:
        time: when they were taken, epoch s.
        stages: stage name -> its :class:`StageRow`.
        bottleneck: the stage that limits throughput now; None while unknown.
        within: the main-thread stage (``read``, ``parse``) that takes most of the produce
            stage's time when ``produce`` is the bottleneck; else None.
    """

    time: float
    stages: dict[str, StageRow]
    bottleneck: str | None
    within: str | None


@dataclass
class StageState:
    """What is known of one stage now.

    Attributes:
        stage: its name (``produce``, ``sink``).
        queue / end: the queue end it is measured at.
        estimate: the latest converged estimate (None before the first).
        estimates: converged estimates so far.
        failures: times the seed method concluded it cannot monitor this end.
        failed: the latest outcome was such a failure (``estimate`` is then the last
            converged one, kept as the best known).
        samples: recent ``(seconds, items, blocked)`` periods, for throughput and blocking.
    """

    stage: str
    queue: str
    end: End
    estimate: Estimate | None = None
    estimates: int = 0
    failures: int = 0
    failed: bool = False
    samples: deque[tuple[float, int, bool]] = field(default_factory=deque)

    def throughput(self) -> float | None:
        """Items per second through the end over the recent periods (None without any)."""
        span = sum(s for s, _n, _b in self.samples)
        return sum(n for _s, n, _b in self.samples) / span if span > 0 else None

    def blocked_share(self) -> float | None:
        """Share of the recent periods in which the end was blocked."""
        if not self.samples:
            return None
        return sum(b for _s, _n, b in self.samples) / len(self.samples)

    def utilisation(self) -> float | None:
        """Throughput over the estimated service rate (None when either is unknown)."""
        tp = self.throughput()
        if self.estimate is None or tp is None or self.estimate.rate_per_s <= 0:
            return None
        return tp / self.estimate.rate_per_s


@dataclass
class BusyStage:
    """A stage of the main thread, measured by the time it spends working.

    Attributes:
        stage: its name (``read``, ``parse``).
        work: recent ``(wall seconds when recorded, items, busy seconds)``.
    """

    stage: str
    work: deque[tuple[float, int, float]] = field(default_factory=deque)

    def rate(self) -> float | None:
        """Items per busy second over the recent work (None without any)."""
        busy = sum(b for _t, _n, b in self.work)
        return sum(n for _t, n, _b in self.work) / busy if busy > 0 else None

    def busy_s(self) -> float:
        """Busy seconds over the recent work."""
        return sum(b for _t, _n, b in self.work)


class ServiceMonitor:
    """A monitor thread per queue end, with an estimator each (see the module docstring).

    Args:
        ends: ``(stage, queue name, queue, end)`` of each end to watch.
        settings: sampling-period bounds.
        state_dir: where ``service_rates.json`` is written (None: not written).
        on_estimate: called (on the monitor's thread) with the stage's state and the outcome
            after each converged estimate and after the first failure of the seed method.
        clock: seconds, high resolution and monotonic.
        sleep: blocks for the given seconds.
    """

    def __init__(
        self,
        ends: list[tuple[str, str, StageQueue[Any], End]],
        settings: ServiceRateSettings,
        state_dir: Path | None = None,
        on_estimate: Callable[[StageState, Estimate], None] = lambda s, e: None,
        *,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.state_dir = state_dir
        self._on_estimate = on_estimate
        self._clock, self._sleep = clock, sleep
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.stages: dict[str, StageState] = {}
        self.busy_stages: dict[str, BusyStage] = {}
        self._watch: list[tuple[StageState, StageQueue[Any]]] = []
        for stage, qname, q, end in ends:
            st = StageState(stage, qname, end)
            self.stages[stage] = st
            self._watch.append((st, q))
        self._threads = [
            threading.Thread(
                target=self._run, args=(st, q), name=f"iolens-monitor-{st.stage}", daemon=True
            )
            for st, q in self._watch
        ]

    def start(self) -> None:
        """Start the monitor threads."""
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        """Stop the monitor threads and write the state file a last time."""
        self._stop.set()
        for t in self._threads:
            if t.is_alive():
                t.join()
        self._write_state()

    def _run(self, st: StageState, q: StageQueue[Any]) -> None:
        est = make_estimator(self.settings)
        q.take(st.end)  # start the first period clean
        start = self._clock()
        while not self._stop.is_set():
            target = start + est.period_s
            while (left := target - self._clock()) > 0 and not self._stop.is_set():
                self._sleep(min(left, 0.05))
            now = self._clock()
            counts = q.take(st.end)
            realised = now - start
            start = now
            with self._lock:
                st.samples.append((realised, counts.count, counts.blocked))
                span = sum(s for s, _n, _b in st.samples)
                while st.samples and span - st.samples[0][0] >= THROUGHPUT_WINDOW_S:
                    span -= st.samples.popleft()[0]
            waited = min(counts.waited_s, realised)
            estimate = est.observe(counts.count, counts.blocked, realised, waited)
            if estimate is not None:
                self._outcome(st, estimate)

    def _outcome(self, st: StageState, estimate: Estimate) -> None:
        """Keep a converged estimate, or count a failure of the seed method (said once per
        run of failures: a starved end fails again every few periods)."""
        with self._lock:
            told = st.failed
            if estimate.method_failed:
                st.failures += 1
                st.failed = True
            else:
                st.estimate, st.failed = estimate, False
                st.estimates += 1
        if estimate.method_failed and told:
            return
        if estimate.method_failed:
            log.info(
                "service rate of the %s stage (%s end of the %s queue): the seed method failed, "
                "no sampling period without waiting; the last estimate is kept. Set "
                "service_rate.method: adaptive to estimate it anyway",
                st.stage,
                st.end,
                st.queue,
            )
        self._write_state()
        self._on_estimate(st, estimate)

    def busy(self, stage: str, items: int, seconds: float) -> None:
        """Record that main-thread stage ``stage`` handled ``items`` in ``seconds`` of work."""
        now = self._clock()
        with self._lock:
            st = self.busy_stages.setdefault(stage, BusyStage(stage))
            st.work.append((now, items, seconds))
            while st.work and now - st.work[0][0] > THROUGHPUT_WINDOW_S:
                st.work.popleft()

    def limiting_part(self) -> str | None:
        """Of the main thread's stages, the one that took most of its working time."""
        with self._lock:
            busy = {name: st.busy_s() for name, st in self.busy_stages.items()}
        busy = {k: v for k, v in busy.items() if v > 0}
        return max(busy, key=lambda k: busy[k]) if busy else None

    def bottleneck(self) -> str | None:
        """The stage that limits throughput now (module docstring); None while unknown."""
        with self._lock:
            known = {s: st.utilisation() for s, st in self.stages.items()}
            util = {s: u for s, u in known.items() if u is not None}
            blocked = {s: st.blocked_share() for s, st in self.stages.items()}
        if (blocked.get("produce") or 0.0) >= 0.5:
            return "sink"  # the queue was full most of the time
        if (blocked.get("sink") or 0.0) >= 0.5:
            return "produce"  # the queue was empty most of the time
        return max(util, key=lambda s: util[s]) if util else None

    def snapshot(self) -> RatesSnapshot:
        """The current rates as plain values: per stage its estimate, throughput, blocked
        share and utilisation, and the bottleneck."""
        bottleneck = self.bottleneck()
        with self._lock:
            stages = {name: _estimated_row(st) for name, st in self.stages.items()}
            for name, bst in self.busy_stages.items():
                stages[name] = _measured_row(bst)
        part = self.limiting_part() if bottleneck == "produce" else None
        return {"time": time.time(), "stages": stages, "bottleneck": bottleneck, "within": part}

    def _write_state(self) -> None:
        if self.state_dir is None:
            return
        path = self.state_dir / STATE_FILE
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(self.snapshot(), indent=1), encoding="utf-8")
            os.replace(tmp, path)
        except OSError as err:
            tmp.unlink(missing_ok=True)
            if not is_disk_full(err):
                log.warning("cannot write %s: %s", path, err)
            # else: a full disk is said once by the sink; the rates are written again next time


def _estimated_row(st: StageState) -> StageRow:
    """A monitored queue end's stage as plain values: its estimate, throughput, blocked share
    and utilisation."""
    return {
        "queue": st.queue,
        "end": st.end,
        "estimate": asdict(st.estimate) if st.estimate is not None else None,
        "estimates": st.estimates,
        "failures": st.failures,
        "method_failed": st.failed,
        "throughput_per_s": st.throughput(),
        "blocked_share": st.blocked_share(),
        "utilisation": st.utilisation(),
    }


def _measured_row(bst: BusyStage) -> StageRow:
    """A stage of the main thread as plain values: its measured rate and busy time."""
    rate = bst.rate()
    measured: EstimateValues | None = (
        None if rate is None else {"rate_per_s": rate, "confidence": "exact"}
    )
    return {
        "queue": None,
        "end": None,
        "estimate": measured,
        "estimates": 0,
        "throughput_per_s": None,
        "blocked_share": None,
        "utilisation": None,
        "busy_s": bst.busy_s(),
    }


def make_estimator(settings: ServiceRateSettings) -> RateEstimator:
    """The estimator ``settings.method`` names, with its sampling-period bounds."""
    if settings.method == "seed":
        return SeedRateEstimator(t0_s=settings.t0_s, cap_s=settings.cap_s)
    return ServiceRateEstimator(t0_s=settings.t0_s, cap_s=settings.cap_s)


def read_state(state_dir: Path) -> RatesSnapshot | None:
    """The rates the last (or the running) pipeline wrote in ``state_dir``; None without any."""
    path = state_dir / STATE_FILE
    try:
        data: RatesSnapshot = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("%s is unreadable: %s", path, err)
        return None
    return data
