"""Streaming peer comparison of one (peer group, metric): :class:`PeerDetector`.

It runs the stages of :func:`pipeline.reducers.peer_flags.detect` (moving average, windows, CDF
distances, anomaly flags, the k-of-(2k-1) filter) on samples as they arrive and gives, window
for window, the same results to the bit. Its state is bounded and JSON-able, so a scheduled job
can save it and resume after a restart.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pipeline.records.json import JsonObject
from pipeline.reducers.peer_flags import WindowResult, evaluate_window
from pipeline.reducers.peer_params import PeerParams, check_block, check_present, with_gaps
from pipeline.reducers.peer_windows import moving_average

F64 = npt.NDArray[np.float64]


@dataclass
class PeerDetector:
    """Streaming peer comparison of one (group, metric); equals ``detect`` on the same data.

    State between calls: the last ``ma_width - 1`` raw samples, the last ``win_size - 1``
    smoothed samples (fewer when windows just completed) and the last ``2k - 1`` anomaly flags
    per LUN, so memory is bounded whatever the stream length.

    Attributes:
        group: peer group.
        metric: metric name.
        luns: LUN names (>= 3), the row order of every block passed to :meth:`add`.
        threshold: the distance threshold.
        params: peer parameters.
    """

    group: str
    metric: str
    luns: tuple[str, ...]
    threshold: float
    params: PeerParams = field(default_factory=PeerParams)
    _raw: F64 = field(init=False, repr=False)
    _sm: F64 = field(init=False, repr=False)
    _sm_t: F64 = field(init=False, repr=False)
    _sm_seen: int = field(init=False, default=0)
    _next_window: int = field(init=False, default=0)
    _last_t: float = field(init=False, default=-math.inf)
    _hist: list[deque[bool]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.luns)
        check_block(self.luns, np.empty(0), np.empty((n, 0)))
        self._raw = np.empty((n, 0), dtype=np.float64)
        self._sm = np.empty((n, 0), dtype=np.float64)
        self._sm_t = np.empty(0, dtype=np.float64)
        self._hist = [deque(maxlen=self.params.history) for _ in self.luns]

    def state(self) -> JsonObject:
        """JSON-able state: resume with :meth:`restore` (e.g. after a restart)."""
        return {
            "luns": list(self.luns),
            "threshold": self.threshold,
            "params": self.params.to_dict(),
            "raw": _json_rows(self._raw),
            "sm": _json_rows(self._sm),
            "sm_t": self._sm_t.tolist(),
            "sm_seen": self._sm_seen,
            "next_window": self._next_window,
            "last_t": None if math.isinf(self._last_t) else self._last_t,
            "hist": [list(h) for h in self._hist],
        }

    @classmethod
    def restore(cls, group: str, metric: str, state: JsonObject) -> PeerDetector:
        """A detector continuing exactly where :meth:`state` was taken.

        Raises:
            ValueError: malformed state.
        """
        luns = tuple(state["luns"])
        det = cls(
            group, metric, luns, float(state["threshold"]), PeerParams.from_dict(state["params"])
        )
        n = len(luns)
        det._raw = np.asarray(state["raw"], dtype=np.float64).reshape(n, -1)
        det._sm = np.asarray(state["sm"], dtype=np.float64).reshape(n, -1)
        det._sm_t = np.asarray(state["sm_t"], dtype=np.float64)
        det._sm_seen = int(state["sm_seen"])
        det._next_window = int(state["next_window"])
        det._last_t = -math.inf if state["last_t"] is None else float(state["last_t"])
        det._hist = [deque((bool(x) for x in h), maxlen=det.params.history) for h in state["hist"]]
        if len(det._hist) != n or det._sm.shape[1] != det._sm_t.size:
            raise ValueError("detector state does not match its LUNs")
        return det

    @property
    def last_time_s(self) -> float:
        """End time of the last sample added (-inf before the first)."""
        return self._last_t

    @property
    def held_samples(self) -> tuple[int, int]:
        """``(raw, smoothed)`` samples held between calls (at most ``ma_width - 1`` and
        ``win_size - 1``)."""
        return self._raw.shape[1], self._sm.shape[1]

    def add(
        self,
        times_s: npt.ArrayLike,
        values: npt.ArrayLike,
        present: npt.ArrayLike | None = None,
    ) -> list[WindowResult]:
        """Append samples and return the windows they complete, in order.

        Args:
            times_s: sample end times, Unix s, shape ``(m,)``, strictly increasing and after
                every earlier sample.
            values: shape ``(n_luns, m)`` (or ``(n_luns,)`` for one sample), rows in ``luns``
                order.
            present: shape of ``values``, False where a LUN has no sample (that value is
                ignored, as :attr:`PeerSeries.present`); None: all present.

        Raises:
            ValueError: wrong shape, times not increasing, or non-finite values.
        """
        t = np.atleast_1d(np.asarray(times_s, dtype=np.float64))
        v = np.asarray(values, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        check_block(self.luns, t, v)
        mask = None if present is None else np.asarray(present, dtype=bool)
        if mask is not None and mask.ndim == 1:
            mask = mask[:, None]
        check_present(v, mask)
        v = with_gaps(v, mask)
        if t.size == 0:
            return []
        if t[0] <= self._last_t:
            raise ValueError(f"sample time {t[0]} is not after the previous one {self._last_t}")
        self._last_t = float(t[-1])
        return self._windows(*self._smooth(t, v))

    def _smooth(self, t: F64, v: F64) -> tuple[F64, F64, int]:
        """Smooth the held raw samples and ``v``; ``(smoothed, times, stream index of col 0)``
        of everything smoothed not yet consumed, keeping the raw tail for the next call."""
        raw = np.concatenate([self._raw, v], axis=1)
        new_sm = moving_average(raw, self.params.ma_width)
        new_t = t[t.size - new_sm.shape[1] :] if new_sm.shape[1] else t[:0]
        held = min(raw.shape[1], self.params.ma_width - 1)
        self._raw = raw[:, raw.shape[1] - held :].copy()  # a view would pin the whole block
        sm = np.concatenate([self._sm, new_sm], axis=1)
        sm_t = np.concatenate([self._sm_t, new_t])
        first = self._sm_seen - self._sm.shape[1]  # stream index of sm[:, 0]
        self._sm_seen += new_sm.shape[1]
        return sm, sm_t, first

    def _windows(self, sm: F64, sm_t: F64, first: int) -> list[WindowResult]:
        """Evaluate every window complete in ``sm``; keep what the next window needs."""
        p = self.params
        out = []
        sid = (self.group, self.metric, self.luns)
        while self._next_window * p.win_shift + p.win_size <= self._sm_seen:
            a = self._next_window * p.win_shift - first
            b = a + p.win_size
            j = self._next_window
            out.append(
                evaluate_window(sid, j, sm_t[a:b], sm[:, a:b], self.threshold, p, self._hist)
            )
            self._next_window += 1
        keep = max(0, self._sm_seen - self._next_window * p.win_shift)
        self._sm = sm[:, sm.shape[1] - keep :].copy()
        self._sm_t = sm_t[sm_t.size - keep :].copy()
        return out


def _json_rows(a: F64) -> list[list[float | None]]:
    """Rows of ``a`` as JSON-able lists, None for a missing (NaN) sample (numpy reads None back
    as NaN in :meth:`PeerDetector.restore`)."""
    return [[None if math.isnan(x) else x for x in row] for row in a.tolist()]
