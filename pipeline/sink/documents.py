"""Documents: data stream names, deterministic ids and ECS fields (reference/elastic.md 1.2, 3).

Streams are named ``{type}-{dataset}-{namespace}``; ``event.dataset`` equals
``data_stream.dataset``; our own fields live under ``fio.*`` and derived ones under ``iolens.*``,
with units in the names (``clat_ns``, ``time_ms``). Ids are hashes of what identifies the
measurement, so a replay is a 409 (``create``), never a second copy.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar, cast

from pipeline import __version__
from pipeline.ids import doc_id
from pipeline.records.core import Document, LineRef
from pipeline.records.sources import (
    CommonAgent,
    CommonSource,
    FioLatencyFio,
    FioLatencyFioClatNs,
    FioLatencySource,
    IolensPeerAnomalyIolens,
    IolensPeerAnomalySource,
    IolensPersistenceSource,
)

ECS_VERSION = "8.11.0"
LATENCY_DATASET = "fio.latency"

V = TypeVar("V")


def stream_name(kind: str, dataset: str, namespace: str) -> str:
    """``{type}-{dataset}-{namespace}``, e.g. ``metrics-fio.histogram-default``."""
    return f"{kind}-{dataset}-{namespace}"


_SECONDS: dict[int, str] = {}
"""Seconds :func:`iso_ms` formatted lately -> their date and time: documents come in time
order, many in one second, and a document names a few seconds (when it happened, when it was
made); forgotten all at once past :data:`_SECONDS_KEPT`."""
_SECONDS_KEPT = 4096


def iso_ms(epoch_ms: int | float) -> str:
    """Epoch ms -> ``2026-11-22T05:11:00.123Z``: what ``datetime.fromtimestamp(epoch_ms / 1000,
    UTC).isoformat(timespec="milliseconds")`` writes, without ``+00:00`` (the fraction rounded
    to microseconds half to even, as :meth:`datetime.fromtimestamp` rounds, then truncated to
    ms); the date and time of a recent second are formatted once.

    Raises:
        ValueError, OverflowError: not a time :class:`datetime` can hold (NaN, infinite, a
            year out of range).
    """
    frac, whole = math.modf(epoch_ms / 1000)
    us = round(frac * 1e6)
    if us >= 1_000_000:
        us -= 1_000_000
        whole += 1.0
    elif us < 0:
        us += 1_000_000
        whole -= 1.0
    sec = int(whole)
    text = _SECONDS.get(sec)
    if text is None:
        text = datetime.fromtimestamp(sec, tz=UTC).isoformat()[:-6]
        if len(_SECONDS) >= _SECONDS_KEPT:
            _SECONDS.clear()
        _SECONDS[sec] = text
    return f"{text}.{us // 1000:03d}Z"


def drop_none(d: Mapping[str, V | None]) -> dict[str, V]:
    """``d`` without its None values (a new dict, same keys otherwise)."""
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class DocContext:
    """What every document of one iolens instance shares: its namespace and its writer.

    ``agent.*`` is the writer; ``host.name`` stays the observed host (a fio client, a LUN's
    server). Neither is part of any ``_id``: a record read by another instance, or another
    version, is the same document (a 409 on create).

    Attributes:
        namespace: the data streams' namespace.
        agent_name: ``agent.name``, the writing host (default: ``socket.gethostname()``).
        agent_id: ``agent.id``, kept across restarts (:mod:`pipeline.sink.agent_id`); None: none.
        agent_version: ``agent.version`` (default: the running iolens, ``pipeline.__version__``).
    """

    namespace: str = "default"
    agent_name: str = field(default_factory=socket.gethostname)
    agent_id: str | None = None
    agent_version: str = __version__

    def base(
        self, kind: str, dataset: str, when_ms: int | float, created_ms: float
    ) -> CommonSource:
        """ECS fields common to all our documents (``agent``: :meth:`agent`); a new dict, which
        a stream's document takes whole (``{**ctx.base(...), ...}``: every ``<Dataset>Source``
        of :mod:`pipeline.records.sources` has the common fields)."""
        return {
            "@timestamp": iso_ms(when_ms),
            "data_stream": {"type": kind, "dataset": dataset, "namespace": self.namespace},
            "event": {
                "kind": "metric",
                "module": dataset.split(".", 1)[0],
                "dataset": dataset,
                "created": iso_ms(created_ms),
            },
            "ecs": {"version": ECS_VERSION},
            "agent": self.agent(),
        }

    def agent(self) -> CommonAgent:
        """The ECS ``agent`` object: ``type`` (iolens), ``name``, ``version``, ``id`` if known."""
        agent: CommonAgent = {
            "type": "iolens",
            "name": self.agent_name,
            "version": self.agent_version,
        }
        if self.agent_id is not None:
            agent["id"] = self.agent_id
        return agent


@dataclass(frozen=True)
class LatencyKey:
    """What a merged-percentile document is about."""

    scope: str  # cluster | host | job
    host: str | None
    job: str | None
    ddir: str  # read | write | trim | mixed
    interval_start_ms: int
    interval_ms: int
    method: str  # window | flp
    prefix: str | None = None  # the job's write_hist_log prefix (job scope)


def latency_document(
    ctx: DocContext,
    key: LatencyKey,
    stats: Mapping[str, float | int | None],
    records: int,
    created_ms: float,
    refs: tuple[LineRef, ...] = (),
) -> Document:
    """One ``metrics-fio.latency`` document: merged percentiles of a scope x ddir x interval."""
    end = key.interval_start_ms + key.interval_ms
    source: FioLatencySource = {
        **ctx.base("metrics", LATENCY_DATASET, end, created_ms),
        **({} if key.host is None else {"host": {"name": key.host}}),
        "fio": _latency_fio(key, stats, records),
        "iolens": {"scope": key.scope, "method": key.method},
    }
    ident = _latency_id(key, stats, records)
    return Document(stream_name("metrics", LATENCY_DATASET, ctx.namespace), ident, source, refs)


def _latency_fio(
    key: LatencyKey, stats: Mapping[str, float | int | None], records: int
) -> FioLatencyFio:
    """The ``fio.*`` fields of a latency document.

    The percentiles of ``clat_ns`` (``p50`` ...) are named at run time from the configured
    ``fio.percentiles``, hence the cast: the stream's strict mapping checks their keys.
    """
    end = key.interval_start_ms + key.interval_ms
    fio: FioLatencyFio = {
        "ddir": key.ddir,
        "interval": {"start_ms": key.interval_start_ms, "end_ms": end, "ms": key.interval_ms},
        "clat_ns": cast(FioLatencyFioClatNs, drop_none(stats)),
        "records": records,
    }
    if key.job is not None:
        fio["job"] = key.job
    if key.prefix is not None:
        fio["prefix"] = key.prefix
    return fio


def _latency_id(key: LatencyKey, stats: Mapping[str, float | int | None], records: int) -> str:
    """The id of a latency document.

    The revision (records merged, samples) is part of the id: the same inputs give the same
    id (a replay is a 409); more inputs give a new document that supersedes the old one.
    """
    return doc_id(
        LATENCY_DATASET,
        key.scope,
        key.host,
        key.job,
        key.ddir,
        key.interval_start_ms,
        key.interval_ms,
        key.method,
        records,
        stats.get("samples"),
        *(() if key.prefix is None else (key.prefix,)),
    )


PEER_ANOMALY_DATASET = "iolens.peer_anomaly"
PERSISTENCE_DATASET = "iolens.persistence"


@dataclass(frozen=True)
class PeerVerdict:
    """One LUN in one comparison window (seed 001 section 4.2), in plain values.

    Attributes:
        group, metric: peer group and sysstat metric compared.
        host, device: the LUN (host x device).
        window_index: window number in the group's stream.
        start_s, end_s: window span (first and last sample ends, Unix s); span_s its length.
        score: 100 x the fraction of peers farther than the threshold (0-100).
        distance: the LUN's majority distance (the value compared with the threshold).
        threshold: trained threshold; bins: histogram bins of the window.
        anomalous: more than half of its peers are farther than the threshold.
        faulty: anomalous in k of the last 2k-1 windows.
        samples: smoothed samples of the LUN present in the window (None: not known).
        skipped: why the LUN was not compared in this window (``too_few_samples``: a gap in
            its data; ``too_few_peers``: fewer than 3 LUNs of the group had enough samples, or
            too few times in common), None when it was; a skipped LUN has no distance.
    """

    group: str
    metric: str
    host: str
    device: str
    window_index: int
    start_s: float
    end_s: float
    span_s: float
    score: float
    distance: float | None
    threshold: float
    bins: int
    anomalous: bool
    faulty: bool
    samples: int | None = None
    skipped: str | None = None


def peer_anomaly_document(ctx: DocContext, v: PeerVerdict, created_ms: float) -> Document:
    """One ``metrics-iolens.peer_anomaly`` document per LUN x window, named like Elastic ML
    ``record`` results (reference/sysstat.md 4.2): ``record_score``/``anomaly_score`` 0-100,
    ``actual`` = the LUN's distance, ``typical`` = the threshold, partitioned by peer group and
    split by metric. ``@timestamp`` is the window start (ML's bucket timestamp)."""
    source: IolensPeerAnomalySource = {
        **ctx.base("metrics", PEER_ANOMALY_DATASET, v.start_s * 1000, created_ms),
        "host": {"name": v.host},
        "system": {"diskio": {"name": v.device}},
        "iolens": _ml_record(v),
    }
    ident = doc_id(PEER_ANOMALY_DATASET, v.group, v.metric, v.host, v.device, f"{v.end_s:.3f}")
    return Document(stream_name("metrics", PEER_ANOMALY_DATASET, ctx.namespace), ident, source)


def _ml_record(v: PeerVerdict) -> IolensPeerAnomalyIolens:
    """The ``iolens.*`` fields of a peer-anomaly document: an Elastic ML ``record`` result,
    with the comparison's own values under ``peer``."""
    return {
        "result_type": "record",
        "job_id": f"peer-{v.metric}",
        "bucket_span": v.span_s,
        "partition_field_name": "iolens.peer.group",
        "partition_field_value": v.group,
        "by_field_name": "iolens.peer.metric",
        "by_field_value": v.metric,
        "actual": [] if v.distance is None else [v.distance],
        "typical": [v.threshold],
        "record_score": v.score,
        "anomaly_score": v.score,
        "anomalous": v.anomalous,
        "faulty": v.faulty,
        "peer": {
            "group": v.group,
            "metric": v.metric,
            "lun": f"{v.host}/{v.device}",
            "window_index": v.window_index,
            "window": {"start_s": v.start_s, "end_s": v.end_s},
            "fraction_exceeded": v.score / 100,
            "bins": v.bins,
            **({} if v.samples is None else {"samples": v.samples}),
            **({} if v.skipped is None else {"skipped": v.skipped}),
        },
    }


def persistence_document(
    ctx: DocContext,
    *,
    metric: str,
    group: str,
    host: str,
    device: str,
    hour_end_s: float,
    value: int,
    rank: int,
    created_ms: float,
) -> Document:
    """One ``metrics-iolens.persistence`` document per LUN x hour: the accumulator (seed 001
    section 4.3) at the end of the hour and the LUN's rank (1 = most persistent)."""
    source: IolensPersistenceSource = {
        **ctx.base("metrics", PERSISTENCE_DATASET, hour_end_s * 1000, created_ms),
        "host": {"name": host},
        "system": {"diskio": {"name": device}},
        "iolens": {
            "persistence": {
                "metric": metric,
                "group": group,
                "lun": f"{host}/{device}",
                "value": value,
                "rank": rank,
                "hour_end_s": hour_end_s,
            }
        },
    }
    ident = doc_id(PERSISTENCE_DATASET, metric, group, host, device, f"{hour_end_s:.0f}")
    return Document(stream_name("metrics", PERSISTENCE_DATASET, ctx.namespace), ident, source)
