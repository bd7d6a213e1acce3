"""``iolens report``'s time arguments (the report of the whole demo, rendered by Chromium, is
tested in tests/demo/test_demo.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.cli.report_cmd import when
from pipeline.errors import ConfigError


def test_times_and_durations() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert when("6h", now) == datetime(2026, 11, 22, 6, 0, tzinfo=UTC)
    assert when("7d", now) == datetime(2026, 11, 15, 12, 0, tzinfo=UTC)
    assert when("2026-11-22", now) == datetime(2026, 11, 22, tzinfo=UTC)
    assert when("2026-11-22T05:25:00+01:00", now).utcoffset() is not None
    with pytest.raises(ConfigError, match="neither an ISO 8601 time nor a duration"):
        when("yesterday", now)
