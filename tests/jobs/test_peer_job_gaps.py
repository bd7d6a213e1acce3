"""The scheduled peer comparison across a gap in one server's data (seed 001).

The job reads the indexed diskio documents; here they come from the real two-server recording
``tests/data/sysstat/peer_restart_*`` (server A's sadc stopped for 74 s, no fault; provenance in
that directory's README), served by a fake search, so the job's grid, its windows and its
``metrics-iolens.peer_anomaly`` documents can be checked against the offline diagnosis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.jobs.peer_diagnosis import diagnose, train
from pipeline.jobs.peer_job import PeerJob
from pipeline.jobs.peer_recording import load, load_lines
from pipeline.records.core import Document
from pipeline.reducers.peer_params import PeerParams
from pipeline.settings import PeerSettings
from pipeline.sink.documents import DocContext, iso_ms

DATA = Path(__file__).resolve().parents[1] / "data" / "sysstat"
RESTART = [DATA / f"peer_restart_{s}_sadf_d.csv" for s in ("srvA_1", "srvA_2", "srvB")]
CLEAN = DATA / "peer_clean_sadf_d.csv"
GROUPS = {"srv*:loop*": "lun"}
METRICS = ("await", "tps")


def diskio_hits() -> list[dict[str, Any]]:
    """One diskio document per LUN x one-second sample, as the sadf shipper indexes them."""
    rec = load_lines(RESTART, 1.0)
    out: list[dict[str, Any]] = []
    for samples in rec.samples.values():
        for s in samples:
            disk = {"await": s.await_ms, "tps": s.tps, "interval_s": s.interval_s}
            out.append(
                {
                    "_source": {
                        "@timestamp": iso_ms(s.end_s * 1000),
                        "host": {"name": s.host},
                        "system": {"diskio": {"name": s.device}},
                        "sysstat": {"disk": disk},
                    }
                }
            )
    out.sort(key=lambda h: str(h["_source"]["@timestamp"]))
    return out


def test_the_job_skips_the_restarted_servers_luns_as_the_offline_diagnosis() -> None:
    params = PeerParams()
    thresholds = train(load([CLEAN], 1.0), METRICS, {"vm:loop[0-5]": "lun"}, params)
    emitted: list[Document] = []
    state: dict[str, Any] = {}
    hits = diskio_hits()
    job = PeerJob(
        hits=lambda index, q, s: hits,
        emit=emitted.append,
        settle=lambda: True,
        peer=PeerSettings(metrics=METRICS, downsample_s=1.0, groups=GROUPS, settle_s=0),
        thresholds=thresholds,
        ctx=DocContext("t", "a"),
        lease=lambda: True,
        load_state=lambda: state.get("s"),
        save_state=lambda s: state.update(s=dict(s)),
    )
    assert job.run(force=True) == 20  # 10 windows x 2 metrics
    json.dumps(state["s"], allow_nan=False)  # missing samples are saved as null, not NaN

    docs = [d.source["iolens"] for d in emitted if "peer" in d.source.get("iolens", {})]
    assert len(docs) == 20 * 6
    assert not [d for d in docs if d["anomalous"] or d["faulty"]]
    skipped = {
        (d["peer"]["metric"], d["peer"]["window_index"], d["peer"]["lun"])
        for d in docs
        if "skipped" in d["peer"]
    }
    a = [f"srvA/loop{i}" for i in range(3)]
    assert skipped == {(m, j, lun) for m in METRICS for j in (4, 5, 6) for lun in a}
    for d in docs:
        peer = d["peer"]
        if "skipped" in peer:
            assert (peer["skipped"], d["actual"], d["record_score"]) == ("too_few_samples", [], 0.0)
            assert peer["samples"] < params.min_samples
        else:
            assert len(d["actual"]) == 1 and peer["samples"] >= params.min_samples

    rec = load(RESTART, 1.0)
    for metric in METRICS:
        offline = diagnose(rec, metric, GROUPS, params, thresholds)
        mine = sorted(
            (d for d in docs if d["peer"]["metric"] == metric),
            key=lambda d: (d["peer"]["window_index"], d["peer"]["lun"]),
        )
        want = [
            (r.index, lun, r.samples[i], lun in r.skipped)
            for r in offline
            for i, lun in enumerate(r.luns)
        ]
        got = [
            (
                d["peer"]["window_index"],
                d["peer"]["lun"],
                d["peer"]["samples"],
                "skipped" in d["peer"],
            )
            for d in mine
        ]
        assert got == want


def test_the_job_waits_for_a_server_behind_at_most_max_wait() -> None:
    """A server cut off from the cluster delivers late: the windows wait for its samples (up to
    its latest) while it sent any within peer.max_wait_s, and go on without it after that."""
    from pipeline.reducers.peer_thresholds import ThresholdEntry, Thresholds

    now = 1_800_000_000.0
    cutoffs: list[int] = []
    sent = {"srvA": now - 50.0, "srvB": now - 4.0, "srvC": now - 10.0}

    def hits(index: str, query: Any, sort: Any) -> list[Any]:
        [rng] = [f["range"]["@timestamp"] for f in query["bool"]["filter"] if "range" in f]
        cutoffs.append(rng["lte"])
        return []

    def latest(index: str, since_s: float) -> dict[str, float]:
        assert index == "metrics-sysstat.diskio-t"
        return {h: t for h, t in sent.items() if t > since_s}

    job = PeerJob(
        hits=hits,
        emit=lambda d: None,
        settle=lambda: True,
        peer=PeerSettings(groups={"*": "g"}, settle_s=5.0, max_wait_s=60.0),
        thresholds=Thresholds((ThresholdEntry("g", "await", 5.0, 1),), PeerParams(), 0.0, 1.0),
        ctx=DocContext("t", "a"),
        lease=lambda: True,
        load_state=lambda: None,
        save_state=lambda s: None,
        clock=lambda: now,
        monotonic=lambda: 0.0,
        latest=latest,
    )
    job.run()
    sent["srvA"] = now - 70.0  # nothing from srvA for longer than max_wait_s: not waited for
    job.run()
    assert cutoffs == [int((now - 50.0) * 1000), int((now - 10.0) * 1000)]
