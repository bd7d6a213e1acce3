"""Parameters of the peer comparison and the series it compares (seed 001 §4.2).

:class:`PeerParams` holds the seed's knobs (moving-average width, window size and shift, the
``k`` of the k-of-(2k-1) filter, the bin cap); :class:`PeerSeries` is one metric of one peer group
on a common time grid, the input of every later stage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PeerParams:
    """Parameters of the peer comparison; defaults are seed 001 §4.2's.

    Attributes:
        ma_width: moving-average width, samples (15).
        win_size: window length, smoothed samples (60).
        win_shift: shift between windows, samples (30); at most ``win_size``.
        k: faulty when anomalous in >= k of the last 2k-1 windows (3).
        bin_cap: upper limit of histogram bins per window (1000, §4.2.2).

    Raises:
        ValueError: a parameter out of range.
    """

    ma_width: int = 15
    win_size: int = 60
    win_shift: int = 30
    k: int = 3
    bin_cap: int = 1000

    def __post_init__(self) -> None:
        if self.ma_width < 1 or self.win_size < 2 or self.k < 1 or self.bin_cap < 1:
            raise ValueError(f"invalid peer parameters {self}")
        if not 1 <= self.win_shift <= self.win_size:
            raise ValueError(f"win_shift must lie in [1, win_size], got {self}")

    @property
    def min_samples(self) -> int:
        """Smoothed samples a LUN needs in a window to be compared in it: half the window,
        rounded up (fewer, after a gap in its data, and the window is skipped for that LUN)."""
        return (self.win_size + 1) // 2

    @property
    def history(self) -> int:
        """Number of windows the k-of-(2k-1) filter looks at."""
        return 2 * self.k - 1

    def to_dict(self) -> dict[str, int]:
        """JSON-able form."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PeerParams:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: unknown keys or invalid values.
        """
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown peer parameter(s) {sorted(unknown)}")
        return cls(**{k: int(v) for k, v in data.items()})


@dataclass(frozen=True, eq=False)
class PeerSeries:
    """One metric of one peer group on a common time grid.

    Attributes:
        group: peer group name.
        metric: metric name (e.g. ``await``).
        luns: LUN names, one per row of ``values``, at least 3 (a majority needs 2 peers).
        times_s: sample end times, Unix s, strictly increasing, shape ``(n_samples,)``.
        values: shape ``(n_luns, n_samples)`` float64, finite.
        present: shape of ``values``, False where a LUN has no sample at a grid time (its
            server's sadc was not running, a file is missing): the value there is not data
            and is ignored. None: every sample is present.

    Raises:
        ValueError: shapes disagree, fewer than 3 LUNs, duplicate names, times not increasing,
            or non-finite values.
    """

    group: str
    metric: str
    luns: tuple[str, ...]
    times_s: F64
    values: F64
    present: npt.NDArray[np.bool_] | None = None

    def __post_init__(self) -> None:
        check_block(self.luns, self.times_s, self.values)
        check_present(self.values, self.present)

    def masked(self) -> F64:
        """``values`` with NaN where a sample is missing (what the windows are computed on)."""
        return with_gaps(self.values, self.present)


def check_present(values: F64, present: npt.NDArray[np.bool_] | None) -> None:
    """Check a presence mask against its values.

    Raises:
        ValueError: ``present`` is not None and its shape differs from ``values``'.
    """
    if present is not None and np.shape(present) != values.shape:
        raise ValueError(
            f"present must have the shape of values {values.shape}, got {np.shape(present)}"
        )


def with_gaps(values: F64, present: npt.NDArray[np.bool_] | None) -> F64:
    """``values`` (shape ``(n_luns, n)``) with NaN where ``present`` is False (a copy), or
    ``values`` itself when ``present`` is None or all True."""
    if present is None or bool(np.all(present)):
        return values
    out: F64 = np.where(present, values, np.nan)
    return out


def check_block(luns: Sequence[str], times_s: F64, values: F64) -> None:
    """Check a block of samples of ``luns``: the invariants of :class:`PeerSeries`.

    Args:
        luns: LUN names, at least 3, distinct.
        times_s: sample end times, Unix s, shape ``(n,)``, strictly increasing.
        values: shape ``(len(luns), n)``, finite.

    Raises:
        ValueError: naming the broken invariant.
    """
    if len(luns) < 3 or len(set(luns)) != len(luns):
        raise ValueError(f"peer comparison needs >= 3 distinct LUNs, got {list(luns)}")
    if values.ndim != 2 or times_s.ndim != 1 or values.shape != (len(luns), times_s.size):
        raise ValueError(
            f"values must have shape (n_luns={len(luns)}, n_samples={times_s.size}), "
            f"got {values.shape}"
        )
    if np.any(np.diff(times_s) <= 0):
        raise ValueError("sample times must be strictly increasing")
    if not np.all(np.isfinite(values)):
        raise ValueError("values must be finite")
