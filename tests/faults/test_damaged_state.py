"""A read-only, removed or damaged state directory (``state_dir``: registry, jobs, notices,
service rates, workload models): each fault is injected for real into the state a real
``iolens run --once`` left, and the next run against the real embedded server either carries
on with a warning naming the file (the registry and ``jobs.sqlite`` moved aside and started
again, nothing indexed twice) or stops with an error naming the file and what to do (exit 2,
no traceback, nothing indexed)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.cli.main import main
from pipeline.errors import ConfigError
from pipeline.jobs.main_job import MainJob
from pipeline.settings import load_settings
from pipeline.sink.embedded import EmbeddedServer, free_port
from pipeline.sink.search import refresh

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "workloads"))
sys.path.insert(0, str(ROOT / "tests" / "reliability"))
from http_client import serve  # noqa: E402
from mixed_drop import DERIVED, finished, grow, ids, iolens, sources, write_config  # noqa: E402

from tests.faults.conftest import unavailable  # noqa: E402

pytestmark = [pytest.mark.faults, pytest.mark.integration]

DEADLINE_S = 120.0
"""Longest wait for a condition before the test fails (a hang guard, not a timing check)."""
TORN = b"\xde\xad\xbe\xef" * 1024
"""What a torn write leaves in the middle of a file: 4 KiB (a page) of other bytes."""
RETRIES = {"max_retries": 1, "backoff_initial_s": 0.05, "backoff_max_s": 0.2}
"""A retry budget of about 0.1 s: documents go to the spool as soon as the cluster is away."""
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
STREAMS = tuple(s for s in DERIVED if not s.startswith("logs-darshan"))
"""The derived streams of the drop below (it has no Darshan log: its worker pool is slow to
start and its documents are covered by the crash test)."""


@dataclass(frozen=True)
class Base:
    """A drop read once into namespace ``ns`` by a real run that left its state in ``state``;
    ``expected``: the document ids per stream of :data:`STREAMS` that run indexed;
    ``snapshots``: the workload model's documents it made (one per cluster of requests)."""

    url: str
    ns: str
    drop: Path
    state: Path
    expected: dict[str, list[str]]
    snapshots: int


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide enough a console that no summary row or message is wrapped."""
    monkeypatch.setenv("COLUMNS", "400")


@pytest.fixture(scope="module")
def base(es_url: str, tmp_path_factory: pytest.TempPathFactory) -> Base:
    tmp = tmp_path_factory.mktemp("base")
    serve(tmp, 3, 20, 31)
    files = sources((tmp / "events.jsonl").read_bytes())
    drop = tmp / "drop"
    grow(drop, {k: v for k, v in files.items() if not k.endswith(".darshan")}, 1, 1)
    (drop / "darshan").mkdir()
    finished(drop)
    ns = f"state{uuid.uuid4().hex[:6]}"
    done = run_once(config(tmp, es_url, ns, drop, tmp / "state"))
    assert done.returncode == 0, done.stderr
    client = Elasticsearch(es_url, request_timeout=30)
    try:
        expected = {s: v for s, v in ids(client, ns).items() if s in STREAMS}
        snapshots = model_snapshots(client, ns)
    finally:
        client.close()
    assert all(expected.values()), expected
    assert snapshots > 0
    assert sorted(p.name for p in (tmp / "state").iterdir()) == [
        "agent_id",
        "deadletter",
        "jobs.sqlite",
        "lock",
        "models",
        "notices.json",
        "registry.sqlite",
        "service_rates.json",
        "spool",
    ]
    return Base(es_url, ns, drop, tmp / "state", expected, snapshots)


def config(tmp: Path, url: str, ns: str, drop: Path, state: Path) -> Path:
    path = tmp / "iolens.yaml"
    write_config(path, url, ns, drop, state)
    return path


@dataclass(frozen=True)
class Done:
    """How a command ended: its exit status and what it wrote."""

    returncode: int
    stdout: str
    stderr: str


def run_once(cfg: Path, capsys: pytest.CaptureFixture[str] | None = None) -> Done:
    """``iolens run --once`` with ``cfg``, in this process (what it writes is taken from
    ``capsys``; an exception it lets out fails the test)."""
    code = main(["--config", str(cfg), "run", "--once"])
    out = capsys.readouterr() if capsys is not None else None
    return Done(code, out.out if out else "", out.err if out else "")


def copy_state(base: Base, tmp: Path, where: Path | None = None) -> tuple[Path, Path]:
    """The base run's state copied to ``where`` (``tmp/state``), and a config using it."""
    state = where or tmp / "state"
    shutil.copytree(base.state, state)
    return state, config(tmp, base.url, base.ns, base.drop, state)


