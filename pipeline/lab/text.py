"""A lab's result as a person reads it (``iolens lab`` without ``--json``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from pipeline.lab.params import LabResult
from pipeline.records.json import Source

LAG_NAMES = {
    "fio": "fio interval over the SLA searchable",
    "sysstat": "sysstat await over the SLA searchable",
    "peer": "peer comparison marks the LUN faulty",
    "darshan": "Darshan diagnosis names the LUN",
    "incident": "incident searchable",
}


def _hms(t_s: float) -> str:
    return datetime.fromtimestamp(t_s, tz=UTC).strftime("%H:%M:%S")


def _iso_hms(iso: str | None) -> str:
    if not iso:
        return "open"
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).strftime("%H:%M:%S")


def render(r: LabResult) -> str:
    """Header, one block per incident, the lags, and where the data is."""
    lines = [_header(r), ""]
    if not r.incidents:
        lines.append("no incident: no LUN was persistently anomalous among its peers")
    for doc in r.incidents:
        lines += incident_lines(doc, {str(j.job_id): j.name for j in r.jobs})
    lines.append("")
    lines += _lag_lines(r)
    if r.lun_hosts:
        lines += ["", *site_lines(r)]
    lines += ["", *_data_lines(r)]
    return "\n".join(lines)


def site_lines(r: LabResult) -> list[str]:
    """A site's hosts, the faults the lab caused and who held each lease over time (seconds
    from the onset)."""
    hosts: dict[str, list[int]] = {}
    for lun, host in sorted(r.lun_hosts.items()):
        hosts.setdefault(host, []).append(lun)
    lines = ["hosts: " + "; ".join(f"{h} LUNs {','.join(map(str, n))}" for h, n in hosts.items())]
    lines += [f"  {_since(r, t)}  {what}" for t, what in r.events]
    lines.append("lease holders (instance host:pid:id):")
    lines += [f"  {_since(r, t)}  {name:24s} {holder}" for t, name, holder in r.leases]
    return lines


def _since(r: LabResult, t_s: float) -> str:
    return f"{t_s - r.onset_s:+7.0f} s"


def announce(r: LabResult, segments: int) -> str:
    """What the workload will be: LUNs, segments, the fault and the end (said at its start)."""
    p = r.params
    fault = (
        f"lun{p.slow} ({r.devices[p.slow]}) slowed by {p.delay_ms:g} ms per I/O from "
        f"+{p.onset_s:g} s to +{p.onset_s + p.duration_s:g} s"
        if p.delay_ms > 0
        else "no fault (--delay-ms 0)"
    )
    return (
        f"workload: fio on {p.luns} LUNs in {segments} segments of {p.segment_s} s; "
        f"{fault}; healthy load until +{r.end_s - r.t0_s:g} s"
    )


def _header(r: LabResult) -> str:
    """The machine, the LUNs, the fault and the workload's span."""
    p = r.params
    fault = (
        f"lun{p.slow} ({r.slow_lun}) slowed by {p.delay_ms:g} ms per I/O from "
        f"{_hms(r.onset_s)} to {_hms(r.fault_end_s)} UTC"
        if p.delay_ms > 0
        else "no fault"
    )
    return (
        f"iolens lab on {r.host}: {p.luns} LUNs, {fault} "
        f"(workload {_hms(r.t0_s)}-{_hms(r.end_s)}, {len(r.jobs)} jobs)"
    )


def _lag_lines(r: LabResult) -> list[str]:
    """When each stream showed the fault, seconds after its onset."""
    p = r.params
    lines = [
        "when each stream showed the fault (after its onset):"
        if p.delay_ms > 0
        else f"signs of a fault on lun{p.slow} after +{p.onset_s:g} s (none expected):"
    ]
    for name, lag in r.lags.items():
        shown = f"+{lag:.0f} s" if lag is not None else "never"
        lines.append(f"  {LAG_NAMES[name]:42s} {shown}")
    return lines


def _data_lines(r: LabResult) -> list[str]:
    """Where the data is and how to look at it."""
    p = r.params
    return [
        f"data: {r.url} (namespace {p.namespace}), e.g.",
        f"  curl -s '{r.url}/logs-iolens.incident-{p.namespace}/_search?pretty'",
        f"  iolens --config {p.lab_dir / 'iolens.yaml'} --es-url {r.url} report "
        "--out lab-report.html",
        f"stop the server with: iolens server stop --data-dir {p.lab_dir / 'noida-db'}",
    ]


def incident_lines(doc: Source, names: Mapping[str, str]) -> list[str]:
    """One incident document as a block of text."""
    i = doc["iolens"]["incident"]
    span = f"{_iso_hms(i['start'])} -> {_iso_hms(i.get('end'))} UTC"
    if i.get("duration_s") is not None:
        span += f" ({i['duration_s']:.0f} s)"
    rank = i.get("persistence_rank")
    sla = i["sla"]
    jobs = ", ".join(f"{j} ({names.get(j, '?')})" for j in i["jobs"]) or "none"
    return [
        f"INCIDENT {i['id']}  {i['status']}  {span}",
        f"  LUN           {i['lun']} mounted at {i.get('mount_point') or '?'} "
        f"(peer group {i['peer_group']}, {i['metric']})",
        f"  peer          {i['windows']} faulty windows, record score up to "
        f"{i['max_score']:.0f}" + (f", persistence rank {rank}" if rank else ""),
        f"  fio           {i['fio_breaches']} intervals over p{sla['percentile']:g} < "
        f"{sla['under_ms']:g} ms: {', '.join(i['fio_jobs']) or 'none'}",
        f"  Darshan jobs  {jobs}",
        *(f"  critical file {f}" for f in i["critical_files"]),
        f"  summary       {i['summary']}",
    ]
