"""The chain of one Darshan log: the whole log -> its job analysis (decode and reduce, in a
worker pool: :class:`~pipeline.formats.darshan.pool.DarshanPool`) -> job, file and, for a
low-bandwidth job, diagnosis documents (encode).

A Darshan log is written once, at the end of a job, so it is read whole once its size and
modification time have been still for ``darshan.stable_s``
(:class:`~pipeline.shippers.whole_file.WholeFileTail`); the pool starts on it as soon as it is
stable, so logs are analysed while others are shipped. The whole file is one pseudo-line for
the registry: its offset moves to the end once every document derived from it is acknowledged.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from pipeline.formats.darshan.encode import diagnosis_document, file_documents, job_document
from pipeline.formats.darshan.pool import DarshanPool
from pipeline.records.core import Document, LineRef
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import (
    NO_EVIDENCE,
    Diagnosis,
    Evidence,
    Thresholds,
    diagnose,
    low_bandwidth,
)
from pipeline.shippers.results import LineResult
from pipeline.shippers.whole_file import FileChain, WholeFileTail, WholeRead
from pipeline.sink.documents import DocContext

FindEvidence = Callable[[JobAnalysis], Evidence]
"""Given a low-bandwidth job, the server-side evidence for its diagnosis found in
Elasticsearch (:func:`pipeline.jobs.darshan_evidence.server_evidence`)."""


class DarshanChain(FileChain):
    """analyse -> encode of one Darshan log (a :class:`~pipeline.shippers.whole_file.FileChain`).

    Args:
        pool: where logs are analysed.
        thresholds: the low-bandwidth cut; a diagnosis document is written for those jobs.
        evidence: server-side data for the diagnosis (None: the job's own counters only).
    """

    def __init__(
        self,
        pool: DarshanPool,
        thresholds: Thresholds | None = None,
        evidence: FindEvidence | None = None,
    ) -> None:
        self.pool, self.evidence = pool, evidence
        self.thresholds = thresholds or Thresholds()

    def prepare(self, path: str) -> None:
        """Hand the log to the pool."""
        self.pool.submit(path)

    def extent(self, path: str) -> int:
        """The log's size (an empty log is read too, and refused as unreadable)."""
        return max(os.stat(path).st_size, 1)

    def encode(self, read: WholeRead, ctx: DocContext, created_ms: float) -> Sequence[LineResult]:
        """The log's documents, on its one pseudo-line.

        Raises:
            ParseError: not a readable Darshan log (the caller quarantines the file).
        """
        a = self.pool.result(read.path)
        ref = LineRef(read.key, read.path, 1, read.extent)
        docs, _ = log_documents(a, ctx, (ref,), created_ms, self.thresholds, self.evidence)
        return [LineResult(ref, tuple(docs))]


def darshan_tail(
    key: str,
    path: str,
    chain: DarshanChain,
    *,
    stable_s: float = 5.0,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
) -> WholeFileTail:
    """The reader of one log: whole, once unchanged for ``stable_s`` (0: at once)."""
    return WholeFileTail(key, path, chain, stable_s=stable_s, clock=clock, monotonic=monotonic)


def log_documents(
    a: JobAnalysis,
    ctx: DocContext,
    refs: tuple[LineRef, ...],
    created_ms: float,
    thresholds: Thresholds,
    evidence: FindEvidence | None = None,
) -> tuple[list[Document], Diagnosis | None]:
    """Every document of one analysed log: its job, its files and, when the job is
    low-bandwidth under ``thresholds``, its diagnosis (with the server-side ``evidence``).

    Returns:
        The documents and the diagnosis (None when the job is not low-bandwidth).
    """
    docs: list[Document] = [job_document(ctx, a, refs, created_ms)]
    docs += file_documents(ctx, a, refs, created_ms)
    if not low_bandwidth(a, thresholds):
        return docs, None
    d = diagnose(a, thresholds, evidence(a) if evidence is not None else NO_EVIDENCE)
    docs.append(diagnosis_document(ctx, d, refs, created_ms))
    return docs, d
