"""A full state directory (DESIGN.md, delivery promise): the spool, registry and job databases
live on a 1 MiB tmpfs while the cluster is away. Reading waits instead of failing, what was
accepted is kept, the full disk is said once, and everything is delivered once when the
cluster answers again, also by a run that starts on the full state directory.

The acceptance case (``test_iolens_run_waits_on_a_full_disk_and_delivers_once``) keeps the
40 s outage but reads 10 hosts of fio logs (about 9 MB, 1590 documents of about 2.3 kB: the
1 MiB fills 3.5 times over), 2 there when the run starts and 8 written once the cluster is
away (so the disk fills however fast the first are read); ``bench/full_disk.py`` runs the
full-size case, 115 hosts (103 MB) there from the start."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.records.core import Document, LineRef
from pipeline.settings import SinkSettings, settings_from_mapping
from pipeline.shippers.registry import Registry
from pipeline.sink.bulk import BulkSink
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.disk import DiskWatch, free_bytes, open_when_room
from pipeline.sink.embedded import EmbeddedServer, free_port
from pipeline.sink.search import refresh
from pipeline.sink.spool import Spool, SpoolDiskFull

sys.path.insert(0, str(Path(__file__).resolve().parent))
from full_disk_drop import build_drop, config, histogram_count, histogram_ids, iolens, write_config

pytestmark = [pytest.mark.faults, pytest.mark.integration]

MIB = 1 << 20
HOSTS = 10
"""Hosts of fio logs in the drop: their documents fill the 1 MiB state directory 3.5 times."""
BEFORE = 2
"""Hosts whose logs are there when ``iolens run`` starts; the others' logs are written while
the cluster is away (so the disk fills however fast the first ones are read)."""
OUTAGE_S = 40.0
"""How long the cluster is away (the acceptance case)."""
SINK = {"chunk_max_docs": 50, "queue_docs": 200, "backoff_max_s": 1.0}
"""Small bulk requests (the spool fills segment by segment before the disk is full), and the
spool tried again at least every second (the cluster is found soon after it is back)."""
FULL = "the state directory's disk is full"
ROOM = "has room again"
WIDE = {**os.environ, "COLUMNS": "1000"}
"""``iolens status`` prints its lines unwrapped."""
DEADLINE_S = 240.0
"""Longest wait for a condition before the test fails (a hang guard, not a timing check)."""


def wait_for(what: str, cond: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    """Poll ``cond`` until true; fail naming ``what`` after :data:`DEADLINE_S` or when
    ``proc`` exited."""
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if proc.poll() is not None:
            pytest.fail(f"iolens run exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > end:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.2)


def doc(i: int, index: str) -> Document:
    """A document of about 2 kB, from line ``i + 1`` of one file."""
    ref = LineRef("2049:7:ff", "/drop/a_clat_hist.1.log", i + 1, 100 * (i + 1))
    return Document(index, f"doc-{i:05d}", {"n": i, "pad": "x" * 2000}, (ref,))


def test_a_spool_write_the_disk_cuts_short_counts_nothing_as_spooled(
    tmpfs: Callable[[str, int], Path],
) -> None:
    root = tmpfs("state", 256 << 10) / "spool"
    spool = Spool(root, reserve_bytes=0, statvfs=lambda _: os.statvfs("/"))  # asks no room
    docs = [doc(i, "x") for i in range(400)]
    written = 0
    with pytest.raises(SpoolDiskFull) as info:
        for i in range(0, len(docs), 20):  # segments of about 40 kB until the disk refuses one
            spool.put(docs[i : i + 20])
            written += 20
    assert isinstance(info.value.__cause__, OSError)  # refused by the disk, half-way
    assert written > 0
    assert sorted(p.name for p in root.iterdir()) == [
        f"seg-{n:012d}.ndjson" for n in range(1, written // 20 + 1)
    ]  # no temporary file left
    assert spool.pending() == written
    assert [d.doc_id for d in spool.iter_documents()] == [d.doc_id for d in docs[:written]]
    assert [d.doc_id for d in Spool(root).iter_documents()] == [
        d.doc_id for d in docs[:written]
    ]  # what another process finds


class Acks:
    """Records the documents acknowledged."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, docs: Sequence[Document]) -> None:
        self.ids.extend(d.doc_id for d in docs)


