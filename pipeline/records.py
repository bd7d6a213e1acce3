"""Frozen record types shared between the stages (shippers -> parsers -> reducers -> sink).

Units live in the field names (``time_ms``, ``latency_ns``); conversion happens once, in the parser.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

DDIR_NAMES: tuple[str, ...] = ("read", "write", "trim")
"""fio's data directions by their numeric code in logs (0 = read, 1 = write, 2 = trim)."""


@dataclass(frozen=True)
class LineRef:
    """Where a record came from: enough to name it in an error and to acknowledge it.

    Attributes:
        file_key: the registry key of the file (device:inode:fingerprint).
        path: the file's path when it was read.
        line_no: 1-based line number.
        end_offset: byte offset just past the line's newline; the registry may advance to it
            once every document derived from the line has been acknowledged.
    """

    file_key: str
    path: str
    line_no: int
    end_offset: int


@dataclass(frozen=True, eq=False)
class FioHistRow:
    """One record of an fio histogram log (``write_hist_log`` + ``log_hist_msec``).

    Attributes:
        time_ms: the record's timestamp as written by fio: the END of its window, in ms since the
            job's epoch (or Unix epoch ms with ``log_unix_epoch``).
        ddir: 0 read, 1 write, 2 trim.
        bs: block size of the I/O that triggered the record (bytes).
        bin_idx: indices of the non-empty bins, strictly increasing, shape ``(k,)`` int64.
        counts: completions in each of those bins during the window (> 0), shape ``(k,)`` int64.
    """

    time_ms: int
    ddir: int
    bs: int
    bin_idx: npt.NDArray[np.int64]
    counts: npt.NDArray[np.int64]

    @property
    def samples(self) -> int:
        """Number of completions the record holds."""
        return int(self.counts.sum())


@dataclass(frozen=True)
class Document:
    """A document on its way to Elasticsearch.

    Attributes:
        index: the target data stream, ``{type}-{dataset}-{namespace}``.
        doc_id: deterministic ``_id``; the bulk action is always ``create``, so a replay is a 409.
        source: the document body (ECS fields plus ours).
        refs: the input lines the document derives from. The registry advances a file's offset
            only after every document referring to its lines has been acknowledged.
    """

    index: str
    doc_id: str
    source: Mapping[str, Any]
    refs: tuple[LineRef, ...] = field(default=())
