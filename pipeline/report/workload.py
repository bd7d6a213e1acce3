"""The workload models as indexed: what ``iolens requests model`` shows (seed 002, section 5).

Two sources, each the authority for its part:

* the request documents (``logs-iolens.request-*``), delivered exactly once, give each
  cluster's *frequency*: how many requests it holds, how many of them were outliers or
  incomplete, their mean duration and critical path (a terms aggregation, so the counts hold
  however many requests there are);
* the latest snapshot of each model (``metrics-iolens.workload_model-*``) gives what only the
  shipper's clusterer knows: each cluster's representative in canonical form with its resources
  and critical path, its diameter and its separation from the nearest other cluster, and the
  model error per resource.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, NotRequired, TypedDict

from pipeline.formats.events.encode import MODEL_DATASET, REQUEST_DATASET
from pipeline.records.json import Query, Response, Source
from pipeline.sink.client import Client
from pipeline.sink.search import iter_hits, search

MAX_CLUSTERS = 10_000
"""Clusters per model counted (a threshold that makes more is too small to be a model)."""


class ClusterCounts(TypedDict):
    """A cluster's frequency from the indexed request documents.

    Attributes:
        requests: requests in the cluster; outliers, incomplete: of them, outliers and
            incomplete requests.
        mean_duration_ms, mean_critical_path_ms: their mean duration and critical path, ms
            (None when no document has the field).
    """

    requests: int
    outliers: int
    incomplete: int
    mean_duration_ms: float | None
    mean_critical_path_ms: float | None


SnapshotHead = TypedDict(
    "SnapshotHead",
    {
        "@timestamp": str,
        "host": str | None,
        "threshold": float,
        "requests": int,
        "model_error": dict[str, float],
    },
)
"""The common fields of a model snapshot: its time (ISO), host (None: not named), the
clusterer's threshold, the requests clustered and the model error per resource (a fraction)."""


class ClusterRow(TypedDict):
    """One cluster of an indexed model (:func:`indexed_models`).

    Attributes:
        cluster: its id; requests, outliers, incomplete: its counts (:class:`ClusterCounts`,
            0 when no request document has it yet, then without the means).
        mean_duration_ms, mean_critical_path_ms: as in :class:`ClusterCounts`.
        share: its fraction (0-1) of the model's requests.
        representative, critical_path_ms, resources, diameter, max_distance, separation: the
            snapshot's description (canonical text, ms, resource -> amount, distances); absent
            for a cluster newer than the snapshot, None when the snapshot lacks the field.
    """

    cluster: int
    requests: int
    outliers: int
    incomplete: int
    mean_duration_ms: NotRequired[float | None]
    mean_critical_path_ms: NotRequired[float | None]
    share: float
    representative: NotRequired[str | None]
    critical_path_ms: NotRequired[float | None]
    resources: NotRequired[dict[str, float] | None]
    diameter: NotRequired[float | None]
    max_distance: NotRequired[float | None]
    separation: NotRequired[float | None]


class IndexedModel(TypedDict):
    """A workload model as indexed: its ``model`` name, ``requests`` and ``outliers`` over all
    clusters, its latest ``snapshot`` (None: none yet) and its ``clusters`` by id."""

    model: str
    requests: int
    outliers: int
    snapshot: SnapshotHead | None
    clusters: list[ClusterRow]


def request_counts(
    client: Client, namespace: str, model: str | None = None
) -> dict[str, dict[int, ClusterCounts]]:
    """Per model name and cluster id: the counts of the indexed request documents.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    index = f"logs-{REQUEST_DATASET}-{namespace}"
    query: Query = {"exists": {"field": "iolens.request.cluster"}}
    if model is not None:
        query = {"bool": {"filter": [query, {"term": {"iolens.request.model": model}}]}}
    resp = search(client, index, size=0, query=query, aggs=_COUNT_AGGS)
    out: dict[str, dict[int, ClusterCounts]] = {}
    if resp is None:
        return out
    for mb in resp["aggregations"]["m"]["buckets"]:
        clusters = out.setdefault(str(mb["key"]), {})
        for cb in mb["c"]["buckets"]:
            clusters[int(cb["key"])] = _cluster_counts(cb)
    return out


_COUNT_AGGS: Query = {
    "m": {
        "terms": {"field": "iolens.request.model", "size": 1000},
        "aggs": {
            "c": {
                "terms": {"field": "iolens.request.cluster", "size": MAX_CLUSTERS},
                "aggs": {
                    "outliers": {"filter": {"term": {"iolens.request.outlier": True}}},
                    "incomplete": {"filter": {"term": {"iolens.request.complete": False}}},
                    "duration": {"avg": {"field": "iolens.request.duration_ms"}},
                    "critical": {"avg": {"field": "iolens.request.critical_path_ms"}},
                },
            }
        },
    }
}
"""Per model, per cluster: outliers, incomplete requests, mean duration and critical path."""


def _cluster_counts(bucket: Response) -> ClusterCounts:
    """A cluster's counts from its bucket of :data:`_COUNT_AGGS`."""
    return {
        "requests": int(bucket["doc_count"]),
        "outliers": int(bucket["outliers"]["doc_count"]),
        "incomplete": int(bucket["incomplete"]["doc_count"]),
        "mean_duration_ms": bucket["duration"]["value"],
        "mean_critical_path_ms": bucket["critical"]["value"],
    }


