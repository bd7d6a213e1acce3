"""The scheduled peer comparison over indexed sysstat data, against the offline diagnosis."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from elasticsearch import Elasticsearch

from pipeline.cli.main import main
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.settings import Settings, settings_from_mapping
from pipeline.sink.search import iter_hits, refresh

pytestmark = pytest.mark.integration


SMALL = ["--hosts", "4", "--luns", "3", "--luns-per-group", "6", "--interval", "15"]
FAULT = "fs001:dm-1:1.0:2.5:5:await"


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory, synth_sadf: Any) -> dict[str, Any]:
    """4 servers x 3 LUNs in 2 peer groups of 6, 15 s samples: 6 h fault-free for training and
    4 h with one await fault (fs001/dm-1, 01:00-02:30)."""
    root = tmp_path_factory.mktemp("peer")
    synth_sadf.generate(root / "train", 6, 21, [], SMALL)
    truth = synth_sadf.generate(root / "faulty", 4, 22, [FAULT], SMALL)
    groups = synth_sadf.groups_file(root / "groups.yaml", truth)
    return {"root": root, "truth": truth, "groups": groups}


@pytest.fixture(scope="module")
def trained(synth: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("thr") / "thresholds.json"
    root = synth["root"]
    assert (
        main(
            [
                "train",
                "--groups",
                str(synth["groups"]),
                "-o",
                str(out),
                *map(str, sorted((root / "train").glob("*.csv"))),
            ]
        )
        == 0
    )
    return out


def make_settings(
    es_url: str, drop: Path, state: Path, ns: str, synth: dict[str, Any], thresholds: Path
) -> Settings:
    groups = yaml.safe_load(Path(synth["groups"]).read_text())
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(state),
            "drops": [{"type": "sadf", "path": str(drop)}],
            "peer": {"groups": groups, "thresholds_file": str(thresholds)},
        }
    )


def run_once(settings: Settings, client: Elasticsearch) -> RunSummary:
    with MainJob(settings, client) as job:
        return job.run_once()


def verdicts(client: Elasticsearch, ns: str) -> dict[tuple[str, float], tuple[bool, bool]]:
    index = f"metrics-iolens.peer_anomaly-{ns}"
    refresh(client, index)
    out = {}
    for hit in iter_hits(
        client,
        index,
        {"match_all": {}},
        [{"iolens.peer.window.end_s": "asc"}, {"iolens.peer.lun": "asc"}],
    ):
        peer = hit["_source"]["iolens"]
        key = (f"{peer['peer']['group']}:{peer['peer']['lun']}", peer["peer"]["window"]["end_s"])
        assert key not in out
        out[key] = (peer["anomalous"], peer["faulty"])
    return out


def test_scheduled_comparison_matches_the_offline_diagnosis(
    es_url: str,
    client: Elasticsearch,
    synth: dict[str, Any],
    trained: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = synth["root"]
    files = sorted((root / "faulty").glob("*.csv"))
    drop = tmp_path / "drop"
    drop.mkdir()
    for f in files:
        shutil.copy(f, drop / f.name)
    ns = f"peer{uuid.uuid4().hex[:8]}"
    settings = make_settings(es_url, drop, tmp_path / "state", ns, synth, trained)
    first = run_once(settings, client)
    assert first.peer_windows > 0
    got = verdicts(client, ns)

    capsys.readouterr()
    assert (
        main(
            [
                "diagnose",
                "--groups",
                str(synth["groups"]),
                "--thresholds",
                str(trained),
                "--json",
                *map(str, files),
            ]
        )
        == 0
    )
    offline = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # the tail leaves each LUN's last 15 s interval open, so it may see one window less
    offline_faulty = {
        (lun, w["window_end"])
        for w in offline
        for lun in w["faulty"]
        if any(k[1] == w["window_end"] for k in got)
    }
    assert {k for k, (_, faulty) in got.items() if faulty} == offline_faulty
    assert {k[0] for k in offline_faulty} == {"0:fs001/dm-1"}

    # the hourly persistence ranking: the fs001 fault (01:00-02:30) leads at 02:00
    index = f"metrics-iolens.persistence-{ns}"
    refresh(client, index)
    top = {
        h["_source"]["iolens"]["persistence"]["hour_end_s"]: h["_source"]["iolens"]["persistence"]
        for h in iter_hits(
            client,
            index,
            {"term": {"iolens.persistence.rank": 1}},
            [{"iolens.persistence.hour_end_s": "asc"}],
        )
    }
    assert top[1767578400.0]["lun"] == "fs001/dm-1"  # 2026-01-05T02:00Z

    again = run_once(settings, client)  # nothing new: no window, no document
    assert again.peer_windows == 0
    assert verdicts(client, ns) == got


def test_state_carries_the_comparison_across_runs(
    es_url: str,
    client: Elasticsearch,
    synth: dict[str, Any],
    trained: Path,
    tmp_path: Path,
) -> None:
    """Data arriving in two parts gives the windows and verdicts of one pass."""
    files = sorted((synth["root"] / "faulty").glob("*.csv"))
    whole_ns, split_ns = f"w{uuid.uuid4().hex[:8]}", f"s{uuid.uuid4().hex[:8]}"
    whole, split = tmp_path / "whole", tmp_path / "split"
    whole.mkdir()
    split.mkdir()
    parts = {}
    for f in files:
        shutil.copy(f, whole / f.name)
        lines = f.read_bytes().splitlines(keepends=True)
        cut = len(lines) // 2
        parts[f.name] = lines[cut:]
        (split / f.name).write_bytes(b"".join(lines[:cut]))
    run_once(make_settings(es_url, whole, tmp_path / "st1", whole_ns, synth, trained), client)
    split_settings = make_settings(es_url, split, tmp_path / "st2", split_ns, synth, trained)
    run_once(split_settings, client)
    for name, rest in parts.items():
        with (split / name).open("ab") as fh:
            fh.write(b"".join(rest))
    run_once(split_settings, client)
    assert verdicts(client, split_ns) == verdicts(client, whole_ns)


def test_a_lun_missing_from_a_batch_does_not_restart_the_comparison() -> None:
    """Between runs, a group whose LUNs are all known continues (a LUN without samples in the
    batch counts as idle); only a new LUN restarts the group's comparison."""
    from pipeline.jobs.peer_job import PeerJob
    from pipeline.reducers.peer_params import PeerParams
    from pipeline.reducers.peer_thresholds import ThresholdEntry, Thresholds
    from pipeline.settings import PeerSettings
    from pipeline.sink.documents import DocContext, iso_ms

    luns = [("fs000", "dm-0"), ("fs000", "dm-1"), ("fs001", "dm-0"), ("fs001", "dm-1")]
    docs: list[Any] = []
    for i in range(200):
        t = 1767225600 + 15 * (i + 1)
        for host, dev in luns:
            docs.append(
                {
                    "_source": {
                        "@timestamp": iso_ms(t * 1000),
                        "host": {"name": host},
                        "system": {"diskio": {"name": dev}},
                        "sysstat": {"disk": {"await": 1.0 + (i % 7) * 0.1, "tps": 10.0}},
                    }
                }
            )
    state: dict[str, Any] = {}
    params = PeerParams()
    thresholds = Thresholds((ThresholdEntry("g", "await", 5.0, 1),), params, 0.0, 1.0)
    job = PeerJob(
        hits=lambda index, q, s: [d for d in docs if _before(d, q)],
        emit=lambda d: None,
        settle=lambda: True,
        peer=PeerSettings(groups={"*": "g"}, settle_s=0),
        thresholds=thresholds,
        ctx=DocContext("t", "a"),
        lease=lambda: True,
        load_state=lambda: state.get("s"),
        save_state=lambda s: state.update(s=dict(s)),
    )
    assert job.run(force=True) > 0
    seen = state["s"]["detectors"]["g\x1fawait"]["sm_seen"]
    docs.append(
        {
            "_source": {  # nothing new for fs001/dm-1 in the next batch
                "@timestamp": iso_ms((1767225600 + 15 * 201) * 1000),
                "host": {"name": "fs000"},
                "system": {"diskio": {"name": "dm-0"}},
                "sysstat": {"disk": {"await": 1.0, "tps": 1}},
            }
        }
    )
    job.run(force=True)
    # the detector went on by one sample (a restart would hold no smoothed sample yet)
    assert state["s"]["detectors"]["g\x1fawait"]["sm_seen"] == seen + 1
    assert state["s"]["detectors"]["g\x1fawait"]["luns"] == [f"{h}/{d}" for h, d in luns]


def _before(doc: dict[str, Any], query: Any) -> bool:
    """The watermark filter of the job's query, applied to a fake document."""
    from datetime import datetime

    t = datetime.fromisoformat(doc["_source"]["@timestamp"].replace("Z", "+00:00")).timestamp()
    for f in query["bool"]["filter"]:
        rng = f.get("range", {}).get("@timestamp")
        if rng and "gt" in rng and not t * 1000 > rng["gt"]:
            return False
    return True