def test_documents_the_disk_refuses_are_held_unacknowledged_and_delivered_once(
    tmp_path: Path, tmpfs: Callable[[str, int], Path], caplog: pytest.LogCaptureFixture
) -> None:
    state = tmpfs("state", 256 << 10)
    index = f"faults-disk-{uuid.uuid4().hex[:6]}"
    docs = [doc(i, index) for i in range(400)]
    settings = SinkSettings(chunk_max_docs=20, max_retries=0, backoff_initial_s=0.01)
    roomy = DiskWatch(state, statvfs=lambda _: os.statvfs("/"))  # the reserve never refuses
    acks = Acks()
    server = EmbeddedServer(tmp_path / "noida", free_port())  # not started yet: the cluster is away
    client = Elasticsearch(server.url, request_timeout=10)
    sink = BulkSink(client, settings, state, on_ack=acks, disk=roomy)
    try:
        added = 0
        while not sink.full():
            sink.add(docs[added])
            added += 1
        assert acks.ids == []  # neither spooled nor delivered: nothing acknowledged
        assert 0 < sink.spool.pending() < added  # the disk refused a segment: the rest is held
        assert not list((state / "spool").glob(".*.tmp"))
        assert caplog.text.count(FULL) == 1
        server.start(timeout_s=30.0)  # the cluster answers
        sink.flush()
        sink.close()
        assert not sink.full() and sink.spool.pending() == 0
        assert sorted(acks.ids) == [d.doc_id for d in docs[:added]]  # each once
        refresh(client, index)
        got = client.search(index=index, size=1000, source=False)["hits"]["hits"]
    finally:
        client.close()
        server.stop()
    assert sorted(h["_id"] for h in got) == sorted(acks.ids)
    assert caplog.text.count(ROOM) == 1