def latest_snapshot(
    client: Client, namespace: str, model: str
) -> tuple[SnapshotHead, dict[int, Source]] | None:
    """The newest snapshot of ``model``: its common fields and its clusters by id (each its
    document's ``iolens.workload_model``); None if there is none.

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    index = f"metrics-{MODEL_DATASET}-{namespace}"
    term = {"term": {"iolens.workload_model.model": model}}
    resp = search(client, index, size=1, query=term, sort=[{"@timestamp": "desc"}])
    if resp is None or not resp["hits"]["hits"]:
        return None
    top = resp["hits"]["hits"][0]["_source"]
    snapshot = top["iolens"]["workload_model"]["snapshot"]
    query = {"term": {"iolens.workload_model.snapshot": snapshot}}
    clusters: dict[int, Source] = {}
    sort = [{"iolens.workload_model.cluster": "asc"}]
    for hit in iter_hits(client, index, query, sort):
        wm = hit["_source"]["iolens"]["workload_model"]
        clusters[int(wm["cluster"])] = wm
    return _snapshot_head(top), clusters


def _snapshot_head(top: Source) -> SnapshotHead:
    """The common fields of a snapshot, from one of its documents."""
    wm = top["iolens"]["workload_model"]
    return {
        "@timestamp": top["@timestamp"],
        "host": top.get("host", {}).get("name"),
        "threshold": wm["threshold"],
        "requests": wm["requests"],
        "model_error": wm.get("model_error", {}),
    }


def indexed_models(
    client: Client, namespace: str, model: str | None = None
) -> Iterator[IndexedModel]:
    """Each workload model (or only ``model``) as indexed, by name.

    Yields:
        the :class:`IndexedModel`; per cluster (by id) its counts (:func:`request_counts`),
        ``share`` of the model's requests, and the snapshot's description (absent for a
        cluster newer than the snapshot).

    Raises:
        ClusterUnavailable: the cluster cannot answer now.
    """
    counts = request_counts(client, namespace, model)
    for name in sorted(counts):
        per = counts[name]
        total = sum(c["requests"] for c in per.values())
        snap = latest_snapshot(client, namespace, name)
        head, described = snap if snap is not None else (None, {})
        clusters = [
            _cluster_row(cid, per.get(cid), described.get(cid), total)
            for cid in sorted(per.keys() | described.keys())
        ]
        yield {
            "model": name,
            "requests": total,
            "outliers": sum(c["outliers"] for c in per.values()),
            "snapshot": head,
            "clusters": clusters,
        }


Described = Literal[
    "representative", "critical_path_ms", "resources", "diameter", "max_distance", "separation"
]
"""A field a snapshot's cluster document adds to the counts."""

_DESCRIBED: tuple[Described, ...] = (
    "representative",
    "critical_path_ms",
    "resources",
    "diameter",
    "max_distance",
    "separation",
)
"""The fields of :data:`Described`, in the order a row shows them."""


def _cluster_row(
    cid: int, counts: ClusterCounts | None, wm: Source | None, total: int
) -> ClusterRow:
    """One cluster of a model: its counts (zero when no request document has it yet), its
    share of the model's ``total`` requests and, when the snapshot has it, its description."""
    requests = 0 if counts is None else counts["requests"]
    share = requests / total if total else 0.0
    row: ClusterRow = {
        "cluster": cid,
        "requests": 0,
        "outliers": 0,
        "incomplete": 0,
        "share": share,
    }
    if counts is not None:
        row = {
            "cluster": cid,
            "requests": counts["requests"],
            "outliers": counts["outliers"],
            "incomplete": counts["incomplete"],
            "mean_duration_ms": counts["mean_duration_ms"],
            "mean_critical_path_ms": counts["mean_critical_path_ms"],
            "share": share,
        }
    if wm is not None:
        for key in _DESCRIBED:
            row[key] = wm.get(key)
    return row
