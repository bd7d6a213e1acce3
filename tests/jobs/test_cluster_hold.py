"""``iolens run`` (watching) holds the files delivered to another cluster: said once per run,
however often they change, while new files are read."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.settings import settings_from_mapping
from pipeline.sink.search import refresh

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples"
DEADLINE_S = 60.0
HELD = (
    "files already delivered to another cluster (iolens:{old}), not to this one ({new}), are "
    "not read: 2. To read them into this cluster, run the command again with --redeliver"
)

pytestmark = pytest.mark.integration


def wait_until(cond: Callable[[], bool]) -> None:
    """Poll ``cond``; fail after :data:`DEADLINE_S` (a hang guard, not a timing check)."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            pytest.fail("gave up waiting")
        time.sleep(0.05)


def histograms(client: Elasticsearch, ns: str) -> int:
    index = f"metrics-fio.histogram-{ns}"
    if not client.indices.exists(index=index):
        return 0
    refresh(client, index)
    return int(client.count(index=index)["count"])


def test_run_holds_files_of_another_cluster_and_says_it_once(
    es_url: str, client: Elasticsearch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ns = f"h{uuid.uuid4().hex[:10]}"
    drop = tmp_path / "drop"
    shutil.copytree(SAMPLES / "node01", drop / "node01")
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "shipper": {"observer": "polling", "poll_interval_s": 0.1},
            "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
        }
    )
    with MainJob(settings, client) as job:
        assert job.run_once().lines == 159
    old = uuid.uuid4().hex
    db = sqlite3.connect(tmp_path / "state" / "registry.sqlite")
    with db:  # as if those lines had gone to a cluster since replaced
        db.execute("UPDATE files SET cluster = ?", (f"iolens:{old}",))
    db.close()

    caplog.set_level(logging.DEBUG, logger="pipeline")
    stop = threading.Event()
    with MainJob(settings, client) as job:
        runner = threading.Thread(target=job.run_forever, args=(stop,))
        runner.start()
        try:
            wait_until(lambda: len(job.files.elsewhere) == 2)  # the first scan is done
            held = drop / "node01" / "randrw_clat_hist.1.log"
            with held.open("ab") as fh:  # a held file grows: still held, not said again
                fh.write(held.read_bytes().splitlines(keepends=True)[-1])
            shutil.copytree(SAMPLES / "node02", drop / "node02")  # new files: read
            wait_until(lambda: histograms(client, ns) == 159 + 156)
        finally:
            stop.set()
            runner.join(timeout=DEADLINE_S)
        summary = job.snapshot()
        new = job.cluster
    assert not runner.is_alive()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [HELD.format(old=old, new=new)]
    assert (summary.files, summary.elsewhere, summary.lines) == (2, 2, 156)
