"""Behavioural clustering of canonical requests into a workload model (seed 002, section 5).

Requests are compared by a string-edit distance over their serialised tokens
(:mod:`pipeline.reducers.canonical`) whose costs depend on the tokens' resources
(reference/magpie-servicerate.md A.6; the paper gives the idea, not the formula):

* inserting or deleting a token costs ``c0 + |r|``;
* substituting a token of the same kind costs ``|r1 - r2|`` (L1 over the resources);
* substituting a token of another kind costs ``2 c0 + |r1| + |r2|`` (a delete and an insert);

with ``|r|`` the weighted L1 norm where 1 unit is 1 ms of CPU (resources named ``*_ns``) or
1 KiB (``*_bytes``). ``c0 > 0`` makes structure count: a 15 ms spin behind an RPC is not the
same request as a 15 ms spin on one thread although they use the same CPU.

The clusterer is incremental (it can run online): a request joins the cluster whose
representative is nearest unless that distance exceeds ``threshold``, in which case it starts
a cluster of its own (representatives whose mass alone puts them farther than the best so far
are not compared, see :func:`mass`). A cluster keeps its representative (the medoid of a
bounded sample of its members, recomputed when its size doubles, then every 4096 members), its
size, the mean and largest distance of its members to the representative (its diameter) and
their summed resources. The workload model is the
representatives with their frequencies; its *model error* per resource is
``|sum_c n_c r(rep_c) - sum_req r(req)| / sum_req r(req)`` (the paper's Table 2 column). A
request is an *outlier* when it is farther from its representative than ``outlier_k`` times the
cluster's mean distance (and than ``threshold / 4``), or alone in its cluster.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from pipeline.records.json import JsonObject
from pipeline.reducers.canonical import Canonical
from pipeline.reducers.edit_distance import (
    INF,
    Profile,
    bounded_distance,
    lower_bound,
    profile_of,
)

__all__ = [
    "Assignment",
    "Cluster",
    "ClusterSummary",
    "Clusterer",
    "cluster_all",
    "cluster_stream",
    "purity",
    "total_resources",
]


class ClusterSummary(TypedDict):
    """One cluster of a model, as :meth:`Clusterer.summary` gives it.

    Attributes:
        cluster: its number; size: requests in it; share: ``size`` over all clustered
            requests (0..1).
        representative: its representative's canonical text (:meth:`Canonical.text`).
        critical_path_ms: the representative's critical path, ms.
        resources: the representative's resources (``cpu_ns``... by name).
        diameter, max_distance: the mean and largest distance of its members to the
            representative.
        separation: the distance to the nearest other representative (None for a lone
            cluster).
    """

    cluster: int
    size: int
    share: float
    representative: str
    critical_path_ms: float
    resources: dict[str, float]
    diameter: float
    max_distance: float
    separation: float | None


@dataclass
class Cluster:
    """One cluster of the workload model.

    Attributes:
        id: its number, in order of creation (0, 1, ...).
        representative: the member that stands for it (its medoid), canonical form.
        size: requests in it.
        distance_sum / distance_max: of its members to the representative when they joined.
        resources: its members' summed resources (canonical: CPU of the schedule).
    """

    id: int
    representative: Canonical
    size: int = 0
    distance_sum: float = 0.0
    distance_max: float = 0.0
    resources: dict[str, float] = field(default_factory=dict)
    _rep: Profile | None = None
    _sample: list[tuple[Canonical, Profile]] = field(default_factory=list)

    @property
    def diameter(self) -> float:
        """Mean distance of the members to the representative (the seed's "Dia.")."""
        return self.distance_sum / self.size if self.size else 0.0


def _first(t: tuple[float, Cluster, Profile]) -> tuple[float, int]:
    return t[0], t[1].id


def _slack(d: float) -> float:
    """``d`` and a little more: a bound above it by a float's rounding only prunes nothing."""
    return d * (1 + 1e-9) + 1e-12


@dataclass(frozen=True)
class Assignment:
    """Where a request went: its cluster, its distance to the representative then."""

    cluster: int
    distance: float


class Clusterer:
    """Incremental behavioural clustering (see the module docstring).

    Args:
        threshold: the distance above which a request starts a new cluster (units: ms of CPU
            or KiB, plus ``c0`` per token of different structure).
        c0: the structural cost of inserting or deleting a token.
        sample: members kept per cluster to choose its medoid from.
        outlier_k: how many mean distances away from its representative a request is an
            outlier.
    """

    def __init__(
        self, threshold: float = 2.0, c0: float = 1.0, sample: int = 32, outlier_k: float = 2.0
    ) -> None:
        if threshold <= 0 or c0 <= 0 or sample < 1 or outlier_k <= 0:
            raise ValueError("threshold, c0, sample and outlier_k must be positive")
        self.threshold, self.c0, self.sample, self.outlier_k = threshold, c0, sample, outlier_k
        self.clusters: list[Cluster] = []

    def add(self, c: Canonical) -> Assignment:
        """Place one request; its cluster and its distance to that cluster's representative."""
        its = profile_of(c, self.c0)
        best, best_d = self._nearest(its)
        if best is None or best_d > self.threshold:
            best = Cluster(len(self.clusters), c, _rep=its)
            self.clusters.append(best)
            best_d = 0.0
        best.size += 1
        best.distance_sum += best_d
        best.distance_max = max(best.distance_max, best_d)
        for k, v in c.resources.items():
            best.resources[k] = best.resources.get(k, 0.0) + v
        if len(best._sample) < self.sample:
            best._sample.append((c, its))
        else:
            best._sample[best.size % self.sample] = (c, its)
        if best.size & (best.size - 1) == 0 or best.size % 4096 == 0:  # sizes 1, 2, 4, 8...
            self._recentre(best)
        return Assignment(best.id, best_d)

    def _nearest(self, its: Profile) -> tuple[Cluster | None, float]:
        """The nearest representative (the lowest id among equals) and its distance.

        Representatives of the request's shape are compared first (their distance is often
        the diagonal's, :mod:`pipeline.reducers.edit_distance`); then the others in order of
        the mass bound, those whose mass bound or bin bound exceeds the best distance so far
        not at all, and a comparison stops once it exceeds it.
        """
        m = its.mass
        order = sorted(
            ((abs(cl._rep.mass - m), cl, cl._rep) for cl in self.clusters if cl._rep), key=_first
        )
        best: Cluster | None = None
        best_d = INF
        for same in (True, False):
            for bound, cl, rep in order:
                slack = _slack(best_d)
                if bound > slack:
                    break
                if (rep.shape == its.shape) is not same:
                    continue
                if not same and lower_bound(its, rep) > slack:
                    continue
                d = bounded_distance(its, rep, best_d)
                if d < best_d or (d == best_d and best is not None and cl.id < best.id):
                    best, best_d = cl, d
        return best, best_d

    def _recentre(self, cl: Cluster) -> None:
        """Make the sample's medoid the representative."""
        sample = cl._sample
        sums = [0.0] * len(sample)
        for i in range(len(sample)):
            for j in range(i + 1, len(sample)):
                d = bounded_distance(sample[i][1], sample[j][1])
                sums[i] += d
                sums[j] += d
        k = min(range(len(sample)), key=sums.__getitem__)
        cl.representative, cl._rep = sample[k]

    def nearest(self, c: Canonical) -> Assignment:
        """The cluster nearest to ``c`` now, without adding it."""
        best, d = self._nearest(profile_of(c, self.c0))
        if best is None:
            raise ValueError("the model has no cluster yet")
        return Assignment(best.id, d)

    def is_outlier(self, cluster: int, d: float) -> bool:
        """Whether a request at distance ``d`` from cluster ``cluster``'s representative is an
        outlier of the current model."""
        cl = self.clusters[cluster]
        return cl.size <= 1 or d > max(self.outlier_k * cl.diameter, self.threshold / 4)

    def separation(self, cluster: int) -> float | None:
        """Distance from the cluster's representative to the nearest other one (None alone)."""
        me = self.clusters[cluster]._rep
        ds = [
            bounded_distance(me, cl._rep)
            for cl in self.clusters
            if cl.id != cluster and me is not None and cl._rep is not None
        ]
        return min(ds) if ds else None

    def summary(self) -> list[ClusterSummary]:
        """Per cluster, as plain values: ``cluster``, ``size``, ``share`` (of all clustered
        requests), ``representative`` (its canonical text), ``critical_path_ms`` and
        ``resources`` of the representative, ``diameter``, ``max_distance`` and
        ``separation`` (None for a lone cluster)."""
        total = sum(cl.size for cl in self.clusters) or 1
        return [
            {
                "cluster": cl.id,
                "size": cl.size,
                "share": cl.size / total,
                "representative": cl.representative.text(),
                "critical_path_ms": cl.representative.critical_path_ns / 1e6,
                "resources": dict(cl.representative.resources),
                "diameter": cl.diameter,
                "max_distance": cl.distance_max,
                "separation": self.separation(cl.id),
            }
            for cl in self.clusters
        ]

    def state(self) -> JsonObject:
        """The whole model as plain values (JSON), to continue it later with
        :meth:`from_state`: parameters, and per cluster its representative, counters and the
        sample its medoid is chosen from."""
        return {
            "threshold": self.threshold,
            "c0": self.c0,
            "sample": self.sample,
            "outlier_k": self.outlier_k,
            "clusters": [
                {
                    "id": cl.id,
                    "representative": cl.representative.to_json(),
                    "size": cl.size,
                    "distance_sum": cl.distance_sum,
                    "distance_max": cl.distance_max,
                    "resources": cl.resources,
                    "sample": [c.to_json() for c, _its in cl._sample],
                }
                for cl in self.clusters
            ],
        }

    @classmethod
    def from_state(cls, state: JsonObject) -> Clusterer:
        """The model :meth:`state` described.

        Raises:
            KeyError, TypeError, ValueError: ``state`` is not what :meth:`state` writes.
        """
        model = cls(state["threshold"], state["c0"], state["sample"], state["outlier_k"])
        for n, d in enumerate(state["clusters"]):
            if d["id"] != n:
                raise ValueError(f"cluster {n} is numbered {d['id']}")
            rep = Canonical.from_json(d["representative"])
            its = profile_of(rep, model.c0)
            sample = [(c, profile_of(c, model.c0)) for c in map(Canonical.from_json, d["sample"])]
            model.clusters.append(
                Cluster(
                    n,
                    rep,
                    int(d["size"]),
                    float(d["distance_sum"]),
                    float(d["distance_max"]),
                    {str(k): float(v) for k, v in d["resources"].items()},
                    its,
                    sample,
                )
            )
        return model

    def model_error(self, measured: Mapping[str, float]) -> dict[str, float | None]:
        """Per resource, the relative difference between the model (representatives times
        cluster sizes) and ``measured`` (the summed resources of the clustered requests)."""
        predicted: dict[str, float] = {}
        for cl in self.clusters:
            for k, v in cl.representative.resources.items():
                predicted[k] = predicted.get(k, 0.0) + cl.size * v
        return {
            k: (abs(predicted.get(k, 0.0) - m) / m if m else None)
            for k, m in sorted(measured.items())
        }


def cluster_all(
    requests: Iterable[Canonical], threshold: float = 2.0, c0: float = 1.0
) -> tuple[Clusterer, list[Assignment], list[bool]]:
    """Offline: cluster every request, then judge each against the final model.

    Returns:
        The clusterer (the model), each request's final assignment (nearest final
        representative) and its outlier flag.
    """
    model = Clusterer(threshold, c0)
    reqs = list(requests)
    for c in reqs:
        model.add(c)
    final = [model.nearest(c) for c in reqs]
    return model, final, [model.is_outlier(a.cluster, a.distance) for a in final]


def cluster_stream(
    requests: Iterable[Canonical], threshold: float = 2.0, c0: float = 1.0
) -> tuple[Clusterer, array[int], array[float]]:
    """Online: place each request as it comes and keep only where it went, so that memory
    grows by 16 bytes a request, not by its canonical form (:func:`cluster_all` keeps every
    form for its final pass).

    Returns:
        The clusterer (the model) and, per request in order, its cluster and its distance to
        that cluster's representative when it was placed: its outlier flag against the final
        model is ``model.is_outlier(cluster, distance)``.
    """
    model = Clusterer(threshold, c0)
    clusters, distances = array("q"), array("d")
    for c in requests:
        a = model.add(c)
        clusters.append(a.cluster)
        distances.append(a.distance)
    return model, clusters, distances


def total_resources(forms: Iterable[Canonical]) -> dict[str, float]:
    """The summed resources of canonical requests (what :meth:`Clusterer.model_error`
    compares the model with)."""
    out: dict[str, float] = {}
    for f in forms:
        for k, v in f.resources.items():
            out[k] = out.get(k, 0.0) + v
    return out


def purity(assignments: Sequence[Assignment], labels: Sequence[Hashable]) -> float:
    """Share of requests whose cluster's most common label is their own (1.0: every cluster
    holds one type), for workloads whose request types are known (reference/
    magpie-servicerate.md A.10).

    Raises:
        ValueError: the sequences differ in length or are empty.
    """
    if len(assignments) != len(labels) or not labels:
        raise ValueError("one label per assignment, and at least one")
    pairs = Counter((a.cluster, label) for a, label in zip(assignments, labels, strict=True))
    best: dict[int, int] = {}
    for (cluster, _label), n in pairs.items():
        best[cluster] = max(best.get(cluster, 0), n)
    return sum(best.values()) / len(labels)
