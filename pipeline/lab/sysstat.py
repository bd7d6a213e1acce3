"""The lab's disk recording: sadc every second, shipped live as ``sadf -d`` CSV.

sadc writes its binary activity file the way the ``cycle`` daemon does (``sadc -S DISK 1
<dir>/sa-YYYYMMDDTHHMMSSZ``, :mod:`pipeline.formats.sysstat.sadc_cycle`). A sadc file is read whole
once it is finished, which is too late to watch a fault live, so the recorder also follows the
growing file: every ``every_s`` it runs ``sadf -d -U FILE -- -d -p --dev=<LUNs>``
(sysstat 12.6: ``--dev`` limits the output to the named devices) and appends the records
newer than the last one written to a CSV file in the ``sadf`` drop, which ``iolens run`` tails
line by line. Only the lab's LUNs are shipped: the machine's other disks are not part of the
lab's storage.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pipeline.formats.sysstat.sadc_cycle import SADC

log = logging.getLogger(__name__)


class SadcRecorder:
    """sadc recording ``devices`` every second, followed into a CSV file.

    Args:
        sa_dir: where the sadc file goes.
        csv_path: the CSV file in the ``sadf`` drop directory (appended to).
        devices: kernel names of the devices to ship (``loop3``).
        every_s: how often the growing sadc file is converted.
        prefix: what sadc runs under (a lab host's namespaces: :meth:`Hosts.prefix`).
    """

    def __init__(
        self,
        sa_dir: Path,
        csv_path: Path,
        devices: Sequence[str],
        every_s: float = 2.0,
        prefix: Sequence[str] = (),
    ) -> None:
        self.prefix = list(prefix)
        self.sa_dir = sa_dir
        self.csv_path = csv_path
        self.devices = list(devices)
        self.every_s = every_s
        self.sa_file = sa_dir / datetime.now(tz=UTC).strftime("sa-%Y%m%dT%H%M%SZ")
        self.last_s = 0
        self.rows = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="sadf-follow", daemon=True)

    def start(self) -> None:
        """Start sadc and the follower."""
        self.sa_dir.mkdir(parents=True, exist_ok=True)
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            [*self.prefix, SADC, "-S", "DISK", "1", str(self.sa_file)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._thread.start()

    @property
    def pid(self) -> int | None:
        """sadc's process id once started."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        """Stop sadc, convert what it wrote last and stop the follower."""
        self._stop.set()
        self._thread.join(timeout=30)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
        self.poll(final=True)

    def _follow(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                self.poll()
            except (OSError, subprocess.SubprocessError) as err:
                log.warning("following %s: %s", self.sa_file, err)

    def poll(self, final: bool = False) -> int:
        """Append the records written since the last poll; returns rows appended. ``final``
        (sadc has stopped): the newest record is complete too."""
        if not self.sa_file.exists():
            return 0
        # the whole file each time (a lab's is small): sadf's -s is a time of day, which
        # breaks at midnight; rows already shipped are skipped by their timestamps
        cmd = ["sadf", "-d", "-U", str(self.sa_file), "--", "-d", "-p"]
        cmd.append("--dev=" + ",".join(self.devices))
        env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)
        if out.returncode != 0:
            log.debug("sadf on %s: %s", self.sa_file, out.stderr.strip())
            return 0
        header, new, last = _new_rows(out.stdout, self.last_s, final)
        if not new:
            return 0
        with open(self.csv_path, "a", encoding="utf-8") as f:
            if self.csv_path.stat().st_size == 0 and header:
                f.write(header + "\n")
            f.write("".join(r + "\n" for r in new))
        self.last_s = last
        self.rows += len(new)
        return len(new)


def _new_rows(text: str, after_s: int, final: bool = False) -> tuple[str, list[str], int]:
    """``(header, rows with a timestamp after after_s, newest timestamp)`` of sadf -d text
    (``host;interval;timestamp;DEV;...``); a record is taken only once all its devices'
    rows are there, i.e. when a newer record follows (the newest may be half written), or
    when ``final`` (sadc has stopped)."""
    header = ""
    by_time: dict[int, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            header = line
            continue
        fields = line.split(";")
        if len(fields) < 4 or not fields[2].isdigit():
            continue
        t = int(fields[2])
        if t > after_s:
            by_time.setdefault(t, []).append(line)
    times = sorted(by_time) if final else sorted(by_time)[:-1]
    rows = [r for t in times for r in by_time[t]]
    return header, rows, (times[-1] if times else after_s)
