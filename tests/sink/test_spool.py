"""The on-disk spool: durable segments, drain semantics, restart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.records.core import Document, LineRef
from pipeline.sink.spool import (
    Spool,
    SpoolFull,
    compact_json,
    document_from_dict,
    document_to_dict,
    encode_json,
)


def doc(i: int, index: str = "metrics-fio.histogram-default") -> Document:
    ref = LineRef(file_key="2049:11:abcd", path="/drop/a.log", line_no=i, end_offset=100 * i)
    return Document(index, f"id-{i}", {"@timestamp": i, "fio": {"job": "j", "n": i}}, (ref,))


def test_codec_round_trips_a_document() -> None:
    d = doc(3)
    line = compact_json(document_to_dict(d))
    assert json.loads(line) == {
        "index": "metrics-fio.histogram-default",
        "_id": "id-3",
        "source": {"@timestamp": 3, "fio": {"job": "j", "n": 3}},
        "refs": [
            {"file_key": "2049:11:abcd", "path": "/drop/a.log", "line_no": 3, "end_offset": 300}
        ],
    }
    assert document_from_dict(json.loads(line)) == d


def test_compact_json_rejects_nan() -> None:
    with pytest.raises(ValueError):
        compact_json({"x": float("nan")})


def test_put_writes_one_segment_per_call_and_counts(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    assert spool.put([]) is None
    first = spool.put([doc(1), doc(2)])
    second = spool.put([doc(3)])
    assert first is not None and second is not None
    assert [first.name, second.name] == ["seg-000000000001.ndjson", "seg-000000000002.ndjson"]
    assert spool.pending() == 3
    assert list(spool.iter_documents()) == [doc(1), doc(2), doc(3)]
    assert sorted(p.name for p in (tmp_path / "spool").iterdir()) == [first.name, second.name]


def test_a_new_spool_object_sees_what_a_previous_one_wrote(tmp_path: Path) -> None:
    Spool(tmp_path).put([doc(1), doc(2)])
    again = Spool(tmp_path)
    assert again.pending() == 2
    seg = again.put([doc(3)])
    assert seg is not None and seg.name == "seg-000000000002.ndjson"


def test_drain_deletes_delivered_segments_in_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.put([doc(1), doc(2)])
    spool.put([doc(3)])
    seen: list[list[str]] = []

    def send(docs: list[Document]) -> list[Document]:
        seen.append([d.doc_id for d in docs])
        return []

    assert spool.drain(send) == 3
    assert seen == [["id-1", "id-2"], ["id-3"]]
    assert spool.pending() == 0
    assert list(tmp_path.iterdir()) == []


def test_drain_keeps_undelivered_documents_and_stops(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.put([doc(1), doc(2), doc(3)])
    spool.put([doc(4)])
    calls = 0

    def send(docs: list[Document]) -> list[Document]:
        nonlocal calls
        calls += 1
        return [d for d in docs if d.doc_id == "id-2"]

    assert spool.drain(send) == 2
    assert calls == 1  # stopped after the partly failed segment
    assert spool.pending() == 2
    assert [d.doc_id for d in Spool(tmp_path).iter_documents()] == ["id-2", "id-4"]


def test_drain_keeps_the_segment_when_send_raises(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.put([doc(1)])

    def send(docs: list[Document]) -> list[Document]:
        raise OSError("boom")

    with pytest.raises(OSError, match="boom"):
        spool.drain(send)
    assert spool.pending() == 1
    assert list(Spool(tmp_path).iter_documents()) == [doc(1)]


def test_unreadable_segment_is_set_aside(tmp_path: Path) -> None:
    (tmp_path / "seg-000000000001.ndjson").write_text('{"index": "x"\n', encoding="utf-8")
    spool = Spool(tmp_path)
    spool.put([doc(1)])
    assert spool.drain(lambda docs: []) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seg-000000000001.ndjson.corrupt"]


def test_temp_files_of_an_interrupted_put_are_ignored(tmp_path: Path) -> None:
    (tmp_path / ".seg-000000000001.ndjson.tmp").write_text("partial", encoding="utf-8")
    assert Spool(tmp_path).pending() == 0


def test_encode_json_is_compact_json_fast_and_as_strict() -> None:
    import numpy as np

    doc = {"a": [1, 2.5, (3, 4)], "b": {"c": "é", 7: np.int64(3)}, "e": np.float64(1.5)}
    assert encode_json(doc) == compact_json(doc).encode()
    assert encode_json({"d": None}) == b'{"d":null}'
    assert encode_json({"x": 1.0, "y": "z"}) == b'{"x":1.0,"y":"z"}'
    # a string holding "null" takes the exact path and comes out the same
    assert encode_json({"name": "/dev/null", "n": [None]}) == b'{"name":"/dev/null","n":[null]}'
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="Out of range float values"):
            encode_json({"x": [bad]})


def test_a_bounded_spool_refuses_a_segment_that_would_pass_the_bound(tmp_path: Path) -> None:
    one = len(compact_json(document_to_dict(doc(1))).encode()) + 1
    spool = Spool(tmp_path, max_bytes=2 * one + 1)
    spool.put([doc(1)])
    spool.put([doc(2)])
    assert spool.size() == sum(p.stat().st_size for p in tmp_path.glob("seg-*.ndjson"))
    with pytest.raises(SpoolFull, match=rf"sink.spool_max_bytes = {2 * one + 1}") as err:
        spool.put([doc(3)])
    assert (err.value.size, err.value.needed) == (spool.size(), one)
    assert (spool.pending(), len(list(tmp_path.glob("seg-*")))) == (2, 2)  # nothing written
    spool.drain(lambda docs: [])
    assert (spool.size(), spool.put([doc(3)]) is not None) == (0, True)
    assert Spool(tmp_path, max_bytes=one).size() == one  # a new object measures what is there
