"""Sampling a queue end for the service-rate estimator: the user thread's counters and the tuning
of the sampling period ``T`` (seed 003 §III, §IV-A; reference B.3 steps 1-4).

A monitor thread takes, once per period, how many items a queue end moved and whether it had
to wait (:class:`QueueEnd`); :class:`PeriodTuner` lengthens ``T`` until enough periods hold
items without waiting, then freezes it so that periods can be sampled.
"""

from __future__ import annotations

from collections import deque

HISTORY = 5
"""Periods of blocking history the period tuner looks at (RaftLib ``NUMFRAMES``)."""


class QueueEnd:
    """Lock-free counters of one thread's use of one end of a queue (seed §III; reference
    B.3 step 1).

    The queue's user (one thread per instance) adds to ``count`` for every item it pops or
    pushes and adds 1 to ``blocked`` whenever it had to wait (queue empty for a reader, full
    for a writer), e.g. around a :class:`queue.Queue`::

        try:
            item = q.get_nowait()
        except queue.Empty:
            end.blocked += 1
            item = q.get()
        end.count += 1

    The monitor thread calls :meth:`take` once per period.

    Why :meth:`take` is atomic under CPython: both fields only ever grow and each has a single
    writer, the user thread, so no increment can be overwritten. The monitor never writes
    them: it reads each (one attribute load of an immutable int, which is never seen half
    updated) and returns the difference from what it read last time, so "zeroing" is the
    monitor moving its own mark. An increment that lands between the two reads is returned by
    the next :meth:`take`; none is lost or counted twice. (Swapping in a fresh counter object
    instead can lose an increment made through a reference the user loaded just before the
    swap.) Several user threads need one instance each; only one thread may call
    :meth:`take`.

    Attributes:
        count: items moved since creation.
        blocked: waits since creation.
    """

    __slots__ = ("_seen_blocked", "_seen_count", "blocked", "count")

    def __init__(self) -> None:
        self.count = 0
        self.blocked = 0
        self._seen_count = 0
        self._seen_blocked = 0

    def take(self) -> tuple[int, bool]:
        """Items moved since the previous call, and whether any wait happened in between."""
        count, blocked = self.count, self.blocked
        moved, waited = count - self._seen_count, blocked != self._seen_blocked
        self._seen_count, self._seen_blocked = count, blocked
        return moved, waited


class PeriodTuner:
    """The sampling period ``T`` and which periods are usable (seed §IV-A; reference B.3
    steps 3-4).

    ``T`` starts at ``t0_s`` and is lengthened (i) on the third period since the last change
    whose realised length missed ``T`` by more than ``miss_tol`` (the clock cannot keep
    ``T``), or (ii) while fewer than ``min_blocked`` of the last ``HISTORY`` periods at this
    ``T`` were blocked (longer periods hold more items, so each sample is less noisy, as long
    as enough of them stay clean). Each lengthening sets ``T`` to
    ``min(cap_s, max(T + t0_s, growth * T))``: ``growth=1`` is RaftLib's step of one clock
    resolution; the default doubling reaches a 20x cap in 5 steps instead of 20, which matters
    because the period is tuned again after every report. ``T`` is frozen after
    ``freeze_after`` periods without growth, or when it reaches the cap; only frozen periods
    are sampled.

    Args:
        t0_s: first period and smallest step, s (the clock's resolution in RaftLib).
        cap_s: longest period, s.
        growth: factor of each lengthening (>= 1).
        miss_tol: relative miss of the realised period that counts towards (i); RaftLib's
            0.005 suits a busy-waiting monitor, a sleeping Python thread misses it often
            (reference B.7) and will see ``T`` grow to the cap.
        band: a frozen-period sample is usable only if its realised length is within
            ``T * (1 +- band)`` (RaftLib 0.01; wider here since rates divide by the realised
            length, reference B.7).
        min_blocked: lengthen while fewer than this many of the last ``HISTORY`` periods
            were blocked (2).
        freeze_after: periods without growth before ``T`` is frozen.

    Attributes:
        period_s: the current ``T``, s.
        frozen: whether ``T`` is tuned (periods are then sampled, not used for tuning).

    Raises:
        ValueError: ``t0_s <= 0``, ``cap_s < t0_s``, ``growth < 1``, a negative ``miss_tol``
            or ``band``, ``freeze_after < 1``.
    """

    def __init__(
        self,
        *,
        t0_s: float,
        cap_s: float,
        growth: float = 2.0,
        miss_tol: float = 0.005,
        band: float = 0.05,
        min_blocked: int = 2,
        freeze_after: int = 10,
    ) -> None:
        if not 0 < t0_s <= cap_s or growth < 1:
            raise ValueError(f"need 0 < t0_s <= cap_s, growth >= 1: {t0_s}, {cap_s}, {growth}")
        if miss_tol < 0 or band < 0 or freeze_after < 1:
            raise ValueError(f"bad miss_tol {miss_tol}, band {band} or freeze_after {freeze_after}")
        self.t0_s, self.cap_s, self.growth = t0_s, cap_s, growth
        self.miss_tol, self.band = miss_tol, band
        self.min_blocked, self.freeze_after = min_blocked, freeze_after
        self._history: deque[bool] = deque(maxlen=HISTORY)
        self.restart()

    def restart(self) -> None:
        """Tune again from ``t0_s`` (frozen at once when ``t0_s == cap_s``)."""
        self.period_s = self.t0_s
        self.frozen = self.period_s >= self.cap_s
        self._misses = 0
        self._quiet = 0
        self._history.clear()

    def in_band(self, realised_s: float) -> bool:
        """Whether a period that lasted ``realised_s`` is close enough to ``T`` to use."""
        return abs(realised_s - self.period_s) <= self.band * self.period_s

    def observe(self, realised_s: float, blocked: bool) -> None:
        """Account one period of the tuning phase (nothing once frozen)."""
        if self.frozen:
            return
        self._quiet += 1
        self._history.append(blocked)
        if abs(realised_s - self.period_s) > self.miss_tol * self.period_s:
            self._misses += 1
        rare = len(self._history) == HISTORY and sum(self._history) < self.min_blocked
        if self._misses >= 3 or rare:
            longer = max(self.period_s + self.t0_s, self.period_s * self.growth)
            self.period_s = min(longer, self.cap_s)
            self._misses = 0
            self._quiet = 0
            self._history.clear()
        if self.period_s >= self.cap_s or self._quiet >= self.freeze_after:
            self.frozen = True
