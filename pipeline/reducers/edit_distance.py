"""The resource-weighted string-edit distance between serialised requests, and its bounds
(seed 002, section 5: "a function of both the character edit cost ... and also of the resource
usage deltas"; the cost model is in :mod:`pipeline.reducers.request_cluster`).

A request is compared many times (with every representative it may join, and with the other
members of its cluster's sample when the medoid is chosen), so what the comparisons need is
computed once per request, in a :class:`Profile`. Three things make a comparison cheap without
changing its result:

* **a lower bound** (:func:`lower_bound`): the L1 distance between the requests' *bins*, the
  structural cost ``c0`` times the tokens of each kind and the summed resources of each
  (kind, resource). An insertion or deletion changes the bins by exactly its cost, a
  substitution by at most its cost (``||r1| - |r2|| <= |r1 - r2|`` per resource), so no edit
  script costs less. It is never below the difference of the masses (the sum of the bins);
  a representative whose bound exceeds the best distance so far is not compared at all;
* **the diagonal** (:func:`bounded_distance`): between requests of the same length, the
  token-by-token alignment costs ``u``; any other alignment inserts and deletes at least one
  token each, ``2 c0`` or more, so ``u <= 2 c0`` is the distance. Between requests of the same
  shape (kinds and resource names) ``u`` is the L1 distance of their resource amounts;
* **a cut-off**: otherwise the dynamic programme runs row by row and stops once a whole row
  exceeds the cut-off (costs are non-negative, so the distance is at least any row's minimum).

The programme's cells are the same sums, in the same order, as the full programme's; the
diagonal of two requests of one shape is summed amount by amount rather than token by token,
which may differ from the programme in the last bit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pipeline.reducers.canonical import Canonical

Vector = tuple[tuple[str, float], ...]
Item = tuple[str, Vector]
"""A token as the distance sees it: its kind and its weighted resource amounts."""

INF = float("inf")


def norm(r: Vector) -> float:
    """The L1 norm of a token's resources (ms of CPU, KiB)."""
    return sum(abs(v) for _k, v in r)


def diff(a: Vector, b: Vector) -> float:
    """The L1 distance between two tokens' resources (a resource one lacks counts as 0)."""
    if len(a) == len(b) and all(x[0] == y[0] for x, y in zip(a, b, strict=True)):
        return sum(abs(x[1] - y[1]) for x, y in zip(a, b, strict=True))
    da, db = dict(a), dict(b)
    return sum(abs(da.get(k, 0.0) - db.get(k, 0.0)) for k in da.keys() | db.keys())


class Profile:
    """What comparisons need of one serialised request, computed once.

    Attributes:
        shape: each token's kind and resource names: two requests of one shape are compared
            on their ``values`` first.
        values: every token's resource amounts (ms of CPU, KiB), in token then name order.
        mass: what deleting every token costs (the sum of ``costs``).
        c0: the structural cost it was made with.
        costs: what inserting or deleting each token costs (``c0 + |r|``).
        kinds, vectors: each token's kind and weighted resources, derived from ``shape`` and
            ``values`` when first asked for (most comparisons are between requests of one
            shape and need only ``values``).
    """

    __slots__ = ("_bins", "_costs", "_vectors", "c0", "mass", "shape", "values")

    def __init__(
        self,
        shape: tuple[tuple[str, tuple[str, ...]], ...],
        values: tuple[float, ...],
        costs: list[float],
        c0: float,
    ) -> None:
        self.shape, self.values, self.c0 = shape, values, c0
        self.mass = sum(costs)  # sum(), not +=: from Python 3.12 it compensates rounding
        self._costs = tuple(costs)
        self._vectors: tuple[Vector, ...] | None = None
        self._bins: dict[tuple[str, str], float] | None = None

    @property
    def kinds(self) -> tuple[str, ...]:
        """Each token's kind."""
        return tuple(kind for kind, _names in self.shape)

    @property
    def vectors(self) -> tuple[Vector, ...]:
        """Each token's weighted resources, ``((name, amount), ...)`` in name order."""
        if self._vectors is None:
            vectors: list[Vector] = []
            at = 0
            values = self.values
            for _kind, names in self.shape:
                vectors.append(tuple(zip(names, values[at : at + len(names)], strict=True)))
                at += len(names)
            self._vectors = tuple(vectors)
        return self._vectors

    @property
    def costs(self) -> tuple[float, ...]:
        """What inserting or deleting each token costs (``c0 + |r|``)."""
        return self._costs

    @property
    def bins(self) -> dict[tuple[str, str], float]:
        """``(kind, "")`` -> ``c0`` x tokens of that kind, ``(kind, resource)`` -> the summed
        absolute amounts (see :func:`lower_bound`); computed when first asked for."""
        if self._bins is None:
            bins: dict[tuple[str, str], float] = {}
            for kind, r in zip(self.kinds, self.vectors, strict=True):
                bins[kind, ""] = bins.get((kind, ""), 0.0) + self.c0
                for name, v in r:
                    bins[kind, name] = bins.get((kind, name), 0.0) + abs(v)
            self._bins = bins
        return self._bins


def profile(items: Sequence[Item], c0: float) -> Profile:
    """The :class:`Profile` of a serialised request (``c0``: the structural cost)."""
    shape: list[tuple[str, tuple[str, ...]]] = []
    values: list[float] = []
    costs: list[float] = []
    for kind, r in items:
        shape.append((kind, tuple(name for name, _v in r)))
        values += [v for _name, v in r]
        costs.append(c0 + norm(r))
    return Profile(tuple(shape), tuple(values), costs, c0)


