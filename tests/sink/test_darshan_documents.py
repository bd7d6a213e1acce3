"""The Darshan job/file tables and the diagnosis as documents: ids, fields, mappings."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pipeline.formats.darshan.encode import diagnosis_document, file_documents, job_document
from pipeline.formats.darshan.read import read_darshan
from pipeline.records.core import Document, LineRef
from pipeline.reducers.darshan_job import analyze
from pipeline.reducers.io_diagnosis import diagnose
from pipeline.sink.documents import DocContext

CTX = DocContext("default", "shipper1")
REF = (LineRef("k", "x.darshan", 1, 10),)

Unmapped = Callable[[Mapping[str, Any], str], list[str]]


@pytest.mark.parametrize(
    "name",
    ["sample-badost.darshan", "sample.darshan", "noposix.darshan", "sample-dxt-simple.darshan"],
)
def test_every_emitted_field_is_mapped(
    darshan_inputs: Path, name: str, unmapped_fields: Unmapped
) -> None:
    a = analyze(read_darshan(darshan_inputs / name))
    job = job_document(CTX, a, REF, 0.0)
    assert unmapped_fields(job.source, "logs-darshan.job") == []
    for doc in file_documents(CTX, a, REF, 0.0):
        assert unmapped_fields(doc.source, "logs-darshan.file") == []
    diag = diagnosis_document(CTX, diagnose(a), REF, 0.0)
    assert unmapped_fields(diag.source, "logs-iolens.io_diagnosis") == []


def test_documents_of_sample_badost(darshan_inputs: Path) -> None:
    a = analyze(read_darshan(darshan_inputs / "sample-badost.darshan"))
    job = job_document(CTX, a, REF, 0.0)
    assert job.index == "logs-darshan.job-default"
    src = job.source
    assert src["@timestamp"] == "2017-06-20T17:49:39.000Z"
    assert src["event"] == {
        "kind": "event",
        "module": "darshan",
        "dataset": "darshan.job",
        "created": "1970-01-01T00:00:00.000Z",
    }
    assert src["darshan"]["job"]["end"] == "2017-06-20T18:02:38.000Z"
    assert src["darshan"]["log"]["id"] == "6265799:1497980979000:sample-badost.darshan"
    assert src["user"] == {"id": "69615"}
    files = list(file_documents(CTX, a, REF, 0.0))
    assert len(files) == 2049
    assert len({d.doc_id for d in files}) == 2049
    assert all(d.source["darshan"]["job"]["id"] == "6265799" for d in files)
    # reading the log again gives the same ids (a replay is a 409)
    again = analyze(read_darshan(darshan_inputs / "sample-badost.darshan"))
    assert job_document(CTX, again, REF, 5.0).doc_id == job.doc_id
    assert [d.doc_id for d in file_documents(CTX, again, REF, 5.0)] == [d.doc_id for d in files]


def test_file_documents_come_encoded_as_their_source(darshan_inputs: Path) -> None:
    import json

    a = analyze(read_darshan(darshan_inputs / "sample-dxt-simple.darshan"))
    docs = list(file_documents(CTX, a, REF, 0.0))
    assert len(docs) == 18
    for doc in docs:
        assert doc.encoded is not None
        assert json.loads(doc.encoded) == json.loads(json.dumps(dict(doc.source)))


def test_a_lazy_file_source_goes_to_the_spool_and_back(
    darshan_inputs: Path, tmp_path: Path
) -> None:
    from pipeline.sink.spool import Spool

    a = analyze(read_darshan(darshan_inputs / "sample-dxt-simple.darshan"))
    docs = list(file_documents(CTX, a, REF, 0.0))
    spool = Spool(tmp_path / "spool")
    spool.put(docs)
    back: list[Document] = []
    assert spool.drain(lambda got: back.extend(got) or []) == 18
    assert [d.source for d in back] == [dict(d.source) for d in docs]
    assert [d.doc_id for d in back] == [d.doc_id for d in docs]
