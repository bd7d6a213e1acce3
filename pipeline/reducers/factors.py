"""IOMiner's five contributing factors of poor I/O bandwidth, per file and per job.

Seed 004, section II-D: Small, Non-consec, Coll, OST# and Proc/OST. Per-file values are
computed from one file's counters in one direction (``read``, ``write`` or ``both``); a job's
value is the mean over its critical files weighted by exclusive time
(:func:`pipeline.reducers.sweep.weighted_factor`, Equation 2), except OST#, which counts the
distinct OSTs of all the job's files.

Definitions (reference/darshan-iominer.md 2.2, 2.3):

* ``small``: share of requests of at most 1 MiB (Darshan's size bins up to ``100K_1M``; the
  Lustre stripe size, so such a request touches part of one stripe); ``small_1k`` is IOMiner's
  own cut (< 1 KiB, the ``0_100`` and ``100_1K`` bins).
* ``non_consec``: ``1 - CONSEC / ops``. Darshan counts a rank's first access to a file as
  neither consecutive nor sequential, so a one-request file is 100 % non-consecutive.
* ``coll``: 1 when the file saw any collective MPI-IO operation in the direction, else 0.
* ``proc_per_ost``: processes accessing the file divided by its stripe count.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Direction = Literal["read", "write", "both"]

FACTORS: tuple[str, ...] = ("small", "small_1k", "non_consec", "coll", "ost_count", "proc_per_ost")
"""Factor names in the order IOMiner's tables print them (plus IOMiner's own < 1 KiB cut)."""


def _value(c: Mapping[str, float | int | None], name: str) -> float | None:
    """``c[name]`` as a float; None when missing, None or NaN (a pandas gap)."""
    v = c.get(name)
    return None if v is None or v != v else float(v)


COUNT_COLUMNS: tuple[str, ...] = (
    "reads",
    "writes",
    "small_reads",
    "small_writes",
    "small_1k_reads",
    "small_1k_writes",
    "consec_reads",
    "consec_writes",
    "coll_reads",
    "coll_writes",
)
"""The per-file request counts the factors read (``darshan.file`` names)."""

_NAMES = {
    d: {
        stem: tuple(f"{stem}{n}" for n in ns)
        for stem in ("", "small_", "small_1k_", "consec_", "coll_")
    }
    for d, ns in (("read", ("reads",)), ("write", ("writes",)), ("both", ("reads", "writes")))
}


def _ops(c: Mapping[str, float | int | None], stem: str, direction: Direction) -> float:
    """``{stem}_reads`` and/or ``{stem}_writes`` (``stem`` '' gives ``reads``/``writes``)."""
    total = 0.0
    for name in _NAMES[direction][f"{stem}_" if stem else ""]:
        v = c.get(name)
        if v is not None and v == v:
            total += v
    return total


@dataclass(frozen=True)
class FileFactors:
    """The per-file factors of one direction; None where undefined (no requests, no stripes)."""

    small: float | None
    small_1k: float | None
    non_consec: float | None
    coll: float | None
    proc_per_ost: float | None


def file_factors(c: Mapping[str, float | int | None], direction: Direction) -> FileFactors:
    """Factors of one file from its aggregated counters.

    Args:
        c: the file's values by the names of the ``darshan.file`` table: ``reads``, ``writes``,
            ``small_reads``, ``small_writes``, ``small_1k_reads``, ``small_1k_writes``,
            ``consec_reads``, ``consec_writes``, ``coll_reads``, ``coll_writes`` (counts),
            ``nprocs`` and ``stripe_count`` (None or 0 when not on Lustre). None and NaN
            both mean "not counted".
        direction: ``read``, ``write`` or ``both``.

    Returns:
        :class:`FileFactors`; the request shares are None when the file has no requests in the
        direction or no CONSEC counters (STDIO: ``consec_reads``/``consec_writes`` None),
        ``proc_per_ost`` is None without a stripe count.
    """
    ops = _ops(c, "", direction)
    stripes = _value(c, "stripe_count") or 0
    procs = _value(c, "nprocs") or 0
    ppo = float(procs) / float(stripes) if stripes and procs else None
    if ops <= 0:
        return FileFactors(None, None, None, None, ppo)
    # STDIO records have no size histogram nor CONSEC counters: their shares stay undefined.
    counted = _value(c, "consec_reads") is not None or _value(c, "consec_writes") is not None
    return FileFactors(
        small=_ops(c, "small", direction) / ops if counted else None,
        small_1k=_ops(c, "small_1k", direction) / ops if counted else None,
        non_consec=max(0.0, 1.0 - _ops(c, "consec", direction) / ops) if counted else None,
        coll=1.0 if _ops(c, "coll", direction) > 0 else 0.0,
        proc_per_ost=ppo,
    )


def factor_arrays(
    cols: Mapping[str, npt.NDArray[np.float64]],
    counted: npt.NDArray[np.bool_],
    nprocs: npt.ArrayLike,
    stripes: npt.ArrayLike,
    direction: Direction,
) -> dict[str, npt.NDArray[np.float64]]:
    """:func:`file_factors` of many files at once, as arrays with NaN where undefined.

    Args:
        cols: per-file counts by ``darshan.file`` name (``reads``, ``small_writes``...), each
            shape ``(n,)``, without NaN.
        counted: which files have size bins and CONSEC counters (POSIX), shape ``(n,)``.
        nprocs: processes per file; stripes: stripe count per file (0 off Lustre).
        direction: ``read``, ``write`` or ``both``.

    Returns:
        ``small``, ``small_1k``, ``non_consec``, ``coll`` and ``proc_per_ost``, each shape
        ``(n,)``.
    """
    ops = functools.partial(_ops_array, cols, direction)
    n_ops = ops("")
    has = n_ops > 0
    ok = has & counted
    safe = np.where(has, n_ops, 1.0)
    nan = np.full_like(n_ops, np.nan)
    ppo = _procs_per_ost(nprocs, stripes)
    return {
        "small": np.where(ok, ops("small_") / safe, nan),
        "small_1k": np.where(ok, ops("small_1k_") / safe, nan),
        "non_consec": np.where(ok, np.maximum(0.0, 1.0 - ops("consec_") / safe), nan),
        "coll": np.where(has, (ops("coll_") > 0).astype(np.float64), nan),
        "proc_per_ost": ppo,
    }


def _ops_array(
    cols: Mapping[str, npt.NDArray[np.float64]], direction: Direction, stem: str
) -> npt.NDArray[np.float64]:
    """``{stem}reads`` and/or ``{stem}writes`` of many files (``stem`` '' gives the requests)."""
    names = _NAMES[direction][stem]
    total = cols[names[0]]
    for name in names[1:]:
        total = total + cols[name]
    return total


def _procs_per_ost(nprocs: npt.ArrayLike, stripes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Processes / stripe count per file; NaN without stripes or processes."""
    procs = np.asarray(nprocs, dtype=np.float64)
    st = np.asarray(stripes, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((st > 0) & (procs > 0), procs / np.where(st > 0, st, 1.0), np.nan)


def weighted_means(
    values: list[npt.NDArray[np.float64]], weights: npt.NDArray[np.float64]
) -> list[float | None]:
    """:func:`pipeline.reducers.sweep.weighted_factor` of several factors over arrays: each
    one's mean weighted by ``weights`` (exclusive times), NaN values and non-positive weights
    left out; None where nothing is left (seed 004, Equation 2).

    Args:
        values: one array per factor, each shape ``(m,)`` (the critical files).
        weights: shape ``(m,)``.
    """
    if not values:
        return []
    v = np.vstack(values)
    keep = ~np.isnan(v) & (weights > 0)
    w = np.where(keep, weights, 0.0)
    den = w.sum(axis=1)
    num = (np.where(keep, v, 0.0) * w).sum(axis=1)
    return [
        float(a / b) if b > 0 else None for a, b in zip(num.tolist(), den.tolist(), strict=True)
    ]
