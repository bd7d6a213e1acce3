"""Elasticsearch queries of the latency job: histograms to merge, revisions to supersede.

Histogram documents (``metrics-fio.histogram``) are selected by ``fio.interval.ms`` and
``fio.interval.start_ms`` (the merged-percentile path) or by ``fio.window.end_ms`` around an
interval (the ``flp`` path), and read in window order. Latency documents
(``metrics-fio.latency``) of an interval that merged fewer records than a new merge are
superseded: same interval, method, scope, host, job, log prefix and ddir.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from pipeline.records.core import Document
from pipeline.records.json import Query

FLP_LOOKAHEAD_MS = 20_000  # fiologparser's default --max_latency, in ms


def histograms_sort(by_interval: bool = False) -> list[Query]:
    """Window order of histogram documents (interval first, with ``by_interval``)."""
    first = [{"fio.interval.start_ms": "asc"}] if by_interval else []
    return [
        *first,
        {"fio.window.end_ms": "asc"},
        {"host.name": "asc"},
        {"log.file.path": "asc"},
        {"fio.log.line": "asc"},
    ]


def interval_histograms_query(interval_ms: int, starts: Sequence[int]) -> Query:
    """The histogram documents of the intervals of length ``interval_ms`` starting at
    ``starts`` (ms)."""
    return {
        "bool": {
            "filter": [
                {"terms": {"fio.interval.start_ms": list(starts)}},
                {"term": {"fio.interval.ms": interval_ms}},
            ]
        }
    }


def flp_window_query(start: int, end: int) -> Query:
    """The histogram records fiologparser_hist.py holds for interval ``[start, end]`` (ms):
    windows ending after ``start`` and before ``end`` + its look-ahead."""
    return {"range": {"fio.window.end_ms": {"gt": start, "lt": end + FLP_LOOKAHEAD_MS}}}


def intervals_query(items: Sequence[tuple[int, int]]) -> Query:
    """Query for the documents of the intervals ``items`` (``(interval_ms, start_ms)``)."""
    starts: dict[int, list[int]] = defaultdict(list)
    for interval_ms, start in items:
        starts[interval_ms].append(start)
    return {
        "bool": {
            "should": [
                {
                    "bool": {
                        "filter": [
                            {"term": {"fio.interval.ms": interval_ms}},
                            {"terms": {"fio.interval.start_ms": sorted(group)}},
                        ]
                    }
                }
                for interval_ms, group in sorted(starts.items())
            ],
            "minimum_should_match": 1,
        }
    }


def _same(field_name: str, value: object) -> Query:
    """``field_name`` is ``value``, or absent for None."""
    if value is None:
        return {"bool": {"must_not": [{"exists": {"field": field_name}}]}}
    return {"term": {field_name: value}}


def _same_or_missing(field_name: str, value: object) -> Query:
    """``field_name`` is ``value`` or absent."""
    # revisions merged before prefixes were recorded have none: they are superseded too
    if value is None:
        return _same(field_name, None)
    missing = {"bool": {"must_not": [{"exists": {"field": field_name}}]}}
    return {"bool": {"should": [{"term": {field_name: value}}, missing]}}


def _older(doc: Document, than: str = "lt") -> Query:
    """The revisions of ``doc``'s scope, host, job and ddir that merged fewer records (``than``
    ``gt``: more)."""
    src, fio = doc.source, doc.source["fio"]
    return {
        "bool": {
            "filter": [
                {"term": {"iolens.scope": src["iolens"]["scope"]}},
                {"term": {"fio.ddir": fio["ddir"]}},
                _same("host.name", src.get("host", {}).get("name")),
                _same("fio.job", fio.get("job")),
                _same_or_missing("fio.prefix", fio.get("prefix")),
                {"range": {"fio.records": {than: fio["records"]}}},
            ]
        }
    }


def superseded_query(
    interval_ms: int, start: int, method: str, docs: Sequence[Document], than: str = "lt"
) -> Query:
    """Query for the documents ``docs`` supersede: same interval, method, scope, host, job
    (log prefix, or none: merged before prefixes were recorded) and ddir, fewer records merged
    (``than="gt"``: the documents that supersede ``docs``, more records merged)."""
    return {
        "bool": {
            "filter": [
                {"term": {"fio.interval.start_ms": start}},
                {"term": {"fio.interval.ms": interval_ms}},
                {"term": {"iolens.method": method}},
            ],
            "should": [_older(d, than) for d in docs],
            "minimum_should_match": 1,
        }
    }
