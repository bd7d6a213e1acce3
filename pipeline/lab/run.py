"""``iolens lab``: build a small real storage system, run a real workload on it, break one LUN,
and watch the whole pipeline see it, live, on one time axis.

Timeline (seconds from the start of the workload)::

    0 ............ onset ............... onset+duration ............... +recovery  (then settle)
    healthy warm-up | LUN <slow> delayed by <delay-ms> per I/O | healthy again
                    ^ thresholds trained on the warm-up          ^ fault off
                      MPI-IO job starts (4 ranks, one on the slow LUN)

What runs (all real): N loop-device LUNs on a delaying FUSE file system with ext4
(:mod:`pipeline.lab.storage`), sadc every second shipped live as sadf CSV
(:mod:`pipeline.lab.sysstat`), fio in segments on every LUN and one ``mpiexec -n 4`` MPI-IO job,
all under Darshan, with their Slurm-format records (:mod:`pipeline.lab.workload`), and
``iolens run`` on the four drop directories into the embedded server (or ``--es-url``) with the
scheduled jobs on. The lab itself writes nothing to Elasticsearch; it only reads, to report
when each stream showed the fault (:mod:`pipeline.lab.observe`).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pipeline.lab import storage, workload
from pipeline.lab.darshan_build import ensure_libdarshan, ensure_mpi_writer
from pipeline.lab.params import (
    MPI_PAUSE_MS,
    LabParams,
    LabResult,
    first_job_id,
    free_port,
    lab_config,
    mpi_iterations,
)
from pipeline.lab.procs import remember, stop_all, stop_leftovers, stop_process
from pipeline.lab.storage import LabError, Storage
from pipeline.lab.sysstat import SadcRecorder
from pipeline.lab.workload import LabJob, Running

log = logging.getLogger(__name__)

Step = tuple[float, Callable[[], None]]
"""A timed step of the timeline: ``(Unix s, what to do then)``."""


class Lab:
    """One run of the lab (see the module docstring).

    Args:
        params: the parameters.
        say: where progress lines go (a person watching).
        clock, sleep: wall-clock seconds and sleeping, injectable.
    """

    def __init__(
        self,
        params: LabParams,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        params.check()
        self.p = params
        self.say = say
        self.clock = clock
        self.sleep = sleep
        self.root = params.lab_dir.resolve()
        self.host = socket.gethostname()
        self.running: list[Running] = []
        self.jobs: list[LabJob] = []
        self._later: list[Step] = []
        """Steps a step scheduled (a restart after a kill), taken into the timeline."""
        self._next_id = first_job_id(clock())

    @property
    def drops(self) -> Path:
        """``<lab>/drops``."""
        return self.root / "drops"

    def run(self) -> LabResult:
        """Build, run, break, watch, clean up; returns what was found.

        Raises:
            LabError: the lab cannot run here, or a step failed (everything set up is undone).
        """
        storage.check_host()
        storage.check_tools()
        self._reset()
        lib = ensure_libdarshan(self.p.cache_dir, self.p.darshan_tarball)
        writer = ensure_mpi_writer(self.p.cache_dir)
        self.say(f"building {self.p.luns} LUNs under {self.root / 'storage'}")
        st = storage.setup(self.root / "storage", self.p.luns, self.p.lun_mib)
        self.iolens: subprocess.Popen[bytes] | None = None
        self.recorder: SadcRecorder | None = None
        cfg = self.root / "iolens.yaml"
        try:
            url = self._start_pipeline(st, cfg)
            result = self._timeline(st, lib, writer, url, cfg)
            self._wind_down()
            self._final_pass(cfg, url)
        finally:
            try:
                self._wind_down()
            finally:
                storage.teardown(self.root / "storage")
        return self._conclude(result)

    def _conclude(self, result: LabResult) -> LabResult:
        """``result`` with the incidents as indexed and each stream's lag."""
        from pipeline.lab.observe import incidents

        result.incidents = incidents(self.client, self.p.namespace, result.t0_s)
        result.lags = self.observer.lags()
        return result

    def _start_pipeline(self, st: Storage, cfg: Path) -> str:
        """The cluster, ``iolens run`` on the lab's configuration (written to ``cfg``) and the
        sadc recorder of the LUNs; the cluster's URL."""
        url = self._cluster()
        cfg.write_text(yaml.safe_dump(lab_config(self.p, self.root, st, self.host)))
        self.iolens = self._start_iolens(cfg, url)
        devices = [lun.kernel_name for lun in st.luns]
        self.recorder = SadcRecorder(self.root / "sa", self.drops / "sadf" / "lab.csv", devices)
        self.recorder.start()
        self._remember(self.recorder.pid)
        return url

    def _wind_down(self) -> None:
        """Stop the jobs, the recorder (its last samples shipped) and ``iolens run``, each
        even when stopping another one failed; safe to call twice."""
        try:
            self._kill_running()
            if self.recorder is not None:
                recorder, self.recorder = self.recorder, None
                recorder.stop()
        finally:
            if self.iolens is not None:
                proc, self.iolens = self.iolens, None
                stop_process(proc, 90)

    def _remember(self, pid: int | None) -> None:
        """Note a process the lab started, so a run after a crash of this one stops it."""
        remember(self.root / "pids", pid)

    def _final_pass(self, cfg: Path, url: str) -> None:
        """``iolens run --once`` over the drops: what ``iolens run`` had not finished when it
        was stopped (the last samples, intervals and windows) is read and computed, so a
        further run adds nothing."""
        cmd = [sys.executable, "-m", "pipeline.cli.main", "--config", str(cfg), "--es-url", url]
        with open(self.root / "logs" / "iolens-run.log", "ab") as out:
            code = subprocess.run([*cmd, "run", "--once"], stdout=out, stderr=out).returncode
        if code != 0:
            raise LabError(f"the final iolens run --once exited with {code}; see its log")

    def _reset(self) -> None:
        """Undo what a previous lab left here (its server, mounts, data) and start empty."""
        from pipeline.sink.embedded import stop_detached

        stop_leftovers(self.root / "pids")
        storage.teardown(self.root / "storage")
        stop_detached(self.root / "noida-db")
        for sub in ("drops", "state", "sa", "noida-db", "logs"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        for sub in ("fio", "sadf", "darshan", "slurm"):
            (self.drops / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "logs").mkdir(parents=True, exist_ok=True)

    def _cluster(self) -> str:
        """The cluster's URL: ``--es-url``, or an embedded server started (detached, so it
        keeps the data after the lab) with its data under the lab directory."""
        if self.p.es_url:
            return self.p.es_url
        from pipeline.sink.embedded import EmbeddedServer

        server = EmbeddedServer(self.root / "noida-db", free_port(self.p.port), "127.0.0.1")
        server.start(30.0, detach=True)
        self.say(f"embedded Elasticsearch-API server at {server.url}")
        return server.url

    def _start_iolens(self, cfg: Path, url: str) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "pipeline.cli.main", "--config", str(cfg)]
        cmd += ["--es-url", url, "run"]
        with open(self.root / "logs" / "iolens-run.log", "ab") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        self._remember(proc.pid)
        self.say(f"iolens run started (log: {self.root / 'logs' / 'iolens-run.log'})")
        return proc

    def _job(self, name: str, luns: tuple[int, ...], ntasks: int) -> LabJob:
        job = LabJob(self._next_id, name, luns, ntasks, self.clock())
        self._next_id += 1
        self.jobs.append(job)
        return job

    def _segment(self, k: int, st: Storage, lib: Path) -> None:
        """Start segment ``k``: one fio process per LUN (on the LUN's host)."""
        for lun in st.luns:
            assert lun.mount_point is not None
            seg = self._fio_drop(lun.index) / f"seg{k:04d}"
            seg.mkdir(parents=True, exist_ok=True)
            job = self._job(f"fio-{lun.name}", (lun.index,), 1)
            cmd = workload.fio_command(
                Path(lun.mount_point),
                seg / lun.name,
                self.p.segment_s - 1,
                self.p.rate_iops,
                self.p.log_ms,
            )
            env = workload.darshan_env(lib, self.drops / "darshan", job.job_id, nonmpi=True)
            log_path = self.root / "logs" / f"fio-{lun.name}.log"
            cmd = self._on_host(lun.index, cmd)
            self.running.append(workload.start(cmd, env, job, log_path))
            self._remember(self.running[-1].proc.pid)

    def _fio_drop(self, lun: int) -> Path:
        """The fio drop of LUN ``lun``'s host (here: the lab's)."""
        return self.drops / "fio"

    def _on_host(self, lun: int, cmd: list[str]) -> list[str]:
        """``cmd`` as run on LUN ``lun``'s host (here: as it is)."""
        return cmd

    def _mpi_job(self, st: Storage, lib: Path, writer: Path, name: str = "mpiio") -> None:
        """Start the MPI-IO job: rank r writes on its own LUN, one rank on the slow one.

        It runs twice: healthy in the warm-up (``mpiio-warmup``: the thresholds are trained on
        a warm-up that holds the lab's whole workload, as seed 001 4.2.1 advises training
        during known workloads) and during the fault."""
        others = [lun for lun in st.luns if lun.index != self.p.slow]
        ranks = others[: self.p.mpi_ranks - 1]
        ranks.insert(min(2, len(ranks)), st.luns[self.p.slow - 1])
        dirs = [Path(lun.mount_point or "") for lun in ranks]
        job = self._job(name, tuple(lun.index for lun in ranks), len(ranks))
        cmd = self._mpi_command(
            workload.mpi_command(writer, dirs, mpi_iterations(self.p), 64, MPI_PAUSE_MS), job.luns
        )
        env = workload.darshan_env(lib, self.drops / "darshan", job.job_id, nonmpi=False)
        self.running.append(workload.start(cmd, env, job, self.root / "logs" / f"{name}.log"))
        self._remember(self.running[-1].proc.pid)
        self.say(
            f"MPI-IO job {job.job_id} started: {len(ranks)} ranks on "
            + ", ".join(lun.name for lun in ranks)
        )

    def _mpi_command(self, cmd: list[str], luns: tuple[int, ...]) -> list[str]:
        """How the MPI-IO job's ``mpiexec`` is started, rank r writing on ``luns[r]`` (here:
        as it is, every rank on this machine)."""
        return cmd

    def _reap(self) -> None:
        """Record the jobs that ended (their Slurm rows go to the slurm drop)."""
        for r in list(self.running):
            code = r.proc.poll()
            if code is None:
                continue
            self.running.remove(r)
            r.job.end_s = self.clock()
            r.job.state = "COMPLETED" if code == 0 else "FAILED"
            if code != 0:
                log.warning("job %s (%s) exited with %s", r.job.job_id, r.job.name, code)
            workload.record_job(self.drops / "slurm" / "sacct.txt", r.job)

    def _kill_running(self) -> None:
        stop_all([r.proc for r in self.running], 15)
        self.running.clear()

    def _train(self, cfg: Path, until_s: float) -> None:
        """Thresholds from the warm-up's samples, put in place atomically for the peer job."""
        state = self.root / "state"
        tmp = state / "thresholds.json.new"
        # niced: training must not take the CPU from the workload at the onset
        cmd = ["nice", "-n", "10", sys.executable, "-m", "pipeline.cli.main", "--config", str(cfg)]
        cmd.append("train")
        cmd += ["--until", str(int(until_s)), "-o", str(tmp), str(self.drops / "sadf" / "lab.csv")]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LabError(f"training the peer thresholds failed: {proc.stderr.strip()}")
        os.replace(tmp, state / "thresholds.json")
        self.say("thresholds trained on the warm-up: " + proc.stdout.splitlines()[0])

    def _timeline(self, st: Storage, lib: Path, writer: Path, url: str, cfg: Path) -> LabResult:
        """Run the workload through warm-up, fault and recovery."""
        p = self.p
        t0 = self.clock()
        onset, fault_end = t0 + p.onset_s, t0 + p.onset_s + p.duration_s
        end = fault_end + p.recovery_s
        segments = math.ceil((end - t0) / p.segment_s)
        devices = {lun.index: lun.kernel_name for lun in st.luns}
        mounts = {lun.index: lun.mount_point or "" for lun in st.luns}
        result = LabResult(p, self.host, url, t0, onset, fault_end, end, devices, mounts, self.jobs)
        self._result_hosts(result, st)
        self.observer = self._observer(result)
        self._announce(result, segments)
        # the fault first: training (a few seconds) must not delay the onset
        steps: list[Step] = [
            (t0 + p.onset_s / 2, lambda: self._mpi_job(st, lib, writer, "mpiio-warmup")),
            (onset, lambda: self._fault(st, True)),
            (onset, lambda: self._train(cfg, onset)),
            (onset + 5, lambda: self._mpi_job(st, lib, writer)),
            (fault_end, lambda: self._fault(st, False)),
            *self._more_steps(result),
        ]
        steps.sort(key=lambda step: step[0])
        if not self._drive(result, steps, segments, st, lib):
            self.say(f"the pipeline did not settle within {p.settle_timeout_s:g} s of the end")
        return result

    def _result_hosts(self, r: LabResult, st: Storage) -> None:
        """Note which host each LUN is attached to (here: all on this machine)."""

    def _watch(self, now: float) -> None:
        """Look at what the lab follows besides the streams (here: nothing)."""

    def _more_steps(self, r: LabResult) -> list[Step]:
        """Further timed steps (the faults of a site, :mod:`pipeline.lab.site`); none here."""
        return []

    def _announce(self, r: LabResult, segments: int) -> None:
        """Say what the workload will be: LUNs, segments, the fault and the end."""
        from pipeline.lab.text import announce

        self.say(announce(r, segments))

    def _drive(
        self, r: LabResult, steps: list[Step], segments: int, st: Storage, lib: Path
    ) -> bool:
        """Start the fio segments and the timed ``steps`` when due, reap ended jobs and watch
        the pipeline until it settles (or the deadline passes); whether it settled."""
        p = self.p
        k, next_poll, settled = 0, r.onset_s, False
        deadline = r.end_s + p.settle_timeout_s
        while True:
            now = self.clock()
            more = k < segments or (not settled and now < deadline)
            if not (more or self.running or steps):
                break
            if now > deadline + 2 * p.segment_s:
                self._stop_hung()
                break
            if more and now >= r.t0_s + k * p.segment_s:
                if k == segments:
                    self.say("the load goes on until the pipeline has caught up")
                self._segment(k, st, lib)
                k += 1
            if self._later:
                steps = sorted([*steps, *self._later], key=lambda step: step[0])
                self._later.clear()
            while steps and now >= steps[0][0]:
                steps.pop(0)[1]()
            self._reap()
            if now >= next_poll:
                self.observer.poll(now)
                self._watch(now)
                settled = settled or (now >= r.end_s and self._settled(r))
                next_poll = now + 2
            self.sleep(0.2)
        return settled

    def _stop_hung(self) -> None:
        """Stop the jobs still running long after the end (a job that hangs: D state on FUSE)."""
        self.say("jobs still running long after the end are stopped")
        self._kill_running()

    def _fault(self, st: Storage, on: bool) -> None:
        if self.p.delay_ms <= 0:
            return
        st.set_delays({self.p.slow: self.p.delay_ms} if on else {})
        what = f"{self.p.delay_ms:g} ms per I/O on lun{self.p.slow}" if on else "no delay"
        self.say(f"fault {'ON' if on else 'OFF'}: {what}")

    def _observer(self, r: LabResult) -> Any:
        from pipeline.lab.observe import Observer
        from pipeline.settings import ElasticsearchSettings
        from pipeline.sink.client import make_client

        client = make_client(ElasticsearchSettings(url=r.url), r.url)
        self.client = client
        fio_job = (r.host_of(self.p.slow), f"lun{self.p.slow}", "1")
        return Observer(client, self.p.namespace, r.slow_lun, fio_job, self.p.sla_ms, r.onset_s)

    def _settled(self, r: LabResult) -> bool:
        """Whether the pipeline caught up with the workload (:func:`observe.settled`)."""
        from pipeline.lab.observe import settled

        return settled(self.client, r, self.clock())
