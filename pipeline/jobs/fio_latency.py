"""Scheduled job: merged (cluster, host, job) latency percentiles per interval.

For every output interval whose histogram documents have settled (no new one for
``fio.settle_s``), the job reads all ``metrics-fio.histogram`` documents of that interval back
from Elasticsearch, whichever shipper wrote them, merges their histograms per scope and
direction (seed 000: merge statistics, not samples) and indexes one ``metrics-fio.latency``
document per scope x direction. With ``fio.method: flp`` the records around the interval are
run through fiologparser_hist.py's time-weighting instead.

Several shippers may merge the same interval (each one the intervals its own records touched,
always from the records of all shippers). Identical inputs give identical document ids (a 409);
a merge of more records supersedes the documents that merged fewer, never the other way round,
so the most complete revision survives whichever instance finishes last.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipeline.jobs.intervals import DirtyIntervals
from pipeline.records import DDIR_NAMES, Document, FioHistRow, LineRef
from pipeline.reducers.fio_bins import BinLayout
from pipeline.reducers.fio_flp import FlpOptions, weighted_interval
from pipeline.reducers.fio_window import IntervalMerger, histogram_stats, percentile_key
from pipeline.reducers.histogram import LatencyHistogram
from pipeline.settings import FioSettings
from pipeline.sink.documents import (
    HISTOGRAM_DATASET,
    LATENCY_DATASET,
    DocContext,
    LatencyKey,
    latency_document,
    stream_name,
)
from pipeline.sink.search import ClusterUnavailable

log = logging.getLogger(__name__)

SEARCH_BATCH = 50
"""Intervals (of one length) whose histograms one search reads."""

SUPERSEDE_BATCH = 50
"""Intervals whose superseded revisions one delete-by-query removes (bounded, to keep the
query's clauses well below Elasticsearch's limit)."""

JOB_KEY = "job:fio.latency"
"""``LineRef.file_key`` of the job's documents, so acknowledgements find their way back."""

FLP_LOOKAHEAD_MS = 20_000  # fiologparser's default --max_latency, in ms
HIT_FIELDS = ["@timestamp", "host.name", "log.file.path", "fio"]

Search = Callable[
    [str, Mapping[str, Any], Sequence[Mapping[str, Any]]], Iterable[Mapping[str, Any]]
]
"""``(index, query, sort) -> hits``: :func:`pipeline.sink.search.iter_hits` bound to a client."""

DIR_CODE_NAMES = {"m": "mixed", "r": "read", "w": "write", "t": "trim"}


def layout_of(fio: Mapping[str, Any]) -> BinLayout:
    """The bin layout a histogram document was written with (``fio.bins``)."""
    bins = fio["bins"]
    unit = bins["unit"]
    coarse = int(bins["coarseness"])
    group_nr = int(bins["count"]) * (1 << coarse) // 64
    return BinLayout(group_nr=group_nr, coarseness=coarse, unit=unit)


def sparse_bins(fio: Mapping[str, Any], layout: BinLayout) -> tuple[np.ndarray, np.ndarray]:
    """Bin indices and counts of a document's ``fio.clat_ns.histogram`` (values are midpoints).

    Raises:
        ValueError: a value is not a bucket midpoint of ``layout``.
    """
    hist = fio.get("clat_ns", {}).get("histogram")
    if not hist:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    values = np.asarray(hist["values"], dtype=np.float64)
    idx = np.searchsorted(layout.midpoints_ns, values)
    if np.any(idx >= layout.nbins) or np.any(
        layout.midpoints_ns[np.minimum(idx, layout.nbins - 1)] != values
    ):
        raise ValueError("histogram values are not bucket midpoints of the document's layout")
    return idx.astype(np.int64), np.asarray(hist["counts"], dtype=np.int64)


