"""The incident job against the embedded server: documents built by the pipeline's own
builders (peer windows, merged fio latencies) and diagnoses in the mapped shape go in; one
incident comes out, is updated in place (same ``_id``) when it closes, is not written again
when nothing changed, and keeps its id when its start falls out of the look-back or moves
earlier."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from elasticsearch import Elasticsearch, helpers

from pipeline.jobs.incident_job import IncidentJob
from pipeline.settings import Settings, settings_from_mapping
from pipeline.sink.capabilities import detect
from pipeline.sink.documents import (
    DocContext,
    LatencyKey,
    PeerVerdict,
    latency_document,
    peer_anomaly_document,
)
from pipeline.sink.templates import install, load_templates

pytestmark = pytest.mark.integration

T0 = 1_795_000_000.0
LUNS = ("loop0", "loop1", "loop2", "loop3")
SLOW = "loop2"
MOUNT = "/lab/storage/mnt/lun3"


def settings(ns: str) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"namespace": ns},
            "peer": {"downsample_s": 1.0, "ma_width": 5, "win_size": 30, "win_shift": 10},
            "incident": {
                "sla": {"percentile": 95, "under_s": 0.01},
                "gap_s": 30.0,
                "margin_s": 30.0,
                "lookback_s": 600.0,
            },
            "darshan": {"proc_mounts": False},
        }
    )


def windows(ctx: DocContext, verdicts: str, first: int = 0, metric: str = "await") -> list[Any]:
    """One window of ``metric`` per character for the slow LUN ('.', 'a' anomalous, 'F' faulty
    too, 'f' faulty only), the others normal; window i ends at T0 + 30 + 10 i."""
    docs = []
    for i, c in enumerate(verdicts, start=first):
        end = T0 + 30 + 10 * i
        for dev in LUNS:
            slow = dev == SLOW
            v = PeerVerdict(
                "lab", metric, "vm", dev, i, end - 29, end, 30.0,
                100.0 if slow and c in "aF" else 0.0, 5.0, 2.0, 12,
                slow and c in "aF", slow and c in "Ff",
            )  # fmt: skip
            docs.append(peer_anomaly_document(ctx, v, T0 * 1000))
    return docs


def latency(ctx: DocContext, prefix: str, start_s: float, p95_ms: float) -> Any:
    key = LatencyKey("job", "vm", "1", "mixed", int(start_s * 1000), 5000, "window", prefix)
    stats = {"samples": 200, "p50": 1e5, "p95": p95_ms * 1e6, "p99": p95_ms * 1e6}
    return latency_document(ctx, key, stats, 2, T0 * 1000)


def diagnosis(ns: str, job: str, start_s: float, end_s: float, lun: str) -> dict[str, Any]:
    from pipeline.sink.documents import iso_ms

    name = f"{MOUNT}/mpiio.2.dat" if lun.endswith(SLOW) else "/lab/storage/mnt/lun1/fio.dat"
    return {
        "_op_type": "create",
        "_index": f"logs-iolens.io_diagnosis-{ns}",
        "_id": f"diag-{job}",
        "@timestamp": iso_ms(start_s * 1000),
        "darshan": {"job": {"id": job}, "log": {"id": f"log-{job}"}},
        "iolens": {
            "io_diagnosis": {
                "job_id": job,
                "log_id": f"log-{job}",
                "end": iso_ms(end_s * 1000),
                "critical_files": [
                    {"name": name, "lun": lun, "mount_point": name.rsplit("/", 1)[0]}
                ],
            }
        },
    }


def index(client: Elasticsearch, docs: list[Any]) -> None:
    actions = [
        d
        if isinstance(d, dict)
        else {"_op_type": "create", "_index": d.index, "_id": d.doc_id, **d.source}
        for d in docs
    ]
    _, errors = helpers.bulk(client, actions, raise_on_error=False, refresh=True)
    assert not errors, errors[:2]


def incidents(client: Elasticsearch, ns: str) -> list[dict[str, Any]]:
    index_name = f"logs-iolens.incident-{ns}"
    client.indices.refresh(index=index_name)
    hits = client.search(index=index_name, size=100, seq_no_primary_term=True)["hits"]["hits"]
    return hits


def test_an_incident_is_written_updated_in_place_and_kept(client: Elasticsearch) -> None:
    ns = f"inc{uuid.uuid4().hex[:8]}"
    ctx = DocContext(namespace=ns)
    install(client, load_templates(), detect(client))
    now = [T0 + 200.0]
    job = IncidentJob(client, settings(ns), lambda: True, lambda: now[0])

    # the LUN turns slow: windows 0-4 normal, 5-6 anomalous, 7-12 faulty, still open
    index(client, windows(ctx, ".....aaFFFFFF"))
    index(
        client,
        [
            latency(ctx, "lun3", T0 + 80, 25.0),  # the slow LUN's fio job, inside the margin
            latency(ctx, "lun3", T0 + 120, 30.0),
            latency(ctx, "lun1", T0 + 120, 0.4),  # a healthy one, under the SLA
            diagnosis(ns, "4243", T0 + 100, T0 + 140, f"vm/{SLOW}"),
            diagnosis(ns, "4240", T0 + 20, T0 + 60, f"vm/{SLOW}"),  # before it was slow
            diagnosis(ns, "4244", T0 + 100, T0 + 140, "vm/loop0"),  # another LUN
        ],
    )
    assert job.run() == 1
    [hit] = incidents(client, ns)
    inc = hit["_source"]["iolens"]["incident"]
    assert (inc["status"], inc["end"], inc["lun"], inc["device"]) == (
        "open",
        None,
        "vm/loop2",
        SLOW,
    )
    assert inc["start"] == "2026-11-18T11:08:00.000Z"  # window 5 ends at T0 + 80
    assert (inc["jobs"], inc["fio_jobs"], inc["fio_breaches"]) == (["4243"], ["vm/lun3.1"], 2)
    assert (inc["mount_point"], inc["critical_files"]) == (MOUNT, [f"{MOUNT}/mpiio.2.dat"])
    assert hit["_id"] == inc["id"]
    assert job.run() == 0  # nothing changed: not written again
    assert incidents(client, ns)[0]["_seq_no"] == hit["_seq_no"]

    # recovery: five normal windows (faulty ones end at T0 + 150; closed once evaluated to 180)
    index(client, windows(ctx, ".....", first=13))
    now[0] = T0 + 260.0
    assert job.run() == 1
    [closed] = incidents(client, ns)
    inc = closed["_source"]["iolens"]["incident"]
    assert (closed["_id"], inc["status"]) == (hit["_id"], "closed")
    assert inc["end"] == "2026-11-18T11:09:10.000Z"  # window 12 ends at T0 + 150
    assert closed["_seq_no"] > hit["_seq_no"]  # the same document, written again

    # long after: its start is out of the look-back; it is left as it is, no second one
    now[0] = T0 + 2000.0
    assert job.run() == 0
    assert [h["_id"] for h in incidents(client, ns)] == [hit["_id"]]


def test_an_incident_whose_start_moves_earlier_stays_one_document(client: Elasticsearch) -> None:
    """A second metric of the slow LUN turns faulty after the incident opened, from a streak
    that began before the first metric's: the incident's start moves earlier, and the stored
    incident is updated under its id rather than a second one opened (and so it stays once
    it closed)."""
    ns = f"inc{uuid.uuid4().hex[:8]}"
    ctx = DocContext(namespace=ns)
    install(client, load_templates(), detect(client))
    now = [T0 + 200.0]
    job = IncidentJob(client, settings(ns), lambda: True, lambda: now[0])
    index(client, windows(ctx, ".....aaFFFFFF"))
    assert job.run() == 1
    [opened] = incidents(client, ns)
    assert opened["_source"]["iolens"]["incident"]["start"] == "2026-11-18T11:08:00.000Z"

    index(client, windows(ctx, "...aaaaFFFFFF", metric="util"))  # its streak began at window 3
    assert job.run() == 1
    [moved] = incidents(client, ns)
    inc = moved["_source"]["iolens"]["incident"]
    assert (moved["_id"], inc["id"], inc["status"]) == (opened["_id"], opened["_id"], "open")
    assert inc["start"] == "2026-11-18T11:07:40.000Z"  # window 3 ends at T0 + 60

    for metric in ("await", "util"):
        index(client, windows(ctx, ".....", first=13, metric=metric))
    now[0] = T0 + 260.0
    assert job.run() == 1
    [closed] = incidents(client, ns)
    inc = closed["_source"]["iolens"]["incident"]
    assert (closed["_id"], inc["status"], inc["start"]) == (
        opened["_id"],
        "closed",
        "2026-11-18T11:07:40.000Z",
    )
    assert job.run() == 0  # closed, found again under the id it was stored with
    assert [h["_id"] for h in incidents(client, ns)] == [opened["_id"]]
