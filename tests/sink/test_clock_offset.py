"""This host's clock against the cluster's (the embedded server's node stats), and the warning
once it runs off by more than ``jobs.max_clock_offset_s``."""

from __future__ import annotations

import logging
import time

import pytest
from elasticsearch import Elasticsearch

from pipeline.sink.clock_offset import ClockOffset, ClockWatch, measure

pytestmark = pytest.mark.integration


class Monotonic:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_offset_of_a_clock_run_off_is_measured(es_client: Elasticsearch) -> None:
    same = measure(es_client)
    assert same is not None
    assert abs(same.offset_s) <= same.uncertainty_s + 0.05  # one machine, one clock
    ahead = measure(es_client, clock=lambda: time.time() + 30.0)
    assert ahead is not None and abs(ahead.offset_s + 30.0) <= ahead.uncertainty_s + 0.05
    assert ahead.off_by_more_than(2.0) and not same.off_by_more_than(2.0)
    assert ahead.text().startswith("this host's clock is 30.0")
    assert "ahead of the cluster's" in ahead.text()


def test_the_watch_warns_once_and_measures_when_due(caplog: pytest.LogCaptureFixture) -> None:
    found = [ClockOffset(-30.0, 0.01), ClockOffset(-31.0, 0.01), ClockOffset(0.2, 0.01)]
    probes: list[ClockOffset] = []

    def probe() -> ClockOffset:
        probes.append(found[len(probes)])
        return probes[-1]

    mono = Monotonic()
    watch = ClockWatch(probe, limit_s=2.0, every_s=300.0, monotonic=mono)
    with caplog.at_level(logging.INFO, logger="pipeline.sink.clock_offset"):
        assert watch.check() == found[0]
        mono.now += 299
        assert watch.check() == found[0] and len(probes) == 1  # not due yet
        mono.now += 1
        assert watch.check() == found[1]
        mono.now += 300
        assert watch.check() == found[2]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "30.000 s ahead of the cluster's" in warnings[0].getMessage()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "this host's clock is 0.200 s behind the cluster's (± 0.01 s): "
        "within jobs.max_clock_offset_s again"
    ]
