"""Elasticsearch outages (DESIGN.md, delivery promise): the cluster stops while ``iolens run``
ingests a mixed drop, for longer than the retry budget; documents go to the disk spool, whose
bound is hit with a clear message, reading waits, and when the cluster returns everything is
delivered exactly once. A run that cannot wait (one-shot, or stopped) lets what found no room
go unacknowledged, so the next run reads it again."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.settings import settings_from_mapping
from pipeline.shippers.registry import Registry
from pipeline.sink.embedded import EmbeddedServer, free_port

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "workloads"))
sys.path.insert(0, str(ROOT / "tests" / "reliability"))
from http_client import serve  # noqa: E402
from mixed_drop import DERIVED, config, finished, grow, ids, iolens, sources, write_config  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

OUTAGE_S = 4.0
"""How long the cluster stays away: many times the retry budget below."""
RETRIES = {"max_retries": 1, "backoff_initial_s": 0.05, "backoff_max_s": 0.2}
"""A retry budget of about 0.1 s: an outage of seconds outlasts it many times over."""
SPOOL_MAX = 256 << 10
"""A spool bound the mixed drop (about 1.4 MB spooled) passes several times over (bytes)."""
DEADLINE_S = 180.0
"""Longest wait for a condition before the test fails (a hang guard, not a timing check)."""


def wait_for(
    what: str, cond: Callable[[], bool], proc: subprocess.Popen[bytes] | None = None
) -> None:
    """Poll ``cond`` until true; fail naming ``what`` after :data:`DEADLINE_S` or when ``proc``
    exited."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"iolens run exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > end:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    tmp = tmp_path_factory.mktemp("server")
    serve(tmp, 3, 20, 31)
    return sources((tmp / "events.jsonl").read_bytes())


@pytest.fixture(scope="module")
def clean(
    es_url: str, tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes]
) -> dict[str, list[str]]:
    """The ids of a clean single run of the whole drop."""
    tmp = tmp_path_factory.mktemp("clean")
    ns = f"clean{uuid.uuid4().hex[:6]}"
    grow(tmp / "drop", files, 1, 1)
    finished(tmp / "drop")
    write_config(tmp / "c.yaml", es_url, ns, tmp / "drop", tmp / "state")
    done = subprocess.run(
        iolens(tmp / "c.yaml", "run", "--once"), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    client = Elasticsearch(es_url, request_timeout=30)
    try:
        out = ids(client, ns)
    finally:
        client.close()
    assert all(out[s] for s in DERIVED)
    return out


def spool_bytes(state: Path) -> int:
    return sum(p.stat().st_size for p in (state / "spool").glob("seg-*.ndjson"))


def committed_to_end(state: Path, drop: Path) -> bool:
    """Every fio and event log committed to its end in the registry."""
    if not (state / "registry.sqlite").exists():
        return False
    reg = Registry(state / "registry.sqlite")
    try:
        offsets = {str(Path(st.path).relative_to(drop)): st.offset for st in reg.all()}
    finally:
        reg.close()
    logs = [p for p in drop.rglob("*") if p.suffix in (".log", ".jsonl") and p.stat().st_size > 0]
    return bool(logs) and all(
        offsets.get(str(p.relative_to(drop))) == p.stat().st_size for p in logs
    )


def test_an_outage_beyond_the_retry_budget_spools_waits_and_delivers_once(
    tmp_path: Path,
    files: dict[str, bytes],
    clean: dict[str, list[str]],
    fault_held: Callable[..., None],
) -> None:
    server = EmbeddedServer(tmp_path / "noida", free_port())
    server.start(timeout_s=30.0)
    drop, state, cfg = tmp_path / "drop", tmp_path / "state", tmp_path / "run.yaml"
    ns = f"outage{uuid.uuid4().hex[:6]}"
    write_config(cfg, server.url, ns, drop, state, spool_max_bytes=SPOOL_MAX, **RETRIES)
    client = Elasticsearch(server.url, request_timeout=30)
    stderr = (tmp_path / "stderr.txt").open("wb")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(iolens(cfg, "run"), stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        grow(drop, files, 1, 4)
        wait_for("the first documents", lambda: bool(sum(map(len, ids(client, ns).values()))), proc)
        server.stop()  # the outage: nothing answers on the port
        for part in (2, 3, 4):
            grow(drop, files, part, 4)
        full = lambda: "is full" in (tmp_path / "stderr.txt").read_text()  # noqa: E731
        wait_for("the spool to fill", full, proc)
        assert 0 < spool_bytes(state) <= SPOOL_MAX
        # the outage lasts OUTAGE_S more (the fault's schedule): all along, the run keeps
        # running, reading waits and nothing is dropped (the spool keeps within its bound)
        bounded = lambda: 0 < spool_bytes(state) <= SPOOL_MAX  # noqa: E731
        fault_held("holding the spool within its bound", OUTAGE_S, proc, bounded)
        server.start(timeout_s=30.0)  # back, same port and data
        wait_for("the spool to drain", lambda: spool_bytes(state) == 0, proc)
        wait_for("the logs to be committed", lambda: committed_to_end(state, drop), proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
    log = (tmp_path / "stderr.txt").read_text()
    assert "sink.spool_max_bytes" in log and "nothing is dropped" in log
    assert "reading resumes" in log
    finished(drop)  # what the events log still holds open is flushed by a last run
    done = subprocess.run(iolens(cfg, "run", "--once"), capture_output=True, text=True, timeout=300)
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        got = ids(client, ns)
    finally:
        client.close()
        server.stop()
    for stream in DERIVED:
        assert got[stream] == clean[stream], stream


@pytest.mark.parametrize("mode", ["once", "stopped"])
def test_a_run_that_cannot_wait_for_a_full_spool_leaves_the_rest_for_the_next(
    mode: str,
    es_url: str,
    client: Elasticsearch,
    tmp_path: Path,
    files: dict[str, bytes],
    clean: dict[str, list[str]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    drop, state = tmp_path / "drop", tmp_path / "state"
    grow(drop, files, 1, 1)
    finished(drop)
    ns = f"{mode}{uuid.uuid4().hex[:6]}"
    settings = settings_from_mapping(
        config(es_url, ns, drop, state, spool_max_bytes=SPOOL_MAX, **RETRIES)
    )
    dead = Elasticsearch(f"http://127.0.0.1:{free_port()}", request_timeout=2)
    caplog.set_level(logging.ERROR)
    with MainJob(settings, dead, install_templates=False) as job:
        if mode == "once":
            summary = job.run_once()
        else:
            stop = threading.Event()
            runner = threading.Thread(target=job.run_forever, args=(stop,))
            runner.start()
            wait_for("the spool to fill", job.sink.sink.full)
            stop.set()
            runner.join(timeout=DEADLINE_S)
            assert not runner.is_alive(), "run_forever did not stop while the spool was full"
            summary = job.snapshot()
    dead.close()
    assert summary.unsent > 0
    assert 0 < spool_bytes(state) <= SPOOL_MAX
    assert "sink.spool_max_bytes" in caplog.text
    assert "read again from their files on the next run" in caplog.text
    assert not committed_to_end(state, drop)  # the registry stays before what was let go
    with MainJob(settings, client) as job:  # the cluster is back: the spool, then the rest
        last = job.run_once()
    assert (last.unsent, last.spooled) == (0, 0)
    assert committed_to_end(state, drop)
    got = ids(client, ns)
    for stream in DERIVED:
        assert got[stream] == clean[stream], stream
