"""Rows of ``iolens requests extract`` kept on disk until they are printed in order of start
(seed 002's requests are completed in order of their last event, listed by their first), and
the JSON text they are written as."""

from __future__ import annotations

import json
import tempfile
from array import array
from collections.abc import Iterator

import orjson

from pipeline.records.json import JsonObject
from pipeline.reducers.request_cluster import Assignment, Clusterer


def json_text(obj: object) -> str:
    """``obj`` as compact JSON text: orjson, or the standard library for what orjson refuses
    (an integer beyond 64 bits)."""
    return json_bytes(obj).decode()


def json_bytes(obj: object) -> bytes:
    """:func:`json_text` as UTF-8 bytes."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        return json.dumps(obj, separators=(",", ":")).encode()


class RequestSpool:
    """Request rows (:func:`request_dict`) as the join completes them, given back in order of
    start (ties in completion order) and numbered so: kept as JSON text in a temporary file,
    so that memory holds 24 bytes a request rather than its events.

    Args:
        clusterer: the model each request was placed in as it came (its cluster and distance
            are added to its row, and its outlier flag against the final model); None: rows
            without clustering.
    """

    def __init__(self, clusterer: Clusterer | None) -> None:
        self._clusterer = clusterer
        self._file = tempfile.TemporaryFile(buffering=1 << 20)  # noqa: SIM115 (closed by __exit__)
        self._size = 0  # bytes written (tell() would ask the kernel every time)
        self._start = array("q")
        self._end = array("q")
        self._cluster = array("q")
        self._distance = array("d")

    def __enter__(self) -> RequestSpool:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def __len__(self) -> int:
        return len(self._start)

    def add(self, start_ns: int, row: JsonObject, assignment: Assignment | None) -> None:
        """One row without its ``request`` number (:meth:`lines` gives it)."""
        self._size += self._file.write(json_bytes(row))
        self._start.append(start_ns)
        self._end.append(self._size)
        if assignment is not None:
            self._cluster.append(assignment.cluster)
            self._distance.append(assignment.distance)

    def lines(self) -> Iterator[str]:
        """Each row as JSON text, in order of start, numbered, with its clustering."""
        for n, i in enumerate(sorted(range(len(self._start)), key=self._start.__getitem__)):
            at = self._end[i - 1] if i else 0
            self._file.seek(at)
            text = self._file.read(self._end[i] - at).decode()
            tail = "}"
            if self._clusterer is not None:
                cluster, distance = self._cluster[i], self._distance[i]
                more = {
                    "cluster": cluster,
                    "distance": distance,
                    "outlier": self._clusterer.is_outlier(cluster, distance),
                }
                tail = "," + json_text(more)[1:]
            yield f'{{"request":{n},{text[1:-1]}{tail}'

    def rows(self) -> Iterator[JsonObject]:
        """Each row as values, as :meth:`lines` gives them."""
        for line in self.lines():
            row: JsonObject = orjson.loads(line)
            yield row
