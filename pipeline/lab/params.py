"""The incident lab's parameters, its pipeline configuration and its result."""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.lab.darshan_build import default_cache_dir
from pipeline.lab.storage import Storage
from pipeline.lab.workload import LabJob
from pipeline.records.json import JsonObject, Source


def first_job_id(now_s: float) -> int:
    """The first job id of a lab started at ``now_s``: ``<seconds of the day>000 + 1``, so the
    job ids of labs run one after another into one cluster do not meet (ids below 86,400,000,
    within Slurm's and Darshan's range)."""
    return int(now_s) % 86400 * 1000 + 1


MPI_PAUSE_MS = 20
"""Pause of the MPI-IO job after each 64 KiB write and sync: its healthy ranks write about 3
MiB/s, so the fio jobs sharing their LUNs stay within the SLA."""


@dataclass(frozen=True)
class LabParams:
    """Everything a lab run is made of (all on ``iolens lab``'s command line).

    Attributes:
        lab_dir: where everything lives (storage, drops, state, the embedded server's data).
        luns: number of LUNs; slow: the LUN slowed (1-based); delay_ms: its per-I/O delay.
        onset_s, duration_s, recovery_s: the timeline (s from the workload's start).
        segment_s: length of one fio segment; rate_iops: fio's rate per LUN.
        log_ms: fio's ``log_hist_msec``; interval_ms: iolens's latency interval.
        sla_ms: the fio SLA (p95 of completion latency under this).
        mpi_ranks: processes of the MPI-IO job; lun_mib: size of each LUN.
        es_url: a cluster to use instead of the embedded server; port: the embedded server's.
        namespace: data stream namespace.
        darshan_tarball: Darshan's source (else ``$IOLENS_DARSHAN_TARBALL`` or the download).
        cache_dir: where Darshan and the MPI writer are built.
        settle_timeout_s: how long to wait after the workload for the pipeline to settle.
        hosts: lab hosts (network and UTS namespaces, :mod:`pipeline.lab.hosts`); 1: the
            machine itself.
        kill_leader_s: seconds after the onset when the instance holding the peer comparison's
            lease is killed (SIGKILL; restarted 30 s later); None: never.
        partition: ``(host, seconds after the onset, duration s)`` a host is cut off (host 0:
            the one whose instance holds the peer comparison's lease then).
        skew: ``(host, seconds)`` a host's wall clock runs off (negative: behind).
    """

    lab_dir: Path = Path("var/lab")
    luns: int = 6
    slow: int = 3
    delay_ms: float = 20.0
    onset_s: float = 120.0
    duration_s: float = 150.0
    recovery_s: float = 120.0
    segment_s: int = 30
    rate_iops: int = 40
    log_ms: int = 1000
    interval_ms: int = 5000
    sla_ms: float = 10.0
    mpi_ranks: int = 4
    lun_mib: int = 256
    es_url: str | None = None
    port: int = 9200
    namespace: str = "lab"
    darshan_tarball: Path | None = None
    cache_dir: Path = field(default_factory=default_cache_dir)
    settle_timeout_s: float = 240.0
    hosts: int = 1
    kill_leader_s: float | None = None
    partition: tuple[int, float, float] | None = None
    skew: tuple[int, float] | None = None

    def check(self) -> None:
        """Raise ValueError naming the parameter that makes no sense."""
        self._check_site()
        if self.luns < 3:
            raise ValueError("--luns: the peer comparison needs at least 3 LUNs")
        if not 1 <= self.slow <= self.luns:
            raise ValueError(f"--slow {self.slow}: LUNs are numbered 1 to {self.luns}")
        if self.delay_ms < 0:
            raise ValueError("--delay-ms must be >= 0")
        if self.onset_s < 60:
            raise ValueError("--onset: the warm-up trains the thresholds and needs >= 60 s")
        if self.duration_s < 60:
            raise ValueError("--duration: the peer comparison needs >= 60 s to indict a LUN")
        if self.mpi_ranks < 2 or self.mpi_ranks > self.luns:
            raise ValueError(f"--mpi-ranks must lie in 2..{self.luns}")

    def _check_site(self) -> None:
        if not 1 <= self.hosts <= min(self.luns, 8):
            raise ValueError(f"--hosts must lie in 1..{min(self.luns, 8)} (one LUN per host)")
        multi = self.hosts > 1
        for option, given in (
            ("--kill-leader", self.kill_leader_s is not None),
            ("--partition", self.partition is not None),
            ("--skew", self.skew is not None),
        ):
            if given and not multi:
                raise ValueError(f"{option} needs --hosts 2 or more")
        for option, h, least in (("--partition", self.partition, 0), ("--skew", self.skew, 1)):
            if h is not None and not least <= h[0] <= self.hosts:
                raise ValueError(f"{option}: hosts are numbered 1 to {self.hosts}")
        if self.partition is not None and self.partition[2] <= 0:
            raise ValueError("--partition H:S:D: the duration D must be > 0")


