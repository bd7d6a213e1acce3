"""Shared fixtures: the embedded Elasticsearch-API server, a client for it, a guard that fails
any test leaving non-daemon threads behind (the watchdog test-suite habit, STYLE.md), and one
that fails the run when a process the tests started outlives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.sink.embedded import EmbeddedServer, free_port

THREAD_GRACE_S = 5.0
"""How long a test's threads may take to finish after the test returned."""


@pytest.fixture(scope="session")
def es_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a noida-db server started for the session in a temporary data directory."""
    data_dir: Path = tmp_path_factory.mktemp("noida-db")
    server = EmbeddedServer(data_dir, free_port())
    server.start(timeout_s=30.0)
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def opened_client(url: str) -> Iterator[Elasticsearch]:
    """A client of ``url``, closed on leaving the block."""
    client = Elasticsearch(url, request_timeout=30)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def es_client(es_url: str) -> Iterator[Elasticsearch]:
    """A client of the session's embedded server (closed after the test)."""
    with opened_client(es_url) as client:
        yield client


@pytest.fixture(scope="session")
def session_client(es_url: str) -> Iterator[Elasticsearch]:
    """One client of the session's embedded server for module- and session-scoped fixtures
    (Hypothesis tests cannot take function-scoped ones)."""
    with opened_client(es_url) as client:
        yield client


@pytest.fixture
def client(es_client: Elasticsearch) -> Elasticsearch:
    """The session server's client under the name the pipeline tests use."""
    return es_client


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail the test if it leaves a non-daemon thread running.

    Threads still alive when the test returns get ``THREAD_GRACE_S`` seconds (a deadline, not a
    sleep) to finish, so stopping a thread asynchronously at teardown is fine.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + THREAD_GRACE_S
    leaked = []
    for t in threading.enumerate():
        if t in before or t.daemon or t is threading.current_thread():
            continue
        t.join(timeout=max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            leaked.append(t.name)
    if leaked:
        pytest.fail(f"test leaked non-daemon threads: {', '.join(sorted(leaked))}")


def hold_fault(
    what: str,
    seconds: float,
    proc: subprocess.Popen[bytes],
    holds: Callable[[], bool] = lambda: True,
) -> None:
    """Keep a fault on for ``seconds`` more (its schedule: how long it lasts, not a wait for a
    state), checking every 0.1 s, the last time when it ends, that ``proc`` keeps running and
    ``holds()`` stays true; fail naming ``what`` at the first check that finds otherwise."""
    end = time.monotonic() + seconds
    while True:
        if proc.poll() is not None:
            pytest.fail(f"iolens run exited ({proc.returncode}) while {what}")
        if not holds():
            pytest.fail(f"no longer {what}")
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.1))


@pytest.fixture
def fault_held() -> Callable[..., None]:
    """:func:`hold_fault`: a fault kept on for its duration while what it must not change is
    checked."""
    return hold_fault


REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "tests" / "data" / "fio" / "samples"
SHARED_FIO = REPO.parent / "shared" / "data" / "fio"
REFERENCE_GZ = Path("/usr/share/doc/fio/fiologparser_hist.py.gz")

XC_JOB = """\
[global]
ioengine=libaio
direct=1
iodepth=4
rw=randrw
rwmixread=70
bs=4k
size=16m
time_based=1
runtime=4
write_hist_log=xc
log_hist_msec=100
per_job_logs=1
write_lat_log=xc
log_avg_msec=0
disable_lat=1
disable_slat=1

[xc]
numjobs=2
"""


