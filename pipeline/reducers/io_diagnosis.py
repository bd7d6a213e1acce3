"""Root causes of a job's poor I/O bandwidth: IOMiner's analysis and the server-side checks.

Seed 004 II-D and III-F. A job is *low-bandwidth* in a direction when it is big enough to
matter (more than ``min_nprocs`` processes, at least ``min_bytes_per_proc`` bytes per process in
that direction) and its bandwidth on the critical path stays under ``max_bytes_per_s`` — the
seed's cut is more than 1,000 processes, 10 MB per process and 1 GB/s. The diagnosis lists the
critical files with their exclusive times and OSTs, the five contributing factors, the
Drishti-style insights (:mod:`pipeline.reducers.insights`) and the causes found:

* ``contention`` (IOMiner): Proc/OST above 3, many processes on few OSTs (III-F);
* ``small_noncontiguous`` (IOMiner): small and non-consecutive requests above 50 % (III-F);
* ``dominant_file`` (IOMiner): one critical file holds at least 90 % of the critical path;
* ``slow_ost`` (beyond IOMiner): a critical file sits on an OST where the job's files ran far
  slower than on its other OSTs (:func:`pipeline.reducers.darshan.osts.ost_stats`), on an OST
  that LMT shows moving far less than its peers during the job, or on an OST whose LUN the peer
  comparison marked anomalous;
* ``anomalous_lun`` (beyond IOMiner, any file system): a critical file sits under a mount point
  whose LUN the peer comparison marked anomalous during the job (the mount table maps files to
  LUNs, see :mod:`pipeline.parsers.mounts`);
* ``ost_load`` (beyond IOMiner): LMT shows a critical file's OST far busier than its peers
  with traffic that is not the job's own (contention from other jobs).

Everything here is pure: the LMT rows and peer verdicts are passed in (the caller queries
Elasticsearch for the job's window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from pipeline.records.darshan_rows import direction_totals
from pipeline.records.json import Source
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.insights import Insight, insights

CauseKind = Literal[
    "contention", "small_noncontiguous", "dominant_file", "slow_ost", "ost_load", "anomalous_lun"
]

PROC_PER_OST = 3.0
SMALL_NONCONSEC = 0.5
DOMINANT_SHARE = 0.9
LMT_SLOW_RATIO = 0.25
LMT_BUSY_RATIO = 4.0


@dataclass(frozen=True)
class Thresholds:
    """Which jobs are low-bandwidth (seed 004 III-F).

    Attributes:
        min_nprocs: a job needs more processes than this.
        min_bytes_per_proc: ... and at least this many bytes per process in the direction.
        max_bytes_per_s: ... and a critical-path bandwidth below this (bytes/s).
    """

    min_nprocs: int = 1000
    min_bytes_per_proc: float = 10 * 2**20
    max_bytes_per_s: float = 2**30


@dataclass(frozen=True)
class Cause:
    """One cause found.

    Attributes:
        kind: see the module docstring.
        message: one sentence with the numbers.
        ost: the OST concerned, if any.
        files: the critical files concerned.
        source: ``darshan`` (the job's own counters), ``lmt`` or ``peer``.
        lun: the LUN (``host/device``) concerned, if any.
    """

    kind: CauseKind
    message: str
    ost: int | None = None
    files: tuple[str, ...] = ()
    source: str = "darshan"
    lun: str | None = None


@dataclass(frozen=True)
class LmtWindow:
    """LMT load of OSTs during a job (rows of ``metrics-lmt.ost`` within the job's run).

    Attributes:
        bytes_per_s: OST index -> mean read + write bytes/s over the intervals in the window.
    """

    bytes_per_s: Mapping[int, float]


@dataclass(frozen=True)
class Evidence:
    """Server-side evidence for one job's diagnosis (what the cluster holds of its run:
    :func:`pipeline.jobs.darshan_evidence.server_evidence`); None where nothing is known.

    Attributes:
        node_count: nodes of the job (Slurm), for the aggregator checks.
        lmt: LMT load of the OSTs during the job, if indexed.
        anomalous_osts: OST index -> LUN (``host/device``) the peer comparison marked anomalous
            during the job.
        placement: critical file name -> ``(mount point, LUN)`` from the mount table.
        anomalous_luns: LUN -> highest record score (0-100) of the windows in which the peer
            comparison marked it anomalous during the job.
    """

    node_count: int | None = None
    lmt: LmtWindow | None = None
    anomalous_osts: Mapping[int, str] | None = None
    placement: Mapping[str, tuple[str, str]] | None = None
    anomalous_luns: Mapping[str, float] | None = None


NO_EVIDENCE = Evidence()
"""A job diagnosed from its own counters only."""


@dataclass(frozen=True)
class Diagnosis:
    """The result of :func:`diagnose`.

    Attributes:
        analysis: the job analysed.
        low: directions (``read``/``write``) in which the job is low-bandwidth.
        bandwidth_bytes_per_s: direction -> bandwidth on the direction's critical path.
        insights: the Drishti-style findings.
        causes: the causes found, most specific first (server side before factors).
        placement: critical file name -> ``(mount point, LUN)`` where the mount table knew it.
    """

    analysis: JobAnalysis
    low: tuple[str, ...]
    bandwidth_bytes_per_s: Mapping[str, float | None]
    insights: tuple[Insight, ...]
    causes: tuple[Cause, ...] = field(default=())
    placement: Mapping[str, tuple[str, str]] = field(default_factory=dict)


def low_bandwidth(a: JobAnalysis, t: Thresholds) -> tuple[str, ...]:
    """Directions in which the job is low-bandwidth under ``t`` (possibly none)."""
    job = a.job
    out = []
    if job["nprocs"] <= t.min_nprocs:
        return ()
    for d in ("read", "write"):
        nbytes, bw = direction_totals(job, d)
        per_proc = nbytes / max(job["nprocs"], 1)
        if per_proc >= t.min_bytes_per_proc and bw is not None and bw < t.max_bytes_per_s:
            out.append(d)
    return tuple(out)


def diagnose(
    a: JobAnalysis,
    thresholds: Thresholds | None = None,
    evidence: Evidence = NO_EVIDENCE,
) -> Diagnosis:
    """Diagnose one analysed job.

    Args:
        a: the job (:func:`~pipeline.reducers.darshan_job.analyze`).
        thresholds: the low-bandwidth cut (default :class:`Thresholds`).
        evidence: what the cluster holds of the job's run (default: nothing).

    Returns:
        The :class:`Diagnosis`. It is computed for every job; ``low`` says whether the job is
        one the thresholds select.
    """
    t = thresholds or Thresholds()
    lmt, placement = evidence.lmt, evidence.placement
    crit_osts = critical_osts(a)
    causes = _slow_ost_causes(a, crit_osts)
    if lmt is not None and lmt.bytes_per_s:
        causes += _lmt_causes(a, lmt, crit_osts)
    causes += _peer_ost_causes(evidence.anomalous_osts or {}, crit_osts)
    causes += _lun_causes(a, placement or {}, evidence.anomalous_luns or {})
    causes += _factor_causes(a.factors)
    causes += _dominant_file_cause(a)
    found = insights(a.job, a.files, a.log.hints, evidence.node_count)
    bw = {d: direction_totals(a.job, d)[1] for d in ("read", "write")}
    return Diagnosis(a, low_bandwidth(a, t), bw, tuple(found), tuple(causes), dict(placement or {}))


def critical_osts(a: JobAnalysis) -> dict[int, list[str]]:
    """OST index -> names of the critical files with a stripe on it (critical path order)."""
    crit_osts: dict[int, list[str]] = {}
    for cf in a.critical:
        for o in cf.osts:
            crit_osts.setdefault(o, []).append(cf.name)
    return crit_osts


def _slow_ost_causes(a: JobAnalysis, crit_osts: dict[int, list[str]]) -> list[Cause]:
    """``slow_ost`` from the job's own files: OSTs :func:`~pipeline.reducers.darshan.osts.
    ost_stats` marks slow that hold critical files."""
    causes: list[Cause] = []
    for st in a.osts:
        if st.slow and st.ost in crit_osts:
            others = [o.median_bytes_per_s for o in a.osts if o.ost != st.ost and o.files >= 3]
            ref = float(np.median(others)) if others else 0.0
            share = sum(cf.share for cf in a.critical if st.ost in cf.osts)
            causes.append(
                Cause(
                    "slow_ost",
                    f"OST {st.ost} is slow: the job's {st.files} files on it ran at a median "
                    f"{st.median_bytes_per_s / 2**20:.2f} MiB/s against {ref / 2**20:.2f} MiB/s "
                    f"on its other OSTs, and critical files on it hold {share:.1%} of the "
                    "critical path",
                    st.ost,
                    tuple(crit_osts[st.ost][:3]),
                )
            )
    return causes


def _peer_ost_causes(
    anomalous_osts: Mapping[int, str], crit_osts: dict[int, list[str]]
) -> list[Cause]:
    """``slow_ost`` from the peer comparison: anomalous OSTs that hold critical files."""
    return [
        Cause(
            "slow_ost",
            f"OST {o} ({lun}) was anomalous among its peers during the job",
            o,
            tuple(crit_osts[o][:3]),
            "peer",
        )
        for o, lun in sorted(anomalous_osts.items())
        if o in crit_osts
    ]


def _factor_causes(f: Mapping[str, float | None]) -> list[Cause]:
    """``contention`` (Proc/OST over :data:`PROC_PER_OST`) and ``small_noncontiguous`` (both
    shares over :data:`SMALL_NONCONSEC`) from the job's factors (seed 004 III-F)."""
    causes: list[Cause] = []
    if (f.get("proc_per_ost") or 0) > PROC_PER_OST:
        causes.append(
            Cause(
                "contention",
                f"{f['proc_per_ost']:.1f} processes per OST on the critical files: stripe them "
                "over more OSTs (lfs setstripe -c)",
            )
        )
    if (f.get("small") or 0) > SMALL_NONCONSEC and (f.get("non_consec") or 0) > SMALL_NONCONSEC:
        causes.append(
            Cause(
                "small_noncontiguous",
                f"{f['small']:.0%} small and {f['non_consec']:.0%} non-consecutive requests on "
                "the critical files",
            )
        )
    return causes


def _dominant_file_cause(a: JobAnalysis) -> list[Cause]:
    """``dominant_file``: the first critical file holds :data:`DOMINANT_SHARE` or more of the
    critical path."""
    if not (a.critical and a.critical[0].share >= DOMINANT_SHARE and a.cover.union > 0):
        return []
    top = a.critical[0]
    return [
        Cause(
            "dominant_file",
            f"{top.name} holds {top.share:.1%} of the critical path "
            f"({top.exclusive_s:.1f} of {a.cover.union:.1f} s)",
            top.osts[0] if len(top.osts) == 1 else None,
            (top.name,),
        )
    ]


def _lun_causes(
    a: JobAnalysis,
    placement: Mapping[str, tuple[str, str]],
    anomalous_luns: Mapping[str, float],
) -> list[Cause]:
    """Critical files under a mount point whose LUN was anomalous among its peers during the
    job, one cause per LUN, the LUN holding most of the critical path first."""
    by_lun: dict[str, list[tuple[float, str, str]]] = {}
    for cf in a.critical:
        mount, lun = placement.get(cf.name, ("", ""))
        if lun in anomalous_luns:
            by_lun.setdefault(lun, []).append((cf.share, cf.name, mount))
    out = []
    for lun, files in sorted(by_lun.items(), key=lambda kv: -sum(f[0] for f in kv[1])):
        share = sum(f[0] for f in files)
        out.append(
            Cause(
                "anomalous_lun",
                f"LUN {lun} (mounted at {files[0][2]}) was anomalous among its peers during the "
                f"job (record score {anomalous_luns[lun]:.0f}); {len(files)} critical "
                f"file{'s' if len(files) > 1 else ''} on it hold{'' if len(files) > 1 else 's'} "
                f"{share:.1%} of the critical path",
                None,
                tuple(name for _, name, _ in files[:3]),
                "peer",
                lun,
            )
        )
    return out


def _lmt_causes(a: JobAnalysis, lmt: LmtWindow, crit_osts: dict[int, list[str]]) -> list[Cause]:
    """OSTs of critical files far slower or far busier than the file system's other OSTs."""
    rates = dict(lmt.bytes_per_s)
    if len(rates) < 3:
        return []
    own = _own_rates(a)
    out: list[Cause] = []
    for o, names in sorted(crit_osts.items()):
        if o in rates:
            ref = float(np.median([r for k, r in rates.items() if k != o]))
            out += _lmt_ost_causes(o, rates[o], own.get(o, 0.0), ref, tuple(names[:3]))
    return out


def _lmt_ost_causes(
    o: int, rate: float, own: float, ref: float, names: tuple[str, ...]
) -> list[Cause]:
    """``slow_ost`` when OST ``o`` moved under :data:`LMT_SLOW_RATIO` of the median ``ref`` of
    the other OSTs (bytes/s), ``ost_load`` when its traffic beyond the job's ``own`` exceeds
    :data:`LMT_BUSY_RATIO` times it."""
    if ref <= 0:
        return []
    out: list[Cause] = []
    if rate < LMT_SLOW_RATIO * ref:
        message = (
            f"LMT: OST {o} moved {rate / 2**20:.1f} MiB/s during the job against a median "
            f"{ref / 2**20:.1f} MiB/s on the other OSTs"
        )
        out.append(Cause("slow_ost", message, o, names, "lmt"))
    background = rate - own
    if background > LMT_BUSY_RATIO * ref:
        message = (
            f"LMT: OST {o} carried {background / 2**20:.1f} MiB/s of other traffic during "
            f"the job against a median {ref / 2**20:.1f} MiB/s on the other OSTs"
        )
        out.append(Cause("ost_load", message, o, names, "lmt"))
    return out


def _own_rates(a: JobAnalysis) -> dict[int, float]:
    """The job's own bytes/s on each OST: each file's bytes spread evenly over its stripes
    and over the job's run time."""
    run = a.job["run_time_s"] or 0.0
    out: dict[int, float] = {}
    if run <= 0:
        return out
    for f in a.files:
        osts = f["osts"]
        if not osts:
            continue
        per = (f["bytes_read"] + f["bytes_written"]) / len(osts) / run
        for o in osts:
            out[o] = out.get(o, 0.0) + per
    return out


def lmt_window(rows: Sequence[Source]) -> LmtWindow:
    """Average LMT rates per OST from ``metrics-lmt.ost`` sources (``lmt.ost.index``,
    ``read_bytes_per_s``, ``write_bytes_per_s``) of the intervals within a job's run."""
    sums: dict[int, list[float]] = {}
    for r in rows:
        ost = r["lmt"]["ost"]
        sums.setdefault(int(ost["index"]), []).append(
            float(ost["read_bytes_per_s"]) + float(ost["write_bytes_per_s"])
        )
    return LmtWindow({o: float(np.mean(v)) for o, v in sums.items()})
