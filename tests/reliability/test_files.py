"""Files as users' tools leave them: one file under two names, links that lead out of a drop
directory, files deleted while read, logs rotated by rename and by copytruncate (while read and
while iolens is away), very many small files, files appearing faster than they are read, and
content a network file system shows late."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
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


OTHER = SAMPLE / "randrw_clat_hist.2.log"
"""Another run's log (80 lines, another first line): what the application writes after a
rotation."""
FIRST, MORE = 30, 50
"""Lines read before the rotation, and lines the log holds when it is rotated."""
STRICT = "*_clat_hist.*.log"
"""A pattern no rotated name matches."""
DEADLINE_S = 120.0


def ids_of(client: Elasticsearch, ns: str) -> set[str]:
    index = f"metrics-fio.histogram-{ns}"
    refresh(client, index)
    hits = client.search(index=index, size=1000, source=False)["hits"]["hits"]
    return {h["_id"] for h in hits}


def clean_ids(es_url: str, client: Elasticsearch, tmp_path: Path) -> set[str]:
    """The ids of a clean run over the log as it was when rotated, and the new log."""
    drop = tmp_path / "clean"
    (drop / "old").mkdir(parents=True)
    (drop / "new").mkdir(parents=True)
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    (drop / "old" / LOG).write_bytes(b"".join(lines[:MORE]))
    shutil.copy(OTHER, drop / "new" / LOG)
    settings, ns = make_settings(es_url, drop, tmp_path / "clean-state")
    run_once(settings, client)
    return ids_of(client, ns)


def rotate(log: Path, how: str) -> None:
    """Rotate ``log`` as logrotate does (``rename``: the default ``create`` mode;
    ``copytruncate``), then the application writes a new run into ``log``."""
    if how == "rename":
        log.rename(log.with_name(log.name + ".1"))
    else:
        shutil.copy(log, log.with_name(log.name + ".1"))
        with log.open("r+b") as fh:
            fh.truncate(0)
    log.write_bytes(OTHER.read_bytes())


def settings_for(es_url: str, drop: Path, state: Path, pattern: str | None) -> tuple[Settings, str]:
    ns = f"rot{uuid.uuid4().hex[:8]}"
    fio_drop: dict[str, object] = {"type": "fio-hist", "path": str(drop), "host": "node01"}
    if pattern:
        fio_drop["pattern"] = pattern
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(state),
            "drops": [fio_drop],
            "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
            "shipper": {"observer": "polling", "poll_interval_s": 0.1},
            "jobs": {"tick_s": 0.1},
        }
    )
    return settings, ns


def started_log(tmp_path: Path) -> tuple[Path, Path, list[bytes]]:
    """A drop whose log holds its first :data:`FIRST` lines: (drop, log, all the lines)."""
    drop = tmp_path / "drop"
    drop.mkdir()
    log = drop / LOG
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:FIRST]))
    return drop, log, lines


CASES = [("rename", None), ("rename", STRICT), ("copytruncate", None)]
"""Rotations, and the pattern of the drop: renamed to a name the pattern matches or not; a
copy must match it to be read (as with any tail-based shipper)."""


@pytest.mark.parametrize(("how", "pattern"), CASES)
def test_a_log_rotated_while_iolens_is_away_is_read_once_to_its_end(
    how: str, pattern: str | None, es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop, log, lines = started_log(tmp_path)
    settings, ns = settings_for(es_url, drop, tmp_path / "state", pattern)
    assert run_once(settings, client).lines == FIRST
    with log.open("ab") as fh:
        fh.write(b"".join(lines[FIRST:MORE]))  # written, not read yet
    rotate(log, how)
    second = run_once(settings, client)
    assert second.lines == MORE - FIRST + 80  # the rest of the rotated log, and the new one
    assert second.docs[f"metrics-fio.histogram-{ns}"]["duplicate"] == 0  # nothing read twice
    assert ids_of(client, ns) == clean_ids(es_url, client, tmp_path)


@pytest.mark.parametrize(("how", "pattern"), CASES)
def test_a_log_rotated_while_read_is_read_once_to_its_end(
    how: str, pattern: str | None, es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop, log, lines = started_log(tmp_path)
    settings, ns = settings_for(es_url, drop, tmp_path / "state", pattern)
    stop = threading.Event()
    with MainJob(settings, client) as job:
        runner = threading.Thread(target=job.run_forever, args=(stop,))
        runner.start()
        try:
            wait_until(lambda: committed_lines(job) == FIRST)
            with log.open("ab") as fh:
                fh.write(b"".join(lines[FIRST:MORE]))
            rotate(log, how)
            wait_until(lambda: histograms(client, ns) == MORE + 80)
        finally:
            stop.set()
            runner.join(timeout=DEADLINE_S)
        summary = job.snapshot()
    assert not runner.is_alive()
    # what was committed before the rotation is never sent again; lines read but not yet
    # acknowledged when the copy appeared may be (a 409, "already there")
    assert summary.docs[f"metrics-fio.histogram-{ns}"]["duplicate"] <= MORE - FIRST
    assert ids_of(client, ns) == clean_ids(es_url, client, tmp_path)


def committed_lines(job: MainJob) -> int:
    return sum(st.line_no for st in job.registry.all())


def wait_until(cond: Callable[[], bool]) -> None:
    """Poll ``cond``; fail after :data:`DEADLINE_S` (a hang guard, not a timing check)."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            pytest.fail("gave up waiting")
        time.sleep(0.05)


