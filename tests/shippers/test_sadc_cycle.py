"""The ``cycle`` daemon (seed 001 4.1.1): run plans as a table, the daemon with a fake clock,
sleep and sadc, one real run of Debian's sadc 12.6.1 and the CLI stopped by SIGTERM.

The fake sadc records its argv, writes ``sadc-bytes`` into its file and, when waited on,
advances the fake clock by the run's length (``(count - 1) * interval``), so a run that
started at 05:11:00 ends exactly at the rollover, as a real sadc would (up to its start-up
time and alarm drift).
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time as walltime
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta, timezone
from pathlib import Path

import pytest

from pipeline.cli.main import main
from pipeline.formats.sysstat import handover
from pipeline.formats.sysstat.handover import hand_over
from pipeline.formats.sysstat.sadc_cycle import (
    CycleDaemon,
    RunPlan,
    file_name_for,
    plan_run,
    retry_delay_s,
)

SADC = "/usr/lib/sysstat/sadc"
REPO = Path(__file__).resolve().parents[2]


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- plan_run ------------------------------------------------------------------------------

PLANS = [
    # now (UTC), interval s, file name, sadc count, ends at
    ("2026-11-22T05:11:00", 1, "sa-20261122T051100Z", 67746, "2026-11-23T00:00:05"),
    # just before the rollover: one interval left -> 2 samples, 1 record
    ("2026-11-22T00:00:04", 1, "sa-20261122T000004Z", 2, "2026-11-22T00:00:05"),
    # half an interval left: below MIN_COUNT, the daemon waits for the rollover
    ("2026-11-22T00:00:04.5", 1, "sa-20261122T000004Z", 1, "2026-11-22T00:00:05"),
    # exactly at the rollover: a whole day, the last sample on the next rollover
    ("2026-11-22T00:00:05", 1, "sa-20261122T000005Z", 86401, "2026-11-23T00:00:05"),
    ("2026-11-22T00:00:06", 1, "sa-20261122T000006Z", 86400, "2026-11-23T00:00:05"),
    # a clock 3 s behind when the previous day's run ends: a 3 s file of the new day,
    # not one dated 23:59 of the day before (the 5 s tolerance)
    ("2026-11-22T00:00:02", 1, "sa-20261122T000002Z", 4, "2026-11-22T00:00:05"),
    # before midnight: the rollover is the next day's; microseconds truncated in the name
    ("2026-11-22T23:59:59.900", 1, "sa-20261122T235959Z", 6, "2026-11-23T00:00:05"),
    # the day leaps over a year end and into a leap day
    ("2026-12-31T23:59:50", 1, "sa-20261231T235950Z", 16, "2027-01-01T00:00:05"),
    ("2028-02-28T12:00:00", 1, "sa-20280228T120000Z", 43206, "2028-02-29T00:00:05"),
    ("2028-02-29T00:00:05", 1, "sa-20280229T000005Z", 86401, "2028-03-01T00:00:05"),
    # interval 15: floor(left / 15) records
    ("2026-11-22T00:00:05", 15, "sa-20261122T000005Z", 5761, "2026-11-23T00:00:05"),
    ("2026-11-22T23:59:00", 15, "sa-20261122T235900Z", 5, "2026-11-23T00:00:05"),  # 65 s
    ("2026-11-22T00:00:00", 15, "sa-20261122T000000Z", 1, "2026-11-22T00:00:05"),  # 5 s
]


@pytest.mark.parametrize(("now", "interval", "name", "count", "ends"), PLANS)
def test_plan_run(now: str, interval: int, name: str, count: int, ends: str) -> None:
    assert plan_run(utc(now), interval) == RunPlan(name, count, utc(ends))


def test_plan_run_converts_other_zones_and_unpacks() -> None:
    now = datetime(2026, 11, 22, 1, 0, 4, tzinfo=timezone(timedelta(hours=1)))
    file_name, count, ends_at = plan_run(now, 1)
    assert (file_name, count, ends_at) == ("sa-20261122T000004Z", 2, utc("2026-11-22T00:00:05"))


def test_plan_run_with_another_rollover() -> None:
    plan = plan_run(utc("2026-11-22T05:11:00"), 60, time(6, 0))
    assert plan == RunPlan("sa-20261122T051100Z", 50, utc("2026-11-22T06:00:00"))


def test_plan_run_rejects_naive_times_and_bad_intervals() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        plan_run(datetime(2026, 11, 22), 1)
    with pytest.raises(ValueError, match=">= 1"):
        plan_run(utc("2026-11-22T00:00:00"), 0)


def test_file_names_sort_by_time() -> None:
    starts = [utc("2026-11-22T23:59:59"), utc("2026-11-23T00:00:05"), utc("2027-01-01T00:00:00")]
    names = [file_name_for(t) for t in starts]
    assert names == sorted(names)
    assert all(":" not in n and "/" not in n for n in names)


@pytest.mark.parametrize(
    ("failures", "delay"), [(1, 1.0), (2, 2.0), (3, 4.0), (9, 256.0), (10, 300.0), (1000, 300.0)]
)
def test_retry_delay_is_capped_exponential(failures: int, delay: float) -> None:
    assert retry_delay_s(failures) == delay


def test_retry_delay_needs_a_failure() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        retry_delay_s(0)


# --- the daemon with fakes -------------------------------------------------------------------


@dataclass
class FakeClock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class FakeHandle:
    """A fake sadc. ``status``: exit status when it ends by itself; None = runs until stopped."""

    clock: FakeClock
    run_s: float
    status: int | None
    stop: threading.Event
    stderr: str = ""
    terminated: bool = False
    killed: bool = False

    def wait(self, timeout: float | None) -> int | None:
        if self.terminated:
            return 143  # sadc 12.6.1 on SIGTERM
        if self.status is None:
            self.stop.set()  # "SIGTERM arrives while sadc runs"
            return None
        self.clock.advance(self.run_s)
        return self.status

    def terminate(self) -> None:
        self.terminated = True

    def kill(self) -> None:
        self.killed = True

    def stderr_text(self) -> str:
        return self.stderr


@dataclass
class FakeSpawn:
    """Plays ``script``: per start an exit status, None (runs until stopped), or an OSError."""

    clock: FakeClock
    stop: threading.Event
    script: list[int | OSError | None]
    write: bytes = b"sadc-bytes"
    argvs: list[list[str]] = field(default_factory=list)
    handles: list[FakeHandle] = field(default_factory=list)

    def __call__(self, argv: Sequence[str]) -> FakeHandle:
        if not self.script:
            self.stop.set()
            raise OSError("script exhausted")  # never reached when the test is right
        step = self.script.pop(0)
        if isinstance(step, OSError):
            raise step
        self.argvs.append(list(argv))
        Path(argv[-1]).write_bytes(self.write)
        count, interval = int(argv[4]), int(argv[3])
        handle = FakeHandle(self.clock, (count - 1) * interval, step, self.stop, "Cannot open")
        self.handles.append(handle)
        if not self.script and step is not None:
            self.stop.set()  # last scripted run: stop once it has ended
        return handle


@dataclass
class Rig:
    clock: FakeClock
    stop: threading.Event
    spawn: FakeSpawn
    sleeps: list[float]
    handed: list[Path]
    directory: Path
    drop: Path

    def daemon(self, **kwargs: object) -> CycleDaemon:
        def sleep(seconds: float) -> None:
            self.sleeps.append(seconds)
            self.clock.advance(seconds)

        args: dict[str, object] = {
            "drop": self.drop,
            "interval_s": 1,
            "stop": self.stop,
            "sadc": "/x/sadc",
            "clock": self.clock,
            "sleep": sleep,
            "spawn": self.spawn,
            "on_handover": self.handed.append,
            **kwargs,
        }
        return CycleDaemon(self.directory, **args)  # type: ignore[arg-type]


@pytest.fixture
def rig(tmp_path: Path) -> Callable[..., Rig]:
    def make(start: str, script: list[int | OSError | None]) -> Rig:
        clock = FakeClock(utc(start))
        stop = threading.Event()
        spawn = FakeSpawn(clock, stop, script)
        return Rig(clock, stop, spawn, [], [], tmp_path / "sa", tmp_path / "drop")

    return make


def test_runs_back_to_back_and_hands_each_file_over(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [0, 0, 0])
    assert r.daemon().run() == 0
    names = ["sa-20261122T051100Z", "sa-20261123T000005Z", "sa-20261124T000005Z"]
    assert r.spawn.argvs == [
        ["/x/sadc", "-S", "DISK", "1", "67746", str(r.directory / names[0])],
        ["/x/sadc", "-S", "DISK", "1", "86401", str(r.directory / names[1])],
        ["/x/sadc", "-S", "DISK", "1", "86401", str(r.directory / names[2])],
    ]
    assert r.handed == [r.drop / n for n in names]
    assert sorted(p.name for p in r.drop.iterdir()) == names
    assert (r.drop / names[0]).read_bytes() == b"sadc-bytes"
    assert list(r.directory.iterdir()) == []
    assert r.sleeps == []


def test_interval_15_and_a_clock_that_jumps_a_day(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T23:59:00", [0, 0])
    d = r.daemon(interval_s=15)
    original = r.spawn.__call__

    def spawn_then_jump(argv: Sequence[str]) -> FakeHandle:
        handle = original(argv)
        if len(r.spawn.argvs) == 1:
            r.clock.advance(86400)  # the clock is set a day ahead while the first run records
        return handle

    d.spawn = spawn_then_jump
    assert d.run() == 0
    counts = [(a[3], a[4], Path(a[5]).name) for a in r.spawn.argvs]
    # the second run starts at 2026-11-24 00:00:05 (a day + 60 s after 23:59:05 on the 22nd)
    assert counts == [("15", "5", "sa-20261122T235900Z"), ("15", "5761", "sa-20261124T000005Z")]


def test_less_than_one_interval_left_waits_for_the_rollover(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T00:00:04.500", [0])
    assert r.daemon().run() == 0
    assert r.sleeps == [0.5]
    assert [Path(a[-1]).name for a in r.spawn.argvs] == ["sa-20261122T000005Z"]


def test_stop_terminates_sadc_and_hands_over_the_partial_file(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [None])
    assert r.daemon().run() == 0
    (handle,) = r.spawn.handles
    assert handle.terminated and not handle.killed
    assert r.handed == [r.drop / "sa-20261122T051100Z"]
    assert r.sleeps == []


def test_sadc_ignoring_sigterm_is_killed(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [None])
    d = r.daemon()
    original = r.spawn.__call__

    def stubborn(argv: Sequence[str]) -> FakeHandle:
        handle = original(argv)
        waits: list[int | None] = [None, None, -9]  # running, still running after SIGTERM, killed
        handle.wait = lambda timeout: (r.stop.set(), waits.pop(0))[1]  # type: ignore[method-assign]
        return handle

    d.spawn = stubborn
    assert d.run() == 0
    assert r.spawn.handles[0].killed
    assert r.handed == [r.drop / "sa-20261122T051100Z"]


def test_failures_are_logged_with_stderr_and_retried_with_capped_backoff(
    rig: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    missing = FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/sadc")
    r = rig("2026-11-22T05:11:00", [missing, missing, 2, 2, 0, 2])
    r.spawn.write = b""  # the failing runs leave empty files: removed, not handed over
    with caplog.at_level(logging.INFO, logger="pipeline.formats.sysstat.sadc_cycle"):
        assert r.daemon(retry_cap_s=3.0).run() == 0
    assert r.sleeps == [1.0, 2.0, 3.0, 3.0]  # the last failure: stopped, no backoff
    errors = [rec.getMessage() for rec in caplog.records if rec.levelno == logging.ERROR]
    assert (
        errors[0]
        == "stage=sadc-cycle cannot start /x/sadc: [Errno 2] No such file or directory: '/x/sadc'"
    )
    assert errors[2].startswith("stage=sadc-cycle sadc exited with status 2 (/x/sadc -S DISK 1 ")
    assert errors[2].endswith("): Cannot open")
    assert len(errors) == 5
    assert r.handed == []
    assert list(r.directory.iterdir()) == []


def test_a_failed_run_keeps_what_it_recorded(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [1])
    assert r.daemon().run() == 0
    assert r.handed == [r.drop / "sa-20261122T051100Z"]
    assert r.sleeps == []  # stopped before the backoff


def test_stop_during_backoff_ends_the_loop(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [OSError("boom"), 0])
    d = r.daemon(retry_base_s=60.0)

    def sleep(seconds: float) -> None:  # SIGTERM during the backoff
        r.sleeps.append(seconds)
        r.stop.set()

    d.sleep = sleep
    assert d.run() == 0
    assert r.sleeps == [60.0]
    assert r.spawn.argvs == []  # no start after the stop


def test_the_default_sleep_is_the_stop_event(tmp_path: Path) -> None:
    stop = threading.Event()
    assert CycleDaemon(tmp_path, stop=stop).sleep == stop.wait


def test_names_never_collide(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [0])
    r.drop.mkdir()
    (r.drop / "sa-20261122T051100Z").write_bytes(b"older")
    assert r.daemon().run() == 0
    assert r.handed == [r.drop / "sa-20261122T051100Z-1"]
    assert (r.drop / "sa-20261122T051100Z").read_bytes() == b"older"


def test_files_left_by_an_earlier_daemon_are_handed_over_first(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [0])
    r.directory.mkdir()
    (r.directory / "sa-20261121T000005Z").write_bytes(b"before the reboot")
    (r.directory / "notes.txt").write_text("not ours")
    assert r.daemon().run() == 0
    assert r.handed == [r.drop / "sa-20261121T000005Z", r.drop / "sa-20261122T051100Z"]
    assert [p.name for p in r.directory.iterdir()] == ["notes.txt"]


def test_without_a_drop_files_stay(rig: Callable[..., Rig]) -> None:
    r = rig("2026-11-22T05:11:00", [0])
    assert r.daemon(drop=None).run() == 0
    assert r.handed == [r.directory / "sa-20261122T051100Z"]


def test_hand_over_across_filesystems_copies_then_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "sa" / "sa-20261122T051100Z"
    src.parent.mkdir()
    src.write_bytes(b"x" * 100_000)
    drop = tmp_path / "drop"
    drop.mkdir()
    real_replace = os.replace
    calls: list[tuple[str, str]] = []

    def replace(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> None:
        calls.append((Path(a).name, Path(b).name))
        if Path(a).parent != Path(b).parent and not Path(a).name.startswith("."):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real_replace(a, b)

    monkeypatch.setattr(handover.os, "replace", replace)
    assert hand_over(src, drop) == drop / src.name
    assert calls == [(src.name, src.name), (f".{src.name}.tmp", src.name)]
    assert (drop / src.name).read_bytes() == b"x" * 100_000
    assert not src.exists()
    assert [p.name for p in drop.iterdir()] == [src.name]


def test_hand_over_reports_other_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        hand_over(tmp_path / "sa-missing", tmp_path)


# --- the real sadc ---------------------------------------------------------------------------


@pytest.fixture
def real_sadc() -> str:
    if not os.access(SADC, os.X_OK):
        pytest.fail(
            f"{SADC} missing: run `make test` (installs sysstat) or apt-get install sysstat"
        )
    return SADC


def test_real_sadc_run_three_seconds_before_the_rollover(real_sadc: str, tmp_path: Path) -> None:
    start = utc("2026-11-22T00:00:02")
    t0: list[float] = []

    def clock() -> datetime:  # real seconds from the first reading, 3 s before the rollover
        now = walltime.monotonic()
        if not t0:
            t0.append(now)
        return start + timedelta(seconds=now - t0[0])

    stop = threading.Event()
    handed: queue.Queue[Path] = queue.Queue()

    def on_handover(path: Path) -> None:
        handed.put(path)
        stop.set()  # one file is enough: no second (day-long) run

    daemon = CycleDaemon(
        tmp_path / "sa",
        drop=tmp_path / "drop",
        interval_s=1,
        stop=stop,
        sadc=real_sadc,
        clock=clock,
        on_handover=on_handover,
        poll_s=0.05,
    )
    worker = threading.Thread(target=daemon.run, name="sadc-cycle-test")
    worker.start()
    try:
        path = handed.get(timeout=60)
    finally:
        stop.set()
        worker.join(timeout=60)
    assert not worker.is_alive()
    assert path == tmp_path / "drop" / "sa-20261122T000002Z"
    assert daemon.runs == 1 and daemon.failures == 0
    csv = subprocess.run(
        ["sadf", "-d", "-U", str(path), "--", "-d"],
        capture_output=True,
        check=True,
        timeout=60,
        env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
    ).stdout.decode()
    rows = [line.split(";") for line in csv.splitlines() if line and not line.startswith("#")]
    assert {row[1] for row in rows} == {"1"}
    assert len({row[2] for row in rows}) == 3  # count 4 = 3 records
    assert list((tmp_path / "sa").iterdir()) == []


# --- the CLI -------------------------------------------------------------------------------

FAKE_SADC = """#!/bin/sh
for last; do :; done
printf 'partial' > "$last"
echo ready > "$READY_FIFO"
exec sleep 600
"""


def test_cli_stops_on_sigterm_and_hands_over(tmp_path: Path) -> None:
    fake = tmp_path / "fake-sadc"
    fake.write_text(FAKE_SADC)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    argv = [sys.executable, "-m", "pipeline.cli.main", "sadc-cycle", str(tmp_path / "sa")]
    argv += ["--drop", str(tmp_path / "drop"), "--sadc", str(fake), "--interval", "15"]
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env={**os.environ, "READY_FIFO": str(fifo)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        with fifo.open() as ready:  # blocks until the fake sadc wrote its file
            assert ready.read() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode()
    (handed,) = (tmp_path / "drop").iterdir()
    assert handed.name.startswith("sa-") and handed.name.endswith("Z")
    assert handed.read_bytes() == b"partial"
    assert b"stopped after 1 runs" in err


def test_cli_without_sadc_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sadc-cycle", str(tmp_path), "--sadc", str(tmp_path / "nope")]) == 2
    assert "apt-get install sysstat, or pass --sadc PATH" in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--interval", "0"], ["--interval", "1.5"], ["--rollover", "25"]])
def test_cli_rejects_bad_options(tmp_path: Path, bad: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sadc-cycle", str(tmp_path), *bad])
    assert exc.value.code == 2