def test_iolens_run_waits_on_a_full_disk_and_delivers_once(
    tmp_path: Path, tmpfs: Callable[[str, int], Path], fault_held: Callable[..., None]
) -> None:
    state = tmpfs("state", MIB)
    drop, cfg, err_path = tmp_path / "drop", tmp_path / "run.yaml", tmp_path / "stderr.txt"
    expected = build_drop(drop, BEFORE)
    server = EmbeddedServer(tmp_path / "noida", free_port())
    server.start(timeout_s=30.0)
    ns = f"disk{uuid.uuid4().hex[:6]}"
    write_config(cfg, server.url, ns, drop, state, **SINK)
    stderr = err_path.open("wb")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(iolens(cfg, "run"), stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    client = Elasticsearch(server.url, request_timeout=60)
    try:
        # the cluster stops once the run delivers (the rest of the drop comes during the
        # outage, so the disk fills however far the run got)
        wait_for("the run's first documents", lambda: histogram_count(client, ns) > 0, proc)
        server.stop()
        stopped = time.monotonic()
        expected += build_drop(drop, HOSTS - BEFORE, BEFORE + 1)  # written during the outage
        wait_for("the disk to fill", lambda: FULL in err_path.read_text(), proc)
        assert (free_bytes(state) or 0) < 512 << 10  # the spool took the disk
        status = subprocess.run(
            iolens(cfg, "status"), capture_output=True, text=True, env=WIDE, timeout=120
        )
        said = " ".join(status.stdout.split())
        assert re.search(rf"state directory {re.escape(str(state))}: \d+ bytes free, full \(", said)
        # the rest of the outage (the fault's schedule): the run keeps running, reading waits
        left = OUTAGE_S - (time.monotonic() - stopped)
        fault_held("waiting on the full disk for the cluster", left, proc)
        server.start(timeout_s=30.0)  # back, same port and data
        wait_for("the disk to have room", lambda: ROOM in err_path.read_text(), proc)
        wait_for("every document", lambda: histogram_count(client, ns) >= expected, proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
        log = err_path.read_text()
        once = subprocess.run(
            iolens(cfg, "run", "--once"), capture_output=True, text=True, timeout=300
        )
        assert once.returncode == 0, once.stderr
        got = histogram_ids(client, ns, HOSTS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
        client.close()
        server.stop()
    assert log.count(FULL) == 1 and log.count(ROOM) == 1
    assert "nothing is dropped" in log and "Traceback" not in log
    assert "Traceback" not in once.stderr
    assert len(got) == expected and len(set(got)) == expected


def test_iolens_run_once_starts_on_a_full_state_directory(
    tmp_path: Path, tmpfs: Callable[[str, int], Path], es_url: str, client: Elasticsearch
) -> None:
    state = tmpfs("state", MIB)
    drop, cfg = tmp_path / "drop", tmp_path / "run.yaml"
    expected = build_drop(drop, 4)
    ns = f"diskonce{uuid.uuid4().hex[:6]}"
    settings = settings_from_mapping(config(es_url, ns, drop, state, **SINK))
    dead = Elasticsearch(f"http://127.0.0.1:{free_port()}", request_timeout=2)
    with MainJob(settings, dead, install_templates=False) as job:  # the cluster is away
        away = job.run_once()
    dead.close()
    assert away.unsent > 0  # left for the next run: the disk is full
    assert list((state / "spool").glob("seg-*.ndjson"))
    fill(state / "filler")  # whatever room is left goes too
    assert free_bytes(state) == 0
    write_config(cfg, es_url, ns, drop, state, **SINK)
    status = subprocess.run(
        iolens(cfg, "status"), capture_output=True, text=True, env=WIDE, timeout=120
    )
    assert status.returncode == 0, status.stderr
    said = " ".join(status.stdout.split())
    assert f"state directory {state}: 0 bytes free, full (the spool leaves" in said
    done = subprocess.run(iolens(cfg, "run", "--once"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    got = histogram_ids(client, ns, 4)
    assert len(got) == expected and len(set(got)) == expected


def fill(path: Path) -> None:
    """Write zeros to ``path`` until its file system has no room left."""
    with path.open("wb", buffering=0) as fh:
        while True:
            try:
                fh.write(b"\0" * 4096)
            except OSError:
                return


def test_a_state_database_opens_once_the_full_disk_has_room(
    tmpfs: Callable[[str, int], Path], caplog: pytest.LogCaptureFixture
) -> None:
    state = tmpfs("state", MIB)
    path = state / "registry.sqlite"
    Registry(path).close()  # a registry closed cleanly: its -wal and -shm files are gone
    fill(state / "filler")
    tries: list[int] = []

    def room() -> None:
        tries.append(free_bytes(state) or 0)
        (state / "filler").unlink()

    reg = open_when_room(lambda: Registry(path), path, DiskWatch(state), room, sleep=tries.append)
    try:
        reg.upsert_new("k", "/drop/a.log")
        assert [st.key for st in reg.all()] == ["k"]
    finally:
        reg.close()
    assert tries == [0.5, 0]  # refused on a full disk, waited, made room, then opened
    assert caplog.text.count(FULL) == 1 and caplog.text.count(ROOM) == 1
    assert f"cannot write {path}" in caplog.text


def test_a_bad_line_the_full_disk_cannot_keep_is_read_again_next_run(
    tmp_path: Path,
    tmpfs: Callable[[str, int], Path],
    es_url: str,
    client: Elasticsearch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = tmpfs("state", MIB)
    drop = tmp_path / "drop"
    expected = build_drop(drop, 1)
    log = drop / "fio" / "node001" / "randrw_clat_hist.1.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:10]))
    ns = f"diskbad{uuid.uuid4().hex[:6]}"
    settings = settings_from_mapping(config(es_url, ns, drop, state, **SINK))
    with MainJob(settings, client) as job:  # both logs registered, the first read to line 10
        job.run_once()
    with log.open("ab") as fh:  # then a bad line is written, and the rest
        fh.write(b"".join([b"not, a, histogram\n", *lines[10:]]))
    with MainJob(settings, client) as job:
        fill(state / "filler")  # the disk fills while the run reads
        second = job.run_once()
    assert second.bad_lines == 1
    assert caplog.text.count(FULL) == 1 and "Traceback" not in caplog.text
    assert f"bad lines to keep (line 11 of {log} first)" in caplog.text
    (state / "filler").unlink()
    with MainJob(settings, client) as job:  # the bad line is read again, and kept
        job.run_once()
    assert [e.line_no for e in DeadLetters(state / "deadletter").iter_inputs()] == [11]
    got = histogram_ids(client, ns, 1)
    assert len(got) == len(set(got)) == expected  # each good line once


def test_a_segment_the_full_disk_cannot_rewrite_is_not_sent_twice(
    tmpfs: Callable[[str, int], Path],
) -> None:
    state = tmpfs("state", 256 << 10)
    spool = Spool(state / "spool", reserve_bytes=0)
    docs = [doc(i, "x") for i in range(40)]
    spool.put(docs[:20])
    spool.put(docs[20:])
    fill(state / "filler")  # no room to rewrite a partly delivered segment
    sent: list[str] = []

    def half(batch: list[Document]) -> list[Document]:  # the cluster takes every other one
        sent.extend(d.doc_id for d in batch[::2])
        return batch[1::2]

    def every(batch: list[Document]) -> list[Document]:
        sent.extend(d.doc_id for d in batch)
        return []

    assert spool.drain(half) == 10
    assert spool.pending() == 30
    assert spool.drain(every) == 30
    assert sorted(sent) == [d.doc_id for d in docs]  # each once
    assert spool.pending() == 0 and not list((state / "spool").iterdir())
