"""The completion-window method: each record's counts go to the output interval its window is in.

fio writes a record when an I/O completes at least ``log_hist_msec`` after the previous record of
the same direction, and the record holds the completions in ``(previous record time, this record
time]`` (reference/fio.md 1.2, verified bin for bin). So a record's completion window is known
exactly; this method assigns the whole record to the output interval ``[k*I, (k+1)*I)`` that
contains the window's midpoint, sums the integer histograms of all records assigned to an
interval (across threads and hosts: seed 000's merge), and takes percentiles from the merged
histogram (:mod:`pipeline.reducers.histogram`). No sample is weighted or smeared across
intervals, so a percentile is that of the I/Os that completed in the covered span, up to bucket
resolution (< 1%, fio.md section 6).

The first record of a direction in a job-relative log opens at time 0 (the job's epoch); in an
epoch-stamped log (``log_unix_epoch``) the opening time is unknown and the first window is taken
as zero-length at its end time. Bursts after a stall (same timestamp) are zero-length windows
that keep their counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pipeline.records.core import DDIR_NAMES, FioHistRow
from pipeline.records.fio_bins import BinLayout
from pipeline.reducers.histogram import LatencyHistogram

STAT_FIELDS = ("samples", "min", "mean", "max")


@dataclass(frozen=True)
class PlacedRow:
    """A record placed on the wall-clock timeline.

    Attributes:
        row: the record.
        start_ms: window start (exclusive), ms on the output timeline.
        end_ms: window end (inclusive) = record time + origin.
        interval_start_ms: start of the output interval the record is assigned to.
        interval_ms: the output interval width.
    """

    row: FioHistRow
    start_ms: int
    end_ms: int
    interval_start_ms: int
    interval_ms: int

    @property
    def interval_end_ms(self) -> int:
        """End of the assigned output interval."""
        return self.interval_start_ms + self.interval_ms


@dataclass
class WindowTracker:
    """Per-file state of the window method: the previous record time of each direction.

    Attributes:
        interval_ms: output interval width (ms).
        origin_ms: added to the log's timestamps to put them on the output timeline (run start
            plus the host's start offset for job-relative logs; the host offset for epoch logs).
        epoch: the log's timestamps are Unix epoch ms.
        prev_ms: last record time per ddir, in log time (resumable: see :meth:`cursor`).
    """

    interval_ms: int
    origin_ms: int
    epoch: bool
    prev_ms: dict[int, int] = field(default_factory=dict)

    def place(self, row: FioHistRow) -> PlacedRow:
        """Place a record; must be called in file order."""
        t = row.time_ms
        prev = self.prev_ms.get(row.ddir, t if self.epoch else 0)
        prev = min(prev, t)
        self.prev_ms[row.ddir] = t
        start, end = prev + self.origin_ms, t + self.origin_ms
        mid2 = start + end  # twice the midpoint: keeps integer arithmetic exact
        k = mid2 // (2 * self.interval_ms)
        return PlacedRow(row, start, end, k * self.interval_ms, self.interval_ms)

    def cursor(self) -> dict[str, object]:
        """JSON-able state to resume after the last placed row."""
        return {
            "origin_ms": self.origin_ms,
            "epoch": self.epoch,
            "prev_ms": {str(k): v for k, v in self.prev_ms.items()},
        }

    @classmethod
    def resume(cls, interval_ms: int, cursor: Mapping[str, object]) -> WindowTracker:
        """Rebuild the tracker from :meth:`cursor`'s output."""
        prev = cursor.get("prev_ms") or {}
        assert isinstance(prev, Mapping)
        origin = cursor["origin_ms"]
        assert isinstance(origin, int)
        return cls(
            interval_ms, origin, bool(cursor["epoch"]), {int(k): int(v) for k, v in prev.items()}
        )


def histogram_stats(
    hist: LatencyHistogram, percentiles: Iterable[float]
) -> dict[str, float | int | None]:
    """``samples, min, mean, max`` and ``pNN`` (``p99_9`` for 99.9) of a histogram, ns."""
    pcts = list(percentiles)
    out: dict[str, float | int | None] = {
        "samples": hist.samples,
        "min": hist.min_ns(),
        "mean": hist.mean_ns(),
        "max": hist.max_ns(),
    }
    for p, v in zip(pcts, hist.quantiles_ns([p / 100 for p in pcts]), strict=True):
        out[percentile_key(p)] = v
    return out


def percentile_key(p: float) -> str:
    """Field name of a percentile: 50 -> ``p50``, 99.9 -> ``p99_9`` (no dots in field names)."""
    text = f"{p:g}".replace(".", "_")
    return f"p{text}"


@dataclass
class IntervalMerger:
    """Sums histograms per (scope, scope value, direction, interval): the merge of seed 000.

    Directions are ``read``, ``write``, ``trim`` and ``mixed`` (all of them). Scopes are
    ``cluster`` (value ``""``), ``host`` (host name) and ``job`` (``host/job``).
    """

    layout: BinLayout
    hists: dict[tuple[str, str, str, int], npt.NDArray[np.int64]] = field(default_factory=dict)
    records: dict[tuple[str, str, str, int], int] = field(default_factory=dict)

    def add(self, placed: PlacedRow, host: str, job: str) -> None:
        """Add one placed record under every scope and under its direction and ``mixed``."""
        r = placed.row
        for scope, value in (("cluster", ""), ("host", host), ("job", f"{host}/{job}")):
            for ddir in (DDIR_NAMES[r.ddir], "mixed"):
                key = (scope, value, ddir, placed.interval_start_ms)
                self.add_sparse(key, r.bin_idx, r.counts)

    def add_sparse(
        self,
        key: tuple[str, str, str, int],
        bin_idx: npt.NDArray[np.int64],
        counts: npt.NDArray[np.int64],
    ) -> None:
        """Add the non-empty bins of one record under ``key``."""
        acc = self.hists.get(key)
        if acc is None:
            acc = self.hists[key] = np.zeros(self.layout.nbins, dtype=np.int64)
        acc[bin_idx] += counts
        self.records[key] = self.records.get(key, 0) + 1

    def histogram(self, key: tuple[str, str, str, int]) -> LatencyHistogram:
        """The merged histogram under ``key``."""
        return LatencyHistogram(self.layout, self.hists[key])