@pytest.fixture(scope="session")
def fio_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real fio run (Debian's fio): 2 jobs of 4 s randrw, histogram logs every 100 ms and
    per-I/O completion-latency logs (``write_lat_log``, ``log_avg_msec=0``) of the same I/Os.

    Files: ``xc_clat_hist.{1,2}.log`` and ``xc_clat.{1,2}.log``.
    """
    import shutil
    import subprocess

    fio = shutil.which("fio")
    if fio is None:
        pytest.fail("fio is not installed; `make test` installs Debian's fio package")
    d = tmp_path_factory.mktemp("fio-run")
    (d / "xc.fio").write_text(XC_JOB)
    subprocess.run([fio, "--output=fio.out", "xc.fio"], cwd=d, check=True, timeout=120)
    for f in d.glob("xc.*.*"):
        if f.suffix != ".log":
            f.unlink()  # the 16 MiB data files
    return d


@pytest.fixture(scope="session")
def reference_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fio's own ``fiologparser_hist.py``, as Debian's fio package ships it (gzipped)."""
    import gzip

    if not REFERENCE_GZ.exists():
        pytest.fail(f"{REFERENCE_GZ} is missing; `make test` installs Debian's fio package")
    out = tmp_path_factory.mktemp("reference") / "fiologparser_hist.py"
    out.write_bytes(gzip.decompress(REFERENCE_GZ.read_bytes()))
    return out


SYNTH_SADF = REPO.parent / "shared" / "tools" / "synth_sadf.py"
SYNTH_GEN = ["--hosts", "4", "--luns", "6", "--luns-per-group", "12", "--interval", "15"]
SYNTH_FAULTS = ["fs001:dm-3:1.0:3.0:5:await", "fs002:dm-0:2.0:4.5:3:await"]


def _synth(
    out: Path, hours: int, seed: int, faults: list[str], layout: list[str] = SYNTH_GEN
) -> dict[str, Any]:
    """Run the generator: one ``sadf -d`` CSV per server and ``truth.json`` in ``out``."""
    import json
    import subprocess
    import sys

    args = [
        sys.executable,
        str(SYNTH_SADF),
        str(out),
        *layout,
        "--hours",
        str(hours),
        "--seed",
        str(seed),
    ]
    for f in faults:
        args += ["--fault", f]
    subprocess.run(args, check=True, capture_output=True, timeout=300)
    truth: dict[str, Any] = json.loads((out / "truth.json").read_text())
    return truth


def _groups_file(path: Path, truth: dict[str, Any]) -> Path:
    """A ``--groups`` YAML file of the generator's peer groups."""
    path.write_text(
        "".join(
            f'"{lun.replace("/", ":")}": "{g}"\n'
            for g, luns in truth["peer_groups"].items()
            for lun in luns
        )
    )
    return path


@pytest.fixture(scope="session")
def synth_sadf() -> Any:
    """``generate(out, hours, seed, faults, layout) -> truth`` with the real generator
    (``../shared/tools/synth_sadf.py``), and ``groups_file(path, truth) -> path``."""
    return SimpleNamespace(generate=_synth, groups_file=_groups_file)


@pytest.fixture(scope="session")
def synth_sysstat(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Generated ``sadf -d`` CSV of 4 servers x 6 LUNs in 2 peer groups of 12, 15 s samples:
    ``train`` (12 h fault-free), ``faulty`` (6 h, await faults ``SYNTH_FAULTS``), ``clean``
    (6 h fault-free), the generator's ``truth`` and a ``groups`` YAML file of the peer groups."""
    root = tmp_path_factory.mktemp("synth")
    _synth(root / "train", 12, 11, [])
    truth = _synth(root / "faulty", 6, 12, SYNTH_FAULTS)
    _synth(root / "clean", 6, 13, [])
    groups = _groups_file(root / "groups.yaml", truth)
    return {"root": root, "truth": truth, "groups": groups}


DARSHAN_SHARED = REPO.parent / "shared" / "data" / "darshan-logs"


def darshan_wheel_logs() -> Path:
    """The ``tests/input`` directory of the installed ``darshan`` wheel (its bundled logs)."""
    import darshan

    return Path(darshan.__file__).resolve().parent / "tests" / "input"


def all_darshan_logs() -> list[Path]:
    """Every distinct bundled and shared Darshan log: the wheel's logs (``tests/input`` and the
    ``examples``, byte-identical copies removed) and ``../shared/data/darshan-logs``.

    Fails (never skips) when the shared logs are missing."""
    import hashlib

    import darshan

    assert DARSHAN_SHARED.is_dir(), f"{DARSHAN_SHARED} is missing: the shared Darshan logs"
    wheel = Path(darshan.__file__).resolve().parent
    seen: set[str] = set()
    out: list[Path] = []
    for p in sorted(wheel.rglob("*.darshan")) + sorted(DARSHAN_SHARED.rglob("*.darshan")):
        digest = hashlib.md5(p.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            out.append(p)
    return out


def find_unmapped(source: Mapping[str, Any], stream: str) -> list[str]:
    """Leaf fields of a document ``source`` that ``iolens-ecs@mappings`` and the stream's
    ``@package`` template do not map (arrays of objects are walked element by element)."""
    from pipeline.sink.templates import mappings_dir

    mapped: set[str] = set()

    def walk(props: Mapping[str, Any], prefix: str) -> None:
        for key, value in props.items():
            if "properties" in value:
                walk(value["properties"], f"{prefix}{key}.")
            else:
                mapped.add(f"{prefix}{key}")

    for name in ("iolens-ecs@mappings", f"{stream}@package"):
        body = json.loads((mappings_dir() / f"component_template.{name}.json").read_text())
        walk(body["template"]["mappings"]["properties"], "")
    missing: list[str] = []

    def leaves(doc: Any, prefix: str) -> None:
        if isinstance(doc, Mapping):
            for key, value in doc.items():
                leaves(value, f"{prefix}{key}.")
        elif isinstance(doc, list) and doc and isinstance(doc[0], Mapping):
            for item in doc:
                leaves(item, prefix)
        elif prefix[:-1] not in mapped:
            missing.append(prefix[:-1])

    leaves(source, "")
    return sorted(set(missing))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test taking ``darshan_log`` runs once per distinct bundled and shared Darshan log."""
    if "darshan_log" in metafunc.fixturenames:
        logs = all_darshan_logs()
        metafunc.parametrize("darshan_log", logs, ids=[p.name[:60] for p in logs])


@pytest.fixture
def darshan_inputs() -> Path:
    """The darshan wheel's ``tests/input`` directory of bundled logs."""
    return darshan_wheel_logs()


@pytest.fixture
def shared_darshan_logs() -> Path:
    """``../shared/data/darshan-logs`` (fails when missing)."""
    assert DARSHAN_SHARED.is_dir(), f"{DARSHAN_SHARED} is missing: the shared Darshan logs"
    return DARSHAN_SHARED


@pytest.fixture
def unmapped_fields() -> Callable[[Mapping[str, Any], str], list[str]]:
    """:func:`find_unmapped`: fields of a document its stream's templates do not map."""
    return find_unmapped


# -- no process left behind ------------------------------------------------------------------

RUN_MARK = "IOLENS_TEST_RUN"
"""Environment variable every process the test run starts inherits (value: this run's token)."""

PROCESS_GRACE_S = 15.0
"""How long processes the tests started may take to exit after the last test."""


def pytest_configure(config: pytest.Config) -> None:
    """Mark this run in the environment, so that its descendants can be found at the end even
    when they were reparented to init (their parent killed)."""
    os.environ.setdefault(RUN_MARK, f"{os.getpid()}-{uuid.uuid4().hex}")


def survivors(token: str) -> list[tuple[int, str]]:
    """``(pid, command line)`` of the processes, other than this one and its own resource
    tracker, whose environment holds this run's mark (Linux ``/proc``; processes of other users
    are not readable and skipped)."""
    mark = f"{RUN_MARK}={token}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if mark not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if cmd and not own_tracker(entry, cmd):  # a zombie has no command line: it is gone
            out.append((int(entry.name), cmd.strip()))
    return out


def own_tracker(entry: Path, cmd: str) -> bool:
    """Whether ``entry`` is this process's multiprocessing resource tracker (it ends with it)."""
    if "multiprocessing.resource_tracker" not in cmd:
        return False
    try:
        ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return False
    return ppid == os.getpid()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a process it started outlives it (``PROCESS_GRACE_S`` to exit): an
    orphaned worker or server keeps files, ports and loop devices busy for the next run."""
    token = os.environ.get(RUN_MARK, "")
    if not token or os.environ.get("PYTEST_XDIST_WORKER") or sys.platform != "linux":
        return
    deadline = time.monotonic() + PROCESS_GRACE_S
    left = survivors(token)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = survivors(token)
    if left:
        lines = "\n".join(f"  {pid}: {cmd[:200]}" for pid, cmd in left)
        session.config.get_terminal_writer().line(
            f"\nprocesses started by the tests are still running:\n{lines}", red=True
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
