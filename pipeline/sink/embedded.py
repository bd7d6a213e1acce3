"""The embedded Elasticsearch-API development server (noida-db) and choosing a cluster to use.

``noida-db`` (PyPI) ships a binary that serves an Elasticsearch 8.15 API subset; this module runs
it in the foreground as a child process (DESIGN.md, "Embedded default")::

    noida-db start --data-dir DIR --only elasticsearch --elasticsearch-port PORT --host 127.0.0.1

It answers ``GET /`` with ES 8.15.3 JSON, and lacks ILM, data-stream admin, the ``percentiles``
aggregation and the licence APIs (see :mod:`pipeline.sink.capabilities`). The server's output goes
to ``<data_dir>/noida-db.log``; a failed start raises :class:`~pipeline.errors.ConfigError`
with its tail.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import SplitResult, urlsplit

from pipeline.errors import ConfigError
from pipeline.settings import ElasticsearchSettings, EmbeddedSettings
from pipeline.sink.client import ping_url

log = logging.getLogger(__name__)

LOG_NAME = "noida-db.log"
PID_NAME = "server.pid"
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
_NOISE = "weak version"  # harmless GLIBC symbol-version warning printed by the binary


def noida_binary() -> Path:
    """Path of the ``noida-db`` executable inside the installed package (made executable).

    Raises:
        ConfigError: the package or its binary is missing.
    """
    try:
        path = Path(str(importlib.resources.files("noida_db") / "noida-db"))
    except ModuleNotFoundError:
        raise ConfigError(
            "the embedded server needs the noida-db package: pip install noida-db "
            "(or point elasticsearch.url at a running cluster)"
        ) from None
    if not path.is_file():
        raise ConfigError(f"{path}: the noida-db binary is missing; reinstall noida-db")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago (bind to port 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _log_tail(path: Path, max_lines: int = 20) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "(no output)"
    useful = [ln for ln in lines if _NOISE not in ln]
    return "\n".join(useful[-max_lines:]) or "(no output)"


class EmbeddedServer:
    """One noida-db process serving the Elasticsearch API on ``host:port``.

    Args:
        data_dir: where it keeps its data (created if missing); also holds ``noida-db.log`` and,
            for a detached server, ``server.pid``.
        port: TCP port of the Elasticsearch API.
        host: address to bind.
        clock, sleep: for the readiness wait (monotonic seconds; injected in tests).
    """

    def __init__(
        self,
        data_dir: Path,
        port: int,
        host: str = "127.0.0.1",
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.host = host
        self._clock = clock
        self._sleep = sleep
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://host:port``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """Process id while started, else None."""
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout_s: float = 20.0, *, detach: bool = False) -> None:
        """Spawn the server and wait until ``GET /`` answers.

        Args:
            timeout_s: how long to wait for it to answer.
            detach: run it in a new session and write ``<data_dir>/server.pid`` so it outlives
                this process (stop it with :func:`stop_detached`).

        Raises:
            ConfigError: something already answers on the port, the binary is missing, the
                process exited, or it did not answer within ``timeout_s``; the message quotes
                the tail of its output.
            RuntimeError: already started.
        """
        if self._proc is not None:
            raise RuntimeError("EmbeddedServer.start() called twice")
        if _listening(self.host, self.port) or ping_url(self.url + "/", timeout=1.0):
            raise ConfigError(
                f"cannot start the embedded Elasticsearch-API server: something already answers "
                f"at {self.url}. Fix: use that server (elasticsearch.url) or pick another port"
            )
        proc = self._spawn(detach)
        self._wait_ready(proc, timeout_s)
        if detach:
            (self.data_dir / PID_NAME).write_text(f"{proc.pid}\n", encoding="utf-8")
        log.debug("embedded Elasticsearch-API server answering at %s (pid %s)", self.url, self.pid)

    def _spawn(self, detach: bool) -> subprocess.Popen[bytes]:
        """Start the binary, its output appended to ``<data_dir>/noida-db.log``."""
        binary = noida_binary()
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"cannot start the embedded Elasticsearch-API server: its data directory "
                f"{self.data_dir}: {err.strerror}. Fix: set embedded.data_dir to a writable "
                "directory, or embedded.enabled: false (iolens run --no-embedded) where a real "
                "cluster is expected"
            ) from None
        cmd = [
            str(binary), "start", "--data-dir", str(self.data_dir), "--only", "elasticsearch",
            "--elasticsearch-port", str(self.port), "--host", self.host,
        ]  # fmt: skip
        with open(self.data_dir / LOG_NAME, "ab") as out:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=detach,
            )
        return self._proc

    def _wait_ready(self, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
        """Wait until ``GET /`` answers; stop the server and raise ConfigError when it exits
        or stays silent for ``timeout_s``."""
        deadline = self._clock() + timeout_s
        while not ping_url(self.url + "/", timeout=1.0):
            code = proc.poll()
            if code is not None or self._clock() >= deadline:
                self.stop()
                if code is not None:
                    what = f"exited with status {code}"
                else:
                    what = f"did not answer at {self.url} within {timeout_s:g} s"
                log_path = self.data_dir / LOG_NAME
                raise ConfigError(
                    f"the embedded Elasticsearch-API server (noida-db) {what}; its output "
                    f"({log_path}) ends with:\n{_log_tail(log_path)}\n"
                    "Fix: free the port, raise embedded.start_timeout_s, or point "
                    "elasticsearch.url at a running cluster"
                )
            self._sleep(0.05)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Terminate the server (SIGTERM, wait, then SIGKILL). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("noida-db (pid %s) ignored SIGTERM; killing it", proc.pid)
                proc.kill()
                proc.wait(timeout=timeout_s)
        pid_file = self.data_dir / PID_NAME
        with contextlib.suppress(OSError, ValueError):
            if int(pid_file.read_text(encoding="utf-8").strip()) == proc.pid:
                pid_file.unlink()

    def __enter__(self) -> EmbeddedServer:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _listening(host: str, port: int) -> bool:
    """Whether something accepts TCP connections on ``host:port`` (even a server too busy to
    answer HTTP in time)."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _is_noida(pid: int) -> bool:
    """Whether ``pid`` runs the noida-db binary (Linux /proc; True where it cannot be told)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return True
    return b"noida-db" in cmdline


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)  # reap it if it is our own child
        if done == pid:
            return False
    return True


def stop_detached(
    data_dir: Path,
    timeout_s: float = 10.0,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Stop a server started with ``start(detach=True)`` in ``data_dir``.

    Reads ``<data_dir>/server.pid``, sends SIGTERM, waits up to ``timeout_s`` seconds, then
    SIGKILL. A stale pid file (no such process, or a process that is not noida-db) is removed.

    Returns:
        Whether a running server was stopped.
    """
    pid_file = Path(data_dir) / PID_NAME
    try:
        pid = int(pid_file.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return False
    if not _alive(pid) or not _is_noida(pid):
        pid_file.unlink(missing_ok=True)
        return False
    _terminate(pid, timeout_s, clock, sleep)
    pid_file.unlink(missing_ok=True)
    return True


def _terminate(
    pid: int, timeout_s: float, clock: Callable[[], float], sleep: Callable[[float], None]
) -> None:
    """SIGTERM ``pid``, wait until it is gone or ``timeout_s`` passed, then SIGKILL."""
    os.kill(pid, signal.SIGTERM)
    deadline = clock() + timeout_s
    while _alive(pid):
        if clock() >= deadline:
            log.warning("noida-db (pid %s) ignored SIGTERM; killing it", pid)
            os.kill(pid, signal.SIGKILL)
            break
        sleep(0.05)


def ensure_cluster(
    es: ElasticsearchSettings,
    emb: EmbeddedSettings,
    log: logging.Logger | None = None,
    *,
    detach: bool = False,
) -> tuple[str, EmbeddedServer | None]:
    """The URL to use: the configured cluster if it answers, else a started embedded server.

    Args:
        es: ``es.url`` is probed with a plain ``GET`` (any HTTP answer counts).
        emb: when nothing answers and the URL is ``http://`` on localhost/127.0.0.1/::1 and
            ``emb.enabled``, noida-db is started on that URL's port (9200 if none) with its
            data in ``emb.data_dir``, waiting up to ``emb.start_timeout_s``.
        log: where to say that the embedded server was started (this module's logger if None):
            at INFO when its data directory is new (the first start), at DEBUG afterwards.
        detach: start it detached (see :meth:`EmbeddedServer.start`), e.g. for ``iolens demo``.

    Returns:
        ``(url, server)``; ``server`` is None when an existing cluster answered. The caller
        stops a returned server (``server.stop()``) unless it was detached.

    Raises:
        ConfigError: nothing answers and the embedded server may not or could not be started;
            the message names the URL and the fix.
    """
    logger = log if log is not None else logging.getLogger(__name__)
    if ping_url(es.url, timeout=min(es.request_timeout_s, 5.0)):
        return es.url, None
    server = _start_embedded(es, emb, detach, logger)
    return server.url, server


def _start_embedded(
    es: ElasticsearchSettings, emb: EmbeddedSettings, detach: bool, logger: logging.Logger
) -> EmbeddedServer:
    """Start noida-db in place of the silent cluster at ``es.url`` (see :func:`ensure_cluster`).

    Raises:
        ConfigError: it may not stand in for ``es.url``, or could not be started.
    """
    parts = _embeddable(es, emb.enabled)
    data_dir = Path(emb.data_dir)
    fresh = not data_dir.exists()
    host = "::1" if parts.hostname == "::1" else "127.0.0.1"
    server = EmbeddedServer(data_dir, parts.port or 9200, host)
    server.start(emb.start_timeout_s, detach=detach)
    logger.log(
        logging.INFO if fresh else logging.DEBUG,
        "no cluster answered at %s; started the embedded Elasticsearch-API server (noida-db) "
        "with data in %s",
        es.url,
        data_dir,
    )
    return server


def _embeddable(es: ElasticsearchSettings, enabled: bool) -> SplitResult:
    """The parts of ``es.url`` when the embedded server may stand in for it (``http://`` on
    localhost and ``embedded.enabled``).

    Raises:
        ConfigError: it may not; the message names the URL and the fix.
    """
    parts = urlsplit(es.url)
    local = parts.scheme == "http" and (parts.hostname or "") in _LOCAL_HOSTS
    if not local or not enabled:
        why = (
            "embedded.enabled is false"
            if local
            else "the embedded server is only started for an http:// URL on localhost"
        )
        raise ConfigError(
            f"no Elasticsearch cluster answered at {es.url} ({why}). Fix: start the cluster or "
            "set elasticsearch.url (or IOLENS_ES_URL) to one that is running"
            + ("" if local else ", or use http://localhost:9200 for the embedded server")
        )
    return parts
