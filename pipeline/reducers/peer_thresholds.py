"""Distance thresholds trained on fault-free data (seed 001 §4.2.1 "Threshold Selection").

The threshold of a (peer group, metric) is the maximum pairwise CDF distance over every window
of fault-free training data (the seed: it "captures the maximum expected deviation";
:func:`threshold_rule`). With the detector's strict ``>``, training data itself never yields an
anomaly. :class:`Thresholds` keeps the trained values with their provenance and the parameters
they were trained with, stored by the CLI as a versioned JSON file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from pipeline.records.json import JsonObject
from pipeline.reducers.peer_cdf import window_distances
from pipeline.reducers.peer_params import PeerParams, PeerSeries
from pipeline.reducers.peer_windows import iter_windows, moving_average

F64 = npt.NDArray[np.float64]

THRESHOLDS_FORMAT = "iolens.peer_thresholds"
THRESHOLDS_VERSION = 1
THRESHOLD_RULE = "max_pairwise_distance"


def threshold_rule(window_max_distances: Sequence[float]) -> float:
    """The training rule (seed 001 §4.2.1): the largest pairwise distance of any window.

    Args:
        window_max_distances: per training window, its largest pairwise distance.

    Raises:
        ValueError: no training window.
    """
    if not window_max_distances:
        raise ValueError("no complete window in the training data")
    return float(max(window_max_distances))


@dataclass(frozen=True)
class TrainedThreshold:
    """A threshold and how many windows it was learned from."""

    threshold: float
    windows: int


def train_threshold(values: F64, params: PeerParams) -> TrainedThreshold:
    """Learn a distance threshold from fault-free data (seed 001 §4.2.1, :func:`threshold_rule`).

    Args:
        values: fault-free samples of one metric of one peer group, ``(n_luns, n_samples)``,
            NaN where a sample is missing.
        params: the parameters the detector will run with (the distances depend on them).

    A window counts only the distances between LUNs the detector would compare in it (at
    least ``params.min_samples`` samples present, 3 such LUNs); a window without 3 of them
    is not a training window.

    Raises:
        ValueError: fewer than ``win_size + ma_width - 1`` samples, or no window with 3 LUNs
            compared (no complete window).
    """
    sm = moving_average(values, params.ma_width)
    maxima = []
    for _, a in iter_windows(sm, params):
        dist, _, _, compared = window_distances(sm[:, a : a + params.win_size], params)
        if compared.any():
            maxima.append(float(np.nanmax(dist)))
    return TrainedThreshold(threshold_rule(maxima), len(maxima))


@dataclass(frozen=True)
class ThresholdEntry:
    """The trained threshold of one (peer group, metric)."""

    group: str
    metric: str
    threshold: float
    windows: int


@dataclass(frozen=True)
class Thresholds:
    """Trained thresholds with their provenance; stored by the CLI as a versioned JSON file.

    Attributes:
        entries: one per (group, metric), unique.
        params: the peer parameters used in training (detection must use the same).
        trained_from_s: first training sample time, Unix s.
        trained_until_s: last training sample time, Unix s.
        rule: name of the training rule.
        version: file format version.

    Raises:
        ValueError: duplicate (group, metric) entries.
    """

    entries: tuple[ThresholdEntry, ...]
    params: PeerParams
    trained_from_s: float
    trained_until_s: float
    rule: str = THRESHOLD_RULE
    version: int = THRESHOLDS_VERSION

    def __post_init__(self) -> None:
        if len(self._by_key) != len(self.entries):
            raise ValueError("duplicate (group, metric) in thresholds")

    @cached_property
    def _by_key(self) -> dict[tuple[str, str], float]:
        return {(e.group, e.metric): e.threshold for e in self.entries}

    def get(self, group: str, metric: str) -> float:
        """The threshold of ``(group, metric)``.

        Raises:
            KeyError: not trained; the message names the pair and the training period.
        """
        try:
            return self._by_key[(group, metric)]
        except KeyError:
            raise KeyError(
                f"no peer threshold for group {group!r} metric {metric!r} "
                f"(trained {self.trained_from_s}..{self.trained_until_s}); retrain"
            ) from None

    def to_dict(self) -> JsonObject:
        """JSON-able form (``format``, ``version``, provenance, ``params``, ``thresholds``)."""
        return {
            "format": THRESHOLDS_FORMAT,
            "version": self.version,
            "rule": self.rule,
            "trained_from_s": self.trained_from_s,
            "trained_until_s": self.trained_until_s,
            "params": self.params.to_dict(),
            "thresholds": [asdict(e) for e in self.entries],
        }

    @classmethod
    def from_dict(cls, data: JsonObject) -> Thresholds:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: another format or version, or malformed content.
        """
        if data.get("format") != THRESHOLDS_FORMAT or data.get("version") != THRESHOLDS_VERSION:
            raise ValueError(
                f"not an {THRESHOLDS_FORMAT} v{THRESHOLDS_VERSION} document: "
                f"format={data.get('format')!r} version={data.get('version')!r}"
            )
        try:
            return cls(
                entries=tuple(_entry(e) for e in data["thresholds"]),
                params=PeerParams.from_dict(data["params"]),
                trained_from_s=float(data["trained_from_s"]),
                trained_until_s=float(data["trained_until_s"]),
                rule=str(data["rule"]),
                version=int(data["version"]),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed thresholds document: {exc!r}") from exc


def _entry(e: JsonObject) -> ThresholdEntry:
    """One ``thresholds`` item of a stored document."""
    return ThresholdEntry(
        str(e["group"]), str(e["metric"]), float(e["threshold"]), int(e["windows"])
    )


def train_thresholds(series: Sequence[PeerSeries], params: PeerParams) -> Thresholds:
    """Train every (group, metric) of fault-free ``series``.

    Raises:
        ValueError: no series, a (group, metric) twice, or a series without a complete window.
    """
    if not series:
        raise ValueError("no training series")
    entries = []
    for s in series:
        t = train_threshold(s.masked(), params)
        entries.append(ThresholdEntry(s.group, s.metric, t.threshold, t.windows))
    return Thresholds(
        entries=tuple(entries),
        params=params,
        trained_from_s=min(float(s.times_s[0]) for s in series),
        trained_until_s=max(float(s.times_s[-1]) for s in series),
    )