SMALL_FILES = 1000
"""Files of a drop of many small logs (two lines each)."""


def test_very_many_small_files_each_read_once(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    for i in range(SMALL_FILES):
        d = drop / f"d{i % 20}"
        d.mkdir(parents=True, exist_ok=True)
        # another first line per file: the time column of the first record
        first = lines[0].replace(b"101, ", f"{101 + i}, ".encode(), 1)
        (d / f"j{i}_clat_hist.1.log").write_bytes(first + lines[2])
    settings, ns = make_settings(es_url, drop, tmp_path / "state")
    first_run = run_once(settings, client)
    assert (first_run.files, first_run.lines, first_run.bad_lines) == (
        SMALL_FILES,
        2 * SMALL_FILES,
        0,
    )
    assert histograms(client, ns) == 2 * SMALL_FILES
    with MainJob(settings, client) as job:
        assert len(job.registry.all()) == SMALL_FILES
        assert job.run_once().lines == 0  # and none again


def test_files_appearing_faster_than_they_are_read(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    settings, ns = settings_for(es_url, drop, tmp_path / "state", None)
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    n = 200
    stop = threading.Event()
    with MainJob(settings, client) as job:
        runner = threading.Thread(target=job.run_forever, args=(stop,))
        runner.start()
        try:
            for i in range(n):  # as fast as the disk takes them, each complete at once
                first = lines[0].replace(b"101, ", f"{101 + i}, ".encode(), 1)
                tmp = drop / f".j{i}.tmp"
                tmp.write_bytes(first + b"".join(lines[1:10]))
                tmp.rename(drop / f"j{i}_clat_hist.1.log")
            wait_until(lambda: committed_lines(job) == 10 * n)
        finally:
            stop.set()
            runner.join(timeout=DEADLINE_S)
    assert not runner.is_alive()
    assert histograms(client, ns) == 10 * n


def test_content_that_shows_late_on_a_network_file_system_is_still_read(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    """NFS clients cache attributes: a file can be listed before its first line is complete,
    and grow while its size and time stamp look unchanged to a poll. Files that could not be
    identified yet, and files not known to be finished, are looked at again every tick."""
    drop = tmp_path / "drop"
    drop.mkdir()
    settings, ns = settings_for(es_url, drop, tmp_path / "state", None)
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    log = drop / LOG
    log.write_bytes(lines[0][:20])  # listed, first line not complete yet
    past = time.time() - 60
    os.utime(log, (past, past))
    stop = threading.Event()
    with MainJob(settings, client) as job:
        runner = threading.Thread(target=job.run_forever, args=(stop,))
        runner.start()
        try:
            wait_until(lambda: str(log) in job._unidentified)
            with log.open("ab") as fh:
                fh.write(b"".join(lines)[20:])
            os.utime(log, (past, past))  # the poll sees the old time stamp
            wait_until(lambda: committed_lines(job) == LINES)
        finally:
            stop.set()
            runner.join(timeout=DEADLINE_S)
    assert not runner.is_alive()
    assert histograms(client, ns) == LINES


def test_unreadable_files_of_one_name_are_all_kept(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    for host in ("node01", "node02"):
        (drop / host).mkdir(parents=True)
        (drop / host / LOG).write_bytes(host.encode() + b"\x00" * (1 << 20))  # no line end
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": f"q{uuid.uuid4().hex[:8]}"},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
        }
    )
    assert run_once(settings, client).bad_files == 2
    kept = sorted((tmp_path / "state" / "deadletter" / "files").iterdir())
    assert [p.name for p in kept] == [LOG, f"{LOG}.1"]
    assert sorted(p.read_bytes()[:6] for p in kept) == [b"node01", b"node02"]


def test_a_file_named_like_a_rotated_copy_but_not_one_is_read_whole(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    """Same first line and a rotation-like name are not enough: the bytes up to where the
    original was read must hold exactly its committed lines."""
    drop = tmp_path / "drop"
    drop.mkdir()
    lines = (SAMPLE / LOG).read_bytes().splitlines(keepends=True)
    other = OTHER.read_bytes().splitlines(keepends=True)
    (drop / LOG).write_bytes(b"".join(lines[:FIRST]))
    settings, _ns = settings_for(es_url, drop, tmp_path / "state", None)
    assert run_once(settings, client).lines == FIRST
    impostor = lines[:1] + other[1:60]  # another run that happens to start alike
    read_to = len(b"".join(lines[:FIRST]))
    assert b"".join(impostor)[:read_to].count(b"\n") != FIRST  # the check can tell them apart
    (drop / f"{LOG}.1").write_bytes(b"".join(impostor))
    assert run_once(settings, client).lines == 60  # read from its start, nothing skipped