@dataclass
class FioLatencyJob:
    """Computes due intervals and hands the documents to the sink.

    Args:
        search: paged search (see :data:`Search`).
        emit: adds a document to the sink.
        dirty: the durable list of due intervals.
        fio: fio settings (method, percentiles, settle time).
        ctx: document context (namespace).
        clock: wall-clock seconds.
        refresh: makes a data stream's recent writes searchable (before reading them back).
        delete: delete-by-query, to remove the earlier revision of an interval that was merged
            again because more records arrived (documents are create-only).
    """

    search: Search
    emit: Callable[[Document], object]
    dirty: DirtyIntervals
    fio: FioSettings
    ctx: DocContext
    clock: Callable[[], float] = time.time
    refresh: Callable[[str], None] = lambda index: None
    delete: Callable[[str, Mapping[str, Any]], int] = lambda index, query: 0
    count: Callable[[str, Mapping[str, Any]], int] | None = None
    """Counts the documents matching a query; when given, a batch whose intervals hold no
    document but its own (the common case: intervals merged for the first time) skips the
    delete-by-query."""
    _pending: dict[tuple[int, int], tuple[int, float, list[Document]]] = field(default_factory=dict)
    _settled: dict[tuple[int, int], tuple[float, list[Document]]] = field(default_factory=dict)
    computed: int = 0

    def run(self, force: bool = False) -> int:
        """Finish the intervals acknowledged since the last run (:meth:`supersede`), then
        compute every due interval; returns how many were computed.

        When the cluster cannot be read, the rest waits for the next run (nothing is lost: the
        intervals stay in the durable dirty list).
        """
        self.supersede()
        try:
            return self._run(force)
        except ClusterUnavailable as err:
            log.warning("merged percentiles postponed: %s", err)
            return 0

    def _run(self, force: bool) -> int:
        n = 0
        due = [
            i
            for i in self.dirty.due(self.fio.settle_s, force)
            if i not in self._pending and i not in self._settled
        ]
        if due:
            self.refresh(stream_name("metrics", HISTOGRAM_DATASET, self.ctx.namespace))
        batches: dict[int, list[int]] = defaultdict(list)
        for interval_ms, start in due:
            batches[interval_ms].append(start)
        for interval_ms, starts in batches.items():
            step = 1 if self.fio.method == "flp" else SEARCH_BATCH
            for i in range(0, len(starts), step):
                began = self.clock()
                computed = self.compute_many(interval_ms, starts[i : i + step])
                for start in starts[i : i + step]:
                    item = (interval_ms, start)
                    docs = computed.get(start, [])
                    if not docs:
                        self.dirty.clear(item, began)
                        continue
                    self._pending[item] = (len(docs), began, docs)
                    for d in docs:
                        self.emit(d)
                    n += 1
        self.computed += n
        return n

    def acknowledged(self, refs: Iterable[LineRef]) -> None:
        """Note the intervals whose documents are now all acknowledged; the next
        :meth:`supersede` (every :meth:`run`) deletes the revisions they supersede and clears
        them, many at once, however the acknowledgements trickle in."""
        for ref in refs:
            item = (ref.line_no, ref.end_offset)
            if item not in self._pending:
                continue
            left, began, docs = self._pending[item]
            if left > 1:
                self._pending[item] = (left - 1, began, docs)
                continue
            del self._pending[item]
            self._settled[item] = (began, docs)

    def supersede(self) -> int:
        """Delete the revisions the acknowledged intervals supersede (one refresh, and a count
        or a delete-by-query, per ``SUPERSEDE_BATCH`` intervals) and clear them from the dirty
        list; returns how many were cleared. A batch the cluster cannot take now waits for the
        next call."""
        done = [(item, began, docs) for item, (began, docs) in self._settled.items()]
        cleared = 0
        for n in range(0, len(done), SUPERSEDE_BATCH):
            batch = done[n : n + SUPERSEDE_BATCH]
            try:
                self._supersede(batch)
            except ClusterUnavailable as err:
                log.warning("%s intervals stay due: %s", len(batch), err)
                continue
            for item, began, _docs in batch:
                self.dirty.clear(item, began)
                del self._settled[item]
                cleared += 1
        return cleared

    def _supersede(self, batch: Sequence[tuple[tuple[int, int], float, list[Document]]]) -> None:
        """Delete earlier revisions of the intervals' documents: per interval, scope, host, job
        and ddir, those that merged fewer records (one refresh and one delete-by-query for the
        batch). A revision with more records (say, computed by another instance that saw
        more) is never deleted, so the most complete one survives."""
        index = stream_name("metrics", LATENCY_DATASET, self.ctx.namespace)
        self.refresh(index)
        if self.count is not None:
            others = intervals_query([item for item, _b, _d in batch])
            ours = sorted({d.doc_id for _item, _began, docs in batch for d in docs})
            others["bool"]["must_not"] = [{"ids": {"values": ours}}]
            if self.count(index, others) == 0:
                return  # no document of these intervals but this merge's: nothing to supersede
        queries = [
            superseded_query(interval_ms, start, self.fio.method, docs)
            for (interval_ms, start), _began, docs in batch
        ]
        query = (
            queries[0]
            if len(queries) == 1
            else {"bool": {"should": queries, "minimum_should_match": 1}}
        )
        removed = self.delete(index, query)
        if removed:
            log.info(
                "%s intervals: replaced %s documents merged before more records arrived",
                len(batch),
                removed,
            )

    def _hits(
        self, query: Mapping[str, Any], by_interval: bool = False
    ) -> Iterator[Mapping[str, Any]]:
        """The histogram documents matching ``query``, in window order (within each interval,
        intervals in order, with ``by_interval``)."""
        index = stream_name("metrics", HISTOGRAM_DATASET, self.ctx.namespace)
        first = [{"fio.interval.start_ms": "asc"}] if by_interval else []
        sort = [
            *first,
            {"fio.window.end_ms": "asc"},
            {"host.name": "asc"},
            {"log.file.path": "asc"},
            {"fio.log.line": "asc"},
        ]
        return iter(self.search(index, query, sort))

    def compute(self, interval_ms: int, start: int) -> Iterator[Document]:
        """The latency documents of one interval (nothing if it has no histogram documents)."""
        yield from self.compute_many(interval_ms, [start]).get(start, [])

    def compute_many(self, interval_ms: int, starts: Sequence[int]) -> dict[int, list[Document]]:
        """The latency documents of several intervals of one length, by interval start (ms);
        an interval without histogram documents is absent. One search reads the histograms of
        all of them (``fio.method: flp`` reads each interval's window on its own).

        Raises:
            ClusterUnavailable: the histograms cannot be read.
        """
        if self.fio.method == "flp":
            return {
                start: docs
                for start in starts
                if (docs := list(self._compute_flp(interval_ms, start)))
            }
        query = {
            "bool": {
                "filter": [
                    {"terms": {"fio.interval.start_ms": list(starts)}},
                    {"term": {"fio.interval.ms": interval_ms}},
                ]
            }
        }
        out: dict[int, list[Document]] = {}
        wanted = set(starts)
        # one interval's histograms at a time: what is held is one interval's merge
        for start, hits in itertools.groupby(
            self._hits(query, by_interval=True),
            key=lambda hit: int(hit["_source"]["fio"]["interval"]["start_ms"]),
        ):
            if start in wanted and (docs := list(self._merge(interval_ms, start, hits))):
                out[start] = docs
        return out

    def _merge(
        self, interval_ms: int, start: int, hits: Iterable[Mapping[str, Any]]
    ) -> Iterator[Document]:
        """Merge one interval's histogram hits per scope and direction (seed 000)."""
        merger: IntervalMerger | None = None
        skipped = 0
        for hit in hits:
            src = hit["_source"]
            fio = src["fio"]
            layout = layout_of(fio)
            if merger is None:
                merger = IntervalMerger(layout)
            elif layout != merger.layout:
                skipped += 1
                continue
            idx, cnt = sparse_bins(fio, layout)
            host = src["host"]["name"]
            job = job_scope(host, fio.get("prefix"), fio["job"])
            for scope, value in (("cluster", ""), ("host", host), ("job", job)):
                for ddir in (fio["ddir"], "mixed"):
                    merger.add_sparse((scope, value, ddir, start), idx, cnt)
        if skipped:
            log.warning(
                "interval %s: %s histogram documents with another bin layout were left "
                "out of the merge",
                start,
                skipped,
            )
        if merger is None:
            return
        created = self.clock() * 1000
        ref = LineRef(JOB_KEY, "", interval_ms, start)
        for key, records in sorted(merger.records.items()):
            scope, value, ddir, _ = key
            stats = histogram_stats(merger.histogram(key), self.fio.percentiles)
            yield latency_document(
                self.ctx,
                self._key(scope, value, ddir, start, interval_ms),
                stats,
                records,
                created,
                (ref,),
            )

    def _key(self, scope: str, value: str, ddir: str, start: int, interval_ms: int) -> LatencyKey:
        if scope != "job":
            host = value if scope == "host" else None
            return LatencyKey(scope, host, None, ddir, start, interval_ms, self.fio.method)
        host, prefix, job = value.split(_SEP)
        method = self.fio.method
        return LatencyKey(scope, host, job, ddir, start, interval_ms, method, prefix or None)

    def _compute_flp(self, interval_ms: int, start: int) -> Iterator[Document]:
        end = start + interval_ms
        query = {"range": {"fio.window.end_ms": {"gt": start, "lt": end + FLP_LOOKAHEAD_MS}}}
        streams: dict[tuple[str, str, str], list[FioHistRow]] = defaultdict(list)
        layout: BinLayout | None = None
        for hit in self._hits(query):
            src = hit["_source"]
            fio = src["fio"]
            lay = layout_of(fio)
            layout = layout or lay
            if lay != layout:
                continue
            idx, cnt = sparse_bins(fio, lay)
            row = FioHistRow(
                int(fio["window"]["end_ms"]),
                DDIR_NAMES.index(fio["ddir"]),
                int(fio.get("bs", 0)),
                idx,
                cnt,
            )
            streams[(src["host"]["name"], fio.get("prefix") or "", str(fio["job"]))].append(row)
        if layout is None:
            return
        pct = [p for p in self.fio.percentiles if p != 50]
        opts = FlpOptions(
            interval_ms=interval_ms,
            percentiles=":".join(f"{p:g}" for p in pct),
            directions="rwtm",
            usbin=layout.unit == "us",
        )
        scale = layout.unit_ns
        created = self.clock() * 1000
        ref = LineRef(JOB_KEY, "", interval_ms, start)
        scopes: dict[tuple[str, str], list[tuple[str, str, str]]] = {
            ("cluster", ""): sorted(streams)
        }
        for host, prefix, job in sorted(streams):
            scopes.setdefault(("host", host), []).append((host, prefix, job))
            scopes[("job", job_scope(host, prefix, job))] = [(host, prefix, job)]
        for (scope, value), members in scopes.items():
            merged = sorted(
                ((r.time_ms, i, r) for i, m in enumerate(members) for r in streams[m]),
                key=lambda x: (x[0], x[1]),
            )
            for st in weighted_interval((r for _, _, r in merged), layout, opts, start, end):
                stats: dict[str, float | int | None] = {
                    "samples": st.samples,
                    "min": st.min * scale,
                    "mean": st.avg * scale,
                    "max": st.max * scale,
                }
                for p, v in zip(opts.percs, st.pcts, strict=True):
                    stats[percentile_key(p)] = v * scale
                key = self._key(scope, value, DIR_CODE_NAMES[st.ddir], start, interval_ms)
                yield latency_document(self.ctx, key, stats, len(merged), created, (ref,))