_EMPTY: tuple[str, ...] = ()
_LAYOUTS: dict[tuple[str, ...], tuple[tuple[str, ...], tuple[float, ...]] | None] = {}
"""Resource names in a token's order -> the same names and their weights when they are in
name order (None: they are not)."""


def _layout(names: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[float, ...]] | None:
    layout = _LAYOUTS.get(names, False)
    if layout is False:
        ordered = list(names) == sorted(names)
        layout = _LAYOUTS[names] = (names, tuple(map(_weight, names))) if ordered else None
    return layout  # type: ignore[return-value]


def profile_of(c: Canonical, c0: float) -> Profile:
    """The :class:`Profile` of a canonical request: ``profile(items(c), c0)`` in one pass
    (the same shape, values and mass, bit for bit)."""
    shape: list[tuple[str, tuple[str, ...]]] = []
    values: list[float] = []
    costs: list[float] = []
    for t in c.tokens:
        r = t.resources
        if not r:
            shape.append((t.kind, _EMPTY))
            costs.append(c0 + 0)
            continue
        layout = _layout(tuple(r))
        if layout is None:  # not in name order (a form not made by canonical())
            vector = items_of(t.kind, r)[1]
            names = tuple(name for name, _v in vector)
            amounts = [v for _name, v in vector]
        else:
            names, weights = layout
            amounts = [v * w for v, w in zip(r.values(), weights, strict=True)]
        shape.append((t.kind, names))
        values += amounts
        costs.append(c0 + sum(map(abs, amounts)))
    return Profile(tuple(shape), tuple(values), costs, c0)


def lower_bound(p: Profile, q: Profile) -> float:
    """A lower bound of the distance (module docstring), at least ``|p.mass - q.mass|``."""
    a, b = p.bins, q.bins
    total = sum(abs(v - b.get(k, 0.0)) for k, v in a.items())
    return total + sum(abs(v) for k, v in b.items() if k not in a)


def bounded_distance(p: Profile, q: Profile, cutoff: float = INF) -> float:
    """The distance between two profiled requests, or ``inf`` once it is sure to exceed
    ``cutoff``.

    Raises:
        ValueError: the profiles were made with different structural costs.
    """
    if p.c0 != q.c0:
        raise ValueError(f"profiles of different structural costs ({p.c0} and {q.c0})")
    if p.shape == q.shape:
        u = 0.0
        for x, y in zip(p.values, q.values, strict=True):
            u += abs(x - y)
        if u <= 2 * p.c0:
            return u
    elif len(p.kinds) == len(q.kinds):
        u = _diagonal(p, q, 2 * p.c0)
        if u <= 2 * p.c0:
            return u
    return _programme(p, q, cutoff)


def _diagonal(p: Profile, q: Profile, cutoff: float) -> float:
    """The token-by-token alignment's cost, summed as the programme sums it (``inf`` past
    ``cutoff``)."""
    u = 0.0
    pairs = zip(p.kinds, q.kinds, p.vectors, q.vectors, p.costs, q.costs, strict=True)
    for ka, kb, ra, rb, wa, wb in pairs:
        u += diff(ra, rb) if ka == kb else wa + wb
        if u > cutoff:
            return INF
    return u


def _programme(p: Profile, q: Profile, cutoff: float) -> float:
    """The edit distance's dynamic programme, row by row, given up (``inf``) when a row's
    minimum exceeds ``cutoff``."""
    nb, kb, vb = q.costs, q.kinds, q.vectors
    prev = [0.0]
    for w in nb:
        prev.append(prev[-1] + w)
    cols = range(len(kb))
    for ka, ra, wa in zip(p.kinds, p.vectors, p.costs, strict=True):
        c = prev[0] + wa
        cur = [c]
        low = c
        for j in cols:
            sub = diff(ra, vb[j]) if ka == kb[j] else wa + nb[j]
            c = min(prev[j] + sub, prev[j + 1] + wa, c + nb[j])
            cur.append(c)
            if c < low:
                low = c
        if low > cutoff:
            return INF
        prev = cur
    return prev[-1]


def _weight(name: str) -> float:
    if name.endswith("_ns"):
        return 1e-6
    if name.endswith("_bytes"):
        return 1 / 1024
    return 1.0


_WEIGHTS: dict[str, float] = {}


def items_of(kind: str, resources: Mapping[str, float]) -> Item:
    """One token in the distance's units (ms of CPU, KiB), its resources in name order."""
    if not resources:
        return (kind, ())
    weights = _WEIGHTS
    vector = []
    for k, v in sorted(resources.items()):
        w = weights.get(k)
        if w is None:
            w = weights[k] = _weight(k)
        vector.append((k, v * w))
    return (kind, tuple(vector))


def items(c: Canonical) -> tuple[Item, ...]:
    """The tokens of ``c`` in the distance's units (ms of CPU, KiB)."""
    return tuple(items_of(t.kind, t.resources) for t in c.tokens)


def mass(a: Sequence[Item], c0: float = 1.0) -> float:
    """What deleting every token of ``a`` costs. Each edit changes the mass by at most its
    cost, so ``|mass(a) - mass(b)|`` is a lower bound of :func:`distance`."""
    return sum(c0 + norm(r) for _k, r in a)


def distance(a: Sequence[Item], b: Sequence[Item], c0: float = 1.0) -> float:
    """The resource-weighted edit distance between two serialised requests (the cost model of
    :mod:`pipeline.reducers.request_cluster`; computed by :func:`bounded_distance`).

    Symmetric, 0 only for equal sequences, at least ``|mass(a) - mass(b)|`` and at most the
    cost of deleting one and inserting the other.
    """
    return bounded_distance(profile(a, c0), profile(b, c0))
