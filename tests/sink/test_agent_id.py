"""``agent.id``: made once in the state directory, read on every later run."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import pytest

from pipeline.sink.agent_id import AGENT_ID_FILE, agent_id


def test_made_once_and_kept_across_runs(tmp_path: Path) -> None:
    first = agent_id(tmp_path)
    assert str(uuid.UUID(first)) == first
    assert (tmp_path / AGENT_ID_FILE).read_text() == first + "\n"
    assert agent_id(tmp_path) == first
    assert agent_id(tmp_path, new=lambda: "never asked") == first
    assert [p.name for p in tmp_path.iterdir()] == [AGENT_ID_FILE]  # no temporary file left


def test_two_state_directories_are_two_instances(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert agent_id(tmp_path / "a") != agent_id(tmp_path / "b")


@pytest.mark.parametrize(
    ("content", "said"),
    [(b"\xde\xad\xbe\xef garbage", "cannot be read"), (b"not-a-uuid\n", "holds no agent id")],
    ids=["not UTF-8", "not a UUID"],
)
def test_a_file_that_holds_no_id_is_replaced_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, said: str
) -> None:
    path = tmp_path / AGENT_ID_FILE
    path.write_bytes(content)
    made = "3f1c9a52-6f0e-4d2b-9b7e-2f4c1f0a8d11"
    with caplog.at_level(logging.WARNING, logger="pipeline.sink.agent_id"):
        assert agent_id(tmp_path, new=lambda: made) == made
    assert path.read_text() == made + "\n"
    [record] = caplog.records
    assert str(path) in record.getMessage()
    assert said in record.getMessage()
    assert "a new agent.id is made" in record.getMessage()


def test_an_id_that_cannot_be_written_holds_for_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / AGENT_ID_FILE).mkdir()  # neither readable nor replaceable as a file
    made = "3f1c9a52-6f0e-4d2b-9b7e-2f4c1f0a8d11"
    with caplog.at_level(logging.WARNING, logger="pipeline.sink.agent_id"):
        assert agent_id(tmp_path, new=lambda: made) == made
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "cannot be read" in messages[0]
    assert "cannot be written" in messages[1] and "holds for this run only" in messages[1]
    assert [p.name for p in tmp_path.iterdir()] == [AGENT_ID_FILE]  # no temporary file left
