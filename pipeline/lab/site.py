"""``iolens lab --hosts N``: the incident lab as a site of N hosts sharing one cluster.

Each host (:mod:`pipeline.lab.hosts`: a network namespace on a bridge and a hostname of its own)
runs its own ``iolens run`` of the installed package with its own state directory and drops: a
file server's sadc on the devices of its LUNs and a client's fio on them. The LUNs are split over
the hosts round-robin (LUN K on host ``(K - 1) % N + 1``) and form one peer group across them
through a storage map (seed 001's LUN-server attachments: ``host,device,array``). Host 1 is the
login node: the Darshan logs and the Slurm rows of every job land in its drops, and the MPI-IO
job's ``mpiexec`` runs there, starting each rank on the host of the LUN it writes on (rank 2 on
the slowed one's host).

The faults of a site, timed from the onset of the slow LUN: ``kill_leader_s`` kills (SIGKILL) the
instance holding the peer comparison's lease and restarts it 30 s later; ``partition`` cuts a
host off from the cluster and the other hosts for a while; ``skew`` runs a host's wall clock
off for the whole lab. The lab records when each happened and, polling the lease documents,
which instance held each lease over time.
"""

from __future__ import annotations

import csv
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import yaml

from pipeline.lab.hosts import GATEWAY, Hosts
from pipeline.lab.params import LabParams, LabResult, free_port, lab_config
from pipeline.lab.procs import stop_process
from pipeline.lab.run import Lab, Step
from pipeline.lab.storage import LabError, Storage
from pipeline.lab.sysstat import SadcRecorder
from pipeline.lab.workload import LabJob
from pipeline.records.json import JsonObject
from pipeline.sink.lease import LEASE_INDEX

log = logging.getLogger(__name__)

RESTART_AFTER_S = 30.0
"""How long a killed leader stays down; also how long an instance that exited waits to be
started again (the service unit's ``RestartSec``, as ``Restart=on-failure`` does)."""


