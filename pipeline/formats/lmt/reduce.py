"""Per-OST intervals from LMT's cumulative counters: deltas, counter resets, gaps.

LMT records, every timestep (5 s at NERSC), each OST's bytes read and written since its
server started (pytokio ``connectors/lmtdb.py``; pytokio's archiver ``archive_lmtdb.py`` also
stores per-step deltas of them). Two consecutive samples ``prev`` and ``cur`` of one OST give
the interval ``[prev.ts_s, cur.ts_s)`` with

* ``read_bytes = cur.read_bytes - prev.read_bytes`` (and the same for writes), normally;
* after a reboot (either counter went down: the server started counting from 0 again),
  ``read_bytes = cur.read_bytes`` and ``write_bytes = cur.write_bytes``, flagged ``reset``.
  What was transferred between the last sample before the reboot and the reboot is lost, so
  this is a lower bound;
* when the interval is longer than ``max_gap_s`` (samples missing), the bytes are still the
  delta, i.e. the traffic of the whole gap, flagged ``gap``; the rates are averages over it.

The first sample of an OST only primes its state. A sample not later than the OST's last one
(a duplicate or out-of-order row) is skipped, logged and counted in
:attr:`OstDeltaReducer.skipped`; :meth:`OstDeltaReducer.refusal` says beforehand why a sample
would be skipped, so that a shipper can keep the row in the dead-letter area. An exact repeat
of an OST's last sample (overlapping exports appended to one file) carries nothing new and is
not refused. The state (last sample per OST) is a small JSON-able dict, so
a tailing shipper can persist it with its file offset and resume (:meth:`OstDeltaReducer.state`,
:meth:`OstDeltaReducer.from_state`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.formats.lmt.decode import LmtSample, split_ost_name
from pipeline.parsers.limits import utc_text
from pipeline.records.json import JsonObject

log = logging.getLogger(__name__)

DEFAULT_MAX_GAP_S = 60.0
"""An interval longer than this is flagged ``gap`` (12 missing 5-s LMT timesteps)."""
STATE_VERSION = 1


@dataclass(frozen=True)
class OstInterval:
    """Traffic of one OST over one interval between two LMT samples.

    Attributes:
        ost_name, fs, ost_index: the OST (``snx11168-OST00ad``, ``snx11168``, 173: the Lustre
            index, as in Darshan's ``LUSTRE_OST_IDS``).
        start_s, end_s: the interval ``[start_s, end_s)``, Unix seconds: the times of the two
            samples.
        read_bytes, write_bytes: bytes read / written in it (>= 0; see the module doc for
            resets and gaps).
        read_bytes_per_s, write_bytes_per_s: those bytes / ``(end_s - start_s)``.
        reset: a counter went down (server restart); the bytes are counted from 0.
        gap: ``end_s - start_s > max_gap_s``: samples are missing inside the interval.
        pct_cpu: the server CPU % recorded with the sample that ends the interval (None when
            not exported).
    """

    ost_name: str
    fs: str
    ost_index: int
    start_s: float
    end_s: float
    read_bytes: int
    write_bytes: int
    read_bytes_per_s: float
    write_bytes_per_s: float
    reset: bool
    gap: bool
    pct_cpu: float | None

    @property
    def interval_s(self) -> float:
        """Length of the interval, seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class _Last:
    ts_s: float
    read_bytes: int
    write_bytes: int


class OstDeltaReducer:
    """Turns a stream of :class:`~pipeline.formats.lmt.decode.LmtSample` into :class:`OstInterval`.

    Samples of different OSTs may interleave (the export is ordered by time, then OST); each
    OST's samples must come in time order (others are skipped and counted).

    Args:
        max_gap_s: intervals longer than this are flagged ``gap`` (seconds, > 0).

    Raises:
        ValueError: ``max_gap_s`` is not a finite number > 0.
    """

    def __init__(self, max_gap_s: float = DEFAULT_MAX_GAP_S) -> None:
        if not (math.isfinite(max_gap_s) and max_gap_s > 0):
            raise ValueError(f"max_gap_s must be a finite number > 0, got {max_gap_s!r}")
        self.max_gap_s = max_gap_s
        self._last: dict[str, _Last] = {}
        self.skipped: dict[str, int] = {"duplicate": 0, "out_of_order": 0}
        """Samples skipped since construction, by reason (not part of :meth:`state`)."""

    def refusal(self, sample: LmtSample) -> str | None:
        """Why :meth:`add` would skip ``sample``, or None when it takes it.

        A sample earlier than its OST's last one (out of order: a clock step back or rows of
        an older export), or at the same time with other counters, is refused with a reason
        naming the OST and both times. An exact repeat of the last sample is not refused: it
        is skipped as a duplicate that carries nothing new.
        """
        prev = self._last.get(sample.ost_name)
        if prev is None or sample.ts_s > prev.ts_s:
            return None
        if sample.ts_s == prev.ts_s:
            if (sample.read_bytes, sample.write_bytes) == (prev.read_bytes, prev.write_bytes):
                return None
            return (
                f"{sample.ost_name} sampled twice at {utc_text(sample.ts_s)} with other counters "
                f"(read {sample.read_bytes} / write {sample.write_bytes} bytes, first "
                f"{prev.read_bytes} / {prev.write_bytes}): the first one is kept"
            )
        return (
            f"{sample.ost_name} sample at {utc_text(sample.ts_s)} is out of order: the OST's last "
            f"sample is at {utc_text(prev.ts_s)} (a clock step back, or an older export's rows?)"
        )

    def add(self, sample: LmtSample) -> OstInterval | None:
        """Take one sample; return the interval it closes, or None (first sample of its OST,
        or a skipped duplicate / out-of-order sample)."""
        prev = self._last.get(sample.ost_name)
        if prev is not None and sample.ts_s <= prev.ts_s:
            reason = "duplicate" if sample.ts_s == prev.ts_s else "out_of_order"
            self.skipped[reason] += 1
            log.warning(
                "LMT %s sample of %s at %s skipped: the last one is at %s",
                reason,
                sample.ost_name,
                sample.ts_s,
                prev.ts_s,
            )
            return None
        self._last[sample.ost_name] = _Last(sample.ts_s, sample.read_bytes, sample.write_bytes)
        if prev is None:
            return None
        return self._interval(prev, sample)

    def _interval(self, prev: _Last, sample: LmtSample) -> OstInterval:
        """The interval from ``prev`` to ``sample`` of one OST: byte deltas (the counters
        themselves after a reset, when either went down), rates, and whether it is a gap."""
        reset = sample.read_bytes < prev.read_bytes or sample.write_bytes < prev.write_bytes
        read = sample.read_bytes if reset else sample.read_bytes - prev.read_bytes
        write = sample.write_bytes if reset else sample.write_bytes - prev.write_bytes
        span = sample.ts_s - prev.ts_s
        return OstInterval(
            ost_name=sample.ost_name,
            fs=sample.fs,
            ost_index=sample.ost_index,
            start_s=prev.ts_s,
            end_s=sample.ts_s,
            read_bytes=read,
            write_bytes=write,
            read_bytes_per_s=read / span,
            write_bytes_per_s=write / span,
            reset=reset,
            gap=span > self.max_gap_s,
            pct_cpu=sample.pct_cpu,
        )

    def feed(self, samples: Iterable[LmtSample]) -> Iterator[OstInterval]:
        """:meth:`add` each sample, yielding the intervals they close, in input order."""
        for sample in samples:
            interval = self.add(sample)
            if interval is not None:
                yield interval

    def state(self) -> JsonObject:
        """The reducer's state as JSON-able data: the last sample of each OST.

        Shape: ``{"version": 1, "osts": {name: {"ts_s": float, "read_bytes": int,
        "write_bytes": int}}}``. Persist it with the input offset it corresponds to.
        """
        return {
            "version": STATE_VERSION,
            "osts": {
                name: {"ts_s": s.ts_s, "read_bytes": s.read_bytes, "write_bytes": s.write_bytes}
                for name, s in sorted(self._last.items())
            },
        }

    @classmethod
    def from_state(
        cls, state: Mapping[str, object], max_gap_s: float = DEFAULT_MAX_GAP_S
    ) -> OstDeltaReducer:
        """A reducer that continues where the one whose :meth:`state` this is stopped.

        Raises:
            ValueError: ``state`` is not what :meth:`state` returns (wrong version, an OST
                name that is not ``<fsname>-OST<hex>``, a non-numeric or negative value).
        """
        if state.get("version") != STATE_VERSION:
            raise ValueError(
                f"LMT reducer state version {state.get('version')!r}, expected {STATE_VERSION}"
            )
        osts = state.get("osts")
        if not isinstance(osts, Mapping):
            raise ValueError("LMT reducer state without an 'osts' object")
        reducer = cls(max_gap_s)
        for name, last in osts.items():
            reducer._last[name] = _last_of_state(name, last)
        return reducer


def _last_of_state(name: str, last: Any) -> _Last:
    """One OST's entry of a saved state.

    Raises:
        ValueError: ``name`` is not ``<fsname>-OST<hex>``, or ``last`` is not ``{ts_s,
            read_bytes, write_bytes}`` with a finite time and counts >= 0.
    """
    split_ost_name(name)
    try:
        ts, read, write = last["ts_s"], last["read_bytes"], last["write_bytes"]
    except (KeyError, TypeError):
        raise ValueError(
            f"LMT reducer state of {name}: not {{ts_s, read_bytes, write_bytes}}: {last!r}"
        ) from None
    numbers_ok = (
        isinstance(ts, int | float)
        and not isinstance(ts, bool)
        and math.isfinite(ts)
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (read, write))
    )
    if not numbers_ok:
        raise ValueError(f"LMT reducer state of {name}: bad values {last!r}")
    return _Last(float(ts), read, write)
