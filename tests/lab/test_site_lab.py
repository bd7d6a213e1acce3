"""The lab as a site: three hosts, one cluster, the leader killed and then cut off mid-fault.

Three hosts (network and UTS namespaces, each its own ``iolens run`` and state) share six LUNs,
two each, compared as one peer group through a storage map; LUN 5 (on host 2) is slowed. During
the fault the instance holding the peer comparison's lease is killed (SIGKILL, restarted 30 s
later), and later the instance leading then is cut off from the cluster for 40 s. One lab runs
for the module (about seven minutes); the assertions read what the instances indexed.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.lab.params import LabParams, LabResult
from pipeline.lab.site import SiteLab
from pipeline.sink.embedded import free_port
from tests.lab.conftest import lab_client, lab_docs, one_incident

NS = "sitetest"
SLOW = 5
TTL_S = 30.0  # the lab's jobs.lease_ttl_s
PARTITION_S = (75.0, 40.0)
"""After the MPI-IO job (from the onset + 5 s, about a minute), which has a rank on every host."""


@pytest.fixture(scope="module")
def site(
    lab_host: None, darshan_tarball: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LabResult, Elasticsearch]]:
    root = tmp_path_factory.mktemp("site")
    params = LabParams(
        lab_dir=root,
        hosts=3,
        slow=SLOW,
        delay_ms=25.0,
        onset_s=150.0,
        duration_s=120.0,
        recovery_s=60.0,
        kill_leader_s=15.0,
        partition=(0, *PARTITION_S),
        port=free_port(),
        namespace=NS,
        darshan_tarball=darshan_tarball,
    )
    result = SiteLab(params, say=lambda m: None).run()
    with lab_client(result.url, root) as client:
        yield result, client


def docs(client: Elasticsearch, stream: str, *filters: Mapping[str, Any]) -> list[dict[str, Any]]:
    return lab_docs(client, f"{stream}-{NS}", *filters)


def test_the_faults_happened_and_the_luns_are_spread_over_the_hosts(site) -> None:
    r, _ = site
    assert sorted(Counter(r.lun_hosts.values()).values()) == [2, 2, 2]
    what = [w for _t, w in r.events]
    assert any(w.startswith("kill-leader:") and "killed" in w for w in what), what
    assert any(w.startswith("kill-leader:") and "restarted" in w for w in what), what
    assert any("cut off from the cluster" in w for w in what), what
    assert any("joined again" in w for w in what), what


def test_the_mpi_job_ran_a_rank_on_the_host_of_each_of_its_luns(site) -> None:
    r, _ = site
    for job in (j for j in r.jobs if j.name.startswith("mpiio")):
        assert job.state == "COMPLETED"
        assert job.node == ",".join(sorted({r.host_of(lun) for lun in job.luns}))
    # Hydra started its proxies on the other hosts through the lab's launcher, for both jobs
    # (on the login node, where mpiexec runs, it starts its own)
    launched = Counter((r.params.lab_dir / "logs" / "mpi-launch.log").read_text().split())
    [mpi] = [j for j in r.jobs if j.name == "mpiio"]
    others = {r.host_of(lun) for lun in mpi.luns} - {r.host_of(1)}
    assert len(others) == 2  # ranks on LUNs 1, 2, 5 and 3: hosts 1, 2, 2 and 3
    assert launched == dict.fromkeys(others, 2), launched
    ranks = (r.params.lab_dir / "logs" / "mpiio.log").read_text()
    assert "rank=2 seconds=" in ranks and f"dir={r.mounts[SLOW]}" in ranks


def test_one_closed_incident_with_the_mpi_job_and_the_luns_fio_job(site) -> None:
    r, client = site
    doc = one_incident(client, NS)
    inc = doc["iolens"]["incident"]
    assert (inc["lun"], inc["status"]) == (r.slow_lun, "closed")
    # fio logs do not name a device: breaches join by time, and a loaded machine can add
    # another job's interval at the onset; the slowed LUN's job is there whatever the load
    assert f"{r.host_of(SLOW)}/lun{SLOW}.1" in inc["fio_jobs"]
    assert inc["fio_breaches"] > 0
    mpi = {str(j.job_id) for j in r.jobs if j.name == "mpiio"}
    assert mpi <= set(inc["jobs"])
    assert r.slow_lun.startswith(r.host_of(SLOW) + "/") and r.host_of(SLOW).endswith("-h2")


def _events(r: LabResult, word: str) -> list[float]:
    return [t for t, w in r.events if word in w]


def test_the_leases_move_to_a_live_instance_within_their_ttl(site) -> None:
    r, _ = site
    for fault in ("killed", "cut off from the cluster"):
        [at] = _events(r, fault)
        before = [h for t, name, h in r.leases if name.startswith("peer.") and t <= at]
        peer = [(t, h) for t, name, h in r.leases if name.startswith("peer.")]
        after = [(t, h) for t, h in peer if at < t <= at + TTL_S + 10]
        assert before and after, (fault, r.leases)
        assert any(h != before[-1] and h != "(released)" for _t, h in after), (fault, r.leases)


def test_the_scheduled_outputs_have_no_gap_and_no_duplicate(site) -> None:
    _, client = site
    windows: dict[tuple[str, str], list[int]] = defaultdict(list)
    ends: dict[int, list[float]] = defaultdict(list)
    for d in docs(client, "metrics-iolens.peer_anomaly"):
        peer = d["iolens"]["peer"]
        windows[(peer["metric"], peer["lun"])].append(peer["window_index"])
        ends[d["iolens"]["lease"]["generation"]].append(peer["window"]["end_s"])
    assert len(windows) == 6
    for key, found in windows.items():
        first = min(found)
        assert sorted(found) == list(range(first, first + len(found))), key  # no gap, no twice
    # fencing: a later generation takes over where the one before stopped, never before it
    generations = sorted(ends)
    assert len(generations) >= 2, "the lease never changed hands"
    for older, newer in itertools.pairwise(generations):
        assert max(ends[older]) < min(ends[newer]), (older, newer)
    latency = Counter(
        (
            d["iolens"]["scope"],
            d.get("host", {}).get("name"),
            d["fio"].get("job"),
            d["fio"].get("prefix"),
            d["fio"]["ddir"],
            d["fio"]["interval"]["start_ms"],
            d["fio"]["interval"]["ms"],
        )
        for d in docs(client, "metrics-fio.latency")
    )
    assert latency and max(latency.values()) == 1, latency.most_common(3)
    rankings = Counter(
        (d["iolens"]["persistence"]["lun"], d["iolens"]["persistence"]["hour_end_s"])
        for d in docs(client, "metrics-iolens.persistence")
    )
    assert rankings and max(rankings.values()) == 1


def test_every_hosts_fio_lines_are_indexed_once(site) -> None:
    r, client = site
    for host in sorted(set(r.lun_hosts.values())):
        h = host.rsplit("-h", 1)[1]
        logs = (r.params.lab_dir / "hosts" / f"h{h}" / "drops" / "fio").rglob("*_clat_hist.*.log")
        lines = sum(len(p.read_text().splitlines()) for p in logs)
        indexed = docs(client, "metrics-fio.histogram", {"term": {"host.name": host}})
        assert lines > 0 and len(indexed) == lines, host
        assert len({d["_id"] for d in indexed}) == lines


def test_the_cut_off_hosts_samples_arrived_after_the_partition(site) -> None:
    r, client = site
    [cut] = [w for _t, w in r.events if "cut off from the cluster" in w]
    host = cut.split()[1]
    [start] = _events(r, "cut off from the cluster")
    [end] = _events(r, "joined again")
    during = docs(
        client,
        "metrics-sysstat.diskio",
        {"term": {"host.name": host}},
        {"range": {"@timestamp": {"gte": int(start * 1000) + 2000, "lte": int(end * 1000) - 2000}}},
    )
    seconds = {d["@timestamp"] for d in during}
    assert len(seconds) >= (end - start) - 8  # sadc went on recording; delivered afterwards
