"""Moving average and windowing of a peer series (seed 001 §4.2 "Moving Average Filter",
"Windowing and Anomaly Filtering").

Only *full* trailing moving-average windows are kept, so the first ``ma_width - 1`` raw samples
yield no smoothed sample; smoothed sample ``i`` is the mean of raw samples
``i .. i + ma_width - 1`` and carries the time of its last raw sample (sadc stamps interval
*ends*, reference/sysstat.md §1.5). Window ``j`` holds smoothed samples
``[j*win_shift, j*win_shift + win_size)``, i.e. raw samples
``[j*win_shift, j*win_shift + win_size + ma_width - 2]`` (:func:`window_span`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from pipeline.reducers.peer_params import PeerParams

F64 = npt.NDArray[np.float64]


def window_span(j: int, params: PeerParams) -> tuple[int, int]:
    """Raw sample indices ``(first, last)`` (inclusive) that window ``j`` depends on."""
    first = j * params.win_shift
    return first, first + params.win_size + params.ma_width - 2


def moving_average(values: F64, width: int) -> F64:
    """Trailing moving average over full windows only.

    Args:
        values: shape ``(n_luns, n)``.
        width: window width in samples, >= 1.

    Returns:
        Shape ``(n_luns, max(0, n - width + 1))``; column ``i`` is the mean of columns
        ``i .. i + width - 1``. The terms are added in a fixed order, so a value depends only
        on its own raw samples (streaming and batch agree to the bit).
    """
    n = values.shape[1] - width + 1
    if n <= 0:
        return np.empty((values.shape[0], 0), dtype=np.float64)
    acc = values[:, 0:n].copy()
    for i in range(1, width):
        acc += values[:, i : i + n]
    out: F64 = acc / width
    return out


def iter_windows(smoothed: F64, params: PeerParams) -> Iterator[tuple[int, int]]:
    """``(j, start)`` of every complete window of a smoothed series of ``smoothed.shape[1]``."""
    n = smoothed.shape[1]
    j = 0
    while j * params.win_shift + params.win_size <= n:
        yield j, j * params.win_shift
        j += 1