class SiteLab(Lab):
    """The lab on ``params.hosts`` hosts (see the module docstring)."""

    def __init__(self, params: LabParams, **kwargs: Any) -> None:
        super().__init__(params, **kwargs)
        skew = {params.skew[0]: params.skew[1]} if params.skew else {}
        self.hosts = Hosts(params.hosts, self.host, skew)
        self.procs: dict[int, subprocess.Popen[bytes] | None] = {}
        self.recorders: list[SadcRecorder] = []
        self.events: list[tuple[float, str]] = []
        self.leases: list[tuple[float, str, str]] = []
        self._holders: dict[str, str] = {}
        self._cut_off: int | None = None

    def host_of(self, lun: int) -> int:
        """The host (1-based) LUN ``lun`` is attached to."""
        return (lun - 1) % self.p.hosts + 1

    def host_dir(self, h: int) -> Path:
        """Host ``h``'s directory: its drops, state, sadc files and configuration."""
        return self.root / "hosts" / f"h{h}"

    @property
    def drops(self) -> Path:
        """The login node's drops (host 1): Darshan logs and Slurm rows go there."""
        return self.host_dir(1) / "drops"

    def run(self) -> LabResult:
        """As :meth:`Lab.run`, on hosts set up first and removed at the end."""
        self.hosts.setup()
        try:
            return super().run()
        finally:
            self.hosts.teardown()

    def _reset(self) -> None:
        super()._reset()
        shutil.rmtree(self.root / "hosts", ignore_errors=True)
        for h in range(1, self.p.hosts + 1):
            for sub in ("fio", "sadf"):
                (self.host_dir(h) / "drops" / sub).mkdir(parents=True, exist_ok=True)
        for sub in ("darshan", "slurm"):
            (self.drops / sub).mkdir(parents=True, exist_ok=True)

    def _cluster(self) -> str:
        if self.p.es_url:
            return self.p.es_url
        from pipeline.sink.embedded import EmbeddedServer

        # on every address: the hosts reach it on the bridge, this machine on localhost
        server = EmbeddedServer(self.root / "noida-db", free_port(self.p.port), "0.0.0.0")
        server.start(30.0, detach=True)
        url = f"http://127.0.0.1:{server.port}"
        self.say(f"embedded Elasticsearch-API server at {url} (hosts: {GATEWAY})")
        return url

    def host_url(self, url: str) -> str:
        """``url`` as the hosts reach it: this machine's loopback is the bridge's gateway."""
        parts = urlsplit(url)
        if parts.hostname in ("127.0.0.1", "localhost", "0.0.0.0"):
            netloc = f"{GATEWAY}:{parts.port}" if parts.port else GATEWAY
            return urlunsplit(parts._replace(netloc=netloc))
        return url

    def _storage_map(self, st: Storage) -> Path:
        """The storage map: every LUN attached to its host, all on one array (``lab``)."""
        path = self.root / "storage_map.csv"
        with open(path, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(["host", "device", "array", "lun"])
            for lun in st.luns:
                name = self.hosts.name(self.host_of(lun.index))
                out.writerow([name, lun.kernel_name, "lab", lun.name])
        return path

    def config(self, h: int, st: Storage) -> JsonObject:
        """Host ``h``'s ``iolens run`` configuration."""
        cfg = lab_config(self.p, self.host_dir(h), st, self.hosts.name(h))
        cfg["drops"] = [d for d in cfg["drops"] if h == 1 or d["type"] in ("fio-hist", "sadf")]
        for d in cfg["drops"]:
            if d["type"] in ("darshan", "slurm"):
                d["path"] = str(self.drops / d["type"])
        del cfg["peer"]["groups"]
        cfg["peer"]["storage_map"] = str(self.root / "storage_map.csv")
        # the login node reads the Darshan logs: which server's LUN each file system is on
        cfg["darshan"]["mounts"] = {
            lun.mount_point: f"{self.hosts.name(self.host_of(lun.index))}/{lun.kernel_name}"
            for lun in st.luns
            if lun.mount_point
        }
        return cfg

    def _start_pipeline(self, st: Storage, cfg: Path) -> str:
        url = self._url = self._cluster()
        self._storage_map(st)
        cfg.write_text(yaml.safe_dump(self.config(1, st)))
        for h in range(1, self.p.hosts + 1):
            (self.host_dir(h) / "iolens.yaml").write_text(yaml.safe_dump(self.config(h, st)))
            self._start_host(h, url)
            devices = [lun.kernel_name for lun in st.luns if self.host_of(lun.index) == h]
            rec = SadcRecorder(
                self.host_dir(h) / "sa",
                self.host_dir(h) / "drops" / "sadf" / "lab.csv",
                devices,
                prefix=self.hosts.prefix(h),
            )
            rec.start()
            self._remember(rec.pid)
            self.recorders.append(rec)
        self.say(f"{self.p.hosts} hosts: " + ", ".join(self._host_line(h, st) for h in self.procs))
        return url

    def _host_line(self, h: int, st: Storage) -> str:
        luns = ",".join(str(lun.index) for lun in st.luns if self.host_of(lun.index) == h)
        return f"{self.hosts.name(h)} ({self.hosts.address(h)}, LUNs {luns})"

    def _iolens(self, h: int, url: str, *args: str) -> list[str]:
        cfg = self.host_dir(h) / "iolens.yaml"
        cmd = [sys.executable, "-m", "pipeline.cli.main", "--config", str(cfg)]
        return self.hosts.run_as(h, [*cmd, "--es-url", self.host_url(url), *args])

    def _start_host(self, h: int, url: str) -> None:
        """Start host ``h``'s ``iolens run``."""
        logs = self.root / "logs" / f"iolens-run-h{h}.log"
        with open(logs, "ab") as out:
            proc = subprocess.Popen(self._iolens(h, url, "run"), stdout=out, stderr=out)
        self.procs[h] = proc
        self._remember(proc.pid)

    def _wind_down(self) -> None:
        try:
            self._kill_running()
            recorders, self.recorders = self.recorders, []
            for rec in recorders:
                rec.stop()
        finally:
            for h, proc in list(self.procs.items()):
                self.procs[h] = None
                if proc is not None:
                    stop_process(proc, 90)
            if left := self.hosts.kill_all():
                log.info("%s processes left in the hosts were killed", left)

    def _final_pass(self, cfg: Path, url: str) -> None:
        for h in range(1, self.p.hosts + 1):
            with open(self.root / "logs" / f"iolens-run-h{h}.log", "ab") as out:
                cmd = self._iolens(h, url, "run", "--once")
                code = subprocess.run(cmd, stdout=out, stderr=out).returncode
            if code != 0:
                raise LabError(f"host {h}'s final iolens run --once exited with {code}")

    def _train(self, cfg: Path, until_s: float) -> None:
        """Thresholds from every host's warm-up samples (one peer group across them), put in
        place atomically in every host's state directory."""
        tmp = self.root / "thresholds.json"
        # niced: training must not take the CPU from the workload at the onset
        cmd = ["nice", "-n", "10", sys.executable, "-m", "pipeline.cli.main", "--config", str(cfg)]
        cmd.append("train")
        cmd += ["--until", str(int(until_s)), "-o", str(tmp)]
        cmd += [str(self.host_dir(h) / "drops" / "sadf" / "lab.csv") for h in self.procs]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise LabError(f"training the peer thresholds failed: {proc.stderr.strip()}")
        for h in self.procs:
            state = self.host_dir(h) / "state"
            state.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(tmp, state / "thresholds.json.new")
            os.replace(state / "thresholds.json.new", state / "thresholds.json")
        self.say("thresholds trained on the warm-up: " + proc.stdout.splitlines()[0])

    def _job(self, name: str, luns: tuple[int, ...], ntasks: int) -> LabJob:
        job = super()._job(name, luns, ntasks)
        job.node = ",".join(sorted({self.hosts.name(self.host_of(lun)) for lun in luns}))
        return job

    def _fio_drop(self, lun: int) -> Path:
        return self.host_dir(self.host_of(lun)) / "drops" / "fio"

    def _on_host(self, lun: int, cmd: list[str]) -> list[str]:
        return self.hosts.run_as(self.host_of(lun), cmd)

    def _mpi_command(self, cmd: list[str], luns: tuple[int, ...]) -> list[str]:
        """``mpiexec`` on the login node (host 1), each rank on the host of its LUN: Hydra
        starts its proxies through a launcher that enters the host (as it would ssh), and they
        connect back to host 1's address."""
        launcher = self.hosts.launcher(
            self.root / "mpi-launch.sh", self.root / "logs" / "mpi-launch.log"
        )
        ranks = ",".join(f"{self.hosts.name(self.host_of(lun))}:1" for lun in luns)
        hydra = ["-launcher", "ssh", "-launcher-exec", str(launcher), "-hosts", ranks]
        hydra += ["-localhost", self.hosts.address(1)]
        return self.hosts.run_as(1, [cmd[0], *hydra, *cmd[1:]])

    def _result_hosts(self, r: LabResult, st: Storage) -> None:
        r.lun_hosts = {lun.index: self.hosts.name(self.host_of(lun.index)) for lun in st.luns}

    def _more_steps(self, r: LabResult) -> list[Step]:
        p, steps = self.p, []
        if p.kill_leader_s is not None:
            at = r.onset_s + p.kill_leader_s
            steps.append((at, self._kill_leader))
        if p.partition is not None:
            h, after, duration = p.partition
            steps.append((r.onset_s + after, lambda: self._cut(h or self._leader(), True)))
            steps.append((r.onset_s + after + duration, lambda: self._cut(None, False)))
        return steps

    def _event(self, what: str) -> None:
        self.events.append((self.clock(), what))
        self.say(what)

    def _leader(self) -> int | None:
        """The host whose instance holds the peer comparison's lease (None: none)."""
        try:
            doc = self.client.get(index=LEASE_INDEX, id=f"peer.{self.p.namespace}")
        except Exception as err:
            log.info("lease not read: %s", err)
            return None
        holder = str(doc["_source"].get("holder", ""))
        names = {self.hosts.name(h): h for h in self.procs}
        return names.get(holder.split(":", 1)[0])

    def _kill_leader(self) -> None:
        h = self._leader()
        proc = self.procs.get(h) if h is not None else None
        if h is None or proc is None:
            self._event("kill-leader: no instance holds the peer comparison's lease")
            return
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.procs[h] = None
        self._event(f"kill-leader: iolens run on {self.hosts.name(h)} killed (SIGKILL)")
        self._restart_later(h)

    def _restart_later(self, h: int) -> None:
        self._later.append((self.clock() + RESTART_AFTER_S, lambda: self._restart(h)))

    def _restart(self, h: int) -> None:
        if self.procs.get(h) is not None:
            return
        self._start_host(h, self._url)
        self._event(f"kill-leader: iolens run on {self.hosts.name(h)} restarted")

    def _cut(self, h: int | None, off: bool) -> None:
        """Cut host ``h`` off (``off``), or join the host cut off again (``h`` None)."""
        if off:
            if h is None:
                self._event("partition: no instance holds the peer comparison's lease")
                return
            self._cut_off = h
        else:
            h, self._cut_off = self._cut_off, None
            if h is None:
                return
        self.hosts.cut(h, off)
        what = "cut off from the cluster" if off else "joined again"
        self._event(f"partition: {self.hosts.name(h)} {what}")

    def _conclude(self, result: LabResult) -> LabResult:
        result = super()._conclude(result)
        result.events, result.leases = self.events, self.leases
        return result

    def _watch(self, now: float) -> None:
        self.watch_leases(now)
        for h, proc in self.procs.items():
            if proc is not None and (code := proc.poll()) is not None:
                self.procs[h] = None  # as systemd's Restart=on-failure: again after RestartSec
                self._event(f"iolens run on {self.hosts.name(h)} exited with {code}")
                self._restart_later(h)

    def watch_leases(self, now: float) -> None:
        """Note each lease's holder when it changed since the last look."""
        try:
            resp = self.client.search(index=LEASE_INDEX, size=100)
        except Exception as err:  # a look, not a step: whatever fails, the next one is tried
            log.debug("leases not read: %s", err)
            return
        for hit in resp["hits"]["hits"]:
            holder = str(hit["_source"].get("holder", ""))
            if int(hit["_source"].get("expires_ms", 0)) <= 0:
                holder = "(released)"
            if self._holders.get(hit["_id"]) != holder:
                self._holders[hit["_id"]] = holder
                self.leases.append((now, hit["_id"], holder))
