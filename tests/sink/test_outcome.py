"""The bulk item classification table (elastic.md §6.3)."""

from __future__ import annotations

import pytest

from pipeline.sink.outcome import Outcome, classify

TABLE = [
    (200, None, Outcome.OK),
    (201, None, Outcome.OK),
    (409, "version_conflict_engine_exception", Outcome.DUPLICATE),
    (400, "strict_dynamic_mapping_exception", Outcome.DEAD_LETTER),
    (400, "document_parsing_exception", Outcome.DEAD_LETTER),
    (400, "mapper_parsing_exception", Outcome.DEAD_LETTER),
    (400, "illegal_argument_exception", Outcome.DEAD_LETTER),
    (401, "security_exception", Outcome.DEAD_LETTER),
    (403, "security_exception", Outcome.DEAD_LETTER),
    (404, "index_not_found_exception", Outcome.DEAD_LETTER),
    (413, None, Outcome.DEAD_LETTER),
    (429, "es_rejected_execution_exception", Outcome.RETRY),
    (429, "circuit_breaking_exception", Outcome.RETRY),
    (500, "internal_server_error", Outcome.RETRY),
    (502, None, Outcome.RETRY),
    (503, "unavailable_shards_exception", Outcome.RETRY),
    (504, None, Outcome.RETRY),
    (0, None, Outcome.RETRY),
    (None, None, Outcome.RETRY),
    (100, None, Outcome.DEAD_LETTER),
    (302, None, Outcome.DEAD_LETTER),
    (600, None, Outcome.RETRY),
]


@pytest.mark.parametrize(("status", "error_type", "expected"), TABLE)
def test_classify(status: int | None, error_type: str | None, expected: Outcome) -> None:
    assert classify(status, error_type) is expected


def test_every_status_has_exactly_the_documented_outcome() -> None:
    for status in range(200, 300):
        assert classify(status) is Outcome.OK
    for status in range(500, 600):
        assert classify(status) is Outcome.RETRY
    dead = [s for s in range(400, 500) if classify(s) is Outcome.DEAD_LETTER]
    assert dead == [s for s in range(400, 500) if s not in (409, 429)]
