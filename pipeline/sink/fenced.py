"""Scheduled output written under a lease, fenced by its generation.

The peer comparison's windows and rankings are computed by the one instance holding the
``peer.<namespace>`` lease (:mod:`pipeline.sink.lease`), from state saved in the cluster. They are
written straight to the cluster rather than through the spool: a run whose documents were not
all written is repeated from the saved state, so nothing is lost by not spooling them, and a
spooled batch delivered long after its writer lost the lease is exactly what fencing must stop.

Each document carries ``iolens.lease.{generation, holder}`` (:meth:`Lease.stamp`). Before each
bulk request the holder checks the lease (:meth:`Lease.fence`); a ``create`` that meets a stored
document (409) compares generations: a stored lower one (written by an instance that was cut off
while leading, and came back) is overwritten in place with ``if_seq_no`` / ``if_primary_term`` in
its backing index; the same one is a replay; a higher one means a successor holds the job, and
the writer stops with :class:`~pipeline.sink.lease.LeaseLost`. So whatever a stale holder wrote
is superseded by the current holder's document of the same id, never kept beside it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from elasticsearch import ConflictError, Elasticsearch

from pipeline.records.core import Document
from pipeline.records.json import Query, Response, Source
from pipeline.sink.lease import Lease, LeaseLost, LeaseStamp
from pipeline.sink.search import ClusterUnavailable, request_errors

log = logging.getLogger(__name__)


def stamped(doc: Document, stamp: LeaseStamp) -> Document:
    """``doc`` with ``iolens.lease`` set to ``stamp`` (its encoded form dropped)."""
    source = dict(doc.source)
    source["iolens"] = {**source.get("iolens", {}), "lease": dict(stamp)}
    return dataclasses.replace(doc, source=source, encoded=None)


def generation_of(source: Source) -> int:
    """The lease generation a stored document was written under (0: none, written unfenced)."""
    return int(source.get("iolens", {}).get("lease", {}).get("generation", 0))


@dataclass
class FencedWriter:
    """Collects a scheduled job's documents and writes them under its lease.

    Args:
        client: the cluster.
        lease: the job's lease, held when :meth:`flush` is called.
        chunk: documents per bulk request (each preceded by a fence).

    Use ``add`` as the job's ``emit`` and ``flush`` as its ``settle``.
    """

    client: Elasticsearch
    lease: Lease
    chunk: int = 500
    written: int = 0
    _docs: list[Document] = field(default_factory=list, repr=False)

    def add(self, doc: Document) -> None:
        """Queue ``doc`` for the next :meth:`flush`."""
        self._docs.append(doc)

    def flush(self) -> bool:
        """Write what was queued; True when every document is stored (written, or stored
        before by this generation). The queue is emptied either way: a job whose flush failed
        computes its documents again.

        Raises:
            LeaseLost: another instance holds the lease (a document of a higher generation, or
                the lease itself, says so).
        """
        docs, self._docs = self._docs, []
        try:
            for n in range(0, len(docs), self.chunk):
                stamp = self.lease.fence()
                if not self._bulk([stamped(d, stamp) for d in docs[n : n + self.chunk]]):
                    return False
        except ClusterUnavailable as err:
            log.warning("%s scheduled documents not written: %s", len(docs), err)
            return False
        return True

    def _bulk(self, docs: Sequence[Document]) -> bool:
        """One bulk ``create`` of ``docs``; 409s are resolved by generation (module docstring).
        False when an item failed otherwise (said; the run is repeated)."""
        ops: list[Query] = []
        for d in docs:
            ops += [{"create": {"_index": d.index, "_id": d.doc_id}}, d.source]
        with request_errors("bulk write of scheduled documents"):
            resp = self.client.bulk(operations=ops)
        conflicts: list[Document] = []
        ok = True
        for d, item in zip(docs, resp["items"], strict=True):
            result = item["create"]
            status = int(result.get("status", 500))
            if status == 409:
                conflicts.append(d)
            elif status >= 300:
                log.error("%s/%s not written: %s", d.index, d.doc_id, result.get("error"))
                ok = False
            else:
                self.written += 1
        return self._resolve(conflicts) and ok

    def _resolve(self, docs: Sequence[Document]) -> bool:
        """Overwrite the stored documents of ``docs`` that a lower generation wrote."""
        by_index: dict[str, list[Document]] = {}
        for d in docs:
            by_index.setdefault(d.index, []).append(d)
        for index, group in by_index.items():
            stored = self._stored(index, [d.doc_id for d in group])
            for d in group:
                hit = stored.get(d.doc_id)
                if hit is None:
                    log.warning("%s/%s: 409 but not found; written next run", index, d.doc_id)
                    return False
                ours, theirs = generation_of(d.source), generation_of(hit["_source"])
                if theirs > ours:
                    raise LeaseLost(f"{index}/{d.doc_id} was written by generation {theirs}")
                if theirs < ours:
                    self._overwrite(d, hit)
        return True

    def _stored(self, index: str, ids: list[str]) -> dict[str, Response]:
        """The stored documents of ``ids`` with their backing index and sequence numbers."""
        with request_errors(f"search of {index}"):
            self.client.indices.refresh(index=index)
            resp = self.client.search(
                index=index, query={"ids": {"values": ids}}, seq_no_primary_term=True, size=len(ids)
            )
        return {h["_id"]: h for h in resp["hits"]["hits"]}

    def _overwrite(self, doc: Document, hit: Response) -> None:
        """Replace a lower generation's ``hit`` with ``doc`` in place (in its backing index,
        if it is still the version read)."""
        with request_errors(f"overwrite of {doc.index}/{doc.doc_id}"):
            try:
                self.client.index(
                    index=hit["_index"],
                    id=doc.doc_id,
                    document=dict(doc.source),
                    if_seq_no=hit["_seq_no"],
                    if_primary_term=hit["_primary_term"],
                )
            except ConflictError:
                raise LeaseLost(f"{doc.index}/{doc.doc_id} was written meanwhile") from None
        log.info(
            "%s/%s: generation %s replaced generation %s",
            doc.index,
            doc.doc_id,
            generation_of(doc.source),
            generation_of(hit["_source"]),
        )
        self.written += 1