def model_snapshots(client: Elasticsearch, ns: str) -> int:
    """How many workload-model documents namespace ``ns`` holds."""
    index = f"metrics-iolens.workload_model-{ns}"
    refresh(client, index)
    return int(client.count(index=index)["count"])


def indexed(client: Elasticsearch, base: Base) -> dict[str, list[str]]:
    """The ids per stream of :data:`STREAMS` in the base namespace now."""
    return {s: v for s, v in ids(client, base.ns).items() if s in STREAMS}


def assert_no_duplicates(client: Elasticsearch, base: Base) -> None:
    """Every expected document once: the same ids, none twice, none missing."""
    got = indexed(client, base)
    for stream, want in base.expected.items():
        assert got[stream] == want, stream
        assert len(set(got[stream])) == len(got[stream]), stream


def read_again_once(
    stdout: str, client: Elasticsearch, base: Base
) -> dict[str, tuple[int, int, int]]:
    """Check that a run that read every file again found every document already there (the
    summary) and indexed none twice (the cluster); the summary's counts."""
    counts = summary(stdout, base.ns)
    for stream, want in base.expected.items():
        assert counts[stream] == (0, len(want), 0), stream  # every document already there
    assert_no_duplicates(client, base)
    return counts


def summary(stdout: str, ns: str) -> dict[str, tuple[int, int, int]]:
    """The summary's documents by data stream: (indexed, already there, dead-lettered)."""
    rows = re.findall(rf"^│ (\S+)-{ns} +│ +(\d+) │ +(\d+) │ +(\d+) │$", stdout, re.M)
    return {stream: (int(a), int(b), int(c)) for stream, a, b, c in rows}


def records(stderr: str, level: str) -> list[str]:
    """The log records of ``level``: ``logger: message``."""
    return re.findall(rf"^\S+ \S+Z {level} (.*)$", stderr, flags=re.M)


