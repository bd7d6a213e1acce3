"""A small multi-threaded HTTP server that posts Magpie-style events (seed 002, Table 1).

Run as a process: ``python http_server.py --events FILE [--workers 4] [--helpers 2]``; it
prints ``port <n>`` once listening and stops on SIGTERM (or SIGINT), flushing its events.

With ``--backend-events FILE --backend-clock-skew-ns N`` the RPC back end plays a second
machine: its threads write their events to ``FILE`` instead, stamped ``time.monotonic_ns() + N``
(a clock ``N`` ns ahead of the front end's), after a ``ClockSync`` line of their own. The back
end's fragment of an F request then joins its request only by cross-machine stitching
(:mod:`pipeline.reducers.stitch`).

Six request types, as in the seed's Table 1 (CPU is spent hashing a buffer with ``hashlib``,
which releases the GIL, until the thread's own CPU clock has advanced enough):

======  ===========  ===================================================================
type    path         what the worker thread does
======  ===========  ===================================================================
A       /longspin    spins 30 ms of CPU
B       /shortspin   spins 15 ms
C       /small       reads a 12 KiB file and sends it
D       /tiny        reads a 5 KiB file and sends it
E       /parspin     hands a 15 ms spin to a helper thread, spins 15 ms itself, joins it
F       /rpcspin     spins 7.5 ms, calls the back-end thread over a socket (which spins 15 ms)
                     and waits for its reply, then spins 7.25 ms
======  ===========  ===================================================================

Events are JSON lines (the format of :mod:`pipeline.formats.events.decode`): ``ts`` from
``time.monotonic_ns()``, ``tid`` from ``threading.get_native_id()``, ``cpu_ns`` the thread's
CPU time since its previous event (``time.thread_time_ns()``), and the join attributes of
``config/schemas/http_server.yaml``. ``ReqStart`` carries the ground truth ``_type`` and
``_conn`` (never joined on). Connections are kept alive: a request on a connection that
already served one opens the connection again with ``Readable``. The first line is a
``ClockSync`` event pairing the monotonic clock with the wall clock (``wall_ns``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

SPIN_BUF = os.urandom(64 * 1024)
BODIES = {"/small": 12 * 1024, "/tiny": 5 * 1024}


class Events:
    """Thread-safe writer of event lines; ``cpu_ns`` per thread since its last event."""

    def __init__(self, fh: BinaryIO, skew_ns: int = 0) -> None:
        self.fh, self.lock = fh, threading.Lock()
        self.local = threading.local()
        self.pid = os.getpid()
        self.skew_ns = skew_ns  # this writer's clock minus the monotonic clock

    def emit(self, ev: str, **attrs: Any) -> None:
        now_cpu = time.thread_time_ns()
        last = getattr(self.local, "cpu", now_cpu)
        self.local.cpu = now_cpu
        line = {
            "ts": time.monotonic_ns() + self.skew_ns,
            "ev": ev,
            "pid": self.pid,
            "tid": threading.get_native_id(),
            **attrs,
        }
        if ev == "Spin":
            line["cpu_ns"] = now_cpu - last
        data = json.dumps(line, separators=(",", ":")).encode() + b"\n"
        with self.lock:
            self.fh.write(data)


def spin(ms: float) -> None:
    """Use ``ms`` of this thread's CPU."""
    end = time.thread_time_ns() + int(ms * 1e6)
    while time.thread_time_ns() < end:
        hashlib.sha256(SPIN_BUF).digest()


def conn_key(sock: socket.socket) -> str:
    """The connection as client ip:port > server ip:port."""
    peer, local = sock.getpeername(), sock.getsockname()
    return f"{peer[0]}:{peer[1]}>{local[0]}:{local[1]}"


