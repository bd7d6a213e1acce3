"""sysstat recordings for offline peer diagnosis (seed 001): files -> downsampled samples per LUN.

Each file is read whole: a sadc binary through ``sadf`` (:mod:`pipeline.formats.sysstat.sadc`, which
converts older formats with ``sadf -c``), ``sadf -d`` CSV, or ``sadf -j`` JSON of any sysstat
version. Every host x device is downsampled exactly to the target interval
(:mod:`pipeline.reducers.downsample`); only full intervals are kept (a partial interval cut by a
restart or a gap is left out of peer comparison).

A host whose samples are coarser than the target (``sa1``'s default 600 s, ``sadf -d 60``) cannot
be refined: its samples are compared at their own interval, said once per host, and a peer group
of LUNs at different intervals is compared at the coarsest of them (:func:`coarsened`). When no
window can be formed, :func:`shortfall` says how much was read and how much a window needs.
"""

from __future__ import annotations

import logging
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline.formats.sysstat.columns import Unsupported
from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.formats.sysstat.downsample_columns import by_lun
from pipeline.formats.sysstat.sadc import convert_sadc
from pipeline.formats.sysstat.sadf_json import parse_sadf_json
from pipeline.jobs.peer_fast import downsample_files
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DiskSample, RestartMark
from pipeline.reducers.downsample import downsample
from pipeline.reducers.peer_params import PeerParams

log = logging.getLogger(__name__)

FULL_TOLERANCE = 1e-6
"""Relative difference from the interval within which a downsampled sample counts as full."""


def sniff(data: bytes, name: str = "") -> str:
    """``json``, ``csv`` or ``sadc`` from the first bytes of a file (4 KiB are enough); an
    empty file is what its name says (``.json``, else CSV: never handed to sadf)."""
    if not data.strip():
        return "json" if name.endswith(".json") else "csv"
    head = data.lstrip()[:1]
    if head == b"{":
        return "json"
    if head == b"#" or (data[:4096].isascii() and b";" in data[:4096]):
        return "csv"
    return "sadc"


def read_samples(path: Path) -> tuple[list[DiskSample | RestartMark], list[ParseError]]:
    """Every disk sample and restart of one recording, and the bad lines (which are skipped).

    A file whose first byte is ``{`` is ``sadf -j`` JSON, one that starts with ``#`` or a
    hostname line is ``sadf -d`` CSV; anything else is a sadc binary file converted with
    ``sadf`` (on the recording host: binary files hold device numbers, not names).

    Raises:
        ParseError: a sadc file sadf cannot read or convert (the reason is sadf's).
        ConfigError: sadf is not installed.
    """
    data = path.read_bytes()
    kind = sniff(data, path.name)
    if kind == "json":
        parsed = list(parse_sadf_json(data, str(path)))
    elif kind == "csv":
        parsed = list(parse_sadf_csv(data.splitlines(), str(path)))
    else:
        parsed = list(parse_sadf_csv(convert_sadc(path).splitlines(), str(path)))
    good = [r for r in parsed if not isinstance(r, ParseError)]
    bad = [r for r in parsed if isinstance(r, ParseError)]
    return good, bad


@dataclass(frozen=True)
class Recording:
    """Downsampled samples of several files, by LUN (``host/device``).

    Attributes:
        samples: full-interval samples per LUN, in time order.
        interval_s: the target interval, s.
        bad_lines: lines (or JSON parts) rejected.
        intervals: each LUN's interval where it is coarser than ``interval_s`` (its host's
            samples were), s.
        luns_read: LUNs with at least one sample read (full interval or not).
    """

    samples: Mapping[str, Sequence[DiskSample]]
    interval_s: float
    bad_lines: int
    intervals: Mapping[str, float] = field(default_factory=dict)
    luns_read: int = 0

    def interval_of(self, lun: str) -> float:
        """The interval ``lun`` is compared at, s."""
        return self.intervals.get(lun, self.interval_s)


def load(paths: Iterable[Path], interval_s: float) -> Recording:
    """Read and downsample every file; full intervals only.

    ``sadf -d`` CSV files go through the columnar reader (:mod:`pipeline.jobs.peer_fast`), which
    gives the same samples without a Python object per line; when a file is JSON or sadc binary,
    or the columnar reader does not take a CSV file exactly (a bad line, samples coarser than the
    target, ...), every file is read line by line (:func:`load_lines`).
    """
    paths = list(paths)
    if all(_sniff_file(p) == "csv" for p in paths):
        try:
            ds = downsample_files(paths, interval_s)
        except Unsupported as err:
            log.info("line-by-line reading: %s", err)
        else:
            return Recording(by_lun(ds, interval_s), interval_s, 0, luns_read=len(ds.luns))
    return load_lines(paths, interval_s)


def _sniff_file(path: Path) -> str:
    with path.open("rb") as f:
        return sniff(f.read(4096), path.name)