def damage(path: Path, how: str) -> bytes:
    """Damage the file at ``path`` as a crash or a bad disk would; returns its new content."""
    data = path.read_bytes()
    if how == "torn":  # a write torn in the middle: a page of other bytes
        mid = len(data) // 2
        data = data[:mid] + TORN + data[mid + len(TORN) :]
    elif how == "truncated":
        data = data[: len(data) // 2]
    elif how == "emptied":
        data = b""
    else:  # garbage
        data = bytes((i * 37 + 11) % 256 for i in range(len(data)))
    path.write_bytes(data)
    return data


def aside(state: Path, name: str) -> Path:
    """The one file ``name`` was moved aside to."""
    (found,) = (p for p in state.glob(f"{name}.damaged-*") if not p.name.endswith(("-wal", "-shm")))
    assert re.fullmatch(rf"{re.escape(name)}\.damaged-\d{{8}}T\d{{6}}Z", found.name)
    return found


@pytest.mark.parametrize("how", ["torn", "truncated", "emptied", "garbage"])
def test_a_damaged_registry_is_moved_aside_and_every_file_read_again_once(
    how: str,
    base: Base,
    tmp_path: Path,
    client: Elasticsearch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    state, cfg = copy_state(base, tmp_path)
    registry = state / "registry.sqlite"
    damaged = damage(registry, how)
    assert main(["--config", str(cfg), "status"]) == 0
    said = re.search(
        rf"^{re.escape(str(registry))} is damaged \((.*)\): the next", capsys.readouterr().out, re.M
    )
    assert said is not None

    done = run_once(cfg, capsys)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    kept = aside(state, "registry.sqlite")
    assert kept.read_bytes() == damaged
    reason = {
        "torn": r"quick_check: .+",
        "truncated": "database disk image is malformed",
        "emptied": "the file is empty",
        "garbage": "file is not a database",
    }[how]
    warning = (
        rf"pipeline\.shippers\.registry_open: registry {re.escape(str(registry))} is damaged "
        rf"\({reason}\): moved it aside to {re.escape(str(kept))} and started a new registry\. "
        r"Every file in the drop directories is read again from its start; documents the "
        r"cluster already holds are counted as already there, not indexed twice"
    )
    assert [w for w in records(done.stderr, "WARNING") if re.fullmatch(warning, w)], done.stderr
    counts = read_again_once(done.stdout, client, base)
    assert "metrics-iolens.workload_model" not in counts  # the model knew every request


def test_damaged_derived_state_is_started_again_with_a_warning_naming_it(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``jobs.sqlite`` (torn), ``notices.json`` and ``service_rates.json`` (garbage): derived
    state, started again; the registry is sound, so nothing is read again."""
    state, cfg = copy_state(base, tmp_path)
    jobs = state / "jobs.sqlite"
    damaged = damage(jobs, "garbage")
    damage(state / "notices.json", "garbage")
    damage(state / "service_rates.json", "garbage")

    done = run_once(cfg, capsys)

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    kept = aside(state, "jobs.sqlite")
    assert kept.read_bytes() == damaged
    warnings = records(done.stderr, "WARNING")
    assert (
        f"pipeline.jobs.intervals: {jobs} is damaged (file is not a database): moved it aside "
        f"to {kept} and started a new one. Merged percentiles (metrics-fio.latency) still due "
        "for intervals it listed are computed only when new histograms arrive for them; to "
        f"compute them all again, stop iolens and move {state / 'registry.sqlite'} aside too "
        "(the files are read again, nothing is indexed twice)"
    ) in warnings
    notices = [w for w in warnings if w.startswith("pipeline.sink.notices: ")]
    assert len(notices) == 1 and notices[0].startswith(
        f"pipeline.sink.notices: {state / 'notices.json'} cannot be read ("
    ), warnings
    assert notices[0].endswith("): the cluster's notices are said again")
    assert json.loads((state / "notices.json").read_text())  # written again
    assert "stages" in json.loads((state / "service_rates.json").read_text())
    assert summary(done.stdout, base.ns).get("metrics-fio.histogram", (0, 0, 0))[0] == 0
    assert_no_duplicates(client, base)


def test_a_damaged_workload_model_stops_the_run_naming_it(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    state, cfg = copy_state(base, tmp_path)
    (model,) = (state / "models").glob("*.json")
    damaged = damage(model, "truncated")

    done = run_once(cfg, capsys)

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (error,) = records(done.stderr, "ERROR")
    assert re.fullmatch(
        rf"iolens: {re.escape(str(model))}: not a saved workload model \(.+\); move it away to "
        "start a new model",
        error,
    ), error
    assert model.read_bytes() == damaged  # left for the user to look at
    assert_no_duplicates(client, base)


@pytest.mark.parametrize("existing", [True, False], ids=["existing", "missing"])
def test_a_read_only_state_directory_is_an_error_naming_it(
    existing: bool,
    base: Base,
    tmp_path: Path,
    tmpfs: Callable[[str, int], Path],
    client: Elasticsearch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mount = tmpfs("ro", 16 << 20)
    state = mount / "state"
    if existing:
        copy_state(base, tmp_path, state)
    cfg = config(tmp_path, base.url, base.ns, base.drop, state)
    before = sorted(p.name for p in mount.rglob("*"))
    remount = subprocess.run(
        ["mount", "-o", "remount,ro", str(mount)], capture_output=True, text=True
    )
    assert remount.returncode == 0, remount.stderr

    done = run_once(cfg, capsys)

    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert records(done.stderr, "ERROR") == [
        f"iolens: state directory {state} cannot be written (Read-only file system): iolens "
        "keeps its registry, spool and dead letters there. Make it writable (remount it "
        "read-write, fix its owner or mode) or pass another --state-dir (state_dir in the "
        "configuration)"
    ]
    assert sorted(p.name for p in mount.rglob("*")) == before
    assert_no_duplicates(client, base)


def test_a_state_directory_that_is_a_file_is_an_error_naming_it(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    state.write_bytes(b"not a directory")
    cfg = config(tmp_path, base.url, base.ns, base.drop, state)

    done = run_once(cfg, capsys)

    assert done.returncode == 2
    assert records(done.stderr, "ERROR") == [
        f"iolens: state directory {state} is a file, not a directory: move it away or pass "
        "another --state-dir (state_dir in the configuration)"
    ]
    assert state.read_bytes() == b"not a directory"
    assert_no_duplicates(client, base)


NO_DAC = (
    "setpriv",
    "--bounding-set",
    "-dac_override,-dac_read_search",
    "--inh-caps",
    "-dac_override,-dac_read_search",
    "--",
)
"""Run a command as root without the capabilities that let root ignore file permissions, so
a ``chmod`` binds it as it binds any user."""


@pytest.fixture
def no_dac() -> tuple[str, ...]:
    """:data:`NO_DAC`, or skip (fail under ``IOLENS_REQUIRE_LAB``) where it cannot run."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        unavailable("taking permissions away from root needs root and setpriv (util-linux)")
    return NO_DAC


@pytest.mark.parametrize("when", ["before", "while"])
def test_a_state_directory_without_write_permission_is_an_error_naming_it(
    when: str, base: Base, tmp_path: Path, client: Elasticsearch, no_dac: tuple[str, ...]
) -> None:
    state, cfg = copy_state(base, tmp_path)
    if when == "before":
        state.chmod(0o555)
        done = subprocess.run(
            [*no_dac, *iolens(cfg, "run", "--once")], capture_output=True, text=True, env=ENV
        )
        code, log = done.returncode, done.stderr
        want = (
            f"iolens: state directory {state} cannot be written (Permission denied): iolens "
            "keeps its registry, spool and dead letters there. Make it writable (remount it "
            "read-write, fix its owner or mode) or pass another --state-dir (state_dir in the "
            "configuration)"
        )
    else:
        code, log = run_and(cfg, tmp_path, lambda: state.chmod(0o555), no_dac)
        want = (
            f"iolens: state directory {state} can no longer be written (it became read-only, "
            "or its permissions changed) while iolens was running, so what is read can no "
            "longer be recorded. iolens stops; make it writable (remount it read-write) and "
            "start it again: it goes on from what was recorded (documents the cluster already "
            "holds are counted as already there, not indexed twice)"
        )
    state.chmod(0o755)

    assert code == 2, log
    assert not re.search(r'File ".*/pipeline/', log), log
    assert records(log, "ERROR") == [want]
    assert_no_duplicates(client, base)


def test_a_state_directory_turned_read_only_while_running_stops_the_run_naming_it(
    base: Base,
    tmp_path: Path,
    tmpfs: Callable[[str, int], Path],
    client: Elasticsearch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A file system remounted read-only under a running iolens (as ext4 does on errors):
    a tmpfs with files open for writing refuses ``remount,ro``, so the directory is made
    read-only through a read-only bind mount of it on itself."""
    mount = tmpfs("state", 16 << 20)
    state, cfg = copy_state(base, tmp_path, mount / "state")
    bound: list[Path] = []

    def read_only() -> None:
        sh(["mount", "--bind", str(mount), str(mount)])
        bound.append(mount)
        sh(["mount", "-o", "remount,ro,bind", str(mount)])

    try:
        code, log = run_and(cfg, tmp_path, read_only)
        assert bound, "the bind mount was not made"
    finally:
        for where in bound:
            sh(["umount", str(where)])

    assert code == 2
    assert not re.search(r'File ".*/pipeline/', log), log
    assert records(log, "ERROR") == [
        f"iolens: state directory {state} can no longer be written (it became read-only, or "
        "its permissions changed) while iolens was running, so what is read can no longer be "
        "recorded. iolens stops; make it writable (remount it read-write) and start it again: "
        "it goes on from what was recorded (documents the cluster already holds are counted "
        "as already there, not indexed twice)"
    ]
    done = run_once(cfg, capsys)  # writable again

    assert done.returncode == 0, done.stderr
    said = records(done.stderr, "WARNING")
    assert not [w for w in said if "registry" in w or "damaged" in w], said  # nothing reset
    assert summary(done.stdout, base.ns).get("metrics-fio.histogram", (0, 0, 0))[0] == 0
    assert_no_duplicates(client, base)


def sh(argv: list[str]) -> None:
    """Run ``argv``; fail the test with its error output when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stderr}"


def test_a_state_directory_removed_while_running_stops_the_run_and_the_next_reads_again_once(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    state, cfg = copy_state(base, tmp_path)

    def remove() -> None:
        while (state / "lock").exists():  # iolens may write into it meanwhile
            shutil.rmtree(state, ignore_errors=True)

    code, log = run_and(cfg, tmp_path, remove)

    assert code == 2
    assert "Traceback" not in log
    assert records(log, "ERROR") == [
        f"iolens: state directory {state} was removed while iolens was running: the registry, "
        "spool and dead letters it held are gone, so what is read can no longer be recorded. "
        "iolens stops; start it again to begin a new state directory there (the files are "
        "read again from their start; documents the cluster already holds are counted as "
        "already there, not indexed twice)"
    ]
    assert_no_duplicates(client, base)

    assert (state / "models").is_dir()  # the workload model was saved as the run stopped
    done = run_once(cfg, capsys)

    assert done.returncode == 0, done.stderr
    assert (
        f"pipeline.shippers.registry_open: registry {state / 'registry.sqlite'} is missing "
        "while the state directory holds other state (models): it was removed or lost, so a "
        "new registry is started. Every file in the drop directories is read again from its "
        "start; documents the cluster already holds are counted as already there, not indexed "
        "twice"
    ) in records(done.stderr, "WARNING")
    counts = read_again_once(done.stdout, client, base)
    assert "metrics-iolens.workload_model" not in counts  # the model knew every request


def test_a_registry_moved_away_while_running_stops_the_run_and_the_next_reads_again_once(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    state, cfg = copy_state(base, tmp_path)
    registry = state / "registry.sqlite"

    code, log = run_and(cfg, tmp_path, lambda: registry.rename(state / "registry.old"))

    assert code == 2
    assert "Traceback" not in log
    assert records(log, "ERROR") == [
        f"iolens: {registry} was removed or replaced while iolens was running, so what is read "
        "can no longer be recorded in it. iolens stops; start it again: it opens the file now "
        "at that path, or starts a new one (a new registry reads every file again from its "
        "start; documents the cluster already holds are counted as already there, not indexed "
        "twice)"
    ]
    done = run_once(cfg, capsys)

    assert done.returncode == 0, done.stderr
    assert (
        f"pipeline.shippers.registry_open: registry {registry} is missing while the state "
        "directory holds other state (jobs.sqlite, models): it was removed or lost, so a new "
        "registry is started. Every file in the drop directories is read again from its "
        "start; documents the cluster already holds are counted as already there, not indexed "
        "twice"
    ) in records(done.stderr, "WARNING")
    read_again_once(done.stdout, client, base)


def test_a_state_directory_removed_during_an_outage_stops_the_run_and_loses_nothing(
    base: Base, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cluster away, documents wait in the spool; the directory removed with them: the
    run stops naming the directory (not the spool segment it could not find), and the next
    run reads the files again into the cluster, each document once."""
    server = EmbeddedServer(tmp_path / "noida", free_port())
    server.start(timeout_s=30.0)
    drop, state = tmp_path / "drop", tmp_path / "state"
    shutil.copytree(base.drop, drop, ignore=shutil.ignore_patterns("node02"))
    ns = f"outage{uuid.uuid4().hex[:6]}"
    cfg = tmp_path / "iolens.yaml"
    write_config(cfg, server.url, ns, drop, state, **RETRIES)
    spooled = lambda: any((state / "spool").glob("seg-*.ndjson"))  # noqa: E731

    def outage_then_remove() -> None:
        server.stop()
        shutil.copytree(base.drop / "fio" / "node02", drop / "fio" / "node02")
        wait_for("documents in the spool", spooled)
        while (state / "lock").exists():
            shutil.rmtree(state, ignore_errors=True)

    try:
        code, log = run_and(cfg, tmp_path, outage_then_remove)
        server.start(timeout_s=30.0)
        done = run_once(cfg, capsys)
        client = Elasticsearch(server.url, request_timeout=30)
        try:
            got = {s: v for s, v in ids(client, ns).items() if s in STREAMS}
        finally:
            client.close()
    finally:
        server.stop()

    assert code == 2
    # (the client library logs its own retries during the outage with their tracebacks)
    assert not re.search(r'File ".*/pipeline/', log), log
    assert records(log, "ERROR")[-1] == (
        f"iolens: state directory {state} was removed while iolens was running: the registry, "
        "spool and dead letters it held are gone, so what is read can no longer be recorded. "
        "iolens stops; start it again to begin a new state directory there (the files are "
        "read again from their start; documents the cluster already holds are counted as "
        "already there, not indexed twice)"
    )
    assert done.returncode == 0, done.stderr
    assert got == base.expected  # every document once: the spooled ones read again


def test_a_state_directory_removed_during_a_one_shot_run_is_an_error_naming_it(
    base: Base, tmp_path: Path, client: Elasticsearch
) -> None:
    """Removed after the job opened its files and before it read the drop: the run delivers
    what it reads (each document once), then says that nothing of it was recorded."""
    state, cfg = copy_state(base, tmp_path)
    (state / "registry.sqlite").unlink()  # so that every file is read (all already there)
    settings = load_settings(cfg)
    with pytest.raises(ConfigError) as caught, MainJob(settings, client) as job:
        shutil.rmtree(state)
        job.run_once()

    assert str(caught.value) == (
        f"state directory {state} was removed while iolens was running: the registry, spool "
        "and dead letters it held are gone, so what is read can no longer be recorded. iolens "
        "stops; start it again to begin a new state directory there (the files are read again "
        "from their start; documents the cluster already holds are counted as already there, "
        "not indexed twice)"
    )
    counts = job.snapshot().docs
    for stream, want in base.expected.items():
        index = f"{stream}-{base.ns}"
        assert (counts[index]["indexed"], counts[index]["duplicate"]) == (0, len(want)), stream
    assert_no_duplicates(client, base)


def test_a_state_directory_removed_before_start_is_made_again_and_every_file_read_once(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing tells a removed state directory from a new one: the run reads every file as a
    first run does, and the cluster's 409s keep each document once."""
    state, cfg = copy_state(base, tmp_path)
    shutil.rmtree(state)
    snapshots = model_snapshots(client, base.ns)

    done = run_once(cfg, capsys)

    assert done.returncode == 0, done.stderr
    assert records(done.stderr, "ERROR") == []
    counts = read_again_once(done.stdout, client, base)
    # The workload model went with the directory: built again from the same requests, it
    # takes a new snapshot (stamped with its time: new documents; the old ones stay).
    assert counts["metrics-iolens.workload_model"] == (base.snapshots, 0, 0)
    assert model_snapshots(client, base.ns) == snapshots + base.snapshots


CRASH = """
import os, signal, sys
from pipeline.shippers.registry import Registry
reg = Registry(sys.argv[1])
reg.set_size_seen(reg.all()[0].key, 1)
os.kill(os.getpid(), signal.SIGKILL)
"""
"""A process that commits once to the registry and is killed before it closes it: the
commit stays in ``registry.sqlite-wal``."""


def test_a_registry_damaged_in_a_crash_is_moved_aside_with_its_write_ahead_log(
    base: Base, tmp_path: Path, client: Elasticsearch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash leaves the last commits in ``registry.sqlite-wal``; with a page of the main
    file then torn, the file goes aside with its log: a log left next to the new registry
    would be replayed into it."""
    state, cfg = copy_state(base, tmp_path)
    registry, wal = state / "registry.sqlite", state / "registry.sqlite-wal"
    crash = subprocess.run([sys.executable, "-c", CRASH, str(registry)], cwd=ROOT, env=ENV)
    assert crash.returncode == -9
    log = wal.read_bytes()
    logged = wal_pages(log)
    assert logged  # the commit is in the log, not in the main file
    size = registry.stat().st_size
    page = next(p for p in range(2, size // PAGE + 1) if p not in logged)
    data = registry.read_bytes()
    damaged = data[: (page - 1) * PAGE] + TORN + data[page * PAGE :]
    registry.write_bytes(damaged)  # a page the log does not hold: the log cannot mend it

    done = run_once(cfg, capsys)

    assert done.returncode == 0, done.stderr
    kept = aside(state, "registry.sqlite")
    assert kept.read_bytes() == damaged
    assert Path(f"{kept}-wal").read_bytes() == log
    warning = (
        rf"pipeline\.shippers\.registry_open: registry {re.escape(str(registry))} is damaged "
        rf"\(quick_check: .+\): moved it aside to {re.escape(str(kept))} and started a new "
        r"registry\. Every file in the drop directories is read again from its start; "
        r"documents the cluster already holds are counted as already there, not indexed twice"
    )
    assert [w for w in records(done.stderr, "WARNING") if re.fullmatch(warning, w)], done.stderr
    read_again_once(done.stdout, client, base)


PAGE = 4096
"""SQLite's page size (its default, which the registry keeps)."""


def wal_pages(log: bytes) -> set[int]:
    """The page numbers a SQLite write-ahead log holds (its 32-byte header, then frames of a
    24-byte header, whose first 4 bytes are the page number, and one page)."""
    frame = 24 + PAGE
    return {
        int.from_bytes(log[at : at + 4], "big") for at in range(32, len(log) - frame + 1, frame)
    }


def run_and(
    cfg: Path, tmp: Path, fault: Callable[[], None], prefix: Sequence[str] = ()
) -> tuple[int, str]:
    """``iolens run`` with ``cfg`` (its command line after ``prefix``); ``fault()`` once its
    first pass over the drop is done.

    Returns:
        Its exit status and what it logged.
    """
    err_path = tmp / "stderr.txt"
    with err_path.open("w") as err:
        argv = [*prefix, *iolens(cfg, "run")]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, text=True, env=ENV)
        try:
            # the first tick's scheduled jobs come after the first pass over the drop
            first_tick = "peer comparison waits for thresholds"
            wait_for("the first tick", lambda: first_tick in err_path.read_text())
            fault()
            code = proc.wait(timeout=DEADLINE_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return code, err_path.read_text()


def wait_for(what: str, cond: Callable[[], bool]) -> None:
    """Poll ``cond`` until true; fail naming ``what`` after :data:`DEADLINE_S`."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)
