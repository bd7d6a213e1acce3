"""Input streams of the site benchmark (``bench/site.py``): N hosts' worth of one drop type,
written at a site's rates from real recordings used as templates, time-compressed.

Each stream writes what its hosts would write over a simulated span that starts at ``t0_s``
(Unix seconds, placed in the past so that every interval has settled by the time it is read):
:meth:`Stream.write_until` appends everything whose simulated time is at most ``sim_s`` seconds
after ``t0_s``; the caller advances ``sim_s`` faster than the wall clock (the speed-up). One
sub-directory per host (``<drop>/<host>/``) gives ``host.name``.

Templates (real recordings of this repository and of ``../shared/data``):

* fio: ``tests/data/fio/samples/node0{1,2}/randrw_clat_hist.{1,2}.log`` (fio 3.33, 100-ms
  histograms); ten consecutive records of one direction are summed into the one-second record
  that ``log_hist_msec=1000`` would have written.
* sysstat: ``tests/data/sysstat/peer_clean_sadf_d.csv`` (``sadf -d -- -d``, seven devices);
  device ``k`` of a host replays template device ``k mod 7``, shifted in time per wrap.
* darshan: every distinct Darshan log of the darshan wheel and ``../shared/data/darshan-logs``
  (as ``bench/darshan_ingest.py`` finds them), copied in turn under a new name (the log's
  identity is job id, start and file name).
* slurm: ``tests/data/slurm/sacct_4478544.txt`` (a job and its ten steps, ``--parsable2``),
  renumbered and moved in time, one file per simulated hour as an hourly ``sacct`` would write.
* events: ``tests/data/events/http_server_6x50.jsonl`` (300 requests of the test server, 2,092
  events), repeated with new connection, thread, task and RPC ids (as ``bench/soak.py`` does).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from fio_lines import encode_rows

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
FIO_SAMPLES = DATA / "fio" / "samples"
SADF_TEMPLATE = DATA / "sysstat" / "peer_clean_sadf_d.csv"
SACCT_TEMPLATE = DATA / "slurm" / "sacct_4478544.txt"
EVENTS_TEMPLATE = DATA / "events" / "http_server_6x50.jsonl"
EVENT_SCHEMA = ROOT / "config" / "schemas" / "http_server.yaml"
SADF_HEADER = "# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util\n"
DAY_S = 86_400.0
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Rates:
    """What one host writes into its drop, per stream.

    Attributes:
        fio_jobs: fio jobs of a client, each logging a read and a write histogram per interval.
        fio_log_hist_msec: fio's ``log_hist_msec`` (ms).
        sadc_interval_s: sadc's sampling interval on a file server (s).
        sadc_devices: block devices (LUNs) of a file server.
        jobs_per_day: jobs a login node sees per day: one Darshan log and one sacct job each.
        requests_per_s: requests per second of an instrumented application host.
    """

    fio_jobs: int = 4
    fio_log_hist_msec: int = 1000
    sadc_interval_s: int = 5
    sadc_devices: int = 16
    jobs_per_day: int = 2000
    requests_per_s: float = 5.0


class Stream:
    """One drop type's input for ``hosts`` hosts under ``root``, simulated from ``t0_s``."""

    name = ""
    drop_type = ""
    primary = ""
    """``type-dataset`` of the data stream with one document per input unit (the drain waits for
    ``expected`` of them)."""

    def __init__(self, root: Path, hosts: int, rates: Rates, t0_s: float) -> None:
        self.root = root
        self.hosts = [f"{self.name}{h + 1:02d}" for h in range(hosts)]
        self.rates = rates
        self.t0_s = t0_s
        self.expected = 0
        for h in self.hosts:
            (root / h).mkdir(parents=True, exist_ok=True)

    def settle_s(self, overrides: dict[str, Any]) -> float:
        """Seconds a scheduled job waits after the last input before it writes (s)."""
        return 0.0

    def drop(self) -> dict[str, Any]:
        """The ``drops:`` entry of the configuration."""
        return {"type": self.drop_type, "path": str(self.root)}

    def settings(self) -> dict[str, Any]:
        """Configuration sections this stream needs besides its drop."""
        return {}

    def write_until(self, sim_s: float) -> None:
        """Append every input unit whose simulated time is at most ``sim_s`` (s after t0)."""
        raise NotImplementedError

    def finish(self) -> None:
        """After the last write: whatever a finished writer leaves (nothing by default)."""


