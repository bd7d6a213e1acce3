"""The incident recording the demo ships (pipeline/assets/demo/incident) and the settings the
demo reads it with (config/demo.yaml) describe the same run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from pipeline.demo.data import INCIDENT, recording, sources
from pipeline.lab.params import LabParams, LabResult
from pipeline.lab.workload import LabJob

REPO = Path(__file__).resolve().parents[2]
RECORDING = REPO / "pipeline" / "assets" / Path(*INCIDENT)
sys.path.insert(0, str(REPO / "scripts"))
import record_incident  # noqa: E402


def test_the_demo_reads_the_recording_with_the_labs_settings() -> None:
    meta = json.loads((RECORDING / "recording.json").read_text())
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    rec = recording()
    assert rec.slow_lun == "vm/loop8" and meta["host"] == rec.host == "vm"
    [fio] = [d for d in demo["drops"] if d["path"] == "incident/fio"]
    assert fio["host"] == rec.host
    luns = {f"{rec.host}/{lun['device']}": lun["mount_point"] for lun in meta["luns"].values()}
    assert rec.slow_lun in luns
    # the peer group holds every LUN, and each mount point names its LUN, as in the lab
    assert demo["peer"]["groups"] == {lun.replace("/", ":"): "lab" for lun in luns}
    assert demo["darshan"]["mounts"] == {m: lun for lun, m in luns.items()}
    assert demo["incident"]["sla"] == {"percentile": 95, "under_s": meta["params"]["sla_ms"] / 1000}
    assert rec.t0_s < rec.onset_s < rec.fault_end_s < rec.end_s
    assert meta["incidents"][0]["lun"] == rec.slow_lun
    assert {rec.jobs[j] for j in meta["incidents"][0]["jobs"]} == {"fio-lun3", "mpiio"}


def test_the_recording_is_small_and_its_logs_have_distinct_identities() -> None:
    files = [p for p in RECORDING.rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in files) <= 5 * 2**20
    logs = sorted(RECORDING.glob("fio/*/*_clat_hist.1.log.gz"))
    assert len(logs) == 14 * 6  # 14 segments of 30 s (one while the pipeline caught up) x 6 LUNs
    assert record_incident.distinct_identities(logs) == []
    shipped = {src for _drop, src, _rel in sources()}
    assert set(logs) <= shipped and RECORDING / "sadf" / "lab.csv" in shipped


def test_a_lab_result_packs_into_a_recording() -> None:
    job = LabJob(7001, "fio-lun1", (1,), 1, 100.0, 130.0, "COMPLETED")
    incident = {"iolens": {"incident": {"id": "x", "lun": "h/loop0", "windows": 3, "extra": 1}}}
    result = LabResult(
        LabParams(lab_dir=Path("/tmp/l")),
        "h",
        "http://127.0.0.1:9200",
        100.0,
        220.0,
        370.0,
        490.0,
        {1: "loop0", 2: "loop1", 3: "loop2"},
        {1: "/tmp/l/storage/mnt/lun1"},
        [job],
        incidents=[incident],
    )
    data = json.loads(json.dumps(result.to_json()))
    assert data["slow_lun"] == "h/loop2"  # LUN 3, the default --slow
    assert data["luns"]["1"] == {
        "device": "loop0",
        "host": "h",
        "mount_point": "/tmp/l/storage/mnt/lun1",
    }
    assert data["params"]["lab_dir"] == "/tmp/l"
    packed = record_incident.recording(data)
    assert packed["params"]["delay_ms"] == 20.0 and "lab_dir" not in packed["params"]
    assert packed["jobs"] == [
        {
            "job_id": 7001,
            "name": "fio-lun1",
            "luns": [1],
            "ntasks": 1,
            "start_s": 100.0,
            "end_s": 130.0,
            "state": "COMPLETED",
        }
    ]
    assert packed["incidents"] == [
        {
            "id": "x",
            "lun": "h/loop0",
            "start": None,
            "end": None,
            "windows": 3,
            "fio_breaches": None,
            "fio_jobs": None,
            "jobs": None,
        }
    ]
