"""sysstat data through the main job: downsampled documents, exactly once, tailing, sadc files."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.formats.sysstat.decode import parse_sadf_csv
from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.parsers.errors import ParseError
from pipeline.records.core import DiskSample
from pipeline.reducers.downsample import Downsampler
from pipeline.settings import Settings, settings_from_mapping
from pipeline.sink.documents import iso_ms
from pipeline.sink.search import iter_hits, refresh

SYSSTAT = Path(__file__).resolve().parents[3] / "shared" / "data" / "sysstat"
RECORDING = SYSSTAT / "exp_ds2_1s_sadf_d.csv"  # 240 s x 6 devices, 1 s samples

pytestmark = pytest.mark.integration


def make_settings(es_url: str, drop: Path, state: Path, ns: str, kind: str) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": ns},
            "state_dir": str(state),
            "drops": [{"type": kind, "path": str(drop)}],
            "peer": {"downsample_s": 15},
        }
    )


def run_once(settings: Settings, client: Elasticsearch) -> RunSummary:
    with MainJob(settings, client) as job:
        return job.run_once()


def finished_intervals(lines: list[bytes]) -> list[DiskSample]:
    """What a tail may index: intervals the downsampler finished without a final flush."""
    ds = Downsampler(15)
    out: list[DiskSample] = []
    for rec in parse_sadf_csv(lines, "x"):
        assert not isinstance(rec, ParseError)
        out += ds.add(rec)
    return out


def indexed(client: Elasticsearch, ns: str) -> dict[tuple[str, float], dict[str, Any]]:
    index = f"metrics-sysstat.diskio-{ns}"
    refresh(client, index)
    docs = {}
    for hit in iter_hits(
        client, index, {"match_all": {}}, [{"@timestamp": "asc"}, {"system.diskio.name": "asc"}]
    ):
        s = hit["_source"]
        key = (s["system"]["diskio"]["name"], s["@timestamp"])
        assert key not in docs
        docs[key] = s["sysstat"]["disk"]
    return docs


def test_tailed_csv_is_downsampled_once_across_appends_and_restarts(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    ns = f"sys{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    lines = RECORDING.read_bytes().splitlines(keepends=True)
    target = drop / "vm_sadf_d.csv"
    target.write_bytes(b"".join(lines[:700]))  # cut in the middle of a 15 s interval
    settings = make_settings(es_url, drop, tmp_path / "state", ns, "sadf")
    first = run_once(settings, client)
    assert first.bad_lines == 0
    with target.open("ab") as fh:
        fh.write(b"".join(lines[700:]))
    run_once(settings, client)
    again = run_once(settings, client)  # only the open last interval is read again
    assert again.docs.get(f"metrics-sysstat.diskio-{ns}", {}).get("indexed", 0) == 0

    expected = finished_intervals([line.rstrip(b"\n") for line in lines])
    docs = indexed(client, ns)
    # 6 devices x (the first 7 s: the recording starts at 04:23:24, off the 15 s grid, plus
    # 15 full intervals); the last interval is still open and waits for more lines
    assert len(docs) == len(expected) == 6 * 16
    assert sorted({s.interval_s for s in expected}) == [7.0, 15.0]
    for s in expected:
        got = docs[(s.device, iso_ms(s.end_s * 1000))]
        # noida-db returns _source floats with 16 significant digits
        assert [got["tps"], got["await"], got["util"], got["interval_s"]] == pytest.approx(
            [s.tps, s.await_ms, s.util_pct, s.interval_s], rel=1e-15
        )


def test_sadc_binary_files_are_converted_and_flushed(
    es_url: str, client: Elasticsearch, tmp_path: Path
) -> None:
    ns = f"sadc{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    shutil.copy(SYSSTAT / "sa_test", drop / "sa_test")
    summary = run_once(make_settings(es_url, drop, tmp_path / "state", ns, "sadc"), client)
    assert summary.bad_files == 0
    docs = indexed(client, ns)
    assert docs  # a whole file: its last interval is complete and indexed too
    assert {k[0] for k in docs} >= {"vda"}
    again = run_once(make_settings(es_url, drop, tmp_path / "state", ns, "sadc"), client)
    assert again.lines == 0


def test_samples_coarser_than_the_target_are_indexed_as_they_are_and_said_once(
    es_url: str, client: Elasticsearch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``sadf -d -U peer_fault.sa 60 -- -d -p`` (60 s samples, as sa1's 600 s files are coarse)."""
    if shutil.which("sadf") is None:
        pytest.fail("sadf not found: run `make test` (installs sysstat)")
    sa = Path(__file__).resolve().parents[1] / "data" / "sysstat" / "peer_fault.sa"
    env = {"TZ": "UTC", "LC_ALL": "C", "PATH": "/usr/bin:/bin"}
    argv = ["sadf", "-d", "-U", str(sa), "60", "--", "-d", "-p"]
    csv = subprocess.run(argv, check=True, capture_output=True, env=env).stdout
    drop = tmp_path / "drop"
    drop.mkdir()
    (drop / "vm_sadf_d.csv").write_bytes(csv)
    ns = f"sys{uuid.uuid4().hex[:8]}"
    with caplog.at_level("WARNING", logger="pipeline.formats.sysstat.chain"):
        summary = run_once(make_settings(es_url, drop, tmp_path / "state", ns, "sadf"), client)
    assert summary.bad_lines == 0
    said = [r.getMessage() for r in caplog.records if "coarser" in r.getMessage()]
    assert said == [
        f"{drop / 'vm_sadf_d.csv'}: vm samples every 60 s, coarser than the downsampling "
        "interval (peer.downsample_s = 15 s): indexed at 60 s; the scheduled peer comparison "
        "compares 15 s samples only (iolens diagnose compares these at their own interval)"
    ]
    docs = indexed(client, ns)
    rows = [line for line in csv.splitlines() if not line.startswith(b"#")]
    assert len(docs) == len(rows) == 9 * 7  # every sample, once
    assert {d["interval_s"] for d in docs.values()} == {60.0}
