"""The incident lab, live: real LUNs, real fio, sadc, MPI-IO and Darshan, one LUN slowed.

One short lab runs for the module (about six minutes: 150 s warm-up, as the thresholds are
trained on it and a shorter one trains them low; 100 s fault on LUN 5, 25 ms per I/O; 60 s
recovery), then every assertion reads what ``iolens run`` indexed. It needs root,
/dev/fuse, loop devices and the Debian packages ``make test`` installs; where one is missing
the test is skipped with that reason (failed under ``IOLENS_REQUIRE_LAB=1``, as in CI).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.lab.params import LabParams, LabResult
from pipeline.lab.run import Lab
from pipeline.sink.embedded import free_port
from tests.lab.conftest import lab_client, lab_docs, one_incident

NS = "labtest"
SLOW = 5


@pytest.fixture(scope="module")
def lab(
    lab_host: None, darshan_tarball: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LabResult, Elasticsearch]]:
    root = tmp_path_factory.mktemp("lab")
    params = LabParams(
        lab_dir=root,
        slow=SLOW,
        delay_ms=25.0,
        onset_s=150.0,
        duration_s=100.0,
        recovery_s=60.0,
        port=free_port(),
        namespace=NS,
        darshan_tarball=darshan_tarball,
    )
    result = Lab(params, say=lambda m: None).run()
    with lab_client(result.url, root) as client:
        yield result, client


def docs(client: Elasticsearch, stream: str, *filters: Mapping[str, Any]) -> list[dict[str, Any]]:
    return lab_docs(client, f"{stream}-{NS}", *filters)


def test_the_peer_comparison_indicts_only_the_slowed_lun_after_onset(lab) -> None:
    r, client = lab
    faulty = docs(client, "metrics-iolens.peer_anomaly", {"term": {"iolens.faulty": True}})
    assert faulty, "the slowed LUN was never indicted"
    assert {d["iolens"]["peer"]["lun"] for d in faulty} == {r.slow_lun}
    assert min(d["iolens"]["peer"]["window"]["end_s"] for d in faulty) > r.onset_s
    anomalous = docs(client, "metrics-iolens.peer_anomaly", {"term": {"iolens.anomalous": True}})
    assert all(d["iolens"]["peer"]["window"]["end_s"] > r.onset_s for d in anomalous)


def test_the_slowed_lun_leads_the_persistence_ranking(lab) -> None:
    r, client = lab
    rankings = docs(
        client,
        "metrics-iolens.persistence",
        {"range": {"iolens.persistence.hour_end_s": {"gt": r.onset_s}}},
        {"range": {"iolens.persistence.hour_end_s": {"lte": r.fault_end_s + 30}}},
    )
    assert rankings
    firsts = {
        d["iolens"]["persistence"]["lun"]
        for d in rankings
        if d["iolens"]["persistence"]["rank"] == 1
    }
    assert firsts == {r.slow_lun}


def test_only_the_fio_job_on_the_slowed_lun_breaches_the_sla(lab) -> None:
    r, client = lab
    over = docs(
        client,
        "metrics-fio.latency",
        {"term": {"iolens.scope": "job"}},
        {"range": {"fio.clat_ns.p95": {"gt": r.params.sla_ms * 1e6}}},
    )
    assert {(d["host"]["name"], d["fio"]["prefix"], d["fio"]["job"]) for d in over} == {
        (r.host, f"lun{SLOW}", "1")
    }
    times = [d["fio"]["interval"]["start_ms"] / 1000 for d in over]
    assert r.onset_s - 5 <= min(times) and max(times) <= r.fault_end_s + 5


def test_the_mpi_job_is_diagnosed_with_its_file_on_the_slowed_lun(lab) -> None:
    r, client = lab
    [mpi] = [j for j in r.jobs if j.name == "mpiio"]  # the one during the fault
    [d] = docs(
        client,
        "logs-iolens.io_diagnosis",
        {"term": {"iolens.io_diagnosis.job_id": str(mpi.job_id)}},
    )
    diag = d["iolens"]["io_diagnosis"]
    top = diag["critical_files"][0]
    assert top["name"] == f"{r.mounts[SLOW]}/mpiio.2.dat"
    assert (top["lun"], top["mount_point"]) == (r.slow_lun, r.mounts[SLOW])
    causes = {c["kind"]: c for c in diag["causes"]}
    assert causes["dominant_file"]["files"] == [top["name"]]
    assert (causes["anomalous_lun"]["lun"], causes["anomalous_lun"]["files"]) == (
        r.slow_lun,
        [top["name"]],
    )


def test_one_closed_incident_with_exactly_the_affected_jobs(lab) -> None:
    r, client = lab
    doc = one_incident(client, NS)
    assert r.incidents == [{k: v for k, v in doc.items() if k != "_id"}]
    inc = doc["iolens"]["incident"]
    assert (inc["lun"], inc["mount_point"], inc["status"]) == (r.slow_lun, r.mounts[SLOW], "closed")
    assert inc["fio_jobs"] == [f"{r.host}/lun{SLOW}.1"]
    assert inc["fio_breaches"] > 0
    on_slow = {str(j.job_id): j for j in r.jobs if SLOW in j.luns}
    assert set(inc["jobs"]) <= set(on_slow)
    during = {i for i, j in on_slow.items() if r.onset_s <= j.start_s and j.end_s <= r.fault_end_s}
    mpi = {str(j.job_id) for j in r.jobs if j.name == "mpiio"}
    assert during | mpi <= set(inc["jobs"])
    before_or_after = {
        i for i, j in on_slow.items() if j.end_s < r.onset_s - 1 or j.start_s > r.fault_end_s + 1
    }
    assert not before_or_after & set(inc["jobs"])
    assert set(inc["critical_files"]) == {
        f"{r.mounts[SLOW]}/fio.dat",
        f"{r.mounts[SLOW]}/mpiio.2.dat",
    }
    assert inc["id"] == doc["_id"]


STREAMS = (
    "metrics-fio.histogram",
    "metrics-fio.latency",
    "metrics-sysstat.diskio",
    "metrics-iolens.peer_anomaly",
    "metrics-iolens.persistence",
    "logs-darshan.job",
    "logs-darshan.file",
    "logs-iolens.io_diagnosis",
    "logs-slurm.job",
    "logs-iolens.incident",
)


def test_ids_are_unique_and_a_second_run_adds_nothing(lab) -> None:
    r, client = lab
    before = {}
    for stream in STREAMS:
        found = docs(client, stream)
        ids = [d["_id"] for d in found]
        assert len(ids) == len(set(ids)), stream
        before[stream] = sorted(ids)
    assert len(before["logs-slurm.job"]) == len(r.jobs)
    cfg = r.params.lab_dir / "iolens.yaml"
    cmd = [sys.executable, "-m", "pipeline.cli.main", "--config", str(cfg), "--es-url", r.url]
    proc = subprocess.run([*cmd, "run", "--once"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    after = {stream: sorted(d["_id"] for d in docs(client, stream)) for stream in STREAMS}
    assert after == before
