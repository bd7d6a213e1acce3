"""Stopped while the cluster answers every bulk item with 429, ``iolens run`` does not drain for
ever: after ``sink.drain_timeout_s`` (or at a second SIGTERM) it says so in one ERROR line and
exits with 75, having committed nothing it was not told was indexed; the next run indexes every
record exactly once.

The cluster is the session's embedded server behind the fault-injecting proxy of
``tests/faults/proxy.py``, which keeps every bulk item from the server and answers each with 429
(``es_rejected_execution_exception``); every other request (``GET /``, the cluster id, the
templates) goes through. The backoff is set long (at least 5 s before the first retry), so the
sender thread is asleep in it when the stop comes, and the drain cannot end by itself."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.shippers.registry import Registry
from pipeline.sink.search import refresh

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "faults"))
from proxy import FaultProxy, Item, Reject

pytestmark = [pytest.mark.integration, pytest.mark.reliability]

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples" / "node01"
RECORDS = 159  # randrw_clat_hist.1.log (79 lines) and .2.log (80): one document per line
WAIT_S = 120.0
"""A guard against a hang (the proxy's first bulk item, a log line, the exit), not a measure."""

TOO_MANY = Reject(
    429, "es_rejected_execution_exception", "rejected execution of coordinating operation"
)
DRAIN_CUT = (
    "exiting now with status 75; the lines whose documents were not acknowledged are read "
    "again on the next start, and spooled documents are delivered then"
)


class Lines:
    """The lines of a stream, read on a daemon thread; :meth:`wait_for` waits (with a timeout)
    for one holding a text."""

    def __init__(self, stream: Iterator[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Iterator[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for(self, text: str) -> None:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(text in line for line in self.lines), timeout=WAIT_S
            )
        assert found, f"no line with {text!r} on stderr:\n{self.text()}"

    def text(self) -> str:
        self._thread.join(timeout=WAIT_S)  # when the process has exited: all of it
        with self._changed:
            return "".join(self.lines)


@pytest.fixture
def throttled(es_url: str) -> Iterator[tuple[FaultProxy, threading.Event]]:
    """The proxy answering 429 for every bulk item, and an event set at the first one."""
    first_bulk = threading.Event()

    def rule(item: Item) -> Reject:
        first_bulk.set()
        return TOO_MANY

    proxy = FaultProxy(es_url, rule)
    try:
        yield proxy, first_bulk
    finally:
        proxy.close()


def fio_run_config(tmp_path: Path, url: str, drain_timeout_s: float) -> tuple[Path, str]:
    """A configuration for the bundled fio logs of node01 (copied to a drop directory) sent to
    ``url``, with a long backoff; the file and the namespace."""
    drop = tmp_path / "drop"
    shutil.copytree(SAMPLES, drop)
    ns = f"drain{uuid.uuid4().hex[:8]}"
    config = tmp_path / "pipeline.yaml"
    settings = {
        "elasticsearch": {"url": url, "namespace": ns, "request_timeout_s": 5.0},
        "state_dir": str(tmp_path / "state"),
        "drops": [{"type": "fio-hist", "path": str(drop), "host": "node01"}],
        "shipper": {"observer": "polling", "poll_interval_s": 0.2},
        "fio": {"run_start": "2026-01-01T00:00:00Z", "settle_s": 1.0},
        "sink": {
            "drain_timeout_s": drain_timeout_s,
            "flush_interval_s": 0.2,
            "backoff_initial_s": 10.0,
            "backoff_max_s": 60.0,
        },
        "jobs": {"tick_s": 0.5},
    }
    config.write_text(yaml.safe_dump(settings))
    return config, ns


def iolens(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli.main", "--config", str(config), *args]


def committed(state: Path) -> dict[str, int]:
    """File name -> offset committed in the registry."""
    reg = Registry(state / "registry.sqlite")
    try:
        return {Path(st.path).name: st.offset for st in reg.all()}
    finally:
        reg.close()


def count(client: Elasticsearch, index: str) -> int:
    try:
        refresh(client, index)
        return int(client.count(index=index)["count"])
    except NotFoundError:  # nothing was ever indexed into it
        return 0


@pytest.mark.parametrize(
    ("drain_timeout_s", "signals", "why"),
    [
        (2.0, 1, "the drain took longer than sink.drain_timeout_s (2 s)"),
        (3600.0, 2, "a second SIGTERM during the drain"),
    ],
    ids=["deadline", "second-signal"],
)
def test_a_stop_against_a_throttling_cluster_exits_75_and_loses_nothing(
    es_url: str,
    client: Elasticsearch,
    tmp_path: Path,
    throttled: tuple[FaultProxy, threading.Event],
    drain_timeout_s: float,
    signals: int,
    why: str,
) -> None:
    proxy, first_bulk = throttled
    config, ns = fio_run_config(tmp_path, proxy.url, drain_timeout_s)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("IOLENS_CONFIG", None)
    proc = subprocess.Popen(
        iolens(config, "run", "--no-embedded"),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stderr is not None
    stderr = Lines(proc.stderr)
    try:
        assert first_bulk.wait(timeout=WAIT_S), stderr.lines  # the sender is in its backoff
        proc.send_signal(signal.SIGTERM)
        stderr.wait_for("SIGTERM: stopping; what was read is delivered and committed")
        if signals == 2:
            proc.send_signal(signal.SIGTERM)
        status: int | None = proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        status = None  # still draining: the assertion below shows its stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT_S)
    text = stderr.text()
    assert status == 75, text
    (cut,) = [line for line in text.splitlines() if DRAIN_CUT in line]
    assert f" ERROR pipeline.jobs.drain: {why}: {DRAIN_CUT}" in cut
    assert "Traceback" not in text
    hist = f"metrics-fio.histogram-{ns}"
    assert count(client, hist) == 0  # the proxy let no bulk item through ...
    logs = sorted(p.name for p in SAMPLES.glob("*.log"))
    assert committed(tmp_path / "state") == dict.fromkeys(logs, 0)  # ... so nothing committed

    again = subprocess.run(
        iolens(config, "--es-url", es_url, "run", "--once", "--no-embedded"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=WAIT_S,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"lines: {RECORDS} " in again.stdout  # every line read again
    assert count(client, hist) == RECORDS  # each record once
    sizes = {name: (tmp_path / "drop" / name).stat().st_size for name in logs}
    assert committed(tmp_path / "state") == sizes  # every file committed to its end
