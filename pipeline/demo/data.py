"""The demo's drop directories, laid out from real data that ships with iolens or its wheels.

One drop directory per type under the demo's ``drops/`` (:mod:`pipeline.demo.layout`), from the
recordings shipped in the package (``pipeline/assets/demo``, which the checkout's ``tests/data``
links to):

* ``incident/fio``, ``sadf``, ``darshan`` and ``incident/slurm``: the recording of one run of
  the incident lab (``demo/incident``, its README says how it was made): six loop-device LUNs,
  one of them slowed by 20 ms per I/O for 150 s; fio latency-histogram logs of every LUN, the
  ``sadf -d`` CSV of every LUN, the Darshan logs of every job (fio segments and two MPI-IO
  jobs) and their Slurm records. The peer thresholds are trained on its warm-up first, as the
  lab does, so the incident job opens one incident on the slowed LUN;
* ``fio``: fio 3.33 latency-histogram logs of two hosts (``demo/fio``);
* ``darshan``: also the Darshan logs of pydarshan's test inputs (the ``darshan`` wheel, a
  dependency): ``sample-badost.darshan`` (2,048 processes writing at 673 MiB/s, one slow OST),
  ``sample.darshan`` (job 4478544) and ``sample-goodost.darshan``;
* ``slurm``: the sacct records of job 4478544 (``demo/slurm``), the job of
  ``sample.darshan``;
* ``events``: a run of the instrumented HTTP server, 300 requests of six types
  (``demo/events/http_server_6x50.jsonl``).

No LMT export goes with them: the two in the test data (``tests/data/lmt``) cover other days
than the Darshan logs, so they are not shipped. Files are copied once; a file already in place
is left as it is, so a second demo finds the same files and the registry knows them.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from pipeline.assets import required
from pipeline.errors import ConfigError

DARSHAN_LOGS = ("sample-badost.darshan", "sample.darshan", "sample-goodost.darshan")
"""pydarshan's test logs the demo reads (``darshan/tests/input`` of the wheel)."""
INCIDENT = ("demo", "incident")
"""The incident lab's recording (under the assets): its drops and ``recording.json``."""


@dataclass(frozen=True)
class Recording:
    """What ``recording.json`` says of the incident lab's run (``scripts/record_incident.py``).

    Attributes:
        host: the machine's name; slow_lun: the LUN slowed, as the peer comparison names it.
        t0_s, onset_s, fault_end_s, end_s: the workload's start, the fault's on and off and
            the workload's end (Unix s); the thresholds are trained on what precedes the onset.
        jobs: job id -> job name (``fio-lun3``, ``mpiio``).
    """

    host: str
    slow_lun: str
    t0_s: float
    onset_s: float
    fault_end_s: float
    end_s: float
    jobs: dict[str, str]


def recording() -> Recording:
    """The incident recording's description.

    Raises:
        ConfigError: the recording is missing from the installed package.
    """
    data = json.loads((required(*INCIDENT) / "recording.json").read_text(encoding="utf-8"))
    return Recording(
        data["host"],
        data["slow_lun"],
        data["t0_s"],
        data["onset_s"],
        data["fault_end_s"],
        data["end_s"],
        {str(j["job_id"]): j["name"] for j in data["jobs"]},
    )


def sysstat_recording() -> Path:
    """The incident recording's ``sadf -d`` CSV (the thresholds are trained on its warm-up).

    Raises:
        ConfigError: the recording is missing from the installed package.
    """
    return required(*INCIDENT, "sadf", "lab.csv")


@dataclass(frozen=True)
class Placed:
    """A file of the demo in its drop directory.

    Attributes:
        drop: the drop directory's type (``fio-hist``, ``sadf``...).
        path: where it is now; source: where it was copied from.
        copied: copied by this call (False: it was there already).
    """

    drop: str
    path: Path
    source: Path
    copied: bool


def darshan_inputs() -> Path:
    """The directory of pydarshan's test logs in the installed ``darshan`` wheel.

    Raises:
        ConfigError: the wheel is missing or holds no test logs.
    """
    import darshan

    where = Path(darshan.__file__).resolve().parent / "tests" / "input"
    if not (where / DARSHAN_LOGS[0]).is_file():
        raise ConfigError(f"the darshan wheel has no test logs in {where}: reinstall darshan")
    return where


def sources() -> list[tuple[str, Path, Path]]:
    """``(drop type, source file, path under the drop directory)`` of every demo file.

    Raises:
        ConfigError: the recordings are missing from the installed package.
    """
    data = required("demo")
    lab = required(*INCIDENT)
    fio = data / "fio"
    out = [("fio-hist", f, Path("fio") / f.relative_to(fio)) for f in sorted(fio.glob("*/*.log"))]
    out += [
        ("fio-hist", f, Path("incident") / f.relative_to(lab))
        for f in sorted((lab / "fio").glob("*/*.log.gz"))
    ]
    out.append(("sadf", sysstat_recording(), Path("sadf/lab.csv")))
    out += [("darshan", darshan_inputs() / n, Path("darshan") / n) for n in DARSHAN_LOGS]
    out += [("darshan", f, Path("darshan") / f.name) for f in sorted(lab.glob("darshan/*.darshan"))]
    out.append(("slurm", data / "slurm" / "sacct_4478544.txt", Path("slurm/sacct.txt")))
    out.append(("slurm", lab / "slurm" / "sacct.txt", Path("incident/slurm/sacct.txt")))
    out.append(("events", data / "events" / "http_server_6x50.jsonl", Path("events/http.jsonl")))
    return out


def lay_out(drops: Path) -> list[Placed]:
    """Copy every demo file (:func:`sources`) under ``drops`` unless it is there already.

    Raises:
        ConfigError: as :func:`sources`.
        OSError: a file cannot be copied.
    """
    placed = []
    for drop, src, rel in sources():
        dest = drops / rel
        copied = not dest.exists()
        if copied:
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.part")  # never a half-copied file in a drop
            shutil.copy2(src, tmp)  # its modification time too: the logs are complete
            tmp.rename(dest)
        placed.append(Placed(drop, dest, src, copied))
    return placed
