"""Files as users' tools leave them: one file under two names, links that lead out of a drop
directory, files deleted while read."""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob, RunSummary
from pipeline.settings import Settings, settings_from_mapping
from pipeline.sink.search import refresh

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples" / "node01"
LOG = "randrw_clat_hist.1.log"
LINES = 79

pytestmark = [pytest.mark.integration, pytest.mark.reliability]


def make_settings(es_url: str, drop: Path, state: Path) -> tuple[Settings, str]:
    ns = f"files{uuid.uuid4().hex[:8]}"
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(state),
            "drops": [{"type": "fio-hist", "path": str(drop), "host": "node01"}],
            "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
        }
    )
    return settings, ns


def run_once(settings: Settings, client: Elasticsearch) -> RunSummary:
    with MainJob(settings, client) as job:
        return job.run_once()


def histograms(client: Elasticsearch, ns: str) -> int:
    index = f"metrics-fio.histogram-{ns}"
    refresh(client, index)
    return int(client.count(index=index)["count"])


def test_one_file_under_two_names_is_read_once(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    (drop / "a").mkdir(parents=True)
    shutil.copy(SAMPLE / LOG, drop / "a" / LOG)
    os.link(drop / "a" / LOG, drop / f"hard_{LOG}")  # a hard link: the same inode
    (drop / f"soft_{LOG}").symlink_to(drop / "a" / LOG)  # a link inside the drop
    settings, ns = make_settings(es_url, drop, tmp_path / "state")
    first = run_once(settings, client)
    assert first.bad_lines == 0
    assert histograms(client, ns) == LINES
    assert run_once(settings, client).lines == 0  # and never again


def test_links_out_of_the_drop_directory_are_refused(
    es_url: str, client: Elasticsearch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "private"
    elsewhere.mkdir()
    shutil.copy(SAMPLE / LOG, elsewhere / LOG)
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / LOG).symlink_to(elsewhere / LOG)
    (drop / "sub").symlink_to(elsewhere, target_is_directory=True)
    shutil.copy(SAMPLE / "randrw_clat_hist.2.log", drop / "randrw_clat_hist.2.log")
    settings, ns = make_settings(es_url, drop, tmp_path / "state")
    caplog.set_level(logging.WARNING)
    summary = run_once(settings, client)
    assert summary.files == 1  # only the file that lies in the drop directory
    assert histograms(client, ns) == 80
    refused = [r.getMessage() for r in caplog.records if "outside the drop directory" in r.message]
    assert len(refused) == 1 and f"leads to {elsewhere / LOG}" in refused[0]


def test_a_file_deleted_while_read_is_let_go(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    target = drop / LOG
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:40]))
    settings, ns = make_settings(es_url, drop, tmp_path / "state")
    with MainJob(settings, client) as job:
        job.once = True
        job.ingest([(target, settings.drops[0])])
        [tail] = list(job.tails.values())
        target.unlink()
        assert job.pump(tail) == 0  # gone: retired, nothing raised
        assert not job.tails
        job.finish()
    assert histograms(client, ns) == 40
