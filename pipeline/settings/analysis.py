"""The per-source analyses: fio latency (seed 000), the peer comparison of LUNs (seed 001),
Darshan jobs (seed 004) and the requests of event logs (seed 002)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from pydantic import Field, field_validator

from pipeline.settings.base import Frozen

FIO_PERCENTILES: tuple[float, ...] = (1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9)
FIO_PERCENTILES += (99.95, 99.99)
"""The percentiles iolens stores (``fio.clat_ns.pNN``, mapped in the fio templates): fio's own
default ``percentile_list`` (fio(1), ``percentile_list``)."""


class FioSettings(Frozen):
    """fio histogram logs and their reduction (seed 000)."""

    interval_ms: int = Field(1000, gt=0, description="Output interval of metrics-fio.latency.")
    method: Literal["window", "flp"] = Field(
        "window",
        description="window = each record's counts go to the interval its completion window "
        "falls in; flp = fiologparser_hist.py's time-weighting (seed 000).",
    )
    percentiles: tuple[float, ...] = Field(
        (50.0, 90.0, 95.0, 99.0, 99.9),
        description="Percentiles stored as fio.clat_ns.pNN, any of fio's default percentile_list "
        "(1, 5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.95, 99.99).",
    )
    bins: Literal["auto", "ns", "us"] = Field(
        "auto",
        description="Bin layout: auto detects from the column count (1856/2^c bins = ns, fio >= "
        "2.99); us forces the 1216-bin layout of fio 2.14 to < 2.99.",
    )
    group_nr: int | None = Field(
        None, ge=1, le=64, description="Force FIO_IO_U_PLAT_GROUP_NR (29 for fio >= 2.99)."
    )
    run_start: datetime | None = Field(
        None,
        description="Wall-clock time of time 0 in job-relative logs. Default: per host, the "
        "first log's modification time minus its last timestamp, recorded when first seen.",
    )
    host_offsets_ms: Mapping[str, int] = Field(
        default_factory=dict,
        description="Per host, ms added to its timestamps (seed 000: hosts started late).",
    )
    settle_s: float = Field(
        10.0,
        ge=0,
        description="An interval's merged percentiles are computed once no histogram of it has "
        "arrived for this long.",
    )

    @field_validator("percentiles")
    @classmethod
    def _pct_range(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if not v or any(not 0 < p < 100 for p in v):
            raise ValueError("percentiles must lie strictly between 0 and 100")
        unmapped = [p for p in v if p not in FIO_PERCENTILES]
        if unmapped:
            listed = ", ".join(f"{p:g}" for p in FIO_PERCENTILES)
            named = ", ".join(f"{p:g}" for p in unmapped)
            raise ValueError(
                f"{named}: not a percentile iolens stores; "
                f"choose from fio's default percentile_list ({listed})"
            )
        return tuple(sorted(set(v)))


class PeerSettings(Frozen):
    """Black-box peer comparison of LUNs from sysstat disk metrics (seed 001, section 4.2)."""

    metrics: tuple[str, ...] = Field(
        ("await",), description="sysstat -d metrics compared across peers (await, tps, ...)."
    )
    downsample_s: float = Field(15.0, gt=0, description="Downsampling interval (seconds).")
    ma_width: int = Field(15, ge=1, description="Moving-average filter width (samples).")
    win_size: int = Field(60, ge=4, description="Comparison window (samples).")
    win_shift: int = Field(30, ge=1, description="Shift between windows (samples).")
    k: int = Field(3, ge=1, description="Faulty when anomalous in k of the last 2k-1 windows.")
    bin_cap: int = Field(1000, ge=1, description="Most histogram bins per window.")
    groups: Mapping[str, str] = Field(
        default_factory=dict,
        description="Peer groups by LUN name pattern: glob of 'host:device' -> group name "
        "(first match wins), e.g. 'fs*:dm-[0-8]': ddn1 puts the same LUNs of every server in "
        "one group (seed 001: peers are LUNs with the same workload on different servers).",
    )
    members: Mapping[str, tuple[str, ...]] = Field(
        default_factory=dict,
        description="Peer groups by explicit list: group name -> its LUNs as 'host:device'; "
        "takes precedence over peer.storage_map and peer.groups.",
    )
    storage_map: str | None = Field(
        None,
        description="Peer groups from a storage map: a CSV file with one row per LUN-server "
        "attachment (columns host, device, array; optional lun, path); the attachments of one "
        "array form a group (one per path role when the path column is filled). Takes "
        "precedence over peer.groups; LUNs named nowhere form one group per host.",
    )
    thresholds_file: str | None = Field(
        None, description="Trained thresholds (iolens train); default <state_dir>/thresholds.json."
    )
    settle_s: float = Field(
        120.0,
        ge=0,
        description="The scheduled comparison takes samples older than this, so that every "
        "server's data for a moment has arrived.",
    )
    max_wait_s: float = Field(
        120.0,
        ge=0,
        description="How long the scheduled comparison waits for a server whose samples stop "
        "arriving (cut off, its shipper down): it compares up to that server's last sample for "
        "at most this long, then goes on without it (its LUNs' windows are skipped as missing).",
    )
    ranking_every_s: float = Field(
        3600.0,
        gt=0,
        description="Period of the persistence ranking (seed: hourly); a ranking is indexed at "
        "the end of every period of UTC time.",
    )

    @field_validator("groups")
    @classmethod
    def _group_names(cls, v: Mapping[str, str]) -> Mapping[str, str]:
        for pattern, group in v.items():
            if not group or ":" in group:
                raise ValueError(
                    f"{pattern}: group name {group!r}: give a non-empty name without ':' "
                    "(rankings name LUNs group:host/device)"
                )
        return v

    @field_validator("members")
    @classmethod
    def _members_are_luns(cls, v: Mapping[str, tuple[str, ...]]) -> Mapping[str, tuple[str, ...]]:
        seen: dict[str, str] = {}
        for group, luns in v.items():
            if not group or ":" in group:
                raise ValueError(
                    f"group name {group!r}: give a non-empty name without ':' (rankings name "
                    "LUNs group:host/device)"
                )
            for lun in luns:
                host, _, device = lun.partition(":")
                if not host or not device:
                    raise ValueError(f"group {group}: {lun!r} is not 'host:device'")
                if lun in seen:
                    raise ValueError(f"{lun} is in groups {seen[lun]} and {group}: keep one")
                seen[lun] = group
        return v


class DarshanSettings(Frozen):
    """Darshan job logs: reading, and the root-cause analysis of low-bandwidth jobs (seed 004)."""

    workers: int = Field(
        0,
        ge=0,
        description="Processes reading and analysing logs in parallel; 0 = one per CPU.",
    )
    inline: bool = Field(
        False,
        description="Read logs in the shipper's own process instead of worker processes: no "
        "start-up cost, but a damaged log that crashes darshan-util then stops the shipper.",
    )
    stable_s: float = Field(
        5.0,
        ge=0,
        description="A log is read once its size and modification time have not changed for "
        "this long (Darshan writes a log once, at the end of the job).",
    )
    min_nprocs: int = Field(
        1000, ge=0, description="Low-bandwidth jobs: more processes than this (seed: 1,000)..."
    )
    min_bytes_per_proc: float = Field(
        10 * 2**20,
        ge=0,
        description="...at least this many bytes per process in the direction (seed: 10 MB)...",
    )
    max_bytes_per_s: float = Field(
        2**30,
        gt=0,
        description="...and a critical-path bandwidth below this, bytes/s (seed: 1 GB/s).",
    )
    lmt_fs: str | None = Field(
        None,
        description="File system name (lmt.ost.fs) whose LMT load the diagnosis compares; "
        "default: any.",
    )
    ost_luns: Mapping[str, str] = Field(
        default_factory=dict,
        description="OST index -> LUN 'host/device' in the peer comparison, so that a "
        "critical file's OST can be matched with peer-anomaly results.",
    )
    mounts: Mapping[str, str] = Field(
        default_factory=dict,
        description="Mount point -> LUN 'host/device' in the peer comparison (or a device "
        "'/dev/sdc', taken as a LUN of this host), so that a critical file on any file system "
        "(ext4, XFS, GPFS, NFS) can be matched with peer-anomaly results; the longest mount "
        "point holding the file wins.",
    )
    proc_mounts: bool = Field(
        True,
        description="Mount points not in darshan.mounts are looked up in this host's "
        "/proc/mounts when the log is read (block devices only; the LUN is "
        "'<this host>/<device>').",
    )


class RequestsSettings(Frozen):
    """Requests of events drops: behavioural clustering into the workload model (seed 002)."""

    threshold: float = Field(
        2.0,
        gt=0,
        description="Distance above which a request starts a new cluster (1 unit = 1 ms of "
        "CPU or 1 KiB, plus 1 per token of different structure).",
    )
    snapshot_s: float = Field(
        60.0,
        gt=0,
        description="How often the workload model is written to metrics-iolens.workload_model "
        "while requests arrive (and once at the end of a run).",
    )
