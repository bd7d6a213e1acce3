"""Incidents: one slow LUN seen by every stream, on one time axis.

A LUN that the peer comparison marks *faulty* (anomalous in k of the last 2k-1 windows, seed
001 section 4.2.4) is persistently slow among its peers. An incident is one such stretch of
time: it starts at the end of the first anomalous window of the streak that made the LUN
faulty (the detector saw the fault inside that window, so the LUN was slow by its end; the
window's start may still be healthy) and ends at the end of its last faulty window. Faulty
windows closer than ``gap_s`` belong to one incident; the incident is *closed* once the LUN
was evaluated and not faulty for ``gap_s`` after its last faulty window, and *open* (no end)
until then.

The incident gathers:

* the fio intervals that breached the latency SLA, per job and host (``metrics-fio.latency``,
  job scope; seed 000's merged percentiles), from ``margin_s`` before its start (a fault is
  seen by fio at once, by the peer comparison up to a window later) to its end, or now while
  open;
* the Darshan jobs whose critical files sit on the LUN (``logs-iolens.io_diagnosis``, files
  mapped to LUNs through the mount table; seed 004 II-D's critical path) whose run overlaps
  the time the LUN was certainly slow (:attr:`Span.slow_s`), and those files.

Everything here is pure: the job (:mod:`pipeline.jobs.incident_job`) passes the documents'
values in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pipeline.ids import doc_id

INCIDENT_DATASET = "iolens.incident"


@dataclass(frozen=True)
class LunWindow:
    """One peer-comparison window of one LUN (a ``metrics-iolens.peer_anomaly`` document).

    Attributes:
        lun: ``host/device``; group, metric: its peer group and the metric compared.
        start_s, end_s: the window, Unix seconds.
        anomalous, faulty: the detector's verdicts; score: record score 0-100.
    """

    lun: str
    group: str
    metric: str
    start_s: float
    end_s: float
    anomalous: bool
    faulty: bool
    score: float


@dataclass(frozen=True)
class Span:
    """The stretch of one incident as the peer comparison sees it.

    Attributes:
        lun, group, metric: the LUN (``host/device``), its peer group and the first metric
            that made it faulty.
        start_s: end of the first anomalous window of the streak (the detector saw the fault
            in it: the LUN was slow by then); last_s: end of the last faulty window (Unix s).
        closed: the LUN was evaluated and not faulty for ``gap_s`` after ``last_s``.
        windows: faulty windows; max_score: highest record score in the stretch.
        slow_s: ``(from, to)``, Unix s: when the LUN was certainly slow. The first anomalous
            window saw the fault somewhere in its raw samples and so did the last one; a fault
            that lasts covers the time between the first one's end and the start of the last
            one's raw samples (its start minus the moving average's reach). A job whose run
            overlaps it was hit.
        continues: the id of the incident, stored by an earlier run (open then, or within the
            look-back), that this stretch is (:func:`continued`); None: its own.
    """

    lun: str
    group: str
    metric: str
    start_s: float
    last_s: float
    closed: bool
    windows: int
    max_score: float
    slow_s: tuple[float, float] = (0.0, 0.0)
    continues: str | None = None

    @property
    def id(self) -> str:
        """The incident's id: that of the stored incident it :attr:`continues`, else the LUN
        and the start, so that it is the same on every run."""
        if self.continues is not None:
            return self.continues
        return doc_id(INCIDENT_DATASET, self.lun, f"{self.start_s:.3f}")


@dataclass(frozen=True)
class Breach:
    """One fio interval of one job over the SLA (``metrics-fio.latency``, job scope).

    Attributes:
        host, job: the fio job (``<log prefix>.<job number>``, e.g. ``lun3.1``, or the job
            number alone for histograms indexed without their prefix); start_s: interval start;
        value_ms: the SLA percentile's latency in the interval.
    """

    host: str
    job: str
    start_s: float
    value_ms: float

    @property
    def name(self) -> str:
        """``host/prefix.job``, e.g. ``vm/lun3.1``."""
        return f"{self.host}/{self.job}"


@dataclass(frozen=True)
class JobOnLun:
    """A diagnosed Darshan job with critical files on one LUN.

    Attributes:
        job_id: Darshan's job id; start_s, end_s: its run (Unix s).
        lun: ``host/device``; mount_point: where the LUN is mounted.
        files: its critical files on the LUN.
    """

    job_id: str
    start_s: float
    end_s: float
    lun: str
    mount_point: str | None
    files: tuple[str, ...]


@dataclass(frozen=True)
class Incident:
    """One incident, ready to become a ``logs-iolens.incident`` document.

    Attributes:
        span: the stretch; mount_point: where the LUN is mounted (None: not known).
        jobs: Darshan job ids; critical_files: their critical files on the LUN.
        fio_breaches: fio intervals over the SLA; fio_jobs: ``host/job`` of those that breached.
        persistence: ``(rank, value)`` of the LUN in the latest persistence ranking of the
            stretch (the one closing the period it ended in).
        summary: one sentence a person reads.
    """

    span: Span
    mount_point: str | None
    jobs: tuple[str, ...]
    critical_files: tuple[str, ...]
    fio_breaches: int
    fio_jobs: tuple[str, ...]
    persistence: tuple[int, float] | None
    summary: str


def spans(
    windows: Iterable[LunWindow],
    gap_s: float,
    lead_s: float = 0.0,
    *,
    now_s: float = math.inf,
    stale_s: float = math.inf,
) -> list[Span]:
    """The incidents' stretches in the peer comparison's windows.

    Stretches are found per LUN and metric (a streak is a run of one metric's windows), then
    the stretches of one LUN that overlap or lie within ``gap_s`` of each other are merged: one
    incident per slow LUN, whatever metrics saw it.

    Args:
        windows: every evaluated window of the LUNs (any order).
        gap_s: a faulty window ending at most this long after the last faulty window's end
            belongs to the same incident; a LUN evaluated and not faulty for this long after
            its last faulty window recovered (the incident closes).
        lead_s: how far before a window's start its raw samples reach (the moving average's
            ``ma_width`` x ``downsample_s``: a window's first smoothed sample averages that
            much raw data before it), for :attr:`Span.slow_s`.
        now_s, stale_s: an incident whose LUN has not been evaluated for ``stale_s`` after its
            last faulty window (a server gone, a device renamed) closes at ``now_s``.

    Returns:
        Stretches ordered by start, then LUN.
    """
    series: dict[tuple[str, str], list[LunWindow]] = {}
    for w in windows:
        series.setdefault((w.lun, w.metric), []).append(w)
    by_lun: dict[str, list[Span]] = {}
    for (lun, _), wins in series.items():
        wins.sort(key=lambda w: (w.end_s, w.start_s))
        stale = math.isfinite(stale_s) and now_s - wins[-1].end_s >= stale_s
        by_lun.setdefault(lun, []).extend(_series_spans(wins, gap_s, lead_s, stale=stale))
    out = [m for found in by_lun.values() for m in _merge(found, gap_s)]
    out.sort(key=lambda s: (s.start_s, s.lun))
    return out


@dataclass(frozen=True)
class StoredIncident:
    """An incident as an earlier run stored it: its id, LUN, start (Unix s) and whether it
    was open."""

    id: str
    lun: str
    start_s: float
    open: bool = True


def continued(found: Sequence[Span], stored: Iterable[StoredIncident], gap_s: float) -> list[Span]:
    """``found`` with each stretch that is a stored incident keeping that incident's id.

    A stretch's start can move between runs while it is open: another metric of the LUN turns
    faulty, and the streak that made it so began earlier than the first one's. The stored
    incident of the same LUN whose start lies within the stretch (``gap_s`` either side) is
    then the same incident: the first such stretch continues it under its id, open or closed
    since, rather than opening a second one. A stretch keeps its own id when that one is
    stored. Stretches of one LUN are more than ``gap_s`` apart, and an incident that began
    more than ``gap_s`` before a stretch is not taken for it; a stored start that lies between
    two stretches less than ``2 gap_s`` apart goes to the earlier one.

    Args:
        found: the stretches of this run (:func:`spans`).
        stored: the incidents stored that this run may find again (open, or started within
            its look-back).
        gap_s: as in :func:`spans`.
    """
    stored = list(stored)
    kept = {i.id for i in stored}
    own = {s.id for s in found}
    waiting = sorted((i for i in stored if i.id not in own), key=lambda i: (i.start_s, i.id))
    out = []
    for s in found:
        if s.id not in kept:
            for i in waiting:
                if i.lun == s.lun and s.start_s - gap_s <= i.start_s <= s.last_s + gap_s:
                    waiting.remove(i)
                    s = replace(s, continues=i.id)
                    break
        out.append(s)
    return out


def _series_spans(
    wins: Sequence[LunWindow], gap_s: float, lead_s: float, *, stale: bool = False
) -> list[Span]:
    """Stretches of one LUN and metric (windows sorted by end); with ``stale``, the last one
    is closed whatever came after it."""
    out: list[Span] = []
    current: Span | None = None
    for i, w in enumerate(wins):
        if not w.faulty:
            continue  # a lone anomalous window after recovery is not the incident's
        if current is not None and w.end_s - current.last_s <= gap_s:
            current = _extend(current, w, lead_s)
            continue
        if current is not None:
            out.append(_closed(current, True))
        streak = _streak(wins, i)
        current = Span(
            w.lun,
            w.group,
            w.metric,
            streak[0].end_s,
            w.end_s,
            False,
            1,
            max(x.score for x in streak),
            _slow(streak[0].end_s, w.start_s - lead_s),
        )
    if current is not None:
        out.append(_closed(current, stale or wins[-1].end_s >= current.last_s + gap_s))
    return out


def _merge(found: list[Span], gap_s: float) -> list[Span]:
    """Stretches of one LUN (several metrics) that overlap or lie within ``gap_s``: one."""
    out: list[Span] = []
    for s in sorted(found, key=lambda x: (x.start_s, x.metric)):
        if out and s.start_s - out[-1].last_s <= gap_s:
            a = out[-1]
            out[-1] = replace(
                a,
                last_s=max(a.last_s, s.last_s),
                closed=a.closed and s.closed,
                windows=a.windows + s.windows,
                max_score=max(a.max_score, s.max_score),
                slow_s=(min(a.slow_s[0], s.slow_s[0]), max(a.slow_s[1], s.slow_s[1])),
            )
        else:
            out.append(s)
    return out


def _extend(s: Span, w: LunWindow, lead_s: float) -> Span:
    return replace(
        s,
        last_s=max(s.last_s, w.end_s),
        windows=s.windows + 1,
        max_score=max(s.max_score, w.score),
        slow_s=_slow(s.start_s, w.start_s - lead_s) if w.anomalous else s.slow_s,
    )


def _slow(first_end: float, last_start: float) -> tuple[float, float]:
    return (min(first_end, last_start), max(first_end, last_start))


def _closed(s: Span, closed: bool) -> Span:
    return replace(s, closed=closed)


def _streak(wins: Sequence[LunWindow], i: int) -> Sequence[LunWindow]:
    """The anomalous windows that end with ``wins[i]`` (the streak that made it faulty)."""
    j = i
    while j > 0 and wins[j - 1].anomalous:
        j -= 1
    return wins[j : i + 1]


def correlate(
    span: Span,
    breaches: Iterable[Breach],
    jobs: Iterable[JobOnLun],
    *,
    margin_s: float,
    now_s: float,
    mount_point: str | None = None,
    persistence: tuple[int, float] | None = None,
    sla: str = "the SLA",
) -> Incident:
    """The incident of ``span``: the breaches within ``[start - margin_s, end]`` (``end`` = now
    while it is open), the jobs on its LUN that ran while it was anomalous, and its summary.

    Args:
        span: the stretch.
        breaches: fio intervals over the SLA (any time; those outside are left out).
        jobs: diagnosed Darshan jobs with critical files on any LUN (others are left out).
        margin_s: how long before the start breaches still count.
        now_s: the present (Unix s), the end of an open incident.
        mount_point: where the LUN is mounted now, when the mount table knows it (where the
            jobs' diagnoses saw it mounted comes first).
        persistence: the LUN's ``(rank, value)`` in the latest persistence ranking of the
            stretch, if any.
        sla: how the SLA reads in the summary (``"p95 under 10 ms"``).
    """
    lo = span.start_s - margin_s
    hi = span.last_s if span.closed else now_s
    hits = sorted({(b.name, b.start_s) for b in breaches if lo <= b.start_s <= hi})
    fio_jobs = tuple(sorted({name for name, _ in hits}))
    mine = [j for j in jobs if j.lun == span.lun and _hit(j, span.slow_s)]
    job_ids = tuple(sorted({j.job_id for j in mine}, key=_job_order))
    files = tuple(sorted({f for j in mine for f in j.files}))
    # where the jobs saw it mounted comes first: the mount table now may be another one's
    mount = next((j.mount_point for j in mine if j.mount_point), None) or mount_point
    summary = _summary(span, mount, len(hits), fio_jobs, job_ids, files, sla)
    return Incident(span, mount, job_ids, files, len(hits), fio_jobs, persistence, summary)


def _hit(job: JobOnLun, slow: tuple[float, float]) -> bool:
    return job.start_s <= slow[1] and job.end_s >= slow[0]


def _job_order(job_id: str) -> tuple[int, str]:
    return (int(job_id), "") if job_id.isdigit() else (0, job_id)


def _clock(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _summary(
    span: Span,
    mount: str | None,
    breaches: int,
    fio_jobs: Sequence[str],
    jobs: Sequence[str],
    files: Sequence[str],
    sla: str,
) -> str:
    where = f"{span.lun} ({mount})" if mount else span.lun
    until = f"to {_clock(span.last_s)}" if span.closed else "and is still slow"
    parts = [
        f"{where} was persistently anomalous among the {span.group} peers ({span.metric}) "
        f"from {_clock(span.start_s)} {until}"
    ]
    if breaches:
        parts.append(
            f"{breaches} fio interval{'s' if breaches != 1 else ''} of "
            f"{', '.join(fio_jobs)} broke {sla}"
        )
    if jobs:
        names = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        parts.append(
            f"Darshan job{'s' if len(jobs) != 1 else ''} {', '.join(jobs)} had critical files "
            f"on it ({names})"
        )
    return "; ".join(parts) + "."
