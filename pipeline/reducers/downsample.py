"""Exact downsampling of sysstat disk samples (e.g. 1 s -> 15 s) by cumulative sums.

Every ``sar -d`` metric is a ratio of increments of kernel counters over the interval
(reference/sysstat.md 1.3), so a coarser sample is what sadc would have printed for the longer
interval when we (1) turn each sample's rates back into the increments, (2) sum them over the
target interval and (3) apply sysstat's formulas to the sums (seed 001 "Downsampling": "compute
the metric's cumulative sum, then sample it at a different rate ... equivalent to running sadc
with a larger sampling interval"; reference/sysstat.md 5.1). For samples i of length Δtᵢ::

    T = Σ Δtᵢ                     N = Σ tpsᵢ·Δtᵢ                       (completed I/Os)
    tps = N / T                   rkB/s = Σ rkB/sᵢ·Δtᵢ / T  (wkB/s, dkB/s alike)
    aqu-sz = Σ aqu-szᵢ·Δtᵢ / T    %util = Σ %utilᵢ·Δtᵢ / T             (time-weighted)
    await = Σ awaitᵢ·Nᵢ / N       areq-sz = Σ areq-szᵢ·Nᵢ / N          (I/O-weighted; 0 if N = 0)

Averaging await over time instead is wrong by up to 24 ms on real data (reference/sysstat.md
5.2). Δtᵢ is the sample's ``interval_s`` (sadf's interval column), not the difference of the
whole-second labels, which skip a second now and then as sadc drifts (5.2, 5.3 item 4).

Target intervals end on a grid: ``offset_s + k·interval_s`` Unix seconds (the UTC epoch grid for
``offset_s = 0``), and a source sample belongs to the target interval ``(end - interval_s, end]``
that contains its own end (it is never split, so the target interval should be a multiple of
the source interval). Output samples end on the grid and carry ``interval_s`` = the seconds of
data they really hold, which is less than the target for a partial interval.

Restarts and gaps: no output sample combines data from both sides of a ``LINUX-RESTART`` or of
a gap (more than ``max_gap_intervals`` source intervals missing between two samples of a
device). The target interval in progress is then emitted early as a partial sample whose
``end_s`` is the end of its last source sample (off the grid, so that
``(end_s - interval_s, end_s]`` is still the time it covers and its end differs from the grid end
of the samples after the interruption); the next sample starts a new partial interval. The same
happens at :meth:`Downsampler.flush` and when a device stops being reported. Nothing is dropped:
filter on ``interval_s`` downstream to keep only full intervals. A clock stepping back is treated
like a restart.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from pipeline.records.core import DiskSample, RestartMark

DEFAULT_INTERVAL_S = 15.0
"""Seed 001: each storage metric is downsampled to 15 s."""

DEFAULT_MAX_GAP_INTERVALS = 2.0
"""Missing time, in source intervals, above which two samples are not averaged together."""


@dataclass(frozen=True)
class DiskAmounts:
    """The counter increments behind one or more disk samples: additive, so they merge by sum.

    Attributes:
        seconds: covered time T, s.
        ios: completed I/Os N (reads + writes + discards).
        read_kb: kB read.
        write_kb: kB written.
        discard_kb: kB discarded.
        request_kb: kB of the completed I/Os by ``areq-sz``, Σ areq-sz·N.
        wait_ms: total time the completed I/Os waited, Σ await·N, ms (Δ of the ticks counters).
        queue_s: time integral of the queue length, Σ aqu-sz·Δt, s (Δ rq_ticks).
        busy_s: time the device was busy, Σ %util/100·Δt, s (Δ io_ticks).
    """

    seconds: float = 0.0
    ios: float = 0.0
    read_kb: float = 0.0
    write_kb: float = 0.0
    discard_kb: float = 0.0
    request_kb: float = 0.0
    wait_ms: float = 0.0
    queue_s: float = 0.0
    busy_s: float = 0.0

    @classmethod
    def of(cls, s: DiskSample) -> DiskAmounts:
        """The increments of one sample: each rate times ``s.interval_s`` (reference 5.1)."""
        dt = s.interval_s
        ios = s.tps * dt
        return cls(
            seconds=dt,
            ios=ios,
            read_kb=s.read_kb_per_s * dt,
            write_kb=s.write_kb_per_s * dt,
            discard_kb=s.discard_kb_per_s * dt,
            request_kb=s.areq_sz_kb * ios,
            wait_ms=s.await_ms * ios,
            queue_s=s.aqu_sz * dt,
            busy_s=s.util_pct / 100.0 * dt,
        )

    def merge(self, other: DiskAmounts) -> DiskAmounts:
        """Field-wise sum (associative and commutative up to float rounding)."""
        return DiskAmounts(
            seconds=self.seconds + other.seconds,
            ios=self.ios + other.ios,
            read_kb=self.read_kb + other.read_kb,
            write_kb=self.write_kb + other.write_kb,
            discard_kb=self.discard_kb + other.discard_kb,
            request_kb=self.request_kb + other.request_kb,
            wait_ms=self.wait_ms + other.wait_ms,
            queue_s=self.queue_s + other.queue_s,
            busy_s=self.busy_s + other.busy_s,
        )

    def sample(self, host: str, device: str, end_s: float) -> DiskSample:
        """sysstat's formulas applied to the sums: the sample over ``(end_s - seconds, end_s]``.

        await and areq-sz are 0 when no I/O completed, as sysstat prints them.

        Raises:
            ValueError: no covered time (``seconds <= 0``).
        """
        t = self.seconds
        if t <= 0:
            raise ValueError(f"no covered time ({t} s) for {host}/{device} at {end_s}")
        n = self.ios
        return DiskSample(
            host=host,
            device=device,
            end_s=end_s,
            interval_s=t,
            tps=n / t,
            read_kb_per_s=self.read_kb / t,
            write_kb_per_s=self.write_kb / t,
            discard_kb_per_s=self.discard_kb / t,
            areq_sz_kb=self.request_kb / n if n > 0 else 0.0,
            aqu_sz=self.queue_s / t,
            await_ms=self.wait_ms / n if n > 0 else 0.0,
            util_pct=100.0 * self.busy_s / t,
        )


@dataclass
class _Open:
    """A target interval in progress for one host x device."""

    grid_end: float
    last_end: float
    last_interval_s: float
    amounts: DiskAmounts


class Downsampler:
    """Streaming downsampler: feed samples in time order per host, get finished coarse samples.

    State is one open target interval per host x device; samples of different hosts may be
    interleaved. See the module docstring for the formulas, the grid and the handling of
    restarts and gaps.

    Args:
        interval_s: target interval, s (> 0).
        offset_s: the grid's phase: target intervals end at ``offset_s + k·interval_s``.
        max_gap_intervals: more missing time than this many source intervals between two
            samples of a device is a gap (a skipped whole-second label, 1 s missing at 1 s, is
            not).

    Raises:
        ValueError: ``interval_s <= 0`` or ``max_gap_intervals < 0``.
    """

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        offset_s: float = 0.0,
        max_gap_intervals: float = DEFAULT_MAX_GAP_INTERVALS,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        if not max_gap_intervals >= 0:
            raise ValueError(f"max_gap_intervals must be >= 0, got {max_gap_intervals}")
        self.interval_s = float(interval_s)
        self.offset_s = float(offset_s)
        self.max_gap_intervals = float(max_gap_intervals)
        self._open: dict[str, dict[str, _Open]] = {}
        self._host_end: dict[str, float] = {}

    def grid_end(self, end_s: float) -> float:
        """End of the target interval ``(g - interval_s, g]`` that contains ``end_s``."""
        k = math.ceil((end_s - self.offset_s) / self.interval_s)
        return self.offset_s + k * self.interval_s

    def add(self, record: DiskSample | RestartMark) -> list[DiskSample]:
        """Take one sample or restart mark; return the target intervals it finished.

        A sample longer than the target interval cannot be refined: it is returned unchanged
        (after the device's open interval, which it closes).
        """
        if isinstance(record, RestartMark):
            return self._close_host(record.host)
        s = record
        out = self._sweep_host(s)
        streams = self._open.setdefault(s.host, {})
        cur = streams.get(s.device)
        if s.interval_s > self.interval_s:
            if cur is not None:
                out.append(self._close(s.host, s.device, early=True))
            out.append(s)
            return out
        g = self.grid_end(s.end_s)
        if cur is not None and (early := self._interrupted(cur, s, g)) is not None:
            out.append(self._close(s.host, s.device, early=early))
            cur = None
        amounts = DiskAmounts.of(s)
        if cur is None:
            streams[s.device] = _Open(g, s.end_s, s.interval_s, amounts)
        else:
            cur.last_end, cur.last_interval_s = s.end_s, s.interval_s
            cur.amounts = cur.amounts.merge(amounts)
        return out

    def _interrupted(self, cur: _Open, s: DiskSample, g: float) -> bool | None:
        """How sample ``s`` (of target interval ``g``) ends the open interval ``cur``: True
        early (a gap, or the clock went back), False on the grid (a new target interval), None
        not at all."""
        missing_s = (s.end_s - s.interval_s) - cur.last_end
        if s.end_s < cur.last_end or missing_s > self.max_gap_intervals * s.interval_s:
            return True
        if g > cur.grid_end:
            return False
        return None

    def flush_complete(self) -> list[DiskSample]:
        """Emit the open target intervals no later sample can add to: those whose last sample
        ends at the interval's grid end. The device's next sample would close each on the grid
        (a later one starts a new interval; one that overlaps is refused upstream), so this gives
        the sample it would give, whenever the input ends. Others stay open."""
        out = []
        for host, streams in self._open.items():
            for device, cur in list(streams.items()):
                if abs(cur.last_end - cur.grid_end) <= 1e-9:
                    out.append(self._close(host, device, early=False))
        return out

    def flush(self) -> list[DiskSample]:
        """Emit every open target interval (partial ones end at their last sample's end)."""
        return [out for host in list(self._open) for out in self._close_host(host)]

    def _close(self, host: str, device: str, *, early: bool) -> DiskSample:
        cur = self._open[host].pop(device)
        end_s = cur.last_end if early else cur.grid_end
        return cur.amounts.sample(host, device, end_s)

    def _close_host(self, host: str) -> list[DiskSample]:
        self._host_end.pop(host, None)
        return [self._close(host, device, early=True) for device in list(self._open.get(host, {}))]

    def _sweep_host(self, s: DiskSample) -> list[DiskSample]:
        """Close the intervals of the host's devices that stopped being reported.

        Runs once per new timestamp of the host: a device whose last sample ended more than
        ``max_gap_intervals`` of its intervals before this sample started has a gap.
        """
        if s.end_s <= self._host_end.get(s.host, -math.inf):
            return []
        self._host_end[s.host] = s.end_s
        start = s.end_s - s.interval_s
        return [
            self._close(s.host, device, early=True)
            for device, cur in list(self._open.get(s.host, {}).items())
            if start - cur.last_end > self.max_gap_intervals * cur.last_interval_s
        ]


def downsample(
    records: Iterable[DiskSample | RestartMark],
    interval_s: float = DEFAULT_INTERVAL_S,
    *,
    offset_s: float = 0.0,
    max_gap_intervals: float = DEFAULT_MAX_GAP_INTERVALS,
) -> list[DiskSample]:
    """Downsample a whole series (see :class:`Downsampler`), flushing at the end.

    Returns:
        The coarse samples in the order they were finished (per host x device, in time order).
    """
    ds = Downsampler(interval_s, offset_s=offset_s, max_gap_intervals=max_gap_intervals)
    out: list[DiskSample] = []
    for record in records:
        out.extend(ds.add(record))
    out.extend(ds.flush())
    return out
