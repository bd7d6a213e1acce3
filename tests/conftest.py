"""Shared fixtures: the embedded Elasticsearch-API server, a client for it, and a guard that
fails any test leaving non-daemon threads behind (the watchdog test-suite habit, STYLE.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.sink.embedded import EmbeddedServer, free_port

THREAD_GRACE_S = 5.0
"""How long a test's threads may take to finish after the test returned."""


@pytest.fixture(scope="session")
def es_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a noida-db server started for the session in a temporary data directory."""
    data_dir: Path = tmp_path_factory.mktemp("noida-db")
    server = EmbeddedServer(data_dir, free_port())
    server.start(timeout_s=30.0)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def es_client(es_url: str) -> Iterator[Elasticsearch]:
    """A client of the session's embedded server (closed after the test)."""
    client = Elasticsearch(es_url, request_timeout=30)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail the test if it leaves a non-daemon thread running.

    Threads still alive when the test returns get ``THREAD_GRACE_S`` seconds (a deadline, not a
    sleep) to finish, so stopping a thread asynchronously at teardown is fine.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + THREAD_GRACE_S
    leaked = []
    for t in threading.enumerate():
        if t in before or t.daemon or t is threading.current_thread():
            continue
        t.join(timeout=max(0.0, deadline - time.monotonic()))
        if t.is_alive():
            leaked.append(t.name)
    if leaked:
        pytest.fail(f"test leaked non-daemon threads: {', '.join(sorted(leaked))}")
