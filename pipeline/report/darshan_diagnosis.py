"""One job's I/O diagnosis as ``iolens darshan diagnose`` prints it: JSON-able values or text.

The diagnosis is :func:`pipeline.reducers.io_diagnosis.diagnose`'s (IOMiner's critical path
and factors, seed 004 II-D; causes; Drishti-style insights). Bandwidths are bytes/s in the JSON
values and MiB/s in the text; times are seconds.
"""

from __future__ import annotations

from typing import TypedDict

from pipeline.records.darshan_rows import DarshanJobRow
from pipeline.reducers.darshan_job import JobAnalysis
from pipeline.reducers.io_diagnosis import Diagnosis, Thresholds

MiB = 2**20
GiB = 2**30


class CriticalFileRow(TypedDict):
    """A critical file: its ``name``, exclusive time (``exclusive_s``, s) and ``share`` of the
    critical path (0-1), the ``osts`` of its stripes, the processes that accessed it
    (``nprocs``) and its ``stripe_count`` (0 off Lustre)."""

    name: str
    exclusive_s: float
    share: float
    osts: list[int]
    nprocs: int
    stripe_count: int


class CauseRow(TypedDict):
    """A cause: its ``kind``, a ``message`` with the numbers, the ``ost`` concerned (None: no
    one OST) and its ``source`` (``darshan``, ``lmt`` or ``peer``)."""

    kind: str
    message: str
    ost: int | None
    source: str


class InsightRow(TypedDict):
    """A Drishti-style insight: its ``code`` (``P05``), ``level`` (``high``, ``warn``,
    ``info``, ``ok``), ``message`` and the ``files`` most concerned (up to three)."""

    code: str
    level: str
    message: str
    files: list[str]


class DiagnosisRow(TypedDict):
    """One job's diagnosis as ``iolens darshan diagnose --json`` writes it.

    Attributes:
        log: the log's path; job_id: the scheduler's job id (text).
        exe, nprocs, pattern, interface, bytes_read, bytes_written, run_time_s: the job's
            ``darshan.job`` fields (bytes, s; None where the log does not say).
        io_time_s, span_s: the I/O time on the critical path and its span, s.
        bandwidth_bytes_per_s: ``critical_path``, ``naive``, ``darshan``, ``read``,
            ``write`` -> bytes/s (None where undefined).
        low_bandwidth: directions (``read``/``write``) in which the job is low-bandwidth.
        direction: the direction of the factors; factors: factor -> value (None: undefined).
        critical_files: the first critical files; critical_file_count: how many there are.
        slow_osts: OSTs far slower than the job's others.
        causes, insights: what the diagnosis found.
    """

    log: str
    job_id: str
    exe: str | None
    nprocs: int
    pattern: str | None
    interface: str | None
    bytes_read: int
    bytes_written: int
    run_time_s: float
    io_time_s: float
    span_s: float
    bandwidth_bytes_per_s: dict[str, float | None]
    low_bandwidth: list[str]
    direction: str
    critical_files: list[CriticalFileRow]
    critical_file_count: int
    factors: dict[str, float | None]
    slow_osts: list[int]
    causes: list[CauseRow]
    insights: list[InsightRow]


def diagnosis_dict(d: Diagnosis, top: int | None = None) -> DiagnosisRow:
    """A diagnosis as JSON-able values (bandwidths in bytes/s, times in s); ``top`` critical
    files at most (all with None)."""
    a = d.analysis
    job = a.job
    return {
        "log": a.log.path,
        "job_id": a.log.jobid,
        "exe": job["exe"],
        "nprocs": job["nprocs"],
        "pattern": job["pattern"],
        "interface": job["interface"],
        "bytes_read": job["bytes_read"],
        "bytes_written": job["bytes_written"],
        "run_time_s": job["run_time_s"],
        "io_time_s": a.cover.union,
        "span_s": a.cover.span,
        "bandwidth_bytes_per_s": _bandwidths(job),
        "low_bandwidth": list(d.low),
        "direction": a.direction,
        "critical_files": _critical_files(a, top),
        "critical_file_count": len(a.critical),
        "factors": dict(a.factors),
        "slow_osts": [o.ost for o in a.osts if o.slow],
        "causes": _causes(d),
        "insights": _insights(d),
    }