def load_lines(paths: Iterable[Path], interval_s: float) -> Recording:
    """:func:`load` through the per-line parsers and the streaming downsampler, each host at
    its effective interval (:func:`effective_interval`)."""
    by_host: dict[str, list[DiskSample | RestartMark]] = defaultdict(list)
    bad = 0
    for p in paths:
        good, errors = read_samples(p)
        for err in errors[:5]:
            log.warning("%s (skipped)", err)
        if len(errors) > 5:
            log.warning("%s: %d more bad lines skipped", p, len(errors) - 5)
        bad += len(errors)
        for r in good:
            by_host[r.host].append(r)
    samples: dict[str, list[DiskSample]] = defaultdict(list)
    intervals: dict[str, float] = {}
    luns = {(r.host, r.device) for rs in by_host.values() for r in rs if isinstance(r, DiskSample)}
    for host, records in by_host.items():
        records.sort(key=lambda r: r.end_s)
        target = effective_interval(host, records, interval_s)
        for s in downsample(records, target):
            if abs(s.interval_s - target) <= FULL_TOLERANCE * target:
                if target != interval_s:  # one source sample closed early (at the end, a gap)
                    s = replace(s, end_s=target * math.ceil(s.end_s / target))
                    intervals[f"{s.host}/{s.device}"] = target
                samples[f"{s.host}/{s.device}"].append(s)
    return Recording(samples, interval_s, bad, intervals, len(luns))


def effective_interval(
    host: str, records: Sequence[DiskSample | RestartMark], interval_s: float
) -> float:
    """The interval a host's samples are compared at: the target, or the host's own sampling
    interval (its most common one) when that is coarser; said once per host.

    Seed 001 downsamples to 15 s, "equivalent to running sadc with a larger sampling interval";
    a sample cannot be split, so a host sampled every 60 or 600 s is compared at that interval.
    """
    counts = Counter(r.interval_s for r in records if isinstance(r, DiskSample))
    if not counts:
        return interval_s
    source = counts.most_common(1)[0][0]
    if source <= interval_s:
        return interval_s
    log.warning(
        "%s: samples every %g s are coarser than the downsampling interval (peer.downsample_s "
        "= %g s): its LUNs are compared at %g s",
        host,
        source,
        interval_s,
        source,
    )
    return source


def coarsened(rec: Recording, luns: Sequence[str], group: str) -> dict[str, list[DiskSample]]:
    """The samples of a peer group's LUNs at the coarsest interval among them.

    Downsampled samples are exact sums of counter increments, so a coarser grid over them is
    exact too when it is a multiple of the finer one (60 s over 15 s).
    """
    target = max(rec.interval_of(lun) for lun in luns)
    out: dict[str, list[DiskSample]] = {}
    for lun in luns:
        samples = list(rec.samples[lun])
        if rec.interval_of(lun) != target:
            samples = [
                s
                for s in downsample(samples, target)
                if abs(s.interval_s - target) <= FULL_TOLERANCE * target
            ]
        out[lun] = samples
    log.warning(
        "peer group %s has LUNs sampled at %s s: compared at %g s",
        group,
        ", ".join(f"{t:g}" for t in sorted({rec.interval_of(lun) for lun in luns})),
        target,
    )
    return out


def shortfall(rec: Recording, groups: Mapping[str, Sequence[str]], params: PeerParams) -> str:
    """Why no window could be formed: how many LUNs and samples were read, and what is needed.

    Args:
        rec: the recording.
        groups: LUNs per peer group (every LUN of the recording).
        params: the window parameters (a window needs ``ma_width - 1 + win_size`` samples).
    """
    need = params.ma_width - 1 + params.win_size
    if not rec.luns_read:
        return (
            f"no disk samples read ({rec.bad_lines} line(s) or part(s) rejected): nothing to "
            "compare"
        )
    large = {g: luns for g, luns in groups.items() if len(luns) >= 3}
    if not large:
        sizes = ", ".join(f"{g}: {len(luns)}" for g, luns in sorted(groups.items())[:10])
        more = f" and {len(groups) - 10} more" if len(groups) > 10 else ""
        return (
            f"no peer group of at least 3 LUNs: {rec.luns_read} LUN(s) read, "
            f"{len(rec.samples)} with a full {rec.interval_s:g} s interval, by group "
            f"{sizes or '-'}{more} (peer.groups assigns LUNs to groups)"
        )
    most = max(len(rec.samples[lun]) for luns in large.values() for lun in luns)
    interval = max(rec.interval_of(lun) for luns in large.values() for lun in luns)
    return (
        f"{len(large)} peer group(s) of at least 3 LUNs, with at most {most} full sample(s) of "
        f"{interval:g} s per LUN; a window needs {need} in a row (peer.ma_width - 1 + "
        f"peer.win_size = {params.ma_width} - 1 + {params.win_size})"
    )
