"""The ``cycle`` daemon: daily sadc activity files, rolled over at 00:00:05 UTC (seed 001 4.1.1).

The daemon runs sysstat's collector over and over::

    /usr/lib/sysstat/sadc -S DISK <interval> <count> DIR/sa-20261122T051100Z

(reference/sysstat.md 1.1: Debian keeps sadc outside ``$PATH``; without ``-S DISK`` there is
no per-device data). Each run is sized by the time left until the next rollover, so a file
never crosses 00:00:05 UTC and clock corrections or reboots give shorter files instead of a
drifting file-creation time (seed 001 4.1.1). The 5 s after midnight absorb a backward clock
correction of up to 5 s without a file dated 23:59 of the previous day.

File names: ``sa-YYYYMMDDTHHMMSSZ``, the ISO 8601 *basic* format of sadc's start time in UTC,
whole seconds (truncated). They sort chronologically as plain strings and contain no ``:``, so
they are safe on every filesystem and in URLs. Should the name already exist (two starts within
one second), ``-1``, ``-2``, ... is appended, which still sorts between that second and the
next.

When sadc exits, its finished file is handed to the drop directory atomically: ``os.replace``
within a filesystem, otherwise a copy to a hidden ``.sa-...tmp`` name (the drop watchers skip
dot files) that is fsynced and renamed. On stop (SIGTERM/SIGINT in the CLI) the running sadc is
terminated (sadc 12.6.1 exits with status 143 on SIGTERM) and its partial file handed over too.

The timestamps in a file are sadc's own (interval end, UTC; reference/sysstat.md 1.5); the
daemon's clock only decides names and counts.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

from pipeline.formats.sysstat.handover import free_name, hand_over
from pipeline.formats.sysstat.sadc_process import SadcHandle, Spawn, popen_spawn, sadc_command

log = logging.getLogger(__name__)

SADC = "/usr/lib/sysstat/sadc"
"""Debian's sadc (sysstat 12.6.1, reference/sysstat.md 1.1)."""

ROLLOVER = time(0, 0, 5)
"""Daily rollover, UTC: 5 s after midnight (seed 001 4.1.1)."""

FILE_PREFIX = "sa-"
NAME_FORMAT = "%Y%m%dT%H%M%SZ"

MIN_COUNT = 2
"""sadc's first sample is only a reference: fewer than 2 samples give a file without records."""

RETRY_BASE_S = 1.0
RETRY_CAP_S = 300.0
POLL_S = 0.5
"""How often a running sadc is checked against the stop event (the stop latency), seconds."""
TERMINATE_GRACE_S = 10.0
"""How long sadc may take to exit after SIGTERM before it is killed, seconds."""
MIN_SLEEP_S = 0.1
"""Shortest wait before a new plan, so that a clock read just before a rollover cannot spin."""

STOP_STATUSES = frozenset({0, 143, -15})
"""sadc's exit statuses after our SIGTERM (143 = 128 + SIGTERM; -15 = killed by it)."""


@dataclass(frozen=True)
class RunPlan:
    """One sadc run; unpacks as ``file_name, count, ends_at = plan``.

    Attributes:
        file_name: ``sa-YYYYMMDDTHHMMSSZ`` of the start time (UTC, whole seconds).
        count: sadc's ``count`` argument, the number of samples: ``floor(left / interval) + 1``,
            i.e. ``count - 1 = floor(left / interval)`` records. May be below ``MIN_COUNT``
            when less than one interval is left.
        ends_at: the rollover the run is sized for (aware, UTC); its last sample falls at
            ``start + (count - 1) * interval <= ends_at``.
    """

    file_name: str
    count: int
    ends_at: datetime

    def __iter__(self) -> Iterator[str | int | datetime]:
        """``file_name, count, ends_at``, for tuple unpacking."""
        return iter((self.file_name, self.count, self.ends_at))


def next_rollover(now_utc: datetime, rollover: time = ROLLOVER) -> datetime:
    """The first ``rollover`` time of day strictly after ``now_utc``.

    Args:
        now_utc: an aware datetime (converted to UTC).
        rollover: time of day, UTC.

    Returns:
        Aware UTC datetime; exactly at the rollover, the next day's.

    Raises:
        ValueError: ``now_utc`` is naive.
    """
    if now_utc.tzinfo is None or now_utc.utcoffset() is None:
        raise ValueError(f"now_utc must be timezone-aware, got {now_utc!r}")
    now = now_utc.astimezone(UTC)
    today = datetime.combine(now.date(), rollover, tzinfo=UTC)
    return today if today > now else today + timedelta(days=1)


