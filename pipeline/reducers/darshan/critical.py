"""Step 5: the critical path, the critical files and the factors they carry (seed 004 II-D).

The critical path is the union of the records' busy intervals; the critical files are a
minimum set of files covering it, each charged its exclusive time (Algorithm 2,
:func:`pipeline.reducers.sweep.covering_set`). The job's five contributing factors are the
critical files' own factors weighted by exclusive time (Equation 2,
:mod:`pipeline.reducers.factors`); OST# counts the OSTs of all the job's files.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from pipeline.records.darshan_rows import DarshanFileRow
from pipeline.reducers.darshan.files import FileTable, ModuleRecords, bytes_moved
from pipeline.reducers.factors import Direction, factor_arrays, weighted_means
from pipeline.reducers.sweep import CoveringSet, covering_set

F64 = npt.NDArray[np.float64]

FACTOR_NAMES = ("small", "small_1k", "non_consec", "coll", "proc_per_ost")
"""The factors weighted over the critical files (OST# is counted over all files)."""


@dataclass(frozen=True, slots=True)
class CriticalFile:
    """A file on the critical path.

    Attributes:
        key: ``module:record id``.
        name: file name (hashed in anonymized logs).
        exclusive_s: its exclusive time (s).
        share: ``exclusive_s`` / critical path length.
        osts: OST indices of its stripes; nprocs: processes that accessed it.
        stripe_count: its stripe count (0 off Lustre).
        factors: its own values of the factors (None where undefined).
    """

    key: str
    name: str
    exclusive_s: float
    share: float
    osts: tuple[int, ...]
    nprocs: int
    stripe_count: int
    factors: dict[str, float | None]


class Attribution(NamedTuple):
    """The critical files' factor values and weights.

    Attributes:
        file_index: the critical files, indices into the file rows, largest exclusive time first.
        exclusive_s: their exclusive times, shape ``(m,)``.
        factors: each of :data:`FACTOR_NAMES` per critical file, shape ``(m,)``, NaN where
            undefined (empty without files).
    """

    file_index: npt.NDArray[np.intp]
    exclusive_s: F64
    factors: dict[str, F64]


def critical_path(records: tuple[ModuleRecords, ...]) -> CoveringSet:
    """The covering set of the records' busy intervals, labelled by file index."""
    labels: list[Hashable] = []
    for r in records:
        labels += r.file_index.tolist()
    st = np.concatenate([r.start for r in records]) if records else np.zeros(0)
    en = np.concatenate([r.end for r in records]) if records else np.zeros(0)
    return covering_set(st, en, labels)


def factor_direction(files: FileTable) -> Direction:
    """The direction the factors are computed for: the one with more bytes (``write`` on a
    tie)."""
    bytes_read, bytes_written = bytes_moved(files)
    return "write" if bytes_written >= bytes_read else "read"


def attribute_factors(
    files: FileTable, rows: list[DarshanFileRow], cover: CoveringSet, direction: Direction
) -> Attribution:
    """Each critical file's factors in ``direction`` (:func:`factor_arrays`; request shares
    are counted for POSIX files only)."""
    crit = np.array(list(cover.exclusive), dtype=np.intp)
    excl = np.array(list(cover.exclusive.values()), dtype=np.float64)
    n = len(files.ids)
    if not n:
        return Attribution(crit, excl, {})
    stripes = np.array([r.get("stripe_count", 0) for r in rows], dtype=np.float64)
    counted = np.arange(n) < files.module.count("POSIX")  # POSIX files come first
    arrays = factor_arrays(files.cols, counted, files.nprocs, stripes, direction)
    return Attribution(crit, excl, {k: arrays[k][crit] for k in FACTOR_NAMES})


def critical_files(
    rows: list[DarshanFileRow], cover: CoveringSet, a: Attribution
) -> tuple[CriticalFile, ...]:
    """The critical files, largest exclusive time first, with their own factors (None where
    undefined) and their share of the critical path."""
    per_file = (
        [
            {k: (v if v == v else None) for k, v in zip(FACTOR_NAMES, values, strict=False)}
            for values in zip(*(a.factors[k].tolist() for k in FACTOR_NAMES), strict=True)
        ]
        if a.factors
        else []
    )
    union = cover.union
    return tuple(
        CriticalFile(
            f"{r['module']}:{r['record_id']}",
            r["name"],
            t_excl,
            t_excl / union if union > 0 else 0.0,
            tuple(r["osts"]),
            r["nprocs"],
            r.get("stripe_count") or 0,
            own,
        )
        for r, t_excl, own in zip(
            (rows[i] for i in a.file_index.tolist()), a.exclusive_s.tolist(), per_file, strict=True
        )
    )


def job_factors(a: Attribution, ost_count: int) -> dict[str, float | None]:
    """The job's factors: each of :data:`FACTOR_NAMES` weighted by exclusive time (None where
    undefined), then ``ost_count``, the distinct OSTs of all its files."""
    factors: dict[str, float | None] = (
        dict(
            zip(
                FACTOR_NAMES,
                weighted_means([a.factors[k] for k in FACTOR_NAMES], a.exclusive_s),
                strict=True,
            )
        )
        if a.factors
        else dict.fromkeys(FACTOR_NAMES)
    )
    factors["ost_count"] = float(ost_count)
    return factors
