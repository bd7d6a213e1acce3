"""``iolens darshan diagnose`` and ``iolens darshan stats`` as users type them."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.cli.main import main
from pipeline.formats.lmt.decode import EXPORT_QUERY


def test_diagnose_prints_the_critical_file_and_the_slow_ost(
    darshan_inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["darshan", "diagnose", str(darshan_inputs / "sample-badost.darshan")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "job 6265799  ior  2048 procs  N-N  POSIX  (sample-badost.darshan)"
    assert "  low bandwidth: write  (more than 1000 procs" in out
    assert lines[4] == "  critical files (3):"
    assert lines[5].split() == [
        "769.082",
        "s",
        "98.8%",
        "OST",
        "14",
        "1",
        "procs",
        "/scratch1/scratchdirs/glock/test-scratch1/ior-posix.out.00001507",
    ]
    assert (
        "    slow_ost [darshan]: OST 14 is slow: the job's 85 files on it ran at a median " in out
    )
    assert "  factors (write): Small 0.00  Small<1KiB 0.00  Non-consec 0.02  Coll 0  OST# 24" in out


def test_diagnose_json_for_several_logs_and_a_bad_one(
    darshan_inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.darshan"
    bad.write_bytes(b"\0" * 64)
    logs = [darshan_inputs / "sample.darshan", bad, darshan_inputs / "noposix.darshan"]
    assert main(["darshan", "diagnose", "--json", "--top", "1", *map(str, logs)]) == 2
    captured = capsys.readouterr()
    first, second = (json.loads(line) for line in captured.out.splitlines())
    assert (first["job_id"], first["interface"], first["pattern"]) == (
        "4478544",
        "MPI-IO collective",
        "N-1",
    )
    assert first["critical_file_count"] == 1
    assert first["critical_files"][0]["name"].endswith("/vpicio.hdf5")
    assert [c["kind"] for c in first["causes"]] == ["contention", "dominant_file"]
    assert first["factors"]["coll"] == 1.0
    assert second["job_id"] == "83017637"
    assert second["factors"]["small"] is None
    assert f"iolens: {bad}: not a readable Darshan log" in captured.err


def test_diagnose_options_override_the_thresholds(
    darshan_inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = str(darshan_inputs / "sample-badost.darshan")
    assert main(["darshan", "diagnose", "--json", "--max-bytes-per-s", "1e8", log]) == 0
    assert json.loads(capsys.readouterr().out)["low_bandwidth"] == []


@pytest.mark.integration
def test_stats_over_indexed_jobs(
    es_url: str, tmp_path: Path, darshan_inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = f"st{uuid.uuid4().hex[:8]}"
    drop = tmp_path / "drop"
    drop.mkdir()
    for name in ("sample-badost.darshan", "sample.darshan", "sample-goodost.darshan"):
        shutil.copy(darshan_inputs / name, drop / name)
    for name in ("noposix.darshan", "sample-dxt-simple.darshan"):
        shutil.copy(darshan_inputs / name, drop / name)
    config = tmp_path / "iolens.yaml"
    config.write_text(
        f"elasticsearch: {{namespace: {ns}}}\nstate_dir: {tmp_path / 'state'}\n"
        f"drops: [{{type: darshan, path: {drop}}}]\n"
    )
    base = ["--config", str(config), "--es-url", es_url]
    assert main([*base, "run", "--once"]) == 0
    capsys.readouterr()
    client = Elasticsearch(es_url)
    client.indices.refresh(index=f"logs-darshan.job-{ns}")
    client.close()
    assert main([*base, "darshan", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["jobs"], stats["jobs_with_io"]) == (5, 5)
    assert [r["exe"] for r in stats["top_write"]] == ["vpicio_uni", "ior", "a.out"]
    assert stats["top_write"][0]["bytes"] == 2199023259968
    assert stats["sharing_patterns"] == {"N-1": 3, "N-N": 2}
    assert stats["interfaces_by_size"]["Medium"] == {
        "jobs": 2,
        "POSIX": 1.0,
        "MPI-IO independent": 0.0,
        "MPI-IO collective": 0.5,
    }
    assert stats["read_ratio_bins"]["0"] == 3
    assert stats["read_ratio_bins"]["100"] == 1
    assert main([*base, "darshan", "stats"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("jobs: 5 (5 with I/O)\n")
    assert "file-sharing pattern (jobs with more than one process):" in text


def fresh_namespace(tmp_path: Path, es_url: str, prefix: str) -> tuple[str, list[str]]:
    """A new namespace and the CLI arguments of a configuration that uses it."""
    ns = f"{prefix}{uuid.uuid4().hex[:8]}"
    config = tmp_path / "iolens.yaml"
    config.write_text(f"elasticsearch: {{namespace: {ns}}}\nstate_dir: {tmp_path / 'state'}\n")
    return ns, ["--config", str(config), "--es-url", es_url]


@pytest.mark.integration
def test_ingest_takes_darshan_logs_and_lmt_exports(
    es_url: str, tmp_path: Path, darshan_inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns, cli = fresh_namespace(tmp_path, es_url, "in")
    base = [*cli, "ingest"]
    log = darshan_inputs / "sample-goodost.darshan"
    assert main([*base, "--type", "darshan", str(log)]) == 0
    lmt = Path(__file__).resolve().parents[1] / "data" / "lmt" / "lmtdb-reset.csv"
    assert main([*base, "--type", "lmt", "--tz", "America/Los_Angeles", str(lmt)]) == 0
    client = Elasticsearch(es_url)
    try:
        client.indices.refresh(index=f"logs-darshan.*-{ns},metrics-lmt.ost-{ns}")
        assert client.count(index=f"logs-darshan.job-{ns}")["count"] == 1
        assert client.count(index=f"logs-darshan.file-{ns}")["count"] == 48
        assert client.count(index=f"metrics-lmt.ost-{ns}")["count"] == 25
    finally:
        client.close()
    assert main([*base, "--type", "lmt", "--tz", "Mars/Olympus", str(lmt)]) == 2
    assert "--tz: Value error, unknown time zone 'Mars/Olympus'" in capsys.readouterr().err


@pytest.mark.integration
def test_stats_that_match_no_job_say_what_they_searched(
    es_url: str, tmp_path: Path, darshan_inputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns, base = fresh_namespace(tmp_path, es_url, "sn")
    stream = f"logs-darshan.job-{ns}"
    # nothing indexed in the namespace yet
    assert main([*base, "darshan", "stats"]) == 0
    assert capsys.readouterr().out == (
        "jobs: 0 (0 with I/O)\n"
        f"no job matched: searched data stream {stream} for jobs whose @timestamp (the job's "
        "start) is at any time (no --start or --end), with no other filter\n"
        f"{stream} holds no job: index Darshan logs first (a darshan drop read by iolens run, "
        "or iolens ingest --type darshan LOG...), or check elasticsearch.namespace (the data "
        "stream's last part)\n"
    )
    log = darshan_inputs / "sample-goodost.darshan"
    assert main([*base, "ingest", "--type", "darshan", str(log)]) == 0
    client = Elasticsearch(es_url)
    client.indices.refresh(index=stream)
    client.close()
    capsys.readouterr()
    # the job started before 2030: a period after it finds nothing
    assert main([*base, "darshan", "stats", "--start", "2030-01-01", "--end", "1924992000"]) == 0
    assert capsys.readouterr().out == (
        "jobs: 0 (0 with I/O)\n"
        f"no job matched: searched data stream {stream} for jobs whose @timestamp (the job's "
        "start) is from 2030-01-01T00:00:00.000Z (--start) before 2031-01-01T00:00:00.000Z "
        "(--end), with no other filter\n"
        f"{stream} holds 1 job(s) starting from 2017-08-04T23:27:52.000Z to "
        "2017-08-04T23:27:52.000Z: give --start/--end around them\n"
    )
    # --start alone (searched up to any time), as JSON
    assert main([*base, "darshan", "stats", "--json", "--start", "2017-08-05T02:00:00+02:00"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["jobs"], stats["searched"]) == (
        0,
        {
            "data_stream": stream,
            "field": "@timestamp",
            "start": "2017-08-05T00:00:00.000Z",
            "end": None,
            "filters": [],
            "indexed_jobs": 1,
            "first_start": "2017-08-04T23:27:52.000Z",
            "last_start": "2017-08-04T23:27:52.000Z",
        },
    )
    # a period that holds the job: statistics, nothing about the search
    assert main([*base, "darshan", "stats", "--json", "--end", "2017-08-05"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["jobs"] == 1 and "searched" not in stats
    assert main([*base, "darshan", "stats", "--start", "yesterday"]) == 2
    assert capsys.readouterr().err.endswith(
        " ERROR iolens: --start 'yesterday': not an ISO 8601 time or epoch seconds (Unknown "
        "datetime string format, unable to parse: yesterday)\n"
    )


@pytest.mark.integration
def test_ingest_refuses_an_lmt_database_with_the_command_that_exports_it(
    es_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytokio's LMT extract (SQLite) given as ``--type lmt``: quarantined whole, said once with
    the file, the reason and the command; that command's CSV is then read."""
    shared = Path(__file__).resolve().parents[3] / "shared" / "data" / "pytokio"
    monkeypatch.chdir(tmp_path)
    Path("lmtdb-reset.sqlite3").write_bytes((shared / "lmtdb-reset.sqlite3").read_bytes())
    ns = f"db{uuid.uuid4().hex[:8]}"
    Path("iolens.yaml").write_text(f"elasticsearch: {{namespace: {ns}}}\nstate_dir: state\n")
    base = ["--config", "iolens.yaml", "--es-url", es_url, "ingest", "--type", "lmt"]
    assert main([*base, "lmtdb-reset.sqlite3"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("files read: 1   lines: 0   bad lines: 0   bad files: 1 ")
    command = f'sqlite3 -header -csv lmtdb-reset.sqlite3 "{EXPORT_QUERY}" > lmtdb-reset.csv'
    said = [line.split(" ", 3)[2:] for line in err.splitlines() if "lmtdb-reset" in line]
    assert said == [
        [
            "ERROR",
            "pipeline.jobs.pump: lmtdb-reset.sqlite3: an SQLite database (LMT's own tables, "
            "as pytokio keeps them), not the CSV export of it that iolens reads for LMT; write "
            f"the CSV with: {command} and give iolens that file (an lmt drop reads *.csv); the "
            "file is kept as state/deadletter/files/lmtdb-reset.sqlite3 and skipped",
        ]
    ]
    letters = [
        json.loads(x) for x in Path("state/deadletter/inputs.ndjson").read_text().splitlines()
    ]
    assert [(x["file"], x["line"], x["raw"]) for x in letters] == [("lmtdb-reset.sqlite3", 0, "")]
    if shutil.which("sqlite3") is None:
        pytest.fail("the sqlite3 command is needed (Debian's sqlite3 package)")
    subprocess.run(command, shell=True, check=True, timeout=60)
    assert main([*base, "lmtdb-reset.csv"]) == 0
    client = Elasticsearch(es_url)
    try:
        client.indices.refresh(index=f"metrics-lmt.ost-{ns}")
        assert client.count(index=f"metrics-lmt.ost-{ns}")["count"] == 25
    finally:
        client.close()
