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


@dataclass(frozen=True, slots=True)
class Document:
    """A document on its way to Elasticsearch.

    Attributes:
        index: the target data stream, ``{type}-{dataset}-{namespace}``.
        doc_id: deterministic ``_id``; the bulk action is always ``create``, so a replay is a 409.
        source: the document body (ECS fields plus ours).
        refs: the input lines the document derives from. The registry advances a file's offset
            only after every document referring to its lines has been acknowledged.
        encoded: ``source`` as compact JSON, when its producer encoded it already (many
            documents sharing their ECS part are encoded faster together); the bulk sink sends
            these bytes instead of encoding ``source`` again.
    """

    index: str
    doc_id: str
    source: Mapping[str, Any]
    refs: tuple[LineRef, ...] = field(default=())
    encoded: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DiskSample:
    """One device's sysstat disk statistics over one interval (``sar -d`` / ``sadf -d -- -d``).

    Every metric is an average over the interval ``(end_s - interval_s, end_s]``, as sysstat
    12.6.1 computes it from differences of ``/proc/diskstats`` counters (reference/sysstat.md
    section 1.3; the names of section 1.4 in brackets).

    Attributes:
        host: the recording host's nodename, as sadf prints it.
        device: the device name as sadf printed it on the recording host (``sda``, ``loop3``,
            ``vda``, ``dm-3``, a ``/dev/mapper`` name with ``-p``, or ``dev253-0`` when the name
            could not be resolved).
        end_s: end of the interval, Unix seconds (UTC). sadf prints whole seconds (truncated).
        interval_s: length of the interval the sample averages over, seconds (sadf's nominal,
            integer ``interval`` column; a downsampled sample carries the time it really covers).
        tps: completed I/Os per second, reads + writes + discards (``tps``).
        read_kb_per_s: kB read per second, 1 kB = 1024 B (``rkB/s``; JSON ``rkB``).
        write_kb_per_s: kB written per second (``wkB/s``; JSON ``wkB``).
        discard_kb_per_s: kB discarded per second (``dkB/s``; JSON ``dkB``).
        areq_sz_kb: mean request size of the completed I/Os, kB (``areq-sz``; 0 with no I/O).
        aqu_sz: time-averaged number of requests queued or in service (``aqu-sz``).
        await_ms: mean time from issue to completion of the completed I/Os, ms (``await``; 0 with
            no I/O, as sysstat prints it).
        util_pct: percentage of the interval the device was busy (``%util``; not capped at 100).
    """

    host: str
    device: str
    end_s: float
    interval_s: float
    tps: float
    read_kb_per_s: float
    write_kb_per_s: float
    discard_kb_per_s: float
    areq_sz_kb: float
    aqu_sz: float
    await_ms: float
    util_pct: float

    @property
    def svctm_ms(self) -> float:
        """sysstat's former ``svctm``, derived: :func:`svctm_ms` of this sample."""
        return svctm_ms(self.util_pct, self.tps)


def svctm_ms(util_pct: float, tps: float) -> float:
    """Mean service time per I/O, ms: the busy time of an interval over its completed I/Os.

    ``svctm = %util / 100 / tps * 1000``, i.e. Delta io_ticks / Delta nr_ios, as sysstat
    computed ``svctm`` before 12.1.2 removed it (reference/sysstat.md section 1.4); 0 when
    ``tps`` is 0, as sysstat printed it. Over a downsampled interval (time-weighted ``%util``
    and ``tps``) it is the same ratio over the longer interval.
    """
    return util_pct * 10.0 / tps if tps > 0 else 0.0


@dataclass(frozen=True)
class RestartMark:
    """A ``LINUX-RESTART`` record: the host rebooted, or a new sadc run began in the same file.

    Counters start over at a restart, so no interval spans one (reference/sysstat.md 1.5).

    Attributes:
        host: the recording host's nodename.
        end_s: the time sadf prints for the record, Unix seconds (UTC).
    """

    host: str
    end_s: float


DISK_METRICS: tuple[str, ...] = (
    "tps",
    "read_kb_per_s",
    "write_kb_per_s",
    "discard_kb_per_s",
    "areq_sz_kb",
    "aqu_sz",
    "await_ms",
    "util_pct",
)
"""The metric fields of :class:`DiskSample`, in declaration order."""
