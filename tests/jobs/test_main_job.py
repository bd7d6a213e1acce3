"""The main job end to end against the embedded server: exactly once, restarts, bad input."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.jobs.summary import RunSummary
from pipeline.settings import Settings, settings_from_mapping
from pipeline.shippers.registry import Registry
from pipeline.sink.deadletter import DeadLetters
from pipeline.sink.embedded import free_port
from pipeline.sink.search import refresh

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "fio" / "samples"
SAMPLE_LINES = 315  # 4 logs: 79 + 80 + 78 + 78 records

pytestmark = pytest.mark.integration


@pytest.fixture
def drop(tmp_path: Path) -> Path:
    """A drop directory holding a copy of the bundled two-host samples."""
    d = tmp_path / "drop"
    shutil.copytree(SAMPLES, d, ignore=shutil.ignore_patterns("*.fio", "*.md"))
    return d


@pytest.fixture
def namespace() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def make_settings(es_url: str, drop: Path, state: Path, namespace: str, **fio: Any) -> Settings:
    return settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": namespace},
            "state_dir": str(state),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "fio": {
                "run_start": "2026-11-22T05:25:00.203Z",
                "host_offsets_ms": {"node02": 1503},
                "settle_s": 0,
                **fio,
            },
            "sink": {"max_retries": 0},
        }
    )


def run_once(settings: Settings, client: Elasticsearch, **kw: Any) -> RunSummary:
    with MainJob(settings, client, **kw) as job:
        return job.run_once()


def count(client: Elasticsearch, stream: str, ns: str, query: dict | None = None) -> int:
    index = f"metrics-{stream}-{ns}"
    refresh(client, index)
    return int(client.count(index=index, query=query or {"match_all": {}})["count"])


def test_every_record_indexed_once_and_restarts_read_nothing(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    first = run_once(settings, client)
    hist = f"metrics-fio.histogram-{namespace}"
    lat = f"metrics-fio.latency-{namespace}"
    assert first.files == 4
    assert first.lines == SAMPLE_LINES
    assert first.docs[hist]["indexed"] == SAMPLE_LINES
    n_latency = first.docs[lat]["indexed"]
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES
    assert count(client, "fio.latency", namespace) == n_latency
    # 2 hosts x 2 jobs: per interval and ddir one cluster, two host and four job documents
    cluster = count(client, "fio.latency", namespace, {"term": {"iolens.scope": "cluster"}})
    assert cluster > 0 and n_latency <= cluster * 7

    # The registry committed every line: a restart reads nothing and indexes nothing.
    reg = Registry(tmp_path / "state" / "registry.sqlite")
    states = reg.all()
    reg.close()
    assert sum(s.line_no for s in states) == SAMPLE_LINES
    assert all(s.offset == (drop / Path(s.path).relative_to(drop)).stat().st_size for s in states)
    second = run_once(settings, client)
    assert second.lines == 0
    assert second.docs.get(hist, {"indexed": 0})["indexed"] == 0

    # Without the registry, everything is read again and every document is a duplicate (409).
    third = run_once(make_settings(es_url, drop, tmp_path / "state2", namespace), client)
    assert third.lines == SAMPLE_LINES
    assert third.docs[hist] == {"indexed": 0, "duplicate": SAMPLE_LINES, "dead_lettered": 0}
    assert third.docs[lat] == {"indexed": 0, "duplicate": n_latency, "dead_lettered": 0}
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES
    assert count(client, "fio.latency", namespace) == n_latency


def test_bad_line_is_dead_lettered_and_the_rest_indexed(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    log = drop / "node01" / "randrw_clat_hist.1.log"
    lines = log.read_bytes().split(b"\n")
    lines[6] = lines[6][: len(lines[6]) // 2]  # a cut record: too few bins
    log.write_bytes(b"\n".join(lines))
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    summary = run_once(settings, client)
    assert summary.bad_lines == 1
    assert summary.lines == SAMPLE_LINES
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES - 1
    [bad] = list(DeadLetters(tmp_path / "state" / "deadletter").iter_inputs())
    assert (bad.path, bad.line_no, bad.stage) == (str(log), 7, "parse")
    assert "bins, but this log's layout has 1856" in bad.reason
    assert bad.raw_bytes == lines[6]


def test_not_a_histogram_log_is_quarantined_whole(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    (drop / "node01" / "junk_clat_hist.9.log").write_text("this is not, a histogram\n")
    summary = run_once(make_settings(es_url, drop, tmp_path / "state", namespace), client)
    assert summary.bad_files == 1
    assert (tmp_path / "state" / "deadletter" / "files" / "junk_clat_hist.9.log").exists()
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES


def test_renamed_file_is_not_read_again_and_appended_lines_are(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    log = drop / "node02" / "randrw_clat_hist.2.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:40]) + lines[40][:100])  # a partial last line
    first = run_once(settings, client)
    assert first.lines == SAMPLE_LINES - len(lines) + 40
    moved = drop / "node02" / "randrw_clat_hist.2.log.node02"
    log.rename(moved)
    with moved.open("ab") as fh:
        fh.write(lines[40][100:] + b"".join(lines[41:]))
    second = run_once(settings, client)
    assert second.lines == len(lines) - 40
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES


def test_outage_spools_and_delivers_on_the_next_run(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    run_once(settings, client)  # templates and a first copy of everything
    ns2 = namespace + "b"
    settings2 = make_settings(es_url, drop, tmp_path / "state2", ns2)
    dead = Elasticsearch(f"http://127.0.0.1:{free_port()}", request_timeout=2)
    down = run_once(settings2, dead, install_templates=False)
    dead.close()
    assert down.spooled == SAMPLE_LINES
    reg = Registry(tmp_path / "state2" / "registry.sqlite")
    assert all(s.offset == 0 for s in reg.all())  # nothing acknowledged, nothing committed
    reg.close()
    up = run_once(settings2, client)
    assert up.spooled == 0
    assert count(client, "fio.histogram", ns2) == SAMPLE_LINES
    reg = Registry(tmp_path / "state2" / "registry.sqlite")
    assert sum(s.line_no for s in reg.all()) == SAMPLE_LINES
    reg.close()


def latency_by_key(client: Elasticsearch, ns: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    from pipeline.sink.search import iter_hits

    index = f"metrics-fio.latency-{ns}"
    refresh(client, index)
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    sort = [
        {"fio.interval.start_ms": "asc"},
        {"iolens.scope": "asc"},
        {"fio.ddir": "asc"},
        {"host.name": "asc"},
        {"fio.job": "asc"},
    ]
    for hit in iter_hits(client, index, {"match_all": {}}, sort):
        s = hit["_source"]
        key = (
            s["iolens"]["scope"],
            s.get("host", {}).get("name"),
            s["fio"].get("job"),
            s["fio"]["ddir"],
            s["fio"]["interval"]["start_ms"],
        )
        assert key not in out, f"two documents for {key}"
        out[key] = s["fio"]["clat_ns"]
    return out


def test_late_records_re_merge_their_interval(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    log = drop / "node01" / "randrw_clat_hist.1.log"
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(lines[:25]))
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    run_once(settings, client)
    partial = latency_by_key(client, namespace)
    with log.open("ab") as fh:
        fh.write(b"".join(lines[25:]))
    run_once(settings, client)
    merged = latency_by_key(client, namespace)  # one document per key: the old one was replaced

    full_ns = namespace + "full"
    run_once(make_settings(es_url, drop, tmp_path / "state-full", full_ns), client)
    assert merged == latency_by_key(client, full_ns)
    assert merged != partial


def test_flp_method_matches_fiologparser_arithmetic(
    es_url: str,
    client: Elasticsearch,
    drop: Path,
    tmp_path: Path,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``fio.method: flp`` through Elasticsearch gives what ``iolens fio-hist`` (byte-identical
    to fiologparser_hist.py) prints for the same logs, up to the float rounding of epoch-ms
    timestamps (1e-6 relative)."""
    from pipeline.cli.main import main

    shutil.rmtree(drop / "node02")
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": namespace},
            "state_dir": str(tmp_path / "state"),
            "drops": [{"type": "fio-hist", "path": str(drop)}],
            "fio": {"run_start": "2026-01-01T00:00:00Z", "method": "flp", "settle_s": 0},
        }
    )
    run_once(settings, client)
    got = {
        (k[4] - 1767225600000 + 1000, k[3]): v
        for k, v in latency_by_key(client, namespace).items()
        if k[0] == "cluster"
    }
    files = [str(drop / "node01" / f"randrw_clat_hist.{i}.log") for i in (1, 2)]
    capsys.readouterr()
    assert (
        main(
            [
                "fio-hist",
                "--directions",
                "rwm",
                "--percentiles",
                "90:95:99:99.9",
                "--decimals",
                "6",
                *files,
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    names = {"m": "mixed", "r": "read", "w": "write"}
    expected = {}
    for line in printed.splitlines()[1:]:
        c = [x.strip() for x in line.split(",")]
        expected[(int(c[0]), names[c[1]])] = [float(x) for x in c[2:]]
    assert set(got) <= set(expected) and len(got) >= 9
    for key, doc in got.items():
        samples, _mn, mean, p50, p90, p95, p99, p999, _mx = expected[key]
        assert doc["samples"] == samples
        for field, want in (
            ("mean", mean),
            ("p50", p50),
            ("p90", p90),
            ("p95", p95),
            ("p99", p99),
            ("p99_9", p999),
        ):
            assert doc[field] == pytest.approx(want, rel=1e-6), (key, field)


def test_truncated_file_is_read_again_without_duplicates(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    run_once(settings, client)
    log = drop / "node01" / "randrw_clat_hist.2.log"
    lines = log.read_bytes().splitlines(keepends=True)
    with log.open("r+b") as fh:  # same inode, same first line, shorter: truncated and rewritten
        fh.truncate(0)
        fh.write(b"".join(lines[:10]))
    again = run_once(settings, client)
    assert again.lines == 10
    # the same records again: the same ids, so nothing is indexed (or merged) twice
    hist = f"metrics-fio.histogram-{namespace}"
    assert again.docs[hist] == {"indexed": 0, "duplicate": 10, "dead_lettered": 0}
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES
    reg = Registry(tmp_path / "state" / "registry.sqlite")
    [state] = [s for s in reg.all() if s.path == str(log)]
    reg.close()
    assert (state.generation, state.line_no) == (1, 10)


def test_gzip_logs_with_a_host_suffix(
    es_url: str, client: Elasticsearch, tmp_path: Path, namespace: str
) -> None:
    import gzip

    drop = tmp_path / "gz"
    drop.mkdir()
    src = SAMPLES / "node02" / "randrw_clat_hist.1.log"
    (drop / "randrw_clat_hist.1.log.node07.gz").write_bytes(gzip.compress(src.read_bytes()))
    summary = run_once(make_settings(es_url, drop, tmp_path / "state", namespace), client)
    assert summary.lines == 78
    assert count(client, "fio.histogram", namespace, {"term": {"host.name": "node07"}}) == 78


def test_a_new_run_into_the_same_file_is_read_from_its_start(
    es_url: str, client: Elasticsearch, tmp_path: Path, namespace: str
) -> None:
    """fio run again into the same path (same inode, new content): a new file, read whole."""
    drop = tmp_path / "drop"
    (drop / "node01").mkdir(parents=True)
    log = drop / "node01" / "randrw_clat_hist.1.log"
    first = (SAMPLES / "node01" / "randrw_clat_hist.1.log").read_bytes().splitlines(True)
    second = (SAMPLES / "node02" / "randrw_clat_hist.2.log").read_bytes()
    log.write_bytes(b"".join(first[:30]))
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    job = MainJob(settings, client)
    try:
        job.ingest([(log, None)])
        with log.open("r+b") as fh:
            fh.truncate(0)
            fh.write(second)
        job.ingest([(log, None)])
        summary = job.finish()
    finally:
        job.close()
    assert summary.lines == 30 + 78
    assert count(client, "fio.histogram", namespace) == 30 + 78


def test_hidden_temporary_files_are_read_once_renamed(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    """rsync writes ``.name.XXXXXX`` and renames it: the host comes from the final place."""
    log = drop / "node01" / "randrw_clat_hist.1.log"
    temp = drop / "node01" / ".randrw_clat_hist.1.log.Ab3dE"
    log.rename(temp)
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    assert run_once(settings, client).lines == SAMPLE_LINES - 79
    temp.rename(log)
    assert run_once(settings, client).lines == 79
    assert count(client, "fio.histogram", namespace, {"term": {"host.name": "node01"}}) == 159


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad_clat_hist.1.log.gz", b"plain text, not gzip\n", "Not a gzipped file"),
        ("noeol_clat_hist.1.log", b"7" * (1 << 20) + b"7", "no line end within 1048576 bytes"),
    ],
)
def test_unreadable_files_are_quarantined_once(
    es_url: str,
    client: Elasticsearch,
    drop: Path,
    tmp_path: Path,
    namespace: str,
    name: str,
    content: bytes,
    reason: str,
) -> None:
    (drop / "node01" / name).write_bytes(content)
    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    first = run_once(settings, client)
    assert first.bad_files == 1
    assert first.lines == SAMPLE_LINES
    [entry] = list(DeadLetters(tmp_path / "state" / "deadletter").iter_inputs())
    assert reason in entry.reason
    assert (tmp_path / "state" / "deadletter" / "files" / name).exists()
    assert run_once(settings, client).bad_files == 0  # not quarantined again


def test_corrupt_gzip_is_quarantined(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    import gzip

    data = bytearray(gzip.compress((SAMPLES / "node01" / "randrw_clat_hist.1.log").read_bytes()))
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # damaged deflate data
    (drop / "node01" / "dmg_clat_hist.3.log.gz").write_bytes(bytes(data))
    summary = run_once(make_settings(es_url, drop, tmp_path / "state", namespace), client)
    assert summary.bad_files == 1
    assert count(client, "fio.histogram", namespace) >= SAMPLE_LINES


def test_out_of_range_values_are_dead_lettered(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    log = drop / "node01" / "randrw_clat_hist.1.log"
    zeros = ", ".join(["0"] * 1855)
    log.write_bytes(
        log.read_bytes()
        + f"999999999999999, 0, 4096, 1, {zeros}\n".encode()
        + f"4001, 0, 4096, 99999999999999999999, {zeros}\n".encode()
    )
    summary = run_once(make_settings(es_url, drop, tmp_path / "state", namespace), client)
    assert summary.bad_lines == 2
    reasons = [i.reason for i in DeadLetters(tmp_path / "state" / "deadletter").iter_inputs()]
    assert reasons[0] == "timestamp 999999999999999 ms is beyond the year 9999"
    assert reasons[1].startswith("a value is out of range")
    assert count(client, "fio.histogram", namespace) == SAMPLE_LINES


def test_state_directory_is_locked(
    es_url: str, client: Elasticsearch, drop: Path, tmp_path: Path, namespace: str
) -> None:
    from pipeline.errors import ConfigError

    settings = make_settings(es_url, drop, tmp_path / "state", namespace)
    job = MainJob(settings, client)
    try:
        with pytest.raises(ConfigError, match="is in use by another iolens process"):
            MainJob(settings, client)
    finally:
        job.close()
    MainJob(settings, client).close()  # free again