def stamp(epoch_s: float) -> str:
    """``YYYY-MM-DD HH:MM:SS`` UTC of ``epoch_s``."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%d %H:%M:%S")


def one_second_histograms(log_ms: int) -> tuple[I64, I64]:
    """Read and write records of the fio samples, summed over ``log_ms`` (a multiple of their
    100 ms): shapes ``(n, 1859)`` int64, columns time, ddir, bs, then the bins."""
    per = log_ms // 100
    reads: list[I64] = []
    writes: list[I64] = []
    for path in sorted(FIO_SAMPLES.glob("node*/*_clat_hist.*.log")):
        rows = np.loadtxt(path, delimiter=",", dtype=np.int64)
        for ddir, out in ((0, reads), (1, writes)):
            sel = rows[rows[:, 1] == ddir]
            n = len(sel) // per
            summed = sel[: n * per].reshape(n, per, -1).sum(axis=1)
            summed[:, 1] = ddir
            summed[:, 2] = sel[0, 2]
            out.append(summed)
    return np.concatenate(reads), np.concatenate(writes)


class FioStream(Stream):
    """fio clients: ``fio_jobs`` histogram logs per host, a read and a write line per interval."""

    name, drop_type, primary = "fio", "fio-hist", "metrics-fio.histogram"

    def __init__(self, root: Path, hosts: int, rates: Rates, t0_s: float) -> None:
        super().__init__(root, hosts, rates, t0_s)
        self.reads, self.writes = one_second_histograms(rates.fio_log_hist_msec)
        self.step_s = rates.fio_log_hist_msec / 1000
        self.done = 0

    def settle_s(self, overrides: dict[str, Any]) -> float:
        """``fio.settle_s`` (default 10 s): the latency job waits that long after the last line."""
        return float(overrides.get("fio", {}).get("settle_s", 10.0))

    def settings(self) -> dict[str, Any]:
        """fio's ``run_start``: the job-relative times start at ``t0_s``."""
        start = datetime.fromtimestamp(self.t0_s, UTC).isoformat().replace("+00:00", "Z")
        return {"fio": {"run_start": start}}

    def write_until(self, sim_s: float) -> None:
        """Append the intervals up to ``sim_s`` to every job's log."""
        last = int(sim_s / self.step_s)
        if last <= self.done:
            return
        k = np.arange(self.done + 1, last + 1, dtype=np.int64)
        for h, host in enumerate(self.hosts):
            for job in range(1, self.rates.fio_jobs + 1):
                src = (k + 7 * job + 13 * h) % len(self.reads)
                rows = np.empty((2 * len(k), self.reads.shape[1]), dtype=np.int64)
                rows[0::2] = self.reads[src]
                rows[1::2] = self.writes[src % len(self.writes)]
                rows[:, 0] = np.repeat(k * self.rates.fio_log_hist_msec + job % 3, 2)
                with open(self.root / host / f"site_clat_hist.{job}.log", "ab") as fh:
                    fh.write(encode_rows(rows))
        self.expected += 2 * len(k) * self.rates.fio_jobs * len(self.hosts)
        self.done = last


def sadf_template() -> tuple[list[str], npt.NDArray[np.float64]]:
    """Devices and values ``(times, devices, 8)`` of the real ``sadf -d`` recording."""
    rows = [ln.split(";") for ln in SADF_TEMPLATE.read_text().splitlines() if ln[:1] != "#"]
    devices = list(dict.fromkeys(r[3] for r in rows))
    values = np.array([[float(v) for v in r[4:12]] for r in rows])
    return devices, values.reshape(-1, len(devices), 8)


