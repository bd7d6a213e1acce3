"""Shared histogram bins and CDF distances of one window (seed 001 §4.2 "CDF Distances").

Bins are shared by all LUNs of a window and chosen from their pooled samples by the modified
Freedman–Diaconis rule ``BinSize = 2 IQR(x) WinSize^(-1/3)``, ``Bins = ceil(Range(x)/BinSize)``
with ``n = WinSize`` (not the pooled count), capped at ``bin_cap`` (§4.2.2). Each LUN's
cumulative histogram, normalised, is its CDF on those bins, and ``d(P, Q) = sum_i |P(i) - Q(i)|``
for every pair (a sum, not a mean: the seed's formula).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from pipeline.reducers.peer_params import PeerParams

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def fd_bin_count(pooled: F64, win_size: int, bin_cap: int) -> int:
    """Number of shared bins for one window (seed 001 §4.2 "CDF Distances", §4.2.2).

    ``BinSize = 2 IQR(x) win_size^(-1/3)`` and ``Bins = ceil(Range(x) / BinSize)``, capped at
    ``bin_cap``; ``x`` holds the samples of all LUNs in the window but ``n = win_size`` (the
    seed: each histogram holds only WinSize samples). IQR uses numpy's linear percentiles.

    Fallback (not in the seed): all values equal (``Range = 0``) gives one bin; ``IQR = 0`` with
    ``Range > 0`` (more than half the pooled values identical, e.g. idle zeros or integer tps)
    gives ``bin_cap`` bins, i.e. ``BinSize = Range / bin_cap``, the finest resolution allowed.

    Args:
        pooled: the window's values of all LUNs, any shape, finite.
        win_size: samples per LUN histogram.
        bin_cap: maximum bins.

    Returns:
        The bin count in ``[1, bin_cap]``.
    """
    lo, hi = float(np.min(pooled)), float(np.max(pooled))
    span = hi - lo
    if span == 0.0:
        return 1
    q25, q75 = np.percentile(pooled, [25.0, 75.0])
    iqr = float(q75 - q25)
    if iqr == 0.0:
        return bin_cap
    bin_size = 2.0 * iqr * math.pow(win_size, -1.0 / 3.0)
    return max(1, min(bin_cap, math.ceil(span / bin_size)))


def cumulative_counts(window: F64, bins: int) -> I64:
    """Per-LUN cumulative histogram on ``bins`` equal bins spanning the pooled range.

    Bins are ``[e_i, e_{i+1})`` with ``e = linspace(min, max, bins + 1)``, the last one closed
    (numpy.histogram's convention).

    Args:
        window: shape ``(n_luns, win_size)``.
        bins: number of bins, >= 1.

    Returns:
        Shape ``(n_luns, bins)`` int64; column ``i`` counts samples in bins ``0..i``, so the
        last column is ``win_size``. Divided by ``win_size`` it is the CDF at the bins' upper
        edges.
    """
    n_luns = window.shape[0]
    edges = np.linspace(float(window.min()), float(window.max()), bins + 1)
    idx = np.clip(np.searchsorted(edges, window, side="right") - 1, 0, bins - 1)
    flat = (idx + np.arange(n_luns)[:, None] * bins).ravel()
    counts = np.bincount(flat, minlength=n_luns * bins).reshape(n_luns, bins)
    out: I64 = np.cumsum(counts, axis=1, dtype=np.int64)
    return out


def cdf_distances(window: F64, params: PeerParams) -> tuple[F64, int]:
    """Pairwise CDF distances of one window (seed 001 §4.2 "CDF Distances").

    ``d(P, Q) = sum_i |P(i) - Q(i)|`` over the shared bins, P and Q the CDFs of two LUNs.
    Computed on integer cumulative counts and divided by ``win_size`` once, so the matrix is
    exactly symmetric with a zero diagonal and zero for identical CDFs. Its range is
    ``[0, bins - 1]`` (the last CDF value is 1 for every LUN).

    Args:
        window: smoothed values, shape ``(n_luns, win_size)``.
        params: supplies ``win_size`` and ``bin_cap``.

    Returns:
        ``(distances, bins)``: shape ``(n_luns, n_luns)`` and the bin count used.
    """
    bins = fd_bin_count(window, params.win_size, params.bin_cap)
    cum = cumulative_counts(window, bins)
    diff = np.abs(cum[:, None, :] - cum[None, :, :]).sum(axis=2)
    dist: F64 = diff / float(window.shape[1])
    return dist, bins


def window_distances(
    window: F64, params: PeerParams
) -> tuple[F64, int, I64, npt.NDArray[np.bool_]]:
    """:func:`cdf_distances` of a window that may hold missing samples (NaN).

    The LUNs compared are those with at least ``params.min_samples`` samples present, over the
    times at which all of them are present (so every CDF covers the same moments: a burst in
    another LUN's gap is not held against it), provided there are 3 such LUNs and at least
    ``min_samples`` such times; distances are :func:`cdf_distances` of that sub-window (bins
    from its samples, ``n = win_size`` in the bin rule as before). Rows and columns of the
    other LUNs are NaN. A window without a missing sample is :func:`cdf_distances` unchanged.

    Args:
        window: smoothed values, shape ``(n_luns, win_size)``, NaN where missing.
        params: supplies ``win_size``, ``bin_cap`` and ``min_samples``.

    Returns:
        ``(distances, bins, present, compared)``: distances shape ``(n_luns, n_luns)``, the
        bin count (0 when no LUN is compared), the samples present per LUN and which LUNs
        are compared, both shape ``(n_luns,)``.
    """
    finite = ~np.isnan(window)
    present: I64 = finite.sum(axis=1).astype(np.int64)
    compared = present >= params.min_samples
    if bool(finite.all()):
        dist, bins = cdf_distances(window, params)
        return dist, bins, present, compared
    out: F64 = np.full((window.shape[0], window.shape[0]), np.nan)
    common = finite[compared].all(axis=0)
    if int(compared.sum()) < 3 or int(common.sum()) < params.min_samples:
        return out, 0, present, np.zeros_like(compared)
    dist, bins = cdf_distances(window[np.ix_(compared, common)], params)
    out[np.ix_(compared, compared)] = dist
    return out, bins, present, compared
