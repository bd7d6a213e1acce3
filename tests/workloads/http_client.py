"""A client for tests/workloads/http_server.py: mixed concurrent load, and a whole recorded run.

``serve(dir, clients, per_client, seed)`` starts the server as a process, drives it with
``clients`` threads of ``per_client`` random requests each (five per kept-alive connection),
stops it and returns its events and the requests sent per type. With
``backend_skew_ns=N`` the server's RPC back end writes its events to a file of its own, on a
clock ``N`` ns ahead (a second machine): they are returned apart, in ``Run.backend``. With
``kernel=True`` the whole run is recorded by ``perf record -a -k mono -e sched:sched_switch``
(root), and its context switches are returned in ``Run.kernel``.
"""

from __future__ import annotations

import http.client
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.formats.events.decode import parse_events, perf_sched_events
from pipeline.records.events import Event

SERVER = Path(__file__).resolve().parent / "http_server.py"
PATHS = {
    "A": "/longspin",
    "B": "/shortspin",
    "C": "/small",
    "D": "/tiny",
    "E": "/parspin",
    "F": "/rpcspin",
}


@dataclass(frozen=True)
class Run:
    """A recorded run: the server's events, the requests the clients sent per type, and the
    events of the back end when it ran as another machine (empty otherwise)."""

    events: list[Event]
    sent: Counter[str]
    backend: list[Event] = field(default_factory=list)
    kernel: list[Event] = field(default_factory=list)


def drive(port: int, clients: int, per_client: int, seed: int) -> Counter[str]:
    """``clients`` threads, each sending ``per_client`` requests of random types, five per
    kept-alive connection; returns the requests sent per type."""
    sent: Counter[str] = Counter()
    lock = threading.Lock()
    errors: list[BaseException] = []

    def client(n: int) -> None:
        rng = random.Random(seed * 100 + n)
        conn = None
        try:
            for i in range(per_client):
                if i % 5 == 0:
                    if conn is not None:
                        conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                kind = rng.choice("ABCDEF")
                conn.request("GET", PATHS[kind])
                resp = conn.getresponse()
                resp.read()
                assert resp.status == 200
                with lock:
                    sent[kind] += 1
        except BaseException as err:
            errors.append(err)
        finally:
            if conn is not None:
                conn.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return sent


def serve(
    tmp: Path,
    clients: int,
    per_client: int,
    seed: int,
    cpu: int | None = None,
    backend_skew_ns: int | None = None,
    kernel: bool = False,
) -> Run:
    """Run the server (on CPU ``cpu`` only, if given), drive it, stop it; its events. With
    ``backend_skew_ns``, the RPC back end writes its own events on a clock that many ns ahead;
    with ``kernel``, perf records the context switches of every CPU meanwhile."""
    perf = record_sched(tmp / "perf.data") if kernel else None
    events_path = tmp / "events.jsonl"
    backend_path = tmp / "backend.jsonl"
    extra = [] if cpu is None else ["--cpu", str(cpu)]
    if backend_skew_ns is not None:
        extra += ["--backend-events", str(backend_path)]
        extra += ["--backend-clock-skew-ns", str(backend_skew_ns)]
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--events", str(events_path), "--workers", "4", *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        sent = drive(port, clients, per_client, seed)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            perf.wait(timeout=60)
    with open(events_path, "rb") as fh:
        events = list(parse_events(fh, str(events_path)))
    backend: list[Event] = []
    if backend_skew_ns is not None:
        with open(backend_path, "rb") as fh:
            backend = list(parse_events(fh, str(backend_path)))
    sched: list[Event] = []
    if perf is not None:
        # perf re-raises the SIGINT it was stopped with once its data is written
        assert perf.returncode in (0, -signal.SIGINT), f"perf record failed ({perf.returncode})"
        fields = "tid,pid,cpu,time,event,trace"
        script = subprocess.run(
            ["perf", "script", "-i", str(tmp / "perf.data"), "--ns", "-F", fields],
            capture_output=True,
            check=True,
        )
        (tmp / "sched.txt").write_bytes(script.stdout)
        sched = list(perf_sched_events(script.stdout.splitlines(), str(tmp / "sched.txt")))
    return Run(events, sent, backend, sched)


def record_sched(out: Path) -> subprocess.Popen[bytes]:
    """``perf record -a -k mono -e sched:sched_switch`` into ``out``, running once it returns
    (its start-up message has been printed); stop it with SIGINT."""
    perf = subprocess.Popen(
        ["perf", "record", "-a", "-k", "mono", "-e", "sched:sched_switch", "-o", str(out)],
        stderr=subprocess.PIPE,
    )
    # perf prints nothing before it records; give it the time to open its ring buffers
    deadline = time.monotonic() + 10
    while not out.exists() or out.stat().st_size == 0:
        if perf.poll() is not None:
            assert perf.stderr is not None
            raise RuntimeError(f"perf record failed: {perf.stderr.read().decode()[-500:]}")
        if time.monotonic() > deadline:
            raise RuntimeError("perf record did not start within 10 s")
        time.sleep(0.05)
    time.sleep(0.2)
    return perf