def _causes(d: Diagnosis) -> list[CauseRow]:
    return [
        {"kind": c.kind, "message": c.message, "ost": c.ost, "source": c.source} for c in d.causes
    ]


def _insights(d: Diagnosis) -> list[InsightRow]:
    return [
        {"code": i.code, "level": i.level, "message": i.message, "files": list(i.files)}
        for i in d.insights
    ]


def _bandwidths(job: DarshanJobRow) -> dict[str, float | None]:
    return {
        "critical_path": job["critical_bytes_per_s"],
        "naive": job["naive_bytes_per_s"],
        "darshan": job["darshan_bytes_per_s"],
        "read": job["read_bytes_per_s"],
        "write": job["write_bytes_per_s"],
    }


def _critical_files(a: JobAnalysis, top: int | None) -> list[CriticalFileRow]:
    return [
        {
            "name": cf.name,
            "exclusive_s": cf.exclusive_s,
            "share": cf.share,
            "osts": list(cf.osts),
            "nprocs": cf.nprocs,
            "stripe_count": cf.stripe_count,
        }
        for cf in a.critical[:top]
    ]


def _bw(v: float | None) -> str:
    return "-" if v is None else f"{v / MiB:.1f}"


def _f(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def format_diagnosis(d: Diagnosis, t: Thresholds, top: int) -> str:
    """The text block of one job: its summary, ``top`` critical files, factors, causes and
    insights."""
    a = d.analysis
    lines = _summary_lines(d, t)
    lines += _critical_lines(a, top)
    lines.append(_factor_line(a))
    if d.causes:
        lines.append("  causes:")
        lines += [f"    {c.kind} [{c.source}]: {c.message}" for c in d.causes]
    if d.insights:
        lines.append("  insights:")
        lines += [f"    {i.code} {i.level}: {i.message}" for i in d.insights]
    return "\n".join(lines) + "\n"


def _summary_lines(d: Diagnosis, t: Thresholds) -> list[str]:
    """The job, its bytes and times, its bandwidths and whether ``t`` selects it."""
    a = d.analysis
    j = a.job
    name = a.log.path.rsplit("/", 1)[-1]
    return [
        f"job {a.log.jobid}  {j['exe'] or '(no exe)'}  {j['nprocs']} procs  "
        f"{j['pattern'] or '-'}  {j['interface'] or 'no I/O'}  ({name})",
        f"  bytes: {j['bytes_written'] / GiB:.3f} GiB written, {j['bytes_read'] / GiB:.3f} GiB "
        f"read; run {j['run_time_s']:.1f} s, I/O on the critical path {a.cover.union:.3f} s "
        f"(span {a.cover.span:.3f} s)",
        f"  bandwidth MiB/s: critical path {_bw(j['critical_bytes_per_s'])}, naive "
        f"{_bw(j['naive_bytes_per_s'])}, Darshan {_bw(j['darshan_bytes_per_s'])}, write "
        f"{_bw(j['write_bytes_per_s'])}, read {_bw(j['read_bytes_per_s'])}",
        f"  low bandwidth: {', '.join(d.low) or 'no'}  (more than {t.min_nprocs} procs, at "
        f"least {t.min_bytes_per_proc / MiB:g} MiB/proc, under {t.max_bytes_per_s / MiB:g} MiB/s)",
    ]


def _critical_lines(a: JobAnalysis, top: int) -> list[str]:
    """The critical files heading, then one line per file (first 8 OSTs)."""
    lines = [f"  critical files ({len(a.critical)}):"]
    for cf in a.critical[:top]:
        osts = ",".join(map(str, cf.osts[:8])) + ("..." if len(cf.osts) > 8 else "")
        lines.append(
            f"    {cf.exclusive_s:10.3f} s {cf.share:6.1%}  OST {osts or '-':<8} "
            f"{cf.nprocs:6d} procs  {cf.name}"
        )
    return lines


def _factor_line(a: JobAnalysis) -> str:
    f = a.factors
    return (
        f"  factors ({a.direction}): Small {_f(f['small'])}  Small<1KiB {_f(f['small_1k'])}  "
        f"Non-consec {_f(f['non_consec'])}  Coll {_f(f['coll'], '.0f')}  "
        f"OST# {_f(f['ost_count'], '.0f')}  Proc/OST {_f(f['proc_per_ost'], '.1f')}"
    )
