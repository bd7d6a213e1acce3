"""Darshan logs, Slurm records and LMT exports through the main job into the test server."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.formats.darshan.chain import DarshanChain, darshan_tail
from pipeline.formats.darshan.pool import DarshanPool
from pipeline.formats.darshan.read import read_darshan
from pipeline.formats.lmt.encode import lmt_ost_document
from pipeline.formats.lmt.reduce import OstInterval
from pipeline.formats.slurm.decode import SlurmJob
from pipeline.formats.slurm.encode import slurm_job_document
from pipeline.jobs.darshan_evidence import server_evidence
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.records.core import Document
from pipeline.reducers.darshan_job import analyze
from pipeline.reducers.io_diagnosis import diagnose
from pipeline.settings import Settings, settings_from_mapping
from pipeline.shippers.whole_file import NotStable
from pipeline.sink.capabilities import detect
from pipeline.sink.documents import DocContext
from pipeline.sink.search import iter_hits, refresh
from pipeline.sink.templates import install, load_templates

pytestmark = pytest.mark.integration

DATA = Path(__file__).resolve().parents[1] / "data"
WHEEL_INPUTS = (
    "noposix.darshan",
    "noposixopens.darshan",
    "sample-badost.darshan",
    "sample-dxt-simple.darshan",
    "sample-goodost.darshan",
    "sample.darshan",
)


def make_settings(es_url: str, tmp: Path, ns: str, drops: list[dict[str, Any]]) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(tmp / "state"),
            "drops": drops,
            "darshan": {"workers": 2},
        }
    )


def run_once(settings: Settings, client: Elasticsearch) -> RunSummary:
    with MainJob(settings, client) as job:
        return job.run_once()


def sources(client: Elasticsearch, index: str, *sort: str) -> list[dict[str, Any]]:
    """Every document of ``index``; ``sort`` must end in a unique field (search_after)."""
    refresh(client, index)
    hits = iter_hits(client, index, {"match_all": {}}, [{f: "asc"} for f in sort])
    return [h["_source"] for h in hits]


def test_bundled_logs_are_indexed_once_and_a_bad_file_is_quarantined(
    es_url: str, client: Elasticsearch, tmp_path: Path, darshan_inputs: Path
) -> None:
    ns = f"dar{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    for name in WHEEL_INPUTS:
        shutil.copy(darshan_inputs / name, drop / name)
    (drop / "truncated.darshan").write_bytes((darshan_inputs / "sample.darshan").read_bytes()[:300])
    (drop / "notes.txt.darshan").write_bytes(b"not a log\n" * 40)
    settings = make_settings(es_url, tmp_path, ns, [{"type": "darshan", "path": str(drop)}])

    first = run_once(settings, client)
    assert first.bad_files == 2
    quarantined = sorted(p.name for p in (tmp_path / "state" / "deadletter" / "files").iterdir())
    assert quarantined == ["notes.txt.darshan", "truncated.darshan"]
    assert first.docs[f"logs-darshan.job-{ns}"]["indexed"] == 6
    files = sum(len(analyze(read_darshan(drop / n)).files) for n in WHEEL_INPUTS)
    assert first.docs[f"logs-darshan.file-{ns}"]["indexed"] == files
    assert first.docs[f"logs-iolens.io_diagnosis-{ns}"]["indexed"] == 1

    jobs = sources(client, f"logs-darshan.job-{ns}", "darshan.log.id")
    # records read (POSIX, MPI-IO, STDIO, Lustre layouts), as pydarshan counts them
    records = {j["darshan"]["log"]["name"]: j["darshan"]["log"]["records"] for j in jobs}
    assert (records["sample-badost.darshan"], records["sample.darshan"]) == (4099, 132)
    assert sorted(j["darshan"]["job"]["id"] for j in jobs) == [
        "2568372269",
        "4233209",
        "4478544",
        "6265799",
        "6909118",
        "83017637",
    ]
    [diag] = sources(client, f"logs-iolens.io_diagnosis-{ns}", "darshan.log.id")
    d = diag["iolens"]["io_diagnosis"]
    assert (d["job_id"], d["low_directions"], d["slow_osts"]) == ("6265799", ["write"], [14])
    assert d["critical_files"][0]["name"].endswith("ior-posix.out.00001507")
    assert d["critical_files"][0]["osts"] == [14]
    assert [(c["kind"], c.get("ost")) for c in d["causes"]] == [
        ("slow_ost", 14),
        ("dominant_file", 14),
    ]
    osts = {
        f["darshan"]["file"]["name"].rsplit(".", 1)[-1]: f["darshan"]["file"]["osts"]
        for f in sources(
            client, f"logs-darshan.file-{ns}", "darshan.log.id", "darshan.file.record_id"
        )
        if f["darshan"]["job"]["id"] == "6265799"
    }
    assert osts["00001507"] == [14]

    again = run_once(settings, client)
    assert (again.files, again.docs) == (0, {})


def test_every_bundled_and_shared_log_goes_through_the_pipeline(
    es_url: str, client: Elasticsearch, tmp_path: Path, darshan_log: Path
) -> None:
    # one log per test: none crashes the pipeline; each gives its job document
    ns = f"all{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    shutil.copy(darshan_log, drop / darshan_log.name)
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "darshan", "path": str(drop)}],
            # in this process: no worker to start for each of the hundred logs
            "darshan": {"workers": 1, "inline": True},
        }
    )
    summary = run_once(settings, client)
    assert summary.bad_files == 0
    assert summary.docs[f"logs-darshan.job-{ns}"] == {
        "indexed": 1,
        "duplicate": 0,
        "dead_lettered": 0,
    }
    assert sum(st["dead_lettered"] for st in summary.docs.values()) == 0


def test_a_log_is_read_once_it_has_been_still_for_stable_s(
    tmp_path: Path, darshan_inputs: Path
) -> None:
    log = tmp_path / "x.darshan"
    shutil.copy(darshan_inputs / "sample.darshan", log)
    mtime = log.stat().st_mtime
    now = [mtime + 1.0]
    pool = DarshanPool(1, inline=True)
    tail = darshan_tail(
        "k",
        str(log),
        DarshanChain(pool),
        stable_s=5.0,
        clock=lambda: now[0],
        monotonic=lambda: now[0],
    )
    with pytest.raises(NotStable, match="changed less than 5 s ago"):
        tail.read(1 << 20)
    now[0] = mtime + 5.0
    chunk = tail.read(1 << 20)
    [res] = tail.process(chunk, DocContext("t", "a"), 0.0)
    assert res.ref.end_offset == log.stat().st_size
    assert [d.index for d in res.docs[:2]] == ["logs-darshan.job-t", "logs-darshan.file-t"]
    assert tail.read(1 << 20).lines == ()  # shipped: nothing more


def test_slurm_and_lmt_exports_are_tailed_exactly_once(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    ns = f"hpc{uuid.uuid4().hex[:8]}"
    slurm, lmt = tmp_path / "slurm", tmp_path / "lmt"
    slurm.mkdir()
    lmt.mkdir()
    shutil.copy(DATA / "slurm" / "sacct_4478544.txt", slurm / "sacct.txt")
    lines = (DATA / "lmt" / "snx11025_2018-01-28.csv").read_bytes().splitlines(keepends=True)
    target = lmt / "snx11025.csv"
    target.write_bytes(b"".join(lines[:700]))  # cut in the middle of a time step
    drops = [
        {"type": "slurm", "path": str(slurm), "tz": "America/Los_Angeles"},
        {"type": "lmt", "path": str(lmt)},
    ]
    settings = make_settings(es_url, tmp_path, ns, drops)
    first = run_once(settings, client)
    assert first.docs[f"logs-slurm.job-{ns}"]["indexed"] == 11
    with target.open("ab") as fh:
        fh.write(b"".join(lines[700:]))
    second = run_once(settings, client)
    assert f"logs-slurm.job-{ns}" not in second.docs
    ivs = sources(client, f"metrics-lmt.ost-{ns}", "@timestamp", "lmt.ost.name")
    assert len(ivs) == 1440  # 24 OSTs x 60 steps, as when read in one go
    assert sum(s["lmt"]["ost"]["write_bytes"] for s in ivs) == 119_037_925_429
    assert sum(s["lmt"]["ost"]["read_bytes"] for s in ivs) == 6_347_173_888
    [job] = [
        s["slurm"]["job"]
        for s in sources(client, f"logs-slurm.job-{ns}", "slurm.job.id")
        if s["slurm"]["job"]["id"] == "4478544"
    ]
    assert (job["node_count"], len(job["nodes"])) == (128, 128)


def badost_window_lmt(ctx: DocContext, start_s: float, end_s: float) -> list[Document]:
    """LMT intervals over sample-badost's run: OST 14 moves 0.5 MiB/s, the 23 others 20 MiB/s
    (what pytokio's notes report for that day), 5 s steps."""
    docs = []
    t = start_s
    while t < end_s:
        for ost in range(24):
            rate = (0.5 if ost == 14 else 20.0) * 2**20
            iv = OstInterval(
                f"snx11168-OST{ost:04x}",
                "snx11168",
                ost,
                t,
                t + 5,
                0,
                int(rate * 5),
                0.0,
                rate,
                False,
                False,
                None,
            )
            docs.append(lmt_ost_document(ctx, iv, (), 0.0))
        t += 5
    return docs


def test_server_side_evidence_names_the_slow_ost(
    es_url: str, client: Elasticsearch, tmp_path: Path, darshan_inputs: Path
) -> None:
    ns = f"ev{uuid.uuid4().hex[:8]}"
    ctx = DocContext(ns, "t")
    install(client, load_templates(), detect(client))
    a = analyze(read_darshan(darshan_inputs / "sample-badost.darshan"))
    docs = badost_window_lmt(ctx, a.log.start_s, a.log.end_s)
    job = SlurmJob(
        id="6265799",
        job_id="6265799",
        display_id="6265799",
        step=None,
        user="glock",
        name="ior",
        partition=None,
        account=None,
        start_s=a.log.start_s,
        end_s=a.log.end_s,
        elapsed_s=780.0,
        state="COMPLETED",
        exit_code="0:0",
        node_count=86,
        tasks=2048,
        cpus=None,
        nodes=(),
    )
    docs.append(slurm_job_document(ctx, job, (), 0.0))
    peer = {
        "@timestamp": "2017-06-20T17:55:00.000Z",
        "host": {"name": "oss4"},
        "system": {"diskio": {"name": "sdc"}},
        # a window that ended during the job: 17:55:00 to 17:59:45 (the job ran 17:49:38-18:02:38)
        "iolens": {
            "anomalous": True,
            "peer": {"lun": "oss4/sdc", "window": {"start_s": 1497981300, "end_s": 1497981585}},
        },
    }
    body: list[dict[str, Any]] = []
    for d in docs:
        body += [{"create": {"_index": d.index, "_id": d.doc_id}}, dict(d.source)]
    body += [{"create": {"_index": f"metrics-iolens.peer_anomaly-{ns}"}}, peer]
    resp = client.bulk(operations=body, refresh=True)
    assert not resp["errors"]
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "darshan": {"ost_luns": {"14": "oss4/sdc"}},
        }
    )
    found = server_evidence(client, settings, a)
    assert found.node_count == 86
    assert found.anomalous_osts == {14: "oss4/sdc"}
    assert found.lmt is not None and found.lmt.bytes_per_s[14] == pytest.approx(0.5 * 2**20)
    d = diagnose(a, evidence=found)
    assert [(c.kind, c.ost, c.source) for c in d.causes] == [
        ("slow_ost", 14, "darshan"),
        ("slow_ost", 14, "lmt"),
        ("slow_ost", 14, "peer"),
        ("dominant_file", 14, "darshan"),
    ]
    # IOR here ran on POSIX: the aggregator checks (cb_nodes against Slurm's 86 nodes) stay out
    assert [i.code for i in d.insights] == ["P01", "P03", "P14", "P19", "M01"]
