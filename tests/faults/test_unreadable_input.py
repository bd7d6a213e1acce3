"""Input files ``iolens run`` cannot read, injected for real while it runs: a file it has no
permission to read (the shipper runs as ``nobody``, the file is ``chmod 000``), a stale NFS
file handle (``ESTALE`` from a FUSE file system, :mod:`faultfs`), a file replaced by another
in the middle of a read (held open by the same file system), and a drop directory deleted and
created again. Each time: the message names the file and the reason, the other files are read
meanwhile, the run keeps going, and the documents indexed are exactly those expected (ids of a
clean run of the same content), none twice."""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from elasticsearch import Elasticsearch, NotFoundError

from pipeline.jobs.main_job import MainJob
from pipeline.settings import settings_from_mapping
from pipeline.shippers.tailer import read_complete_lines
from pipeline.shippers.unreadable import Unreadable
from pipeline.sink.search import refresh
from tests.faults.conftest import unavailable

pytestmark = [pytest.mark.faults, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
FAULTFS = Path(__file__).with_name("faultfs.py")
SAMPLES = ROOT / "tests" / "data" / "fio" / "samples"
ONE = (SAMPLES / "node01" / "randrw_clat_hist.1.log").read_bytes()
"""fio histogram log of 79 lines (one document each)."""
TWO = (SAMPLES / "node01" / "randrw_clat_hist.2.log").read_bytes()
"""Another of 80 lines, with another first line."""
THREE = (SAMPLES / "node02" / "randrw_clat_hist.1.log").read_bytes()
"""A third, written while a file cannot be read: it must be read meanwhile."""
A, B, C = "randrw_clat_hist.1.log", "randrw_clat_hist.2.log", "seqrd_clat_hist.1.log"
DEADLINE_S = 60.0
"""Longest wait for a condition (a hang guard, not a timing check)."""
CHUNK_BYTES = 16 << 10
"""``shipper.read_chunk_bytes``: a log is read in several chunks."""


def lines(data: bytes, n: int) -> bytes:
    """The first ``n`` lines of ``data``."""
    return b"".join(data.splitlines(keepends=True)[:n])


def config(es_url: str, ns: str, drop: Path, state: Path, observer: str) -> dict[str, Any]:
    return {
        "elasticsearch": {"url": es_url, "namespace": ns},
        "state_dir": str(state),
        "drops": [{"type": "fio-hist", "path": str(drop), "host": "node01"}],
        "fio": {"run_start": "2026-11-22T05:25:00.203Z", "settle_s": 0},
        "shipper": {
            "observer": observer,
            "poll_interval_s": 0.1,
            "read_chunk_bytes": CHUNK_BYTES,
        },
        "sink": {"flush_interval_s": 0.05},
        "jobs": {"tick_s": 0.1},
    }


def histogram_ids(client: Elasticsearch, ns: str) -> list[str]:
    """The sorted ids of the histogram documents of namespace ``ns`` (repeats kept)."""
    index = f"metrics-fio.histogram-{ns}"
    try:
        refresh(client, index)
        hits = client.search(index=index, size=5000, source=False)["hits"]["hits"]
    except NotFoundError:
        return []
    return sorted(h["_id"] for h in hits)


def expected_ids(
    es_url: str, client: Elasticsearch, where: Path, files: dict[str, bytes]
) -> list[str]:
    """The ids of a clean one-shot run of ``files`` (``dir/name`` -> content) into a namespace
    of its own."""
    drop = where / "clean"
    for rel, data in files.items():
        (drop / rel).parent.mkdir(parents=True, exist_ok=True)
        (drop / rel).write_bytes(data)
    ns = f"clean{uuid.uuid4().hex[:8]}"
    settings = settings_from_mapping(config(es_url, ns, drop, where / "clean-state", "polling"))
    with MainJob(settings, client) as job:
        job.run_once()
    return histogram_ids(client, ns)


class Run:
    """``iolens run`` (with ``args``) in a subprocess, as ``user`` if given; its output in
    ``log``."""

    def __init__(
        self, cfg: dict[str, Any], where: Path, user: str | None = None, *args: str
    ) -> None:
        path = where / "iolens.yaml"
        path.write_text(yaml.safe_dump(cfg))
        self.log = where / f"iolens{'-'.join(args)}.log"
        as_user = (
            ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups"] if user else []
        )
        argv = [
            *as_user,
            sys.executable,
            "-m",
            "pipeline.cli.main",
            "--config",
            str(path),
            "run",
            *args,
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOME": cfg["state_dir"]}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=out, stderr=out, env=env)

    def text(self) -> str:
        return self.log.read_text()

    def wait_for(self, what: str, cond: Callable[[], bool]) -> None:
        """Poll ``cond``; fail naming ``what`` when the run exited or after the deadline."""
        end = time.monotonic() + DEADLINE_S
        while not cond():
            if self.proc.poll() is not None:
                pytest.fail(
                    f"iolens run exited ({self.proc.returncode}) waiting for {what}:\n{self.text()}"
                )
            if time.monotonic() > end:
                pytest.fail(f"gave up waiting for {what}:\n{self.text()}")
            time.sleep(0.05)

    def stop(self) -> int:
        """SIGTERM; the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=DEADLINE_S)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def run_dir() -> Iterator[Path]:
    """A directory the unprivileged user can reach (pytest's own are private to root)."""
    where = Path(tempfile.mkdtemp(prefix="iolens-unreadable-"))
    where.chmod(0o755)
    yield where
    shutil.rmtree(where, ignore_errors=True)


def test_a_file_without_read_permission_is_read_once_allowed(
    es_url: str, client: Elasticsearch, run_dir: Path
) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        unavailable("running the shipper as another user needs root and setpriv")
    drop, state = run_dir / "drop", run_dir / "state"
    drop.mkdir(mode=0o755)
    state.mkdir()
    shutil.chown(state, "nobody", "nogroup")
    (drop / A).write_bytes(ONE)
    (drop / B).write_bytes(TWO)
    (drop / B).chmod(0)
    ns = f"perm{uuid.uuid4().hex[:8]}"
    cfg = config(es_url, ns, drop, state, "native")
    once = Run(cfg, run_dir, "nobody", "--once")  # a one-shot run names what it did not read
    assert once.proc.wait(timeout=DEADLINE_S) == 0, once.text()
    assert (
        f"{drop / B} could not be read in this run (EACCES): it was not read to its end; the "
        "next run tries it again from where it was read to"
    ) in once.text()
    assert histogram_ids(client, ns) == expected_ids(es_url, client, run_dir / "w", {A: ONE})
    run = Run(cfg, run_dir, user="nobody")
    try:
        denied = (
            f"{drop / B} cannot be read (Permission denied, EACCES): give the user iolens runs "
            "as (uid 65534) read access to it and search access to its directories. It is not "
            "read for now and tried again at each pass over the drop, from where it was read "
            "to; the other files are read meanwhile"
        )
        run.wait_for("the refusal", lambda: denied in run.text())
        (drop / C).write_bytes(THREE)  # a new file meanwhile: read while B is not
        first = expected_ids(es_url, client, run_dir / "x", {A: ONE, C: THREE})
        run.wait_for("the other files", lambda: histogram_ids(client, ns) == first)
        (drop / B).chmod(0o644)
        every = expected_ids(es_url, client, run_dir / "y", {A: ONE, B: TWO, C: THREE})
        run.wait_for("the file once allowed", lambda: histogram_ids(client, ns) == every)
        assert run.proc.poll() is None
        assert run.stop() == 0
    finally:
        run.kill()
    text = run.text()
    assert text.count(denied) == 1  # said once, however often it was tried
    assert f"{drop / B} can be read again: reading it from where it was read to" in text
    assert len(every) == 79 + 80 + len(THREE.splitlines())
    assert histogram_ids(client, ns) == every  # none missing, none twice


@pytest.fixture
def faultfs(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """A :mod:`faultfs` mount: (the directory it serves, the mount point, its control file)."""
    if os.geteuid() != 0 or not Path("/dev/fuse").exists():
        unavailable("the FUSE file system of the fault tests needs root and /dev/fuse")
    back, mnt, control = tmp_path / "back", tmp_path / "mnt", tmp_path / "faults"
    back.mkdir()
    mnt.mkdir()
    control.write_text("")
    log = (tmp_path / "faultfs.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, str(FAULTFS), str(back), str(mnt), str(control)], stdout=log, stderr=log
    )
    end = time.monotonic() + DEADLINE_S
    while not os.path.ismount(mnt):
        if proc.poll() is not None or time.monotonic() > end:
            log.close()
            unavailable(
                f"cannot mount the FUSE file system: {(tmp_path / 'faultfs.log').read_text()}"
            )
        time.sleep(0.05)
    try:
        yield back, mnt, control
    finally:
        control.write_text("")  # a held read lets go
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        try:
            proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_a_stale_nfs_file_handle_is_reopened_or_retried_and_read_on_from_its_offset(
    es_url: str, client: Elasticsearch, tmp_path: Path, faultfs: tuple[Path, Path, Path]
) -> None:
    back, mnt, control = faultfs
    drop = mnt / "drop"
    drop.mkdir()
    served = back / "drop" / A  # written where the file is served from, as on an NFS server
    (drop / A).write_bytes(lines(ONE, 30))
    (drop / B).write_bytes(TWO)
    ns = f"stale{uuid.uuid4().hex[:8]}"
    run = Run(config(es_url, ns, drop, tmp_path / "state", "polling"), tmp_path)
    try:
        start = expected_ids(es_url, client, tmp_path / "x", {A: lines(ONE, 30), B: TWO})
        run.wait_for("the first lines", lambda: histogram_ids(client, ns) == start)
        control.write_text(f"{A} estale\n")  # the server forgot the file: every read fails
        with served.open("ab") as fh:
            fh.write(ONE[len(lines(ONE, 30)) : len(lines(ONE, 50))])
        stale = (
            f"{drop / A} cannot be read (Stale file handle, ESTALE): the network file system no "
            "longer knows the file (removed or replaced on the server, or the export remounted) "
            "and opening it again by its path did not help; check the mount on this host. It is "
            "not read for now and tried again at each pass over the drop, from where it was read "
            "to; the other files are read meanwhile"
        )
        run.wait_for("the stale handle", lambda: stale in run.text())
        (drop / C).write_bytes(THREE)
        meanwhile = expected_ids(
            es_url, client, tmp_path / "y", {A: lines(ONE, 30), B: TWO, C: THREE}
        )
        run.wait_for("the other files", lambda: histogram_ids(client, ns) == meanwhile)
        control.write_text("")  # the mount recovers
        fifty = expected_ids(es_url, client, tmp_path / "z", {A: lines(ONE, 50), B: TWO, C: THREE})
        run.wait_for("the rest, from the offset", lambda: histogram_ids(client, ns) == fifty)
        control.write_text(f"{A} estale-once\n")  # one stale handle: a new lookup cures it
        with served.open("ab") as fh:
            fh.write(ONE[len(lines(ONE, 50)) :])
        every = expected_ids(es_url, client, tmp_path / "w", {A: ONE, B: TWO, C: THREE})
        run.wait_for("the whole file", lambda: histogram_ids(client, ns) == every)
        assert run.proc.poll() is None
        assert run.stop() == 0
    finally:
        run.kill()
    text = run.text()
    assert text.count(stale) == 1
    assert f"{drop / A} can be read again: reading it from where it was read to" in text
    reopened = (
        f"{drop / A}: stale file handle (ESTALE); opened again by its path, it is the same "
        f"file: reading on from byte {len(lines(ONE, 50))}"
    )
    assert reopened in text
    assert len(every) == 79 + 80 + len(THREE.splitlines())
    assert histogram_ids(client, ns) == every


def test_a_file_replaced_while_being_read_is_let_go_and_the_new_one_read_from_its_start(
    es_url: str, client: Elasticsearch, tmp_path: Path, faultfs: tuple[Path, Path, Path]
) -> None:
    back, mnt, control = faultfs
    drop = mnt / "drop"
    drop.mkdir()
    control.write_text(f"{A} hold\n")  # the second chunk's read waits, the file open
    (drop / A).write_bytes(ONE)
    first = read_complete_lines(drop / A, 0, CHUNK_BYTES)
    assert 0 < len(first.lines) < 79
    ns = f"swap{uuid.uuid4().hex[:8]}"
    run = Run(config(es_url, ns, drop, tmp_path / "state", "polling"), tmp_path)
    try:
        run.wait_for("a read held open", Path(f"{control}.held").exists)
        # On the server: a new file at the path, the old one deleted (still open, mid-read).
        (back / "drop" / "next.tmp").write_bytes(TWO)
        (back / "drop" / "next.tmp").rename(back / "drop" / A)
        inode = (drop / A).stat().st_ino
        control.write_text("")  # the held read returns the old file's bytes
        (drop / C).write_bytes(THREE)
        every = expected_ids(
            es_url,
            client,
            tmp_path / "x",
            {f"old/{A}": lines(ONE, len(first.lines)), f"new/{A}": TWO, C: THREE},
        )
        run.wait_for("the new file", lambda: histogram_ids(client, ns) == every)
        assert run.proc.poll() is None
        assert run.stop() == 0
    finally:
        run.kill()
    replaced = (
        f"{drop / A} was replaced by another file (inode {inode}): the new file is read from its "
        "start. The file read there before is no longer in its directory (deleted, or moved "
        f"elsewhere): it was read to byte {first.next_offset} and whatever it held after that "
        "is not read"
    )
    assert run.text().count(replaced) == 1
    assert len(every) == len(first.lines) + 80 + len(THREE.splitlines())
    assert histogram_ids(client, ns) == every


@pytest.mark.parametrize("observer", ["native", "polling"])
def test_a_drop_directory_deleted_and_created_again_is_watched_again(
    observer: str, es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / A).write_bytes(ONE)
    ns = f"redo{uuid.uuid4().hex[:8]}"
    run = Run(config(es_url, ns, drop, tmp_path / "state", observer), tmp_path)
    gone = (
        f"drop directory {drop} was deleted or moved away: its files are read no more; it is "
        "watched for, and read again once a directory is there (create it again, or fix "
        "drops[].path)"
    )
    try:
        one = expected_ids(es_url, client, tmp_path / "x", {A: ONE})
        run.wait_for("the first file", lambda: histogram_ids(client, ns) == one)
        shutil.rmtree(drop)
        run.wait_for("the deletion", lambda: gone in run.text())
        drop.mkdir()
        (drop / B).write_bytes(TWO)
        every = expected_ids(es_url, client, tmp_path / "y", {A: ONE, B: TWO})
        run.wait_for("the new directory's file", lambda: histogram_ids(client, ns) == every)
        (drop / C).write_bytes(THREE)  # and what comes after: it is watched again
        more = expected_ids(es_url, client, tmp_path / "z", {A: ONE, B: TWO, C: THREE})
        run.wait_for("a later file", lambda: histogram_ids(client, ns) == more)
        assert run.proc.poll() is None
        assert run.stop() == 0
    finally:
        run.kill()
    text = run.text()
    assert text.count(gone) == 1
    assert text.count(f"drop directory {drop} is there again: watching it again; ") == 1
    assert len(more) == 79 + 80 + len(THREE.splitlines())
    assert histogram_ids(client, ns) == more


def test_a_reason_is_said_once_per_file_and_errno_with_what_to_do(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="pipeline.shippers.unreadable")
    seen = Unreadable()
    denied = PermissionError(errno.EACCES, "Permission denied")
    for _ in range(3):
        seen.report("/drop/a.log", denied)
    seen.report("/drop/a.log", OSError(errno.EIO, "Input/output error"))
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split(": ", 1)[0] for w in warned] == [
        "/drop/a.log cannot be read (Permission denied, EACCES)",
        "/drop/a.log cannot be read (Input/output error, EIO)",
    ]
    assert "check the device or the network file system it is on (kernel log)" in warned[1]
    assert seen.failing == {"/drop/a.log": errno.EIO}
    seen.readable("/drop/a.log")
    seen.readable("/drop/a.log")  # said once, and only after a failure
    again = [r.getMessage() for r in caplog.records if "can be read again" in r.getMessage()]
    assert again == ["/drop/a.log can be read again: reading it from where it was read to"]
    assert seen.failing == {}
