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

The documents read back are decoded by :mod:`pipeline.jobs.fio_hits`, the queries are in
:mod:`pipeline.jobs.fio_latency_queries` and the ``flp`` method's scopes in
:mod:`pipeline.jobs.fio_latency_flp`; their public names are importable from here too.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from pipeline.formats.fio.encode import HISTOGRAM_DATASET
from pipeline.formats.fio.window import IntervalMerger, histogram_stats
from pipeline.jobs.fio_hits import SEP, job_scope, layout_of, sparse_bins
from pipeline.jobs.fio_latency_flp import (
    DIR_CODE_NAMES,
    flp_fields,
    flp_options,
    flp_scopes,
    flp_streams,
    scope_stats,
)
from pipeline.jobs.fio_latency_queries import (
    flp_window_query,
    histograms_sort,
    interval_histograms_query,
    intervals_query,
    superseded_query,
)
from pipeline.jobs.intervals import DirtyIntervals
from pipeline.records.core import Document, LineRef
from pipeline.records.fio_bins import BinLayout
from pipeline.records.json import Query, Response, Source
from pipeline.settings import FioSettings
from pipeline.sink.documents import (
    LATENCY_DATASET,
    DocContext,
    LatencyKey,
    latency_document,
    stream_name,
)
from pipeline.sink.search import ClusterUnavailable

__all__ = [
    "HIT_FIELDS",
    "JOB_KEY",
    "SEARCH_BATCH",
    "SUPERSEDE_BATCH",
    "FioLatencyJob",
    "Search",
]

log = logging.getLogger(__name__)

SEARCH_BATCH = 50
"""Intervals (of one length) whose histograms one search reads."""

SUPERSEDE_BATCH = 50
"""Intervals whose superseded revisions one delete-by-query removes (bounded, to keep the
query's clauses well below Elasticsearch's limit)."""

JOB_KEY = "job:fio.latency"
"""``LineRef.file_key`` of the job's documents, so acknowledgements find their way back."""

HIT_FIELDS = ["@timestamp", "host.name", "log.file.path", "fio"]

Search = Callable[[str, Query, Sequence[Query]], Iterable[Response]]
"""``(index, query, sort) -> hits``: :func:`pipeline.sink.search.iter_hits` bound to a client."""


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
    delete: Callable[[str, Query], int] = lambda index, query: 0
    count: Callable[[str, Query], int] | None = None
    """Counts the documents matching a query; when given, a batch whose intervals hold no
    document but its own (the common case: intervals merged for the first time) skips the
    delete-by-query."""
    _pending: dict[tuple[int, int], tuple[int, int, list[Document]]] = field(default_factory=dict)
    _settled: dict[tuple[int, int], tuple[int, list[Document]]] = field(default_factory=dict)
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
        began = self.dirty.mark()  # touches after it are merged again, whatever the clock
        if due:
            self.refresh(stream_name("metrics", HISTOGRAM_DATASET, self.ctx.namespace))
        batches: dict[int, list[int]] = defaultdict(list)
        for interval_ms, start in due:
            batches[interval_ms].append(start)
        for interval_ms, starts in batches.items():
            step = 1 if self.fio.method == "flp" else SEARCH_BATCH
            for i in range(0, len(starts), step):
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

    def _supersede(self, batch: Sequence[tuple[tuple[int, int], int, list[Document]]]) -> None:
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
        self._withdraw(index, batch)

    def _withdraw(
        self, index: str, batch: Sequence[tuple[tuple[int, int], int, list[Document]]]
    ) -> None:
        """Delete this merge's documents that a revision with more records supersedes: one
        another instance indexed while ours waited (an instance cut off from the cluster
        delivers its merge late), so the less complete one never stays beside it."""
        queries = [
            superseded_query(interval_ms, start, self.fio.method, docs, than="gt")
            for (interval_ms, start), _began, docs in batch
        ]
        newer = [
            hit["_source"]
            for hit in self.search(
                index,
                {"bool": {"should": queries, "minimum_should_match": 1}},
                [{"fio.interval.start_ms": "asc"}],
            )
        ]
        if not newer:
            return
        ours = [d for _item, _began, docs in batch for d in docs]
        stale = sorted(d.doc_id for d in ours if any(_supersedes(n, d.source) for n in newer))
        if stale and self.delete(index, {"ids": {"values": stale}}):
            log.info("%s documents withdrawn: another instance merged more records", len(stale))

    def _hits(self, query: Query, by_interval: bool = False) -> Iterator[Response]:
        """The histogram documents matching ``query``, in window order (within each interval,
        intervals in order, with ``by_interval``)."""
        index = stream_name("metrics", HISTOGRAM_DATASET, self.ctx.namespace)
        return iter(self.search(index, query, histograms_sort(by_interval)))

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
        query = interval_histograms_query(interval_ms, starts)
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

    def _merge(self, interval_ms: int, start: int, hits: Iterable[Response]) -> Iterator[Document]:
        """Merge one interval's histogram hits per scope and direction (seed 000)."""
        merger = _merger(start, hits)
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
        host, prefix, job = value.split(SEP)
        method = self.fio.method
        return LatencyKey(scope, host, job, ddir, start, interval_ms, method, prefix or None)

    def _compute_flp(self, interval_ms: int, start: int) -> Iterator[Document]:
        """One interval through fiologparser_hist.py's time-weighting, per scope."""
        end = start + interval_ms
        streams, layout = flp_streams(self._hits(flp_window_query(start, end)))
        if layout is None:
            return
        opts = flp_options(interval_ms, layout, self.fio.percentiles)
        created = self.clock() * 1000
        ref = LineRef(JOB_KEY, "", interval_ms, start)
        for (scope, value), members in flp_scopes(streams).items():
            records, rows = scope_stats(streams, members, layout, opts, (start, end))
            for st in rows:
                key = self._key(scope, value, DIR_CODE_NAMES[st.ddir], start, interval_ms)
                stats = flp_fields(st, opts, layout.unit_ns)
                yield latency_document(self.ctx, key, stats, records, created, (ref,))


