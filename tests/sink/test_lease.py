"""The job lease against the embedded server: one holder at a time, expiry, renewal, release."""

from __future__ import annotations

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
