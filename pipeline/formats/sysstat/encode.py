"""Disk samples -> ``metrics-sysstat.diskio`` documents, in Metricbeat's ``system.diskio`` names
and sysstat's own ``sar -d`` names."""

from __future__ import annotations

from pipeline.ids import doc_id
from pipeline.records.core import DiskSample, Document, LineRef
from pipeline.records.sources import (
    SysstatDiskioSource,
    SysstatDiskioSysstatDisk,
    SysstatDiskioSystemDiskio,
)
from pipeline.sink.documents import DocContext, stream_name

DISKIO_DATASET = "sysstat.diskio"


def diskio_document(
    ctx: DocContext, s: DiskSample, refs: tuple[LineRef, ...], created_ms: float
) -> Document:
    """One ``metrics-sysstat.diskio`` document per host x device x (downsampled) interval.

    Metricbeat's names (``system.diskio.name``, ``system.diskio.iostat.*`` in bytes, ms and %;
    reference/sysstat.md 4.1) plus sysstat's own under ``sysstat.disk`` (kB, as ``sar -d``
    prints them). ``@timestamp`` is the interval end; the id is host, device and interval end,
    so an interval rebuilt after a restart is recognised (409).
    """
    source: SysstatDiskioSource = {
        **ctx.base("metrics", DISKIO_DATASET, s.end_s * 1000, created_ms),
        "host": {"name": s.host},
        "metricset": {"period": round(s.interval_s * 1000)},
        "system": {"diskio": _metricbeat_diskio(s)},
        "sysstat": {"disk": _sysstat_disk(s)},
    }
    ident = doc_id(DISKIO_DATASET, s.host, s.device, f"{s.end_s:.3f}")
    return Document(stream_name("metrics", DISKIO_DATASET, ctx.namespace), ident, source, refs)


def _metricbeat_diskio(s: DiskSample) -> SysstatDiskioSystemDiskio:
    """Metricbeat's ``system.diskio`` fields of ``s`` (bytes, ms and %)."""
    return {
        "name": s.device,
        "iostat": {
            "request": {"per_sec": s.tps, "avg_size": s.areq_sz_kb * 1024},
            "read": {"per_sec": {"bytes": s.read_kb_per_s * 1024}},
            "write": {"per_sec": {"bytes": s.write_kb_per_s * 1024}},
            "discard": {"per_sec": {"bytes": s.discard_kb_per_s * 1024}},
            "queue": {"avg_size": s.aqu_sz},
            "await": s.await_ms,
            "busy": s.util_pct,
        },
    }


def _sysstat_disk(s: DiskSample) -> SysstatDiskioSysstatDisk:
    """sysstat's own ``sar -d`` fields of ``s`` (kB, as ``sar -d`` prints them)."""
    return {
        "tps": s.tps,
        "rkB_s": s.read_kb_per_s,
        "wkB_s": s.write_kb_per_s,
        "dkB_s": s.discard_kb_per_s,
        "areq_sz": s.areq_sz_kb,
        "aqu_sz": s.aqu_sz,
        "await": s.await_ms,
        "util": s.util_pct,
        "interval_s": s.interval_s,
    }
