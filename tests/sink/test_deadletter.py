"""The dead-letter area: replayable documents, quarantined input, replay."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from pipeline.records.core import Document, LineRef
from pipeline.sink.deadletter import DeadLetters, Rejection

NOW = datetime(2025, 1, 1, 12, 0, 2, tzinfo=UTC)


def doc(i: int) -> Document:
    ref = LineRef(file_key="k", path="/drop/a.log", line_no=i, end_offset=10 * i)
    return Document("metrics-fio.latency-default", f"id-{i}", {"fio": {"x": i}}, (ref,))


def area(tmp_path: Path) -> DeadLetters:
    return DeadLetters(tmp_path / "deadletter", now=lambda: NOW)


def test_write_document_appends_a_replayable_line(tmp_path: Path) -> None:
    dl = area(tmp_path)
    dl.write_document(doc(1), 400, "strict_dynamic_mapping_exception", "no [x]", "sink")
    lines = dl.documents_path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(x) for x in lines] == [
        {
            "@timestamp": "2025-01-01T12:00:02+00:00",
            "index": "metrics-fio.latency-default",
            "_id": "id-1",
            "document": {"fio": {"x": 1}},
            "status": 400,
            "error": {"type": "strict_dynamic_mapping_exception", "reason": "no [x]"},
            "stage": "sink",
            "refs": [{"file_key": "k", "path": "/drop/a.log", "line_no": 1, "end_offset": 10}],
        }
    ]
    [entry] = list(dl.iter_documents())
    assert entry.doc == doc(1)
    assert (entry.status, entry.error_type, entry.reason, entry.stage) == (
        400,
        "strict_dynamic_mapping_exception",
        "no [x]",
        "sink",
    )


def test_write_input_keeps_text_and_exact_bytes(tmp_path: Path) -> None:
    dl = area(tmp_path)
    dl.write_input("/drop/a.log", 7, "expected 4 columns", b"1, 2, 3\n", "parse")
    dl.write_input("/drop/b.log", 9, "not UTF-8", b"1, \xff\xfe\n", "parse")
    rows = [json.loads(x) for x in dl.inputs_path.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == {
        "@timestamp": "2025-01-01T12:00:02+00:00",
        "file": "/drop/a.log",
        "line": 7,
        "reason": "expected 4 columns",
        "raw": "1, 2, 3\n",
        "stage": "parse",
    }
    assert rows[1]["raw"] == "1, \ufffd\ufffd\n"
    assert base64.b64decode(rows[1]["raw_base64"]) == b"1, \xff\xfe\n"
    got = list(dl.iter_inputs())
    assert [(g.path, g.line_no, g.raw_bytes) for g in got] == [
        ("/drop/a.log", 7, b"1, 2, 3\n"),
        ("/drop/b.log", 9, b"1, \xff\xfe\n"),
    ]


def test_count_and_torn_lines(tmp_path: Path) -> None:
    dl = area(tmp_path)
    assert dl.count() == {"documents": 0, "inputs": 0}
    dl.write_document(doc(1), 400, "t", "r", "sink")
    with open(dl.documents_path, "a", encoding="utf-8") as fh:
        fh.write('{"index": "torn')
    dl.write_input("/a", 1, "bad", b"x", "parse")
    assert dl.count() == {"documents": 1, "inputs": 1}


class FakeResender:
    """Rejects the documents whose id is in ``reject``; the rest are delivered."""

    def __init__(self, reject: set[str]) -> None:
        self.reject = reject
        self.seen: list[str] = []

    def resend(self, docs: Sequence[Document]) -> list[Rejection]:
        self.seen.extend(d.doc_id for d in docs)
        return [Rejection(d, 400, "again", "still bad") for d in docs if d.doc_id in self.reject]


def test_replay_rewrites_the_file_with_what_failed_again(tmp_path: Path) -> None:
    dl = area(tmp_path)
    for i in (1, 2, 3):
        dl.write_document(doc(i), 400, "first", "bad", "sink")
    sink = FakeResender({"id-2"})
    assert dl.replay(sink, batch_size=2) == 2
    assert sink.seen == ["id-1", "id-2", "id-3"]
    [entry] = list(dl.iter_documents())
    assert (entry.doc, entry.error_type, entry.reason) == (doc(2), "again", "still bad")
    assert sorted(p.name for p in dl.root.iterdir()) == ["documents.ndjson"]


def test_replay_picks_up_an_interrupted_replay_and_keeps_torn_lines(tmp_path: Path) -> None:
    dl = area(tmp_path)
    dl.write_document(doc(1), 400, "t", "r", "sink")
    dl.documents_path.rename(dl.root / "documents.replay-1.ndjson")
    dl.write_document(doc(2), 400, "t", "r", "sink")
    with open(dl.documents_path, "a", encoding="utf-8") as fh:
        fh.write("not json\n")
    assert dl.count()["documents"] == 2
    sink = FakeResender(set())
    assert dl.replay(sink) == 2
    assert sink.seen == ["id-1", "id-2"]
    assert dl.documents_path.read_text(encoding="utf-8") == "not json\n"
    assert dl.count()["documents"] == 0


def test_replay_of_an_empty_area_sends_nothing(tmp_path: Path) -> None:
    sink = FakeResender(set())
    assert area(tmp_path).replay(sink) == 0
    assert sink.seen == []
