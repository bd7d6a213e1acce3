"""Fixtures for the shipper tests: every test fails if it leaves a thread running."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail the test if a thread started during it is still alive afterwards."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not leaked, f"threads left running: {[t.name for t in leaked]}"
