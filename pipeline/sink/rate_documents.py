"""``metrics-iolens.service_rate`` documents: one per stage and converged estimate (seed 003)."""

from __future__ import annotations

from pipeline.ids import doc_id
from pipeline.records.core import Document
from pipeline.records.sources import (
    IolensPipelineIolensPipeline,
    IolensPipelineSource,
    IolensServiceRateIolensServiceRate,
    IolensServiceRateSource,
)
from pipeline.sink.documents import DocContext, stream_name

RATE_DATASET = "iolens.service_rate"


def service_rate_document(
    ctx: DocContext,
    host: str,
    stage: str,
    values: IolensServiceRateIolensServiceRate,
    when_ms: float,
    created_ms: float,
) -> Document:
    """The document of one converged estimate of ``stage`` on ``host``.

    Args:
        values: ``iolens.service_rate.*`` fields: ``queue``, ``end``, ``rate_per_s``,
            ``mean_per_s``, ``quantile_per_s``, ``converged``, ``usable_fraction``,
            ``confidence``, ``period_s``, ``samples``, ``throughput_per_s`` (items/s),
            ``method`` (``online_estimate``, or ``busy_time`` for the main thread's stages,
            with ``busy_s``), ``estimator`` (``adaptive`` or ``seed``), ``method_failed``
            (the seed method failed: no rate fields),
            ``blocked_share``, ``utilisation``, ``bottleneck``.
        when_ms: when the estimate converged (epoch ms); with host and stage, its id.
    """
    source: IolensServiceRateSource = {
        **ctx.base("metrics", RATE_DATASET, when_ms, created_ms),
        "host": {"name": host},
        "iolens": {"service_rate": {"stage": stage, **values}},
    }
    index = stream_name("metrics", RATE_DATASET, ctx.namespace)
    return Document(index, doc_id(RATE_DATASET, host, stage, round(when_ms)), source, ())


PIPELINE_DATASET = "iolens.pipeline"


def pipeline_document(
    ctx: DocContext, host: str, values: IolensPipelineIolensPipeline, when_ms: float
) -> Document:
    """A ``metrics-iolens.pipeline`` document: the pipeline's health on ``host`` at ``when_ms``.

    Args:
        values: ``iolens.pipeline.*``: ``acknowledged`` (documents since the previous one),
            ``lag_mean_s`` / ``lag_max_s`` (from reading to acknowledgement), ``queued``,
            ``spooled`` (documents), ``spool_bytes``, ``spool_full`` (reading waits for the
            cluster), ``dead_letters`` and ``dead_letters_new`` (since the previous one),
            ``files``, ``bottleneck`` (the stage that limits, when known), ``clock_offset_s``
            (the cluster's clock minus this host's, s: :mod:`pipeline.sink.clock_offset`).
    """
    source: IolensPipelineSource = {
        **ctx.base("metrics", PIPELINE_DATASET, when_ms, when_ms),
        "host": {"name": host},
        "iolens": {"pipeline": values},
    }
    index = stream_name("metrics", PIPELINE_DATASET, ctx.namespace)
    return Document(index, doc_id(PIPELINE_DATASET, host, round(when_ms)), source, ())
