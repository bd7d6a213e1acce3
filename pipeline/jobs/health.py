"""The pipeline's own metrics: service-rate estimates and health documents.

The service-rate monitor (:class:`~pipeline.jobs.service_monitor.ServiceMonitor`) estimates on
its own thread how fast each stage serves (produce: reading and parsing; sink: bulk requests);
each converged estimate sizes the sink's bulk requests and becomes a
``metrics-iolens.service_rate`` document, queued here and sent on the main thread. Every tick a
``metrics-iolens.pipeline`` document reports lag, queue, spool and dead letters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from pathlib import Path

from pipeline.jobs.service_monitor import ServiceMonitor, StageState
from pipeline.records.core import Document
from pipeline.records.sources import (
    IolensPipelineIolensPipeline,
    IolensServiceRateIolensServiceRate,
)
from pipeline.reducers.service_rate import Estimate
from pipeline.settings import ServiceRateSettings
from pipeline.sink.clock_offset import ClockWatch
from pipeline.sink.documents import DocContext
from pipeline.sink.rate_documents import pipeline_document, service_rate_document
from pipeline.sink.sender import AsyncSink


class Health:
    """Service rates and health documents of one main job.

    Args:
        sink: the job's sink (its queue is measured; documents go there).
        settings: ``service_rate`` (the monitor runs when enabled).
        state_dir: where the monitor keeps its state.
        ctx: the documents' namespace; hostname: their ``host.name``.
        clock: wall-clock seconds.
        files: how many files were read so far.
    """

    def __init__(
        self,
        sink: AsyncSink,
        settings: ServiceRateSettings,
        state_dir: Path,
        ctx: DocContext,
        hostname: str,
        clock: Callable[[], float],
        files: Callable[[], int],
    ) -> None:
        self.sink, self.ctx, self.hostname, self.clock, self.files = (
            sink,
            ctx,
            hostname,
            clock,
            files,
        )
        self._rate_docs: deque[Document] = deque()
        self.clock_watch: ClockWatch | None = None
        """Measures this host's clock against the cluster's (set by the main job)."""
        letters = sink.deadletters.count()
        self._letters_seen = letters["documents"] + letters["inputs"]
        self.monitor: ServiceMonitor | None = None
        if settings.enabled:
            q = sink.queue
            self.monitor = ServiceMonitor(
                [("produce", "sink", q, "tail"), ("sink", "sink", q, "head")],
                settings,
                state_dir,
                self._rate_estimated,
            )
            self.monitor.start()

    def _rate_estimated(self, st: StageState, outcome: Estimate) -> None:
        """A stage's service rate converged, or the seed method failed (on the monitor's
        thread): size bulk requests by the sink's rate, and queue the outcome's document for
        the main thread."""
        assert self.monitor is not None
        bottleneck = self.monitor.bottleneck()
        if st.stage == "sink" and not outcome.method_failed:
            self.sink.set_rate(outcome.rate_per_s)
        values = outcome_values(st, outcome, bottleneck)
        now_ms = self.clock() * 1000
        doc = service_rate_document(self.ctx, self.hostname, st.stage, values, now_ms, now_ms)
        self._rate_docs.append(doc)
        if st.stage == "produce" and not outcome.method_failed:
            self._part_rates(bottleneck, now_ms)

    def _part_rates(self, bottleneck: str | None, now_ms: float) -> None:
        """The produce stage's parts (read, parse), measured by their working time."""
        assert self.monitor is not None
        snap = self.monitor.snapshot()
        for name in ("read", "parse"):
            part = snap["stages"].get(name)
            rate = (
                None if part is None or part["estimate"] is None else part["estimate"]["rate_per_s"]
            )
            if part is None or not isinstance(rate, float | int):
                continue
            values: IolensServiceRateIolensServiceRate = {
                "method": "busy_time",
                "rate_per_s": rate,
                "confidence": "exact",
                "busy_s": part["busy_s"],
                "bottleneck": bottleneck == "produce" and snap["within"] == name,
            }
            doc = service_rate_document(self.ctx, self.hostname, name, values, now_ms, now_ms)
            self._rate_docs.append(doc)

    def report(self) -> None:
        """A ``metrics-iolens.pipeline`` document: lag, queue, spool and dead letters (every
        tick of the main job's loop)."""
        acknowledged, lag_mean, lag_max = self.sink.take_lag()
        letters = self.sink.deadletters.count()
        total = letters["documents"] + letters["inputs"]
        values: IolensPipelineIolensPipeline = {
            "acknowledged": acknowledged,
            "queued": len(self.sink.queue),
            "spooled": self.sink.spool.pending(),
            "spool_bytes": self.sink.spool.size(),
            "spool_full": self.sink.sink.full(),
            "dead_letters": total,
            "dead_letters_new": max(0, total - self._letters_seen),
            "files": self.files(),
        }
        self._letters_seen = total
        if lag_mean is not None and lag_max is not None:
            values |= {"lag_mean_s": lag_mean, "lag_max_s": lag_max}
        if self.clock_watch is not None and (offset := self.clock_watch.check()) is not None:
            values["clock_offset_s"] = round(offset.offset_s, 4)
        if self.monitor is not None and (limit := self.monitor.bottleneck()) is not None:
            values["bottleneck"] = limit
        now_ms = self.clock() * 1000
        self.sink.add(pipeline_document(self.ctx, self.hostname, values, now_ms))

    def ship_rates(self) -> None:
        """Send the service-rate documents the monitor made (on this, the main, thread)."""
        while self._rate_docs:
            self.sink.add(self._rate_docs.popleft())

    def stop(self) -> None:
        """Stop the monitor."""
        if self.monitor is not None:
            self.monitor.stop()


def outcome_values(
    st: StageState, outcome: Estimate, bottleneck: str | None
) -> IolensServiceRateIolensServiceRate:
    """The ``iolens.service_rate.*`` fields of a queue end's outcome: a converged estimate,
    or a failure of the seed method (which has no rate fields)."""
    values: IolensServiceRateIolensServiceRate = {
        "queue": st.queue,
        "end": st.end,
        "method": "online_estimate",
        "estimator": outcome.estimator,
        "method_failed": outcome.method_failed,
        "converged": outcome.converged,
        "throughput_per_s": st.throughput(),
        "blocked_share": st.blocked_share(),
        "bottleneck": bottleneck == st.stage,
    }
    if outcome.method_failed:
        return values
    return values | {
        "rate_per_s": outcome.rate_per_s,
        "mean_per_s": outcome.mean_per_s,
        "quantile_per_s": outcome.quantile_per_s,
        "usable_fraction": outcome.usable_fraction,
        "confidence": outcome.confidence,
        "period_s": outcome.period_s,
        "samples": outcome.samples,
        "utilisation": st.utilisation(),
    }