def file_name_for(start_utc: datetime) -> str:
    """``sa-YYYYMMDDTHHMMSSZ`` for a start time (aware; truncated to whole seconds, UTC)."""
    return FILE_PREFIX + start_utc.astimezone(UTC).strftime(NAME_FORMAT)


def plan_run(now_utc: datetime, interval_s: int, rollover: time = ROLLOVER) -> RunPlan:
    """Name and size of a sadc run that starts now and ends at the next rollover (seed 001 4.1.1).

    ``count = floor(left / interval_s) + 1`` samples: sadc's first sample is a reference
    (reference/sysstat.md 1.1: count samples give count - 1 records), so the last sample falls
    on or just before the rollover, and the next run begins right after it without a gap.

    Args:
        now_utc: the current time, timezone-aware.
        interval_s: sadc's sampling interval, whole seconds >= 1.
        rollover: the daily rollover time of day, UTC.

    Returns:
        The :class:`RunPlan`. A clock that is 3 s behind at 00:00:02 gives a 3 s run (4
        samples) named for 00:00:02 of the new day, not a file dated 23:59 the day before.

    Raises:
        ValueError: ``interval_s`` < 1, or ``now_utc`` is naive.
    """
    if interval_s < 1:
        raise ValueError(f"interval_s must be a whole number of seconds >= 1, got {interval_s}")
    ends_at = next_rollover(now_utc, rollover)
    left_s = (ends_at - now_utc).total_seconds()
    count = math.floor(left_s / interval_s) + 1
    return RunPlan(file_name_for(now_utc), count, ends_at)


def retry_delay_s(failures: int, base_s: float = RETRY_BASE_S, cap_s: float = RETRY_CAP_S) -> float:
    """Backoff before the next start after ``failures`` consecutive failed runs (>= 1).

    ``base_s * 2 ** (failures - 1)``, capped at ``cap_s``: 1, 2, 4, ... 256, 300, 300 s.

    Raises:
        ValueError: ``failures`` < 1.
    """
    if failures < 1:
        raise ValueError(f"failures must be >= 1, got {failures}")
    return min(cap_s, base_s * 2.0 ** min(failures - 1, 64))


