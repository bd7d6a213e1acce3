"""Black-box peer comparison of one metric across the LUNs of one peer group (seed 001 §4.2).

The steps, all from seed 001 §4.2 "Overview" unless noted, each in a module of its own:

0. **Downsampling** to 15 s by cumulative sums, before any of this
   (:mod:`pipeline.reducers.downsample`).
1. **Moving average** of width ``ma_width`` (15) per LUN. Edge handling: only *full* trailing
   windows are kept, so the first ``ma_width - 1`` raw samples yield no smoothed sample.
   Smoothed sample ``i`` is the mean of raw samples ``i .. i + ma_width - 1`` and carries the
   time of its last raw sample (sadc stamps interval *ends*, reference/sysstat.md §1.5).
2. **Windows** of ``win_size`` (60) smoothed samples shifted by ``win_shift`` (30): window ``j``
   holds smoothed samples ``[j*win_shift, j*win_shift + win_size)``, i.e. raw samples
   ``[j*win_shift, j*win_shift + win_size + ma_width - 2]`` (:func:`window_span`). Steps 1-2:
   :mod:`pipeline.reducers.peer_windows`.
3. **Shared bins** per window from the pooled samples of all LUNs by the modified
   Freedman–Diaconis rule ``BinSize = 2 IQR(x) WinSize^(-1/3)``, ``Bins = ceil(Range(x)/BinSize)``
   with ``n = WinSize`` (not the pooled count), capped at ``bin_cap`` (§4.2 "CDF Distances",
   §4.2.2). See :func:`fd_bin_count` for the IQR = 0 fallback.
4. **CDF distances**: per-LUN cumulative histograms normalised to CDFs on the shared bins, and
   ``d(P, Q) = sum_i |P(i) - Q(i)|`` for every pair (a sum, not a mean: the seed's formula).
   Steps 3-4: :mod:`pipeline.reducers.peer_cdf`.
5. **Anomalous**: a LUN whose distances to *more than half* of its ``n - 1`` peers exceed the
   threshold (strictly greater). **Faulty**: anomalous in at least ``k`` of the last ``2k - 1``
   windows (§4.2 "Windowing and Anomaly Filtering"): :mod:`pipeline.reducers.peer_flags`
   (batch, :func:`detect`) and :mod:`pipeline.reducers.peer_stream` (:class:`PeerDetector`).
6. **Threshold** per (peer group, metric): the maximum pairwise distance over every window of
   fault-free training data (§4.2.1 "captures the maximum expected deviation";
   :func:`threshold_rule`). With a strict ``>``, training data itself never yields an anomaly:
   :mod:`pipeline.reducers.peer_thresholds`.
7. **Persistence ordering** of the anomalous LUNs (§4.3): :mod:`pipeline.reducers.persistence`.

``anomaly_score`` (0-100, for Elastic-ML-like documents, reference/sysstat.md §4.2) is ``100 x``
the fraction of peers whose distance exceeds the threshold, so a LUN is anomalous exactly when
its score is above 50 (Kibana's "major" band and up).

Reducers are pure: values come in as arrays on a common time grid (already downsampled), no
file I/O, no clock. Values must be finite (a missing sample is the downsampler's business).
The parameters and the input series are in :mod:`pipeline.reducers.peer_params`. This module
gathers the public names of all these stages, so callers import them from one place.
"""

from __future__ import annotations

from pipeline.reducers.peer_cdf import cdf_distances, cumulative_counts, fd_bin_count
from pipeline.reducers.peer_flags import (
    WindowResult,
    detect,
    indicted,
    majority_distance,
    peers_exceeded,
)
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_stream import PeerDetector
from pipeline.reducers.peer_thresholds import (
    THRESHOLD_RULE,
    THRESHOLDS_FORMAT,
    THRESHOLDS_VERSION,
    ThresholdEntry,
    Thresholds,
    TrainedThreshold,
    threshold_rule,
    train_threshold,
    train_thresholds,
)
from pipeline.reducers.peer_windows import iter_windows, moving_average, window_span

__all__ = [
    "THRESHOLDS_FORMAT",
    "THRESHOLDS_VERSION",
    "THRESHOLD_RULE",
    "PeerDetector",
    "PeerParams",
    "PeerSeries",
    "ThresholdEntry",
    "Thresholds",
    "TrainedThreshold",
    "WindowResult",
    "cdf_distances",
    "cumulative_counts",
    "detect",
    "fd_bin_count",
    "indicted",
    "iter_windows",
    "majority_distance",
    "moving_average",
    "peers_exceeded",
    "threshold_rule",
    "train_threshold",
    "train_thresholds",
    "window_span",
]