def free_port(preferred: int) -> int:
    """``preferred`` when nothing listens there, else (or for 0) a free port the kernel picks."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
        except OSError:
            s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lab_config(p: LabParams, root: Path, st: Storage, host: str) -> JsonObject:
    """The ``iolens run`` configuration of a lab: its drops and the parameters that make a
    few minutes enough (1 s sysstat samples, short windows, every job diagnosed)."""
    return {
        "state_dir": str(root / "state"),
        "elasticsearch": {"namespace": p.namespace},
        "embedded": {"data_dir": str(root / "noida-db")},
        "drops": _drops(root / "drops", host),
        "fio": {"interval_ms": p.interval_ms, "settle_s": 3.0},
        "peer": _peer(st, host),
        "darshan": {
            "workers": 1,
            "stable_s": 2.0,
            "min_nprocs": 0,
            "min_bytes_per_proc": 0.0,
            "max_bytes_per_s": 1e15,
        },
        "incident": {
            "sla": {"percentile": 95, "under_s": p.sla_ms / 1000},
            "gap_s": 30.0,
            "margin_s": 30.0,
            "lookback_s": 3600.0,
        },
        "jobs": {"tick_s": 2.0, "lease_ttl_s": 30.0},
    }


def _drops(drops: Path, host: str) -> list[dict[str, str]]:
    """The lab's four drop directories under ``drops`` (fio logs named by ``host``)."""
    return [
        {"type": "fio-hist", "path": str(drops / "fio"), "host": host},
        {"type": "sadf", "path": str(drops / "sadf")},
        {"type": "darshan", "path": str(drops / "darshan")},
        {"type": "slurm", "path": str(drops / "slurm"), "tz": "UTC"},
    ]


def _peer(st: Storage, host: str) -> JsonObject:
    """The peer comparison of the lab's LUNs, one peer group (``lab``), on 1 s samples with
    short windows, ranked every minute."""
    return {
        "downsample_s": 1.0,
        "ma_width": 5,
        "win_size": 30,
        "win_shift": 10,
        "k": 3,
        "groups": {f"{host}:{lun.kernel_name}": "lab" for lun in st.luns},
        "settle_s": 3.0,
        "max_wait_s": 90.0,
        "ranking_every_s": 60.0,
    }


@dataclass
class LabResult:
    """What a lab run did and found.

    Attributes:
        params: the parameters; host: this machine's name; url: the cluster.
        t0_s, onset_s, fault_end_s, end_s: the workload's start, the fault's on and off and
            the workload's end (Unix s).
        devices: LUN index -> kernel device name (``loop2``); mounts: LUN -> mount point.
        jobs: every job the lab ran.
        incidents: the incident documents as indexed (``_source``).
        lags: stream -> seconds from the onset until it showed the fault (None: never).
        lun_hosts: LUN index -> the host it is attached to (several hosts only).
        events: ``(Unix s, what)`` of each fault of a site the lab caused.
        leases: ``(Unix s, lease, holder)`` each time a lease was seen to change hands.
    """

    params: LabParams
    host: str
    url: str
    t0_s: float
    onset_s: float
    fault_end_s: float
    end_s: float
    devices: dict[int, str]
    mounts: dict[int, str]
    jobs: list[LabJob]
    incidents: list[Source] = field(default_factory=list)
    lags: dict[str, float | None] = field(default_factory=dict)
    lun_hosts: dict[int, str] = field(default_factory=dict)
    events: list[tuple[float, str]] = field(default_factory=list)
    leases: list[tuple[float, str, str]] = field(default_factory=list)

    def host_of(self, lun: int) -> str:
        """The host LUN ``lun`` is attached to (the machine itself with one host)."""
        return self.lun_hosts.get(lun, self.host)

    @property
    def slow_lun(self) -> str:
        """The slowed LUN as the peer comparison names it."""
        return f"{self.host_of(self.params.slow)}/{self.devices[self.params.slow]}"

    def to_json(self) -> JsonObject:
        """The run as plain values (``<lab dir>/result.json``): the timeline (Unix s), the
        slowed LUN, each LUN's device, host and mount point, the parameters, every job and
        the incidents as indexed."""
        params = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self.params).items()}
        luns = {
            str(k): {"device": d, "host": self.host_of(k), "mount_point": self.mounts.get(k)}
            for k, d in sorted(self.devices.items())
        }
        return {
            "host": self.host,
            "t0_s": self.t0_s,
            "onset_s": self.onset_s,
            "fault_end_s": self.fault_end_s,
            "end_s": self.end_s,
            "slow_lun": self.slow_lun,
            "luns": luns,
            "params": params,
            "jobs": [asdict(j) for j in self.jobs],
            "incidents": list(self.incidents),
        }


def mpi_iterations(p: LabParams) -> int:
    """Iterations of the MPI-IO writer: about a minute (at most half the fault) on the slow
    LUN, where one 64 KiB write and its sync cost about five delayed I/Os (measured: 1,000
    iterations took 96 s at 20 ms per I/O) plus the pause; at most 500, about 11 s on a
    healthy LUN, so the job's extra load on its healthy LUNs stays short."""
    per_iteration_s = (5 * max(p.delay_ms, 0.0) + MPI_PAUSE_MS) / 1000
    target_s = min(60.0, p.duration_s / 2)
    return max(200, min(500, round(target_s / per_iteration_s)))
