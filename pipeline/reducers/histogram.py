"""A mergeable latency histogram over fio's bucket layout, and its percentiles.

Percentiles interpolate the CDF linearly inside the exact bucket ``[lower, upper)`` in which the
rank falls (seed 000 "Latency histogram method": percentiles from the inverse of the CDF; the
exact bucket edges are fio's, ``stat.h``). Quantiles are ``q`` in [0, 1]; an empty histogram
gives None for every statistic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pipeline.records.fio_bins import BinLayout

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class LatencyHistogram:
    """Completion counts per fio bucket.

    Attributes:
        layout: the bucket layout; only histograms of the same layout merge.
        counts: dense counts, shape ``(layout.nbins,)`` int64, all >= 0.
    """

    layout: BinLayout
    counts: I64

    @classmethod
    def empty(cls, layout: BinLayout) -> LatencyHistogram:
        """A histogram with no samples."""
        return cls(layout, np.zeros(layout.nbins, dtype=np.int64))

    @classmethod
    def from_sparse(cls, layout: BinLayout, bin_idx: I64, counts: I64) -> LatencyHistogram:
        """Build from the non-empty bins of a record (``FioHistRow.bin_idx/counts``)."""
        dense = np.zeros(layout.nbins, dtype=np.int64)
        np.add.at(dense, bin_idx, counts)
        return cls(layout, dense)

    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        """Bin-wise sum (associative, commutative, counts conserved).

        Raises:
            ValueError: the layouts differ (different bin count, unit or coarseness).
        """
        if other.layout != self.layout:
            raise ValueError(f"cannot merge histograms of layouts {self.layout} and {other.layout}")
        return LatencyHistogram(self.layout, self.counts + other.counts)

    @property
    def samples(self) -> int:
        """Number of completions."""
        return int(self.counts.sum())

    def min_ns(self) -> float | None:
        """Lower edge of the first non-empty bucket (ns)."""
        nz = np.flatnonzero(self.counts)
        return float(self.layout.edges_ns[nz[0]]) if nz.size else None

    def max_ns(self) -> float | None:
        """Upper edge of the last non-empty bucket (ns)."""
        nz = np.flatnonzero(self.counts)
        return float(self.layout.edges_ns[nz[-1] + 1]) if nz.size else None

    def mean_ns(self) -> float | None:
        """Count-weighted mean of the bucket representatives (fio's midpoints), ns."""
        n = self.samples
        if n == 0:
            return None
        return float(np.dot(self.counts, self.layout.midpoints_ns) / n)

    def quantiles_ns(self, qs: npt.ArrayLike) -> list[float | None]:
        """Latency (ns) at each quantile q in [0, 1], interpolated inside the bucket.

        The rank ``q * samples`` falls in the first bucket whose cumulative count reaches it;
        the value moves linearly from the bucket's lower to its upper edge as the rank crosses
        the bucket's count.

        Raises:
            ValueError: a q outside [0, 1].
        """
        q = np.atleast_1d(np.asarray(qs, dtype=np.float64))
        if np.any((q < 0) | (q > 1)):
            raise ValueError(f"quantiles must lie in [0, 1], got {q.tolist()}")
        n = self.samples
        if n == 0:
            return [None] * q.size
        nz = np.flatnonzero(self.counts)
        c = self.counts[nz]
        cum = np.cumsum(c)
        rank = q * n
        pos = np.minimum(np.searchsorted(cum, rank, side="left"), nz.size - 1)
        below = cum[pos] - c[pos]
        frac = np.clip((rank - below) / c[pos], 0.0, 1.0)
        lo = self.layout.edges_ns[nz[pos]]
        hi = self.layout.edges_ns[nz[pos] + 1]
        return [float(v) for v in lo + frac * (hi - lo)]

    def nonempty(self) -> tuple[list[float], list[int]]:
        """``(values, counts)`` of the non-empty bins for an Elasticsearch ``histogram`` field.

        Values are the bucket representatives in ns (strictly increasing), counts > 0.
        """
        nz = np.flatnonzero(self.counts)
        return self.layout.midpoints_ns[nz].tolist(), self.counts[nz].tolist()
