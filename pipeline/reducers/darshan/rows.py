"""Step 4: the ``darshan.file`` rows, one dict per file (seed 004 II-B, the file table).

Undefined values are left out of a row: STDIO has no request shares (size histogram, CONSEC
and SEQ counters), a file off Lustre has no stripes.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
import numpy.typing as npt

from pipeline.records.darshan_log import DarshanLog
from pipeline.records.darshan_rows import DarshanFileRow
from pipeline.reducers.darshan.files import FileTable

F64 = npt.NDArray[np.float64]

INT_COLUMNS = (
    "bytes_read",
    "bytes_written",
    "reads",
    "writes",
    "coll_reads",
    "coll_writes",
    "indep_reads",
    "indep_writes",
    "slowest_rank_bytes",
    "fastest_rank_bytes",
)
"""Integer columns of every file row."""

POSIX_COLUMNS = (
    "consec_reads",
    "consec_writes",
    "seq_reads",
    "seq_writes",
    "small_reads",
    "small_writes",
    "small_1k_reads",
    "small_1k_writes",
    "not_aligned",
    "mem_not_aligned",
)
"""Integer columns of POSIX file rows only."""

FLOAT_COLUMNS = (
    "read_time_s",
    "write_time_s",
    "meta_time_s",
    "read_start_s",
    "read_end_s",
    "write_start_s",
    "write_end_s",
    "slowest_rank_time_s",
    "fastest_rank_time_s",
)
"""Float columns of every file row (s)."""

_BASE_KEYS = ("record_id", "name", "module", "nprocs", "shared", "start_s", "end_s", "busy_s")
_STDIO_KEYS = (*_BASE_KEYS, *INT_COLUMNS, *FLOAT_COLUMNS)
_POSIX_KEYS = (*_STDIO_KEYS, *POSIX_COLUMNS)
"""A file row's keys before its Lustre layout (``osts``, and on Lustre ``stripe_size``,
``stripe_count`` and, with a stripe count, ``proc_per_ost``)."""


def file_rows(log: DarshanLog, files: FileTable) -> list[DarshanFileRow]:
    """One dict per file, by ``darshan.file`` field name, in the order of ``files``.

    Built column-wise: each row is one ``dict(zip(names, values))``.

    Args:
        log: the log (file names, Lustre layouts).
        files: the grouped files, POSIX ones first.

    Returns:
        The rows: :data:`_POSIX_KEYS` for POSIX files, :data:`_STDIO_KEYS` for STDIO ones,
        then the layout keys (:func:`add_layouts`).
    """
    if not len(files.ids):
        return []
    ids = files.ids.tolist()
    nprocs = files.nprocs.tolist()
    base_cols = _base_columns(log, files, ids, nprocs)
    value_cols, posix_cols = _value_columns(files.cols)
    npos = files.module.count("POSIX")  # POSIX files come first, then STDIO ones
    rows = _zip_rows(npos, base_cols, value_cols, posix_cols)
    add_layouts(log, rows, ids, nprocs)
    return rows


def _zip_rows(
    npos: int,
    base_cols: list[list[Any]],
    value_cols: list[list[Any]],
    posix_cols: list[list[Any]],
) -> list[DarshanFileRow]:
    """The rows of the first ``npos`` (POSIX) files with :data:`_POSIX_KEYS`, then the rest
    (STDIO) with :data:`_STDIO_KEYS`."""
    rows: list[dict[str, str | int | float]] = [
        dict(zip(_POSIX_KEYS, values, strict=False))
        for values in zip(*(c[:npos] for c in (*base_cols, *value_cols, *posix_cols)), strict=True)
    ]
    rows += [
        dict(zip(_STDIO_KEYS, values, strict=False))
        for values in zip(*(c[npos:] for c in (*base_cols, *value_cols)), strict=True)
    ]
    # (the keys and each row's values are built to the same length: no strict check per row)
    return cast(list[DarshanFileRow], rows)  # the keys of DarshanFileRow, checked by the tests


def _base_columns(
    log: DarshanLog, files: FileTable, ids: list[int], nprocs: list[int]
) -> list[list[Any]]:
    """The columns of ``_BASE_KEYS``, as Python lists."""
    return [
        [str(i) for i in ids],
        [log.names.get(i, str(i)) for i in ids],
        files.module,
        nprocs,
        [p > 1 for p in nprocs],
        files.start.tolist(),
        files.end.tolist(),
        files.busy.tolist(),
    ]


def _value_columns(c: dict[str, F64]) -> tuple[list[list[Any]], list[list[Any]]]:
    """``(INT_COLUMNS + FLOAT_COLUMNS, POSIX_COLUMNS)`` as Python lists, in one conversion per
    type: the integer columns (the shared ones, then POSIX's), then the floats."""
    ints = np.stack([c[k] for k in (*INT_COLUMNS, *POSIX_COLUMNS)]).astype(np.int64).tolist()
    floats = np.stack([c[k] for k in FLOAT_COLUMNS]).tolist()
    return ints[: len(INT_COLUMNS)] + floats, ints[len(INT_COLUMNS) :]


def add_layouts(
    log: DarshanLog, rows: list[DarshanFileRow], ids: list[int], nprocs: list[int]
) -> None:
    """Add each row's Lustre layout, in place: ``osts`` (empty off Lustre), and on Lustre
    ``stripe_size``, ``stripe_count`` and, with a stripe count, ``proc_per_ost`` (processes
    per stripe, IOMiner's Proc/OST)."""
    get = log.layouts.get
    for row, i, procs in zip(rows, ids, nprocs, strict=True):
        lay = get(i)
        if lay is None:
            row["osts"] = []
        else:
            row["osts"] = list(lay.osts)
            row["stripe_size"] = lay.stripe_size
            count = row["stripe_count"] = lay.stripe_count
            if count:
                row["proc_per_ost"] = procs / count
