"""The diskio samples the scheduled peer comparison reads (:mod:`pipeline.jobs.peer_job`): the
query of a time range, and a metric's values on a peer group's common time grid."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from pipeline.records.core import svctm_ms
from pipeline.records.json import Query, Source

SYSSTAT_FIELDS = {
    "tps": "tps",
    "read_kb_per_s": "rkB_s",
    "write_kb_per_s": "wkB_s",
    "discard_kb_per_s": "dkB_s",
    "areq_sz_kb": "areq_sz",
    "aqu_sz": "aqu_sz",
    "await_ms": "await",
    "util_pct": "util",
    "svctm_ms": "svctm",
}
"""DiskSample field -> its name under ``sysstat.disk`` in the diskio documents."""


def _disk_value(disk: Source, name: str) -> float:
    """One ``sysstat.disk`` value of a diskio document; ``svctm`` derived from util and tps."""
    if name == "svctm":
        return svctm_ms(float(disk["util"]), float(disk["tps"]))
    return float(disk[name])


def epoch_s(iso: str) -> float:
    """Unix seconds of an ISO 8601 ``@timestamp``."""
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def diskio_query(span_s: float, watermark: float | None, until: float) -> Query:
    """The diskio documents of ``span_s`` intervals after ``watermark`` up to ``until`` (s)."""
    rng: dict[str, int | str] = {}
    if watermark is not None:
        rng["gt"] = int(watermark * 1000)
    if math.isfinite(until):
        rng["lte"] = int(until * 1000)
    filters: list[Query] = [{"term": {"sysstat.disk.interval_s": span_s}}]
    if rng:
        rng["format"] = "epoch_millis"
        filters.append({"range": {"@timestamp": rng}})
    return {"bool": {"filter": filters}}


def metric_values(
    luns: Sequence[str],
    times: Sequence[float],
    samples: Mapping[str, Mapping[float, Source]],
    field_name: str,
    scale: float,
) -> tuple[np.ndarray, np.ndarray]:
    """``(values, present)``, shape ``(n_luns, n_times)``, of one field: ``present`` False (and
    the value 0) where a LUN has no sample, which is missing data, not an idle LUN."""
    values = np.zeros((len(luns), len(times)))
    present = np.zeros(values.shape, dtype=bool)
    for row, lun in enumerate(luns):
        for col, t in enumerate(times):
            s = samples.get(lun, {}).get(t)
            if s is not None:
                values[row, col] = _disk_value(s, field_name) * scale
                present[row, col] = True
    return values, present
