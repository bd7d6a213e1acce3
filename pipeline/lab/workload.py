"""The lab's real workload: fio on every LUN and one MPI-IO job, all under Darshan, each one
accounted for as a Slurm job would be.

fio writes its histogram logs when a job ends, so a live view needs jobs that end: every LUN
runs fio in consecutive segments of ``segment_s`` seconds (one fio process per LUN and segment,
the same open-loop ``randrw`` load everywhere). All segments of a LUN use the log prefix
``lun<K>`` and fio job number 1, so iolens sees one fio job per LUN (``<host>/lun<K>.1``)
whose logs arrive every segment, in sub-directories ``seg<NNNN>/`` of the ``fio-hist`` drop.

Every process runs under Darshan's runtime (``LD_PRELOAD=libdarshan.so``; fio also with
``DARSHAN_ENABLE_NONMPI=1``, and ``--thread`` so its I/O is in the process that writes the
log), with ``DARSHAN_JOBID=SLURM_JOB_ID`` so the log carries the lab's job id. The lab is the
scheduler: each job's record goes into the ``slurm`` drop in ``sacct --parsable2`` format,
with a ``Comment`` saying so.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

SACCT_HEADER = (
    "JobID|JobIDRaw|User|JobName|Partition|Account|Start|End|Elapsed|State|ExitCode|"
    "NNodes|NTasks|NCPUS|NodeList|Comment"
)
PROVENANCE = "recorded by iolens lab: the lab ran this job and is its scheduler"


@dataclass
class LabJob:
    """One job the lab ran.

    Attributes:
        job_id: the lab's job id (Darshan's ``jobid``, Slurm's ``JobID``).
        name: ``fio-lun3`` or ``mpiio``.
        luns: indices of the LUNs it did I/O on.
        ntasks: processes.
        start_s, end_s: its run (Unix s); end is None while it runs.
        state: ``COMPLETED`` or ``FAILED``.
        node: the host it ran on (None: this machine).
    """

    job_id: int
    name: str
    luns: tuple[int, ...]
    ntasks: int
    start_s: float
    end_s: float | None = None
    state: str = "RUNNING"
    node: str | None = None


def fio_command(
    mount_point: Path, log_prefix: Path, runtime_s: int, rate_iops: int, log_ms: int
) -> list[str]:
    """One fio segment on one LUN: open-loop 4 KiB random read/write (70/30), direct I/O,
    psync (Darshan sees each ``pread``/``pwrite``), histogram log every ``log_ms``."""
    return [
        "fio",
        "--name=lab",
        f"--filename={mount_point / 'fio.dat'}",
        "--size=32m",
        "--rw=randrw",
        "--rwmixread=70",
        "--bs=4k",
        "--direct=1",
        "--ioengine=psync",
        "--thread",
        "--time_based",
        f"--runtime={runtime_s}",
        f"--rate_iops={rate_iops}",
        f"--write_hist_log={log_prefix}",
        f"--log_hist_msec={log_ms}",
        "--per_job_logs=1",
        "--log_unix_epoch=1",
        "--output-format=terse",
    ]


def darshan_env(libdarshan: Path, log_dir: Path, job_id: int, nonmpi: bool) -> dict[str, str]:
    """Environment of a process run under Darshan with the lab's job id."""
    env = dict(os.environ)
    env.update(
        LD_PRELOAD=str(libdarshan),
        DARSHAN_LOG_DIR_PATH=str(log_dir),
        DARSHAN_JOBID="SLURM_JOB_ID",
        SLURM_JOB_ID=str(job_id),
        # Darshan 3.4.7's heatmap module can fail an assertion at the exit of a threaded fio
        # (heatmap_output: `heatmap_runtime'), losing the log; the lab does not use it
        DARSHAN_MOD_DISABLE="HEATMAP",
    )
    if nonmpi:
        env["DARSHAN_ENABLE_NONMPI"] = "1"
    else:
        env.pop("DARSHAN_ENABLE_NONMPI", None)
    return env


def mpi_command(
    writer: Path, dirs: Sequence[Path], iterations: int, block_kib: int, pause_ms: int
) -> list[str]:
    """``mpiexec -n len(dirs)`` of the MPI-IO writer, rank r writing one file in ``dirs[r]``,
    pausing ``pause_ms`` after each block (a paced job leaves its healthy LUNs to fio)."""
    return [
        "mpiexec",
        "-n",
        str(len(dirs)),
        str(writer),
        "--iterations",
        str(iterations),
        "--block-kib",
        str(block_kib),
        "--pause-ms",
        str(pause_ms),
        *map(str, dirs),
    ]


def _sacct_time(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def sacct_line(job: LabJob, host: str | None = None) -> str:
    """The job's ``sacct --parsable2`` row (times in UTC, the drop's ``tz``)."""
    assert job.end_s is not None
    host = host or socket.gethostname()
    values = [
        str(job.job_id),
        str(job.job_id),
        "root" if os.geteuid() == 0 else str(os.geteuid()),
        job.name,
        "lab",
        "iolens-lab",
        _sacct_time(job.start_s),
        _sacct_time(job.end_s),
        _elapsed(job.end_s - job.start_s),
        job.state,
        "0:0" if job.state == "COMPLETED" else "1:0",
        "1",
        str(job.ntasks),
        str(job.ntasks),
        host,
        PROVENANCE,
    ]
    return "|".join(values)


def record_job(slurm_file: Path, job: LabJob) -> None:
    """Append the finished job's row to the slurm drop file (header first)."""
    new = not slurm_file.exists() or slurm_file.stat().st_size == 0
    with open(slurm_file, "a", encoding="utf-8") as f:
        if new:
            f.write(SACCT_HEADER + "\n")
        f.write(sacct_line(job, job.node) + "\n")


@dataclass
class Running:
    """A job's process while it runs."""

    job: LabJob
    proc: subprocess.Popen[bytes]


def start(cmd: Sequence[str], env: Mapping[str, str], job: LabJob, log_path: Path) -> Running:
    """Start ``cmd`` for ``job`` with its output in ``log_path``."""
    out = open(log_path, "ab")  # noqa: SIM115 (closed when the process is reaped)
    proc = subprocess.Popen(list(cmd), env=dict(env), stdout=out, stderr=subprocess.STDOUT)
    out.close()
    return Running(job, proc)
