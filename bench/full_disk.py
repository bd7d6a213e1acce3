"""Full state directory, full size: ``iolens run`` with its state directory on a 1 MiB tmpfs,
about 100 MB of fio histogram logs in the drop, and the cluster (an embedded noida-db on its own
port and data directory) away for 40 s from 2 s into the run.

The drop is ``fio/node001 .. nodeNNN/``, each a copy of ``tests/data/fio/samples/node01`` (two
real logs, about 0.9 MB, 159 histogram documents; the host name makes other document ids). The
script checks what ``tests/faults/test_full_disk.py`` checks on 10 hosts: ``iolens run`` stays
alive while the disk is full, says so once (and once when there is room again), exits 0 on
SIGTERM without a traceback, a following ``iolens run --once`` in the same state directory
exits 0, and every histogram document is indexed exactly once. Needs root (``mount``).

Usage::

    .venv/bin/python bench/full_disk.py                  # 115 hosts (~100 MB), 40 s outage
    .venv/bin/python bench/full_disk.py --hosts 20 --outage-s 10
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "faults"))

from elasticsearch import Elasticsearch  # noqa: E402
from full_disk_drop import build_drop, histogram_count, histogram_ids, iolens, write_config  # noqa: E402

from pipeline.sink.disk import free_bytes  # noqa: E402
from pipeline.sink.embedded import EmbeddedServer, free_port  # noqa: E402

FULL = "the state directory's disk is full"
ROOM = "has room again"
SINK = {"chunk_max_docs": 50, "queue_docs": 200, "backoff_max_s": 1.0}


def wait_for(
    what: str, cond: Callable[[], bool], proc: subprocess.Popen[bytes], limit_s: float
) -> None:
    """Poll ``cond()`` until true; exit naming ``what`` when ``proc`` exited or after
    ``limit_s``."""
    end = time.monotonic() + limit_s
    while not cond():
        if proc.poll() is not None:
            sys.exit(f"iolens run exited ({proc.returncode}) while waiting for {what}")
        if time.monotonic() > end:
            sys.exit(f"gave up waiting for {what}")
        time.sleep(2.0)


def run(work: Path, hosts: int, outage_s: float, start_s: float) -> int:
    """One run of the scenario in ``work``; 0 when every check held."""
    state = work / "state"
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1048576", "tmpfs", str(state)], check=True)
    server = EmbeddedServer(work / "noida", free_port())
    proc: subprocess.Popen[bytes] | None = None
    try:
        expected = build_drop(work / "drop", hosts)
        size = sum(p.stat().st_size for p in (work / "drop").rglob("*.log"))
        print(f"drop: {hosts} hosts, {size / 1e6:.0f} MB, {expected} histogram documents")
        server.start(timeout_s=30.0)
        ns = f"disk{uuid.uuid4().hex[:6]}"
        cfg, err_path = work / "run.yaml", work / "stderr.txt"
        write_config(cfg, server.url, ns, work / "drop", state, **SINK)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        t0 = time.monotonic()
        with err_path.open("wb") as err:
            out = subprocess.DEVNULL
            proc = subprocess.Popen(iolens(cfg, "run"), stdout=out, stderr=err, env=env, cwd=ROOT)
            time.sleep(start_s)
            server.stop()
            wait_for("the disk to fill", lambda: FULL in err_path.read_text(), proc, 600)
            print(f"{time.monotonic() - t0:6.1f} s  disk full ({free_bytes(state)} bytes free)")
            time.sleep(max(0.0, outage_s - (time.monotonic() - t0 - start_s)))
            alive = proc.poll() is None
            server.start(timeout_s=30.0)
            print(f"{time.monotonic() - t0:6.1f} s  cluster back; iolens run alive: {alive}")
            client = Elasticsearch(server.url, request_timeout=120)
            done = lambda: histogram_count(client, ns) >= expected  # noqa: E731
            wait_for("every document", done, proc, 3600)
            print(f"{time.monotonic() - t0:6.1f} s  every document indexed")
            proc.send_signal(signal.SIGTERM)
            rc = proc.wait(timeout=300)
        once = subprocess.run(
            iolens(cfg, "run", "--once"), capture_output=True, text=True, cwd=ROOT
        )
        got = histogram_ids(client, ns, hosts)
        client.close()
        log = err_path.read_text()
        checks = {
            "alive while the disk was full": alive,
            "run exited 0 on SIGTERM": rc == 0,
            "full said once": log.count(FULL) == 1,
            "room again said once": log.count(ROOM) == 1,
            "no traceback": "Traceback" not in log + once.stderr,
            "run --once exited 0": once.returncode == 0,
            f"{expected} documents, none twice": len(got) == len(set(got)) == expected,
        }
        for name, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
        return 0 if all(checks.values()) else 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        server.stop()
        subprocess.run(["umount", "-l", str(state)], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=115, help="host directories (0.9 MB each)")
    ap.add_argument("--outage-s", type=float, default=40.0, help="how long the cluster is away")
    ap.add_argument("--start-s", type=float, default=2.0, help="when it goes, into the run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="iolens-full-disk-") as tmp:
        return run(Path(tmp), args.hosts, args.outage_s, args.start_s)


if __name__ == "__main__":
    sys.exit(main())
