"""The job lease against the embedded server: one holder at a time, expiry, renewal, release."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid

import pytest
from elasticsearch import Elasticsearch

from pipeline.sink.lease import Lease

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_one_holder_at_a_time(es_client: Elasticsearch) -> None:
    name = f"job-{uuid.uuid4().hex[:8]}"
    clock = Clock()
    a = Lease(es_client, name, ttl_s=30, holder="a", clock=clock, monotonic=clock)
    b = Lease(es_client, name, ttl_s=30, holder="b", clock=clock, monotonic=clock)
    assert a.acquire()
    assert not b.acquire()
    clock.now += 20
    assert a.acquire()  # renewed: good for 30 s from now
    clock.now += 20
    assert not b.acquire()
    clock.now += 11  # a stopped renewing: expired
    assert b.acquire()
    assert not a.acquire()
    b.release()
    assert a.acquire()


def test_release_only_what_we_hold(es_client: Elasticsearch) -> None:
    name = f"job-{uuid.uuid4().hex[:8]}"
    clock = Clock()
    a = Lease(es_client, name, ttl_s=30, holder="a", clock=clock, monotonic=clock)
    b = Lease(es_client, name, ttl_s=30, holder="b", clock=clock, monotonic=clock)
    assert a.acquire()
    b.release()  # never held: nothing happens
    assert not b.acquire()


def test_a_lease_of_a_process_of_this_host_that_is_gone_is_free_at_once(
    es_client: Elasticsearch,
) -> None:
    dead = subprocess.Popen(["true"])  # a pid that ran here and exited
    dead.wait()
    me, host = os.getpid(), socket.gethostname()

    def lease(name: str, holder: str) -> Lease:
        return Lease(es_client, name, ttl_s=30, holder=holder, clock=Clock(), monotonic=Clock())

    running, gone, remote = (f"job-{uuid.uuid4().hex[:8]}" for _ in range(3))
    assert lease(running, f"{host}:{me}:a").acquire()
    assert not lease(running, f"{host}:{me}:b").acquire()  # its holder runs: respected
    assert lease(gone, f"{host}:{dead.pid}:a").acquire()
    assert lease(gone, f"{host}:{me}:b").acquire()  # its holder is gone: no wait of ttl_s
    assert lease(remote, f"elsewhere:{dead.pid}:a").acquire()
    assert not lease(remote, f"{host}:{me}:b").acquire()  # another host's: cannot tell
