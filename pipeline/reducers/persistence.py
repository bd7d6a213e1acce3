"""Persistence ordering of anomalous LUNs (seed 001 §4.3, Figure 5).

Each LUN has an accumulator that gains 1 for every window in which the LUN is anomalous and
loses 1 (only while it is above 0) for every window in which it is not. After ``A`` consecutive
anomalous windows the value is ``A``; it takes ``A`` clean windows to return to 0
(reference/sysstat.md §3.3). LUNs are ranked by decreasing value, ties by name. A LUN is named
``group:lun`` as in Figure 5's ``PG:LUN-server`` column.

The hourly report gives the accumulator values at the end of each UTC hour. A window belongs to
the hour containing its ``end_s`` under the sysstat convention that a time stamps an interval
*end*: hour ``h`` holds windows with ``h*3600 < end_s <= (h+1)*3600``. Figure 5's row format::

    20110417.00: 7 2:18.61.102 6 2:15.65.74 5 2:11.55.48 5 2:12.48.49
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pipeline.reducers.peer_flags import WindowResult

HOUR_S = 3600


def qualified_name(group: str, lun: str) -> str:
    """``group:lun``, the name used in rankings (Figure 5's ``PG:LUN``)."""
    return f"{group}:{lun}"


@dataclass
class Persistence:
    """Persistence accumulators of one metric over any number of peer groups.

    Attributes:
        metric: the metric whose window results are accumulated (set by the first update when
            None).
        values: accumulator per qualified LUN name, never negative.
    """

    metric: str | None = None
    values: dict[str, int] = field(default_factory=dict)

    def update(self, result: WindowResult) -> None:
        """Apply one window: +1 for each anomalous LUN, -1 (floored at 0) for the others
        compared; a LUN the window skipped (a gap in its data) keeps its value.

        Windows of one group must come in time order.

        Raises:
            ValueError: the result is for another metric.
        """
        if self.metric is None:
            self.metric = result.metric
        elif result.metric != self.metric:
            raise ValueError(
                f"persistence of metric {self.metric!r} got a window of {result.metric!r}"
            )
        bad, skipped = set(result.anomalous), set(result.skipped)
        for lun in result.luns:
            if lun in skipped:
                continue
            name = qualified_name(result.group, lun)
            v = self.values.get(name, 0)
            self.values[name] = v + 1 if lun in bad else max(0, v - 1)

    def ranking(self, top_n: int | None = None) -> list[tuple[str, int]]:
        """``(group:lun, value)`` of the LUNs with a positive value, by decreasing value then name.

        Args:
            top_n: keep the first ``top_n`` (all when None).

        Raises:
            ValueError: ``top_n`` < 0.
        """
        if top_n is not None and top_n < 0:
            raise ValueError(f"top_n must be >= 0, got {top_n}")
        ranked = sorted(((n, v) for n, v in self.values.items() if v > 0), key=_rank_key)
        return ranked if top_n is None else ranked[:top_n]


def _rank_key(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


@dataclass(frozen=True)
class HourRow:
    """One row of the hourly report.

    Attributes:
        hour_start_s: start of the UTC hour, Unix s (a multiple of 3600).
        ranking: ``(group:lun, value)`` at the end of the hour, as :meth:`Persistence.ranking`.
    """

    hour_start_s: int
    ranking: tuple[tuple[str, int], ...]

    def format(self) -> str:
        """Figure 5's text: ``YYYYMMDD.HH: value group:lun value group:lun ...``."""
        stamp = datetime.fromtimestamp(self.hour_start_s, tz=UTC).strftime("%Y%m%d.%H")
        cells = " ".join(f"{v} {name}" for name, v in self.ranking)
        return f"{stamp}: {cells}".rstrip()


def hour_of(end_s: float) -> int:
    """Start (Unix s) of the UTC hour a window ending at ``end_s`` belongs to."""
    return (math.ceil(end_s / HOUR_S) - 1) * HOUR_S


def hourly_rows(results: Iterable[WindowResult], top_n: int | None = None) -> Iterator[HourRow]:
    """Accumulator rankings at the end of each UTC hour of a stream of window results.

    Every hour from that of the first window to that of the last is reported, hours without
    windows repeating the previous values; the last row is the state after the last window
    (its hour may be incomplete). Results must be in time order within each group; groups may
    interleave.

    Args:
        results: window results of one metric.
        top_n: LUNs per row (all positive ones when None).

    Raises:
        ValueError: results of different metrics, or a window earlier than an hour already
            reported.
    """
    acc = Persistence()
    current: int | None = None
    for r in results:
        h = hour_of(r.end_s)
        if current is None:
            current = h
        if h < current:
            raise ValueError(f"window ending at {r.end_s} arrived after hour {current} closed")
        while current < h:
            yield HourRow(current, tuple(acc.ranking(top_n)))
            current += HOUR_S
        acc.update(r)
    if current is not None:
        yield HourRow(current, tuple(acc.ranking(top_n)))