def _merger(start: int, hits: Iterable[Response]) -> IntervalMerger | None:
    """The histograms of one interval's ``hits`` merged per scope and direction (None without
    hits); documents with another bin layout than the first are left out, with a warning."""
    merger: IntervalMerger | None = None
    skipped = 0
    for hit in hits:
        fio = hit["_source"]["fio"]
        layout = layout_of(fio)
        if merger is None:
            merger = IntervalMerger(layout)
        elif layout != merger.layout:
            skipped += 1
            continue
        _add_hit(merger, hit["_source"], layout, start)
    if skipped:
        log.warning(
            "interval %s: %s histogram documents with another bin layout were left "
            "out of the merge",
            start,
            skipped,
        )
    return merger


def _add_hit(merger: IntervalMerger, src: Source, layout: BinLayout, start: int) -> None:
    """Add one histogram document to its cluster, host and job scopes, its ddir and mixed."""
    fio = src["fio"]
    idx, cnt = sparse_bins(fio, layout)
    host = src["host"]["name"]
    job = job_scope(host, fio.get("prefix"), fio["job"])
    for scope, value in (("cluster", ""), ("host", host), ("job", job)):
        for ddir in (fio["ddir"], "mixed"):
            merger.add_sparse((scope, value, ddir, start), idx, cnt)


def _supersedes(newer: Source, doc: Source) -> bool:
    """Whether the stored latency document ``newer`` is a more complete revision of ``doc``:
    same interval, method, scope, host, job, prefix and ddir, more records."""
    a, b = newer.get("fio", {}), doc["fio"]
    same = (
        a.get("interval", {}).get("start_ms") == b["interval"]["start_ms"]
        and a.get("interval", {}).get("ms") == b["interval"]["ms"]
        and newer.get("iolens", {}).get("scope") == doc["iolens"]["scope"]
        and newer.get("iolens", {}).get("method") == doc["iolens"].get("method")
        and a.get("ddir") == b["ddir"]
        and newer.get("host", {}).get("name") == doc.get("host", {}).get("name")
        and a.get("job") == b.get("job")
        and a.get("prefix", b.get("prefix")) == b.get("prefix")
    )
    return same and int(a.get("records", 0)) > int(b["records"])