class Server:
    """Listener, worker pool, helper pool and RPC back-end (see the module docstring)."""

    def __init__(
        self,
        events: Events,
        workers: int,
        helpers: int,
        files: Path,
        backend_events: Events | None = None,
    ) -> None:
        self.ev = events
        self.backend_ev = events if backend_events is None else backend_events
        self.files = files
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.conns: queue.Queue[tuple[socket.socket, str] | None] = queue.Queue()
        self.tasks: queue.Queue[tuple[str, threading.Event] | None] = queue.Queue()
        self.ids = itertools.count(1)
        self.stop = threading.Event()
        backend = socket.create_server(("127.0.0.1", 0))
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads += [
            threading.Thread(target=self._work, name=f"worker-{n}", daemon=True)
            for n in range(workers)
        ]
        self.threads += [threading.Thread(target=self._help, daemon=True) for _ in range(helpers)]
        self.threads.append(threading.Thread(target=self._backend, args=(backend,), daemon=True))
        self.rpc_addr = backend.getsockname()
        self.rpc_local = threading.local()

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stop accepting, let the workers finish the requests they hold (a client has its
        response before the worker posts ``Send`` and ``ReqEnd``), then stop them."""
        self.listener.close()
        workers = [t for t in self.threads if t.name.startswith("worker")]
        for _ in workers:
            self.conns.put(None)
        for t in workers:
            t.join(timeout_s)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _addr = self.listener.accept()
            except OSError:
                return
            key = conn_key(sock)
            self.ev.emit("Accept", conn=key)
            self.conns.put((sock, key))

    def _work(self) -> None:
        while (item := self.conns.get()) is not None:
            sock, key = item
            self.ev.emit("Dequeue", conn=key)
            reader = sock.makefile("rb")
            first = True
            try:
                while True:
                    line = reader.readline()
                    if not line:
                        break
                    while reader.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    if not first:
                        self.ev.emit("Readable", conn=key)
                    first = False
                    path = line.split()[1].decode()
                    self._serve(sock, key, path)
            except OSError:
                pass
            finally:
                reader.close()
                sock.close()

    def _serve(self, sock: socket.socket, key: str, path: str) -> None:
        kind = {"/longspin": "A", "/shortspin": "B", "/small": "C", "/tiny": "D"}
        kind |= {"/parspin": "E", "/rpcspin": "F"}
        self.ev.emit("ReqStart", conn=key, _type=kind.get(path, "?"), _conn=key)
        body = b"ok\n"
        if path == "/longspin":
            spin(30)
            self.ev.emit("Spin")
        elif path == "/shortspin":
            spin(15)
            self.ev.emit("Spin")
        elif path in BODIES:
            body = (self.files / path.lstrip("/")).read_bytes()
            self.ev.emit("FileRead", bytes=len(body))
        elif path == "/parspin":
            task, done = f"task{next(self.ids)}", threading.Event()
            self.ev.emit("Fork", task=task)
            self.tasks.put((task, done))
            spin(15)
            self.ev.emit("Spin")
            done.wait()
            self.ev.emit("Join", task=task)
        elif path == "/rpcspin":
            spin(7.5)
            self.ev.emit("Spin")
            self._rpc(f"rpc{next(self.ids)}")
            spin(7.25)
            self.ev.emit("Spin")
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        sock.sendall(head + body)
        self.ev.emit("Send", conn=key, bytes=len(head) + len(body))
        self.ev.emit("ReqEnd", conn=key)

    def _rpc(self, rpc: str) -> None:
        sock = getattr(self.rpc_local, "sock", None)
        if sock is None:  # one persistent connection per worker
            sock = self.rpc_local.sock = socket.create_connection(self.rpc_addr)
        self.ev.emit("RpcCall", rpc=rpc)
        sock.sendall(rpc.encode() + b"\n")
        reply = b""
        while not reply.endswith(b"\n"):
            reply += sock.recv(64)
        self.ev.emit("RpcReturn", rpc=rpc)

    def _help(self) -> None:
        while (item := self.tasks.get()) is not None:
            task, done = item
            self.ev.emit("TaskStart", task=task)
            spin(15)
            self.ev.emit("Spin")
            self.ev.emit("TaskEnd", task=task)
            done.set()

    def _backend(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _addr = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_rpc, args=(sock,), daemon=True).start()

    def _serve_rpc(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        for line in reader:
            rpc = line.strip().decode()
            self.backend_ev.emit("RpcServe", rpc=rpc)
            spin(15)
            self.backend_ev.emit("Spin")
            self.backend_ev.emit("RpcReply", rpc=rpc)
            sock.sendall(b"done\n")


def make_files(where: Path) -> None:
    """The static files of /small and /tiny."""
    where.mkdir(parents=True, exist_ok=True)
    for path, size in BODIES.items():
        (where / path.lstrip("/")).write_bytes(os.urandom(size))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--events", type=Path, required=True)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--helpers", type=int, default=2)
    p.add_argument("--cpu", type=int, help="run on this CPU only (a starved server)")
    p.add_argument("--backend-events", type=Path, help="the RPC back end's events (own clock)")
    p.add_argument(
        "--backend-clock-skew-ns", type=int, default=0, help="the back end's clock minus ours"
    )
    args = p.parse_args(argv)
    if args.cpu is not None:  # before any thread starts: they inherit it
        os.sched_setaffinity(0, {args.cpu})
    files = args.events.parent / "static"
    make_files(files)
    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(open(args.events, "wb"))
        writers = [Events(fh)]
        if args.backend_events is not None:
            bfh = stack.enter_context(open(args.backend_events, "wb"))
            writers.append(Events(bfh, args.backend_clock_skew_ns))
        server = Server(writers[0], args.workers, args.helpers, files, writers[-1])
        stopped = threading.Event()
        handler: Callable[[int, Any], None] = lambda *_a: stopped.set()  # noqa: E731
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        for w in writers:
            w.emit("ClockSync", wall_ns=time.time_ns())
        server.start()
        print(f"port {server.port}", flush=True)
        stopped.wait()
        server.shutdown()
        for w in writers:
            with w.lock:
                w.fh.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
