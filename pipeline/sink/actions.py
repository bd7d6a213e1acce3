"""The first two stages of the bulk path: *expand* a document into its action and source lines,
and *chunk* documents by count and bytes (elasticsearch-py ``helpers/actions.py``: ``expand_action``
and ``_ActionChunker``, elastic.md §6.4).

A bulk request body is NDJSON, two lines a document::

    {"create":{"_index":"metrics-fio.histogram-default","_id":"Zq3..."}}
    {"@timestamp":"2024-05-02T10:00:00.000Z","fio":{...}}

The action is always ``create`` (data streams accept nothing else, elastic.md §1.2) with the
document's deterministic ``_id``, so re-sending after a crash or a lost response is a 409.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pipeline.records.core import Document
from pipeline.records.json import Source
from pipeline.sink.spool import encode_json

_PLAIN = re.compile(r"[A-Za-z0-9._\-]*")


def expand(doc: Document) -> tuple[dict[str, dict[str, str]], Source, int]:
    """The bulk action and source of ``doc`` and their NDJSON size in bytes (two lines).

    Raises:
        ValueError: the source has no JSON form (NaN, infinity, unserialisable value); that is
            a bug in the stage that built it, so it is not dead-lettered.
    """
    action = {"create": {"_index": doc.index, "_id": doc.doc_id}}
    try:
        nbytes = len(_action(doc)) + len(_source(doc)) + 2
    except (TypeError, ValueError) as err:
        raise ValueError(f"document {doc.index}/{doc.doc_id} is not JSON: {err}") from err
    return action, doc.source, nbytes


def _source(doc: Document) -> bytes:
    """The source line of ``doc``: its producer's encoding, or :func:`encode_json`."""
    return doc.encoded if doc.encoded is not None else encode_json(doc.source)


def _action(doc: Document) -> bytes:
    """``{"create":{"_index":...,"_id":...}}`` of ``doc``. Index names and ids are plain
    ASCII (data stream names, url-safe base64), written as they are; anything else is
    encoded as JSON strings."""
    if _PLAIN.fullmatch(doc.index) and _PLAIN.fullmatch(doc.doc_id):
        return f'{{"create":{{"_index":"{doc.index}","_id":"{doc.doc_id}"}}}}'.encode()
    index, ident = encode_json(doc.index), encode_json(doc.doc_id)
    return b'{"create":{"_index":' + index + b',"_id":' + ident + b"}}"


def ndjson(docs: Sequence[Document]) -> bytes:
    """The bulk request body of ``docs``: a ``create`` action line and a source line each.

    Raises:
        ValueError: a source has no JSON form (see :func:`expand`).
    """
    parts: list[bytes] = []
    for doc in docs:
        parts.append(_action(doc))
        parts.append(_source(doc))
    parts.append(b"")
    return b"\n".join(parts)


def chunks(docs: Sequence[Document], max_docs: int, max_bytes: int) -> Iterator[list[Document]]:
    """Split ``docs``, in order, into chunks of at most ``max_docs`` documents and at most
    ``max_bytes`` bytes of NDJSON (a single larger document makes a chunk of its own).

    Raises:
        ValueError: a source has no JSON form (see :func:`expand`).
    """
    chunk: list[Document] = []
    size = 0
    for doc in docs:
        nbytes = expand(doc)[2]
        if chunk and (len(chunk) >= max_docs or size + nbytes > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(doc)
        size += nbytes
    if chunk:
        yield chunk


def as_text(value: Any) -> Any:
    """``value`` with what JSON cannot hold (NaN, infinity, other objects) written as text,
    so that a document :func:`expand` refuses can still be dead-lettered."""
    if isinstance(value, Mapping):
        return {str(k): as_text(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_text(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return repr(value)