class SysstatStream(Stream):
    """File servers: ``sadf -d`` lines of ``sadc_devices`` devices every ``sadc_interval_s``."""

    name, drop_type, primary = "sysstat", "sadf", "metrics-sysstat.diskio"

    def __init__(self, root: Path, hosts: int, rates: Rates, t0_s: float) -> None:
        super().__init__(root, hosts, rates, t0_s)
        self.template = sadf_template()[1]
        self.done = 0
        for host in self.hosts:
            (root / host / "sadf-d.csv").write_text(SADF_HEADER)

    def lines(self, host: str, first: int, last: int, t0_s: float) -> str:
        """The CSV rows of samples ``first..last`` of ``host`` (sample k ends at t0 + k dt)."""
        dt = self.rates.sadc_interval_s
        times, ndev = self.template.shape[:2]
        out = []
        for k in range(first, last + 1):
            prefix = f"{host};{dt};{stamp(t0_s + k * dt)} UTC;"
            for d in range(self.rates.sadc_devices):
                v = self.template[(k + 53 * (d // ndev)) % times, d % ndev]
                out.append(f"{prefix}dm-{d};" + ";".join(f"{x:.2f}" for x in v) + "\n")
        return "".join(out)

    def training_file(self, path: Path, span_s: float) -> None:
        """Fault-free samples of every host over ``span_s`` before ``t0_s``, for iolens train."""
        n = int(span_s / self.rates.sadc_interval_s)
        start = self.t0_s - n * self.rates.sadc_interval_s
        path.write_text(SADF_HEADER + "".join(self.lines(h, 1, n, start) for h in self.hosts))

    def write_until(self, sim_s: float) -> None:
        """Append the samples up to ``sim_s`` to every host's file."""
        last = int(sim_s / self.rates.sadc_interval_s)
        if last <= self.done:
            return
        for host in self.hosts:
            with open(self.root / host / "sadf-d.csv", "a") as fh:
                fh.write(self.lines(host, self.done + 1, last, self.t0_s))
        self.done = last
        per_doc = 15 / self.rates.sadc_interval_s  # peer.downsample_s, the default 15 s
        self.expected = len(self.hosts) * self.rates.sadc_devices * max(0, int(last / per_doc) - 1)


class DarshanStream(Stream):
    """A login node's Darshan logs: ``jobs_per_day`` logs, the real logs taken in turn."""

    name, drop_type, primary = "darshan", "darshan", "logs-darshan.job"

    def __init__(self, root: Path, hosts: int, rates: Rates, t0_s: float) -> None:
        super().__init__(root, hosts, rates, t0_s)
        from darshan_ingest import LOGS_DIR, bundled_dir, find_logs

        self.logs = [
            Path(x.path) for x in find_logs([("wheel", bundled_dir()), ("shared", LOGS_DIR)])
        ]
        self.every_s = DAY_S / rates.jobs_per_day
        self.done = 0

    def write_until(self, sim_s: float) -> None:
        """Copy in the logs of the jobs that ended by ``sim_s`` (renamed into place whole)."""
        last = int(sim_s / self.every_s)
        for k in range(self.done, last):
            for h, host in enumerate(self.hosts):
                src = self.logs[(k + 17 * h) % len(self.logs)]
                final = self.root / host / f"{src.stem}_site{k:06d}.darshan"
                part = final.with_suffix(".part")
                shutil.copyfile(src, part)
                os.replace(part, final)
        self.expected += max(0, last - self.done) * len(self.hosts)
        self.done = max(self.done, last)


class SlurmStream(Stream):
    """A login node's sacct rows: ``jobs_per_day`` jobs of the real job's shape (a job, its
    batch and extern steps and eight numbered steps), one file per simulated hour."""

    name, drop_type, primary = "slurm", "slurm", "logs-slurm.job"

    def __init__(self, root: Path, hosts: int, rates: Rates, t0_s: float) -> None:
        super().__init__(root, hosts, rates, t0_s)
        header, *rows = SACCT_TEMPLATE.read_text().splitlines()
        self.header = header + "\n"
        self.rows = [r.split("|") for r in rows]
        self.job_end = max(self._epoch(r[5]) for r in self.rows)
        self.every_s = DAY_S / rates.jobs_per_day
        self.done = 0

    @staticmethod
    def _epoch(text: str) -> float:
        return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()

    def job_lines(self, job_id: int, end_s: float) -> str:
        """The template's rows as job ``job_id`` ending at ``end_s`` (Unix s, written UTC)."""
        shift = end_s - self.job_end
        out = []
        for r in self.rows:
            r = list(r)
            for col in (0, 1):
                r[col] = str(job_id) + r[col][len("4478544") :]
            for col in (4, 5):
                r[col] = datetime.fromtimestamp(self._epoch(r[col]) + shift, UTC).strftime(
                    "%Y-%m-%dT%H:%M:%S"
                )
            out.append("|".join(r) + "\n")
        return "".join(out)

    def write_until(self, sim_s: float) -> None:
        """Append the rows of the jobs that ended by ``sim_s`` to the hour's file."""
        last = int(sim_s / self.every_s)
        for k in range(self.done, last):
            end_s = self.t0_s + (k + 1) * self.every_s
            for h, host in enumerate(self.hosts):
                path = self.root / host / f"sacct-{int((k + 1) * self.every_s // 3600):04d}.txt"
                with open(path, "a") as fh:
                    if fh.tell() == 0:
                        fh.write(self.header)
                    fh.write(self.job_lines(5_000_000 + 100_000 * h + k, end_s))
        self.expected += max(0, last - self.done) * len(self.hosts) * len(self.rows)
        self.done = max(self.done, last)


class EventsStream(Stream):
    """Application hosts: the recorded server's requests again and again at ``requests_per_s``."""

    name, drop_type, primary = "events", "events", "logs-iolens.request"

    def __init__(self, root: Path, hosts: int, rates: Rates, t0_s: float) -> None:
        super().__init__(root, hosts, rates, t0_s)
        sync, *events = [json.loads(ln) for ln in EVENTS_TEMPLATE.read_text().splitlines()]
        self.sync = sync
        self.events = events
        self.per_copy = sum(e["ev"] == "ReqStart" for e in events)
        self.every_s = self.per_copy / rates.requests_per_s
        self.done = 0
        for host in self.hosts:
            first = dict(sync, wall_ns=int(t0_s * 1e9))
            (root / host / "server.jsonl").write_text(json.dumps(first) + "\n")

    def drop(self) -> dict[str, Any]:
        """An events drop with the test server's schema."""
        return {**super().drop(), "schema": str(EVENT_SCHEMA)}

    def copy_lines(self, k: int) -> bytes:
        """Copy ``k`` of the recording, ``k * every_s`` later, with ids of its own."""
        shift = int(k * self.every_s * 1e9)
        lines = []
        for e in self.events:
            e2 = dict(e, ts=e["ts"] + shift)
            for a in ("conn", "_conn", "task", "rpc"):
                if a in e2:
                    e2[a] = f"{e2[a]}#{k}"
            if isinstance(e2.get("tid"), int):
                e2["tid"] += 1_000_000 * (k + 1)
            lines.append(json.dumps(e2, separators=(",", ":")))
        return ("\n".join(lines) + "\n").encode()

    def write_until(self, sim_s: float) -> None:
        """Append the copies whose period ended by ``sim_s``."""
        last = int(sim_s / self.every_s)
        for k in range(self.done, last):
            data = self.copy_lines(k)
            for host in self.hosts:
                with open(self.root / host / "server.jsonl", "ab") as fh:
                    fh.write(data)
        self.expected += max(0, last - self.done) * len(self.hosts) * self.per_copy
        self.done = max(self.done, last)

    def finish(self) -> None:
        """Age the logs: a finished log's open requests are closed (as bench/soak.py does)."""
        old = self.t0_s - 3600
        for host in self.hosts:
            os.utime(self.root / host / "server.jsonl", (old, old))


STREAMS: dict[str, type[Stream]] = {
    s.name: s for s in (FioStream, SysstatStream, DarshanStream, SlurmStream, EventsStream)
}


def span_note(span_s: float) -> str:
    """``"15 min"``/``"2 h"``: a simulated span for tables."""
    return f"{span_s / 3600:g} h" if span_s >= 3600 else f"{span_s / 60:g} min"
