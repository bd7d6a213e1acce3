"""Offline peer diagnosis of LUNs from sysstat recordings (seed 001): files -> ranked LUNs.

Steps: read each file and downsample every host x device exactly to ``downsample_s``
(:mod:`pipeline.jobs.peer_recording`), put LUNs in peer
groups, line each group up on the common time grid, compare peers per window
(:mod:`pipeline.reducers.peer_params` lists the stages) and order LUNs by persistence
(:mod:`pipeline.reducers.persistence`).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from pipeline.errors import ConfigError
from pipeline.formats.sysstat.downsample_columns import SampleColumns
from pipeline.jobs.peer_groups import PeerGroups, as_groups
from pipeline.jobs.peer_recording import Recording, coarsened, shortfall
from pipeline.records.core import DiskSample
from pipeline.reducers.peer_flags import WindowResult, detect
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_thresholds import Thresholds
from pipeline.reducers.peer_thresholds import train_thresholds as train_series

log = logging.getLogger(__name__)

METRICS: dict[str, tuple[str, float]] = {
    # sysstat 12.6 names (sar -d / sadf -d) -> DiskSample field, scale
    "tps": ("tps", 1.0),
    "rkB/s": ("read_kb_per_s", 1.0),
    "wkB/s": ("write_kb_per_s", 1.0),
    "dkB/s": ("discard_kb_per_s", 1.0),
    "areq-sz": ("areq_sz_kb", 1.0),
    "aqu-sz": ("aqu_sz", 1.0),
    "await": ("await_ms", 1.0),
    "%util": ("util_pct", 1.0),
    # the seed's (older sysstat) names: 512-byte sectors
    "rd_sec": ("read_kb_per_s", 2.0),
    "wr_sec": ("write_kb_per_s", 2.0),
    "avgrq-sz": ("areq_sz_kb", 2.0),
    "avgqu-sz": ("aqu_sz", 1.0),
    "util": ("util_pct", 1.0),
    # derived from %util and tps of the same sample (sysstat dropped svctm in 12.1.2)
    "svctm": ("svctm_ms", 1.0),
}
"""Metric names accepted on the command line and in ``peer.metrics``."""


def metric_field(name: str) -> tuple[str, float]:
    """``(DiskSample field, scale)`` of a metric name.

    Raises:
        ConfigError: an unknown name (the message lists the known ones).
    """
    try:
        return METRICS[name]
    except KeyError:
        raise ConfigError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}") from None


def group_of(host: str, device: str, groups: Mapping[str, str] | PeerGroups) -> str:
    """Peer group of a LUN (:mod:`pipeline.jobs.peer_groups`): ``groups`` assigns it, or is a
    mapping of ``"host:device"`` globs to group names (first match wins, else the host)."""
    return as_groups(groups).of(host, device)


def series(
    rec: Recording,
    metric: str,
    groups: Mapping[str, str] | PeerGroups,
    *,
    since_s: float | None = None,
    until_s: float | None = None,
) -> list[PeerSeries]:
    """One :class:`PeerSeries` per peer group with at least 3 LUNs, on the group's time grid.

    A LUN without a sample at a grid time (its server's sadc was not running, a file is
    missing or was cut by a restart) is missing there (``PeerSeries.present``), not idle:
    sysstat reports a device that did nothing with zeros, so an absent row is no data. Groups
    of fewer than 3 LUNs are skipped with a warning.
    """
    field, scale = metric_field(metric)
    out = []
    for group, luns in sorted(members_of(rec, groups).items()):
        if len(luns) < 3:
            log.warning(
                "peer group %s has %s LUN(s) (%s); at least 3 are needed: not compared",
                group,
                len(luns),
                ", ".join(sorted(luns)),
            )
            continue
        block = _block(rec, luns, group, field, scale, since_s, until_s)
        if block is None:
            continue
        out.append(PeerSeries(group, metric, tuple(luns), *block))
    return out


def members_of(rec: Recording, groups: Mapping[str, str] | PeerGroups) -> dict[str, list[str]]:
    """The LUNs of the recording by peer group, sorted."""
    groups = as_groups(groups)
    members: dict[str, list[str]] = defaultdict(list)
    for lun in sorted(rec.samples):
        host, device = lun.split("/", 1)
        members[group_of(host, device, groups)].append(lun)
    return members


def _block(
    rec: Recording,
    luns: Sequence[str],
    group: str,
    field: str,
    scale: float,
    since_s: float | None,
    until_s: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``(times, values, present)`` of a group on its grid, or None without a time in range;
    ``present`` is False (and the value 0) where a LUN has no sample at a grid time; LUNs at
    different intervals are compared at the coarsest (:func:`coarsened`)."""
    if len({rec.interval_of(lun) for lun in luns}) > 1:
        mixed = coarsened(rec, luns, group)
        return _sample_block([mixed[lun] for lun in luns], field, scale, since_s, until_s)
    columns = [rec.samples[lun] for lun in luns]
    if all(isinstance(c, SampleColumns) for c in columns):
        return _columnar_block(
            [c for c in columns if isinstance(c, SampleColumns)], field, scale, since_s, until_s
        )
    return _sample_block(columns, field, scale, since_s, until_s)


