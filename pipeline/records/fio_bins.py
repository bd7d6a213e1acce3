"""fio's latency bucket layout: bin index -> latency, for every layout fio has written.

fio keeps ``FIO_IO_U_PLAT_GROUP_NR x 64`` buckets (``stat.h``): groups 0 and 1 hold the exact
values 0..127; group g >= 2 holds ``[2^(g+5), 2^(g+6))`` split into 64 buckets of width
``2^(g-1)``. fio >= 2.99 has 29 groups (1856 bins, ns); fio 2.14 to < 2.99 had 19 groups
(1216 bins, us). ``log_hist_coarseness=c`` sums runs of ``2^c`` fine buckets, so a log has
``G*64 / 2^c`` bins per record (reference/fio.md sections 1.3-1.4).

Three value rules are provided:

* exact bucket edges (``edges_ns``) for our own percentiles (interpolation inside a bucket);
* fio's ``plat_idx_to_val`` midpoint (``midpoints_ns``), the representative used in the
  ``histogram`` field (the value fio itself reports in json+ ``bins``);
* ``fiologparser_hist.py``'s bin values (``flp_bin_values``), which overshoot by one fine bucket
  (its ``plat_idx_to_val_coarse`` quirk) and must be reproduced for byte-identical output.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS  # 64 buckets per group
GROUP_NR_NS = 29  # fio >= 2.99: 1856 bins, ns
GROUP_NR_US = 19  # fio 2.14 .. < 2.99: 1216 bins, us
MAX_COARSENESS = 6  # fio's accepted range 0..6 (validated from fio-3.42 on)

Unit = Literal["ns", "us"]


def fine_lower_edge(idx: int) -> int:
    """Lower edge of fine bucket ``idx`` in the log's unit (fio ``stat.c`` ``plat_idx_to_val``).

    Buckets below 128 hold exactly one integer value; above, bucket k of group g starts at
    ``2^(g+5) + k * 2^(g-1)``.
    """
    if idx < (PLAT_VAL << 1):
        return idx
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    return base + (idx % PLAT_VAL) * (1 << error_bits)


def fine_width(idx: int) -> int:
    """Width of fine bucket ``idx`` (1 below index 128)."""
    if idx < (PLAT_VAL << 1):
        return 1
    return 1 << ((idx >> PLAT_BITS) - 1)


def plat_val_to_idx(value: int, group_nr: int = GROUP_NR_NS) -> int:
    """Fine bucket of a latency value (fio ``stat.c`` ``plat_val_to_idx``), clamped to the last.

    Raises:
        ValueError: a negative value.
    """
    if value < 0:
        raise ValueError(f"latency must be >= 0, got {value}")
    msb = value.bit_length() - 1 if value else 0
    if msb <= PLAT_BITS:
        return min(value, group_nr * PLAT_VAL - 1)
    error_bits = msb - PLAT_BITS
    idx = ((error_bits + 1) << PLAT_BITS) + ((PLAT_VAL - 1) & (value >> error_bits))
    return min(idx, group_nr * PLAT_VAL - 1)


def fio_midpoint(idx: int) -> int:
    """fio's own representative value of fine bucket ``idx``: ``plat_idx_to_val`` (truncated mean).

    This is the key fio prints in json+ ``"bins"`` and the value its percentiles report.
    """
    if idx < (PLAT_VAL << 1):
        return idx
    return fine_lower_edge(idx) + fine_width(idx) // 2


def _flp_plat(idx: int, edge: float) -> float:
    # fiologparser_hist.py _plat_idx_to_val: same arithmetic, float result for edge > 0.
    if idx < (PLAT_VAL << 1):
        return idx
    error_bits = (idx >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = idx % PLAT_VAL
    return base + ((k + edge) * (1 << error_bits))


@dataclass(frozen=True)
class BinLayout:
    """The bins of one histogram log: group count, coarseness and unit.

    Attributes:
        group_nr: ``FIO_IO_U_PLAT_GROUP_NR`` of the fio that wrote the log (29 or 19).
        coarseness: ``log_hist_coarseness`` (0..6 in practice; fiologparser accepts up to 8).
        unit: ``"ns"`` (fio >= 2.99) or ``"us"`` (fio < 2.99).
    """

    group_nr: int
    coarseness: int
    unit: Unit

    @property
    def fine_bins(self) -> int:
        """Number of fine buckets (``group_nr * 64``)."""
        return self.group_nr * PLAT_VAL

    @property
    def stride(self) -> int:
        """Fine buckets summed into one logged bin (``2^coarseness``)."""
        return 1 << self.coarseness

    @property
    def nbins(self) -> int:
        """Bins per record in the log."""
        return self.fine_bins // self.stride

    @property
    def unit_ns(self) -> int:
        """Nanoseconds per unit of the log's bin values."""
        return 1 if self.unit == "ns" else 1000

    @cached_property
    def edges_ns(self) -> npt.NDArray[np.float64]:
        """Exact bucket edges in ns, shape ``(nbins + 1,)``: bin i covers ``[e[i], e[i+1])``."""
        s = self.stride
        lo = [fine_lower_edge(i * s) for i in range(self.nbins)]
        last = self.nbins * s - 1
        hi = fine_lower_edge(last) + fine_width(last)
        return np.array([*lo, hi], dtype=np.float64) * self.unit_ns

    @cached_property
    def midpoints_ns(self) -> npt.NDArray[np.float64]:
        """Representative value of each bin in ns, shape ``(nbins,)``, strictly increasing.

        At coarseness 0 this is fio's ``plat_idx_to_val`` (its json+ bin keys); for a coarse bin
        it is the midpoint of the exact range the bin covers (integer ns, truncated).
        """
        if self.coarseness == 0:
            vals = [fio_midpoint(i) for i in range(self.nbins)]
        else:
            e = self.edges_ns / self.unit_ns
            vals = [int(e[i] + (e[i + 1] - e[i]) // 2) for i in range(self.nbins)]
        return np.array(vals, dtype=np.float64) * self.unit_ns

    def flp_bin_values(self, edge: float) -> npt.NDArray[np.float64]:
        """``fiologparser_hist.py``'s ``plat_idx_to_val_coarse`` for every bin, in the log's unit.

        ``edge`` 0.0 gives its lower edges, 0.5 its bin values, 1.0 its upper edges; the upper
        end is taken from fine bucket ``x*stride + stride`` (one past the bin), exactly as the
        script does (reference/fio.md section 2.1).
        """
        s = self.stride
        out = []
        for x in range(self.nbins):
            lower = _flp_plat(x * s, 0.0)
            upper = _flp_plat(x * s + s, 1.0)
            out.append(lower + (upper - lower) * edge)
        return np.array(out, dtype=np.float64)


def layout_for_bins(
    nbins: int,
    *,
    unit: Literal["auto", "ns", "us"] = "auto",
    group_nr: int | None = None,
    max_coarseness: int = MAX_COARSENESS,
) -> BinLayout:
    """Detect the bin layout from the number of bins per record.

    ``auto`` accepts ``1856 / 2^c`` (ns, fio >= 2.99) for c = 0..6; a 1216-bin family log is
    only accepted when told (``unit="us"`` or ``group_nr=19``), because 1216/2^c collides with
    nothing fio >= 2.99 writes but the unit cannot be seen in the file (reference/fio.md 1.3).
    ``max_coarseness`` is fio's 6; fiologparser_hist.py accepts up to 8.

    Raises:
        ValueError: no layout has that many bins; the message lists what would be accepted.
    """
    if group_nr is None:
        group_nr = GROUP_NR_US if unit == "us" else GROUP_NR_NS
    resolved: Unit = unit if unit != "auto" else ("us" if group_nr < GROUP_NR_NS else "ns")
    fine = group_nr * PLAT_VAL
    accepted = [fine >> c for c in range(max_coarseness + 1) if fine % (1 << c) == 0]
    for c in range(max_coarseness + 1):
        if fine % (1 << c) == 0 and fine >> c == nbins:
            return BinLayout(group_nr=group_nr, coarseness=c, unit=resolved)
    hint = _us_layout_hint(nbins, group_nr)
    raise ValueError(
        f"{nbins} histogram bins per record match no fio layout with {group_nr} groups; "
        f"expected one of {accepted}{hint}"
    )


def _us_layout_hint(nbins: int, group_nr: int) -> str:
    """A hint when ``nbins`` is the microsecond layout of fio < 2.99; empty otherwise."""
    if group_nr != GROUP_NR_US and nbins in [(GROUP_NR_US * PLAT_VAL) >> c for c in range(7)]:
        return (
            " (the 1216-bin layout of fio < 2.99: set fio.bins: us, or pass --group_nr 19 --usbin)"
        )
    return ""
