"""Delivery to Elasticsearch: bulk indexing, retries, spool, and the stages' service rates."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pipeline.settings.base import Frozen


class SinkSettings(Frozen):
    """Bulk indexing, retries, spool and dead letters, and how long a stop may drain."""

    chunk_max_docs: int = Field(500, gt=0, description="Send a bulk request at this many docs.")
    chunk_max_bytes: int = Field(10 << 20, gt=0, description="...or at this many bytes of NDJSON.")
    flush_interval_s: float = Field(1.0, gt=0, description="...or this long after the first doc.")
    max_retries: int = Field(8, ge=0, description="Retries of 429/5xx items before spooling.")
    backoff_initial_s: float = Field(0.5, gt=0, description="First retry delay.")
    backoff_max_s: float = Field(30.0, gt=0, description="Cap of the retry delay.")
    spool_max_bytes: int = Field(
        1 << 30,
        gt=0,
        description="Most bytes of undelivered documents kept in the on-disk spool while "
        "Elasticsearch is away; when it is full, reading waits (nothing is dropped).",
    )
    queue_docs: int = Field(
        10000,
        gt=0,
        description="Most documents waiting between the reading thread and the sink's sender "
        "thread; reading waits when it is full, so memory stays bounded when Elasticsearch is "
        "slow.",
    )
    drain_timeout_s: float = Field(
        120.0,
        gt=0,
        description="After SIGTERM or SIGINT, how long iolens run may drain (deliver what it "
        "holds, commit offsets) before it exits anyway, with status 75; what was not "
        "acknowledged is read again on the next start. The systemd unit's TimeoutStopSec is "
        "this plus 30 s.",
    )


class ServiceRateSettings(Frozen):
    """Online non-blocking service rates of the pipeline's stages (seed 003)."""

    enabled: bool = Field(
        True,
        description="Sample the queue between reading and the sink and estimate both stages' "
        "service rates (metrics-iolens.service_rate, iolens status).",
    )
    method: Literal["adaptive", "seed"] = Field(
        "adaptive",
        description="Estimator: 'adaptive' (tuned for a sleeping monitor thread; the mean of "
        "clean periods when most are clean) or 'seed' (seed 003 as written: the period grows "
        "only after clean, stable periods, else the method reports that it failed; the running "
        "mean of the 90 % quantile).",
    )
    t0_s: float = Field(
        0.05,
        gt=0,
        description="First sampling period (it doubles while it is tuned). A sleeping Python "
        "monitor cannot keep periods much shorter.",
    )
    cap_s: float = Field(
        2.0,
        gt=0,
        description="Longest sampling period: it should span several bulk requests, since the "
        "sink takes documents a bulk request at a time.",
    )
    target_bulk_s: float = Field(
        0.5,
        gt=0,
        description="Bulk requests hold about this much of the sink's measured service rate "
        "(at most sink.chunk_max_docs documents).",
    )