def intervals_query(items: Sequence[tuple[int, int]]) -> dict[str, Any]:
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


_SEP = "\x1f"


def job_scope(host: str, prefix: str | None, job: object) -> str:
    """The job scope's merge key: host, ``write_hist_log`` prefix (``""`` for histograms
    indexed before prefixes were recorded) and fio's job number. Two fio runs on one host
    with different log prefixes are different jobs, even with the same job numbers."""
    return f"{host}{_SEP}{prefix or ''}{_SEP}{job}"


def superseded_query(
    interval_ms: int, start: int, method: str, docs: Sequence[Document]
) -> dict[str, Any]:
    """Query for the documents ``docs`` supersede: same interval, method, scope, host, job
    (log prefix, or none: merged before prefixes were recorded) and ddir, fewer records merged."""

    def same(field_name: str, value: object) -> dict[str, Any]:
        if value is None:
            return {"bool": {"must_not": [{"exists": {"field": field_name}}]}}
        return {"term": {field_name: value}}

    def same_or_missing(field_name: str, value: object) -> dict[str, Any]:
        # revisions merged before prefixes were recorded have none: they are superseded too
        if value is None:
            return same(field_name, None)
        missing = {"bool": {"must_not": [{"exists": {"field": field_name}}]}}
        return {"bool": {"should": [{"term": {field_name: value}}, missing]}}

    older = []
    for d in docs:
        src, fio = d.source, d.source["fio"]
        older.append(
            {
                "bool": {
                    "filter": [
                        {"term": {"iolens.scope": src["iolens"]["scope"]}},
                        {"term": {"fio.ddir": fio["ddir"]}},
                        same("host.name", src.get("host", {}).get("name")),
                        same("fio.job", fio.get("job")),
                        same_or_missing("fio.prefix", fio.get("prefix")),
                        {"range": {"fio.records": {"lt": fio["records"]}}},
                    ]
                }
            }
        )
    return {
        "bool": {
            "filter": [
                {"term": {"fio.interval.start_ms": start}},
                {"term": {"fio.interval.ms": interval_ms}},
                {"term": {"iolens.method": method}},
            ],
            "should": older,
            "minimum_should_match": 1,
        }
    }


def histogram_of(fio: Mapping[str, Any]) -> LatencyHistogram:
    """The :class:`LatencyHistogram` stored in a histogram document's ``fio`` object."""
    layout = layout_of(fio)
    idx, cnt = sparse_bins(fio, layout)
    return LatencyHistogram.from_sparse(layout, idx, cnt)