def _sample_block(
    columns: Sequence[Sequence[DiskSample]],
    field: str,
    scale: float,
    since_s: float | None,
    until_s: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_block` over each LUN's samples as :class:`DiskSample` objects."""
    times = sorted(
        {
            s.end_s
            for samples in columns
            for s in samples
            if (since_s is None or s.end_s > since_s) and (until_s is None or s.end_s <= until_s)
        }
    )
    if not times:
        return None
    index = {t: i for i, t in enumerate(times)}
    values = np.zeros((len(columns), len(times)), dtype=np.float64)
    present = np.zeros(values.shape, dtype=bool)
    for row, samples in enumerate(columns):
        for s in samples:
            col = index.get(s.end_s)
            if col is not None:
                values[row, col] = getattr(s, field) * scale
                present[row, col] = True
    return np.array(times), values, present


def _columnar_block(
    columns: Sequence[SampleColumns],
    field: str,
    scale: float,
    since_s: float | None,
    until_s: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    lo = -np.inf if since_s is None else since_s
    hi = np.inf if until_s is None else until_s
    masks = [(c.end_s > lo) & (c.end_s <= hi) for c in columns]
    times = np.unique(np.concatenate([c.end_s[m] for c, m in zip(columns, masks, strict=True)]))
    if len(times) == 0:
        return None
    values = np.zeros((len(columns), len(times)), dtype=np.float64)
    present = np.zeros(values.shape, dtype=bool)
    for row, (c, m) in enumerate(zip(columns, masks, strict=True)):
        cols = np.searchsorted(times, c.end_s[m])
        values[row, cols] = c.column(field)[m] * scale
        present[row, cols] = True
    return times, values, present


def train(
    rec: Recording,
    metrics: Sequence[str],
    groups: Mapping[str, str] | PeerGroups,
    params: PeerParams,
    until_s: float | None = None,
) -> Thresholds:
    """Thresholds from fault-free data (seed 001 section 4.2.1), up to ``until_s`` if given.

    Raises:
        ConfigError: no peer group has enough data for one window.
    """
    groups = as_groups(groups)
    all_series = [s for m in metrics for s in series(rec, m, groups, until_s=until_s)]
    if not all_series:
        raise ConfigError(
            f"cannot train thresholds: {shortfall(rec, members_of(rec, groups), params)}"
        )
    try:
        return train_series(all_series, params)
    except ValueError as err:
        why = shortfall(rec, members_of(rec, groups), params)
        raise ConfigError(f"cannot train thresholds: {err}; {why}") from None


def diagnose(
    rec: Recording,
    metric: str,
    groups: Mapping[str, str] | PeerGroups,
    params: PeerParams,
    thresholds: Thresholds,
    since_s: float | None = None,
) -> list[WindowResult]:
    """Window results of every peer group, in time order (groups interleaved by window end).

    Raises:
        ConfigError: a group has no trained threshold for the metric.
    """
    results: list[WindowResult] = []
    groups = as_groups(groups)
    for s in series(rec, metric, groups, since_s=since_s):
        try:
            threshold = thresholds.get(s.group, metric)
        except KeyError as err:
            raise ConfigError(str(err.args[0])) from None
        results += detect(s, threshold, params)
    results.sort(key=lambda r: (r.end_s, r.group))
    return results