class CycleDaemon:
    """Runs sadc back to back into ``sa-*`` files in ``directory`` (seed 001 4.1.1).

    Args:
        directory: where sadc writes (created if missing).
        drop: where finished files are handed over (None: they stay in ``directory``).
        interval_s: sadc's interval, whole seconds >= 1.
        stop: set it to stop; a running sadc is then terminated within ``poll_s`` and its
            partial file handed over.
        sadc: the sadc executable.
        rollover: daily rollover time of day, UTC.
        clock: current time, aware (default: ``datetime.now(UTC)``).
        sleep: waits the given seconds, returning early when stopped (default ``stop.wait``).
        spawn: starts sadc (default :func:`popen_spawn`).
        on_handover: called with each file's final path (tests wait on it).
        poll_s: how often a running sadc is checked against ``stop``.
        retry_base_s, retry_cap_s: the :func:`retry_delay_s` schedule.

    Raises:
        ValueError: ``interval_s`` < 1.
    """

    def __init__(
        self,
        directory: Path,
        *,
        drop: Path | None = None,
        interval_s: int = 1,
        stop: threading.Event | None = None,
        sadc: str = SADC,
        rollover: time = ROLLOVER,
        clock: Callable[[], datetime] | None = None,
        sleep: Callable[[float], object] | None = None,
        spawn: Spawn = popen_spawn,
        on_handover: Callable[[Path], None] | None = None,
        poll_s: float = POLL_S,
        retry_base_s: float = RETRY_BASE_S,
        retry_cap_s: float = RETRY_CAP_S,
    ) -> None:
        if interval_s < 1:
            raise ValueError(f"interval_s must be a whole number of seconds >= 1, got {interval_s}")
        self.directory = directory
        self.drop = drop
        self.interval_s = interval_s
        self.stop = stop if stop is not None else threading.Event()
        self.sadc = sadc
        self.rollover = rollover
        self.clock = clock if clock is not None else _utc_now
        self.sleep = sleep if sleep is not None else self.stop.wait
        self.spawn = spawn
        self.on_handover = on_handover
        self.poll_s = poll_s
        self.retry_base_s = retry_base_s
        self.retry_cap_s = retry_cap_s
        self.runs = 0
        self.failures = 0

    def run(self) -> int:
        """Cycle until ``stop`` is set; returns 0 (failed runs are retried, never fatal)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.drop is not None:
            self.drop.mkdir(parents=True, exist_ok=True)
            self._recover()
        consecutive = 0
        while not self.stop.is_set():
            ok = self._one_run()
            if ok is None or self.stop.is_set():
                continue
            if ok:
                consecutive = 0
                continue
            consecutive += 1
            self.failures += 1
            delay = retry_delay_s(consecutive, self.retry_base_s, self.retry_cap_s)
            log.info(
                "stage=sadc-cycle retrying in %.0f s (failure %d in a row)", delay, consecutive
            )
            self.sleep(delay)
        log.info("stage=sadc-cycle stopped after %d runs", self.runs)
        return 0

    def _one_run(self) -> bool | None:
        """Plan, run and hand over one file: True ok, False failed, None nothing was started."""
        now = self.clock()
        plan = plan_run(now, self.interval_s, self.rollover)
        if plan.count < MIN_COUNT:
            wait_s = max(MIN_SLEEP_S, (plan.ends_at - now).total_seconds())
            log.debug("stage=sadc-cycle %.3f s to the rollover: waiting", wait_s)
            self.sleep(wait_s)
            return None
        dirs = (self.directory,) if self.drop is None else (self.directory, self.drop)
        path = self.directory / free_name(plan.file_name, *dirs)
        argv = sadc_command(self.sadc, self.interval_s, plan.count, path)
        handle = self._start(argv, plan)
        if handle is None:
            return False
        status, stopped = self._wait(handle)
        self._finish(path)
        return self._succeeded(status, stopped, argv, handle)

    def _start(self, argv: list[str], plan: RunPlan) -> SadcHandle | None:
        """Start sadc; None (logged) when it cannot be started."""
        try:
            handle = self.spawn(argv)
        except OSError as err:
            log.error("stage=sadc-cycle cannot start %s: %s", self.sadc, err)
            return None
        self.runs += 1
        log.info(
            "stage=sadc-cycle sadc started: %s (%d samples, until %s)",
            Path(argv[-1]).name,
            plan.count,
            plan.ends_at.isoformat(),
        )
        return handle

    @staticmethod
    def _succeeded(status: int, stopped: bool, argv: list[str], handle: SadcHandle) -> bool:
        """Whether a finished run went well: it exited 0, or as sadc does when we stop it."""
        if stopped and status in STOP_STATUSES:
            return True
        if status != 0:
            log.error(
                "stage=sadc-cycle sadc exited with status %d (%s): %s",
                status,
                " ".join(argv),
                handle.stderr_text() or "(no message)",
            )
            return False
        return True

    def _wait(self, handle: SadcHandle) -> tuple[int, bool]:
        """Exit status of sadc and whether it was stopped by us."""
        while True:
            status = handle.wait(self.poll_s)
            if status is not None:
                return status, False
            if self.stop.is_set():
                break
        handle.terminate()
        status = handle.wait(TERMINATE_GRACE_S)
        if status is None:
            log.warning(
                "stage=sadc-cycle sadc ignored SIGTERM for %g s: killing", TERMINATE_GRACE_S
            )
            handle.kill()
            status = handle.wait(None)
        return (status if status is not None else -9), True

    def _finish(self, path: Path) -> None:
        """Hand over ``path`` (drop set) or leave it; an empty or missing file is dropped."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0:
            path.unlink()
            return
        if self.drop is None:
            self._handed(path)
            return
        try:
            dest = hand_over(path, self.drop)
        except OSError as err:
            log.error("stage=sadc-cycle cannot hand %s over to %s: %s", path, self.drop, err)
            return
        self._handed(dest)

    def _handed(self, path: Path) -> None:
        log.info("stage=sadc-cycle finished %s", path)
        if self.on_handover is not None:
            self.on_handover(path)

    def _recover(self) -> None:
        """Hand over ``sa-*`` files left by a previous daemon (a crash or a reboot).

        A sadc orphaned by a killed daemon would still be writing; the moved file then keeps
        growing in the drop directory. Stop such a process before restarting the daemon.
        """
        assert self.drop is not None
        for left in sorted(self.directory.glob(FILE_PREFIX + "*")):
            if left.is_file():
                log.warning("stage=sadc-cycle handing over %s left by an earlier run", left.name)
                self._finish(left)


def _utc_now() -> datetime:
    return datetime.now(UTC)
