"""``iolens demo`` as a new user meets it: a checkout of its own (the repository's files copied to
a temporary directory, as a fresh clone has them), the demo run twice, then ``iolens status``,
``report``, ``deadletter list`` and ``darshan stats`` with no flags. The cluster is the embedded
server the demo starts itself (on a free port given through ``IOLENS_ES_URL``, so that it never
meets a server of the developer's)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch

from pipeline.sink.embedded import free_port, stop_detached

sys.path.insert(0, str(Path(__file__).parent))
from demo_expected import EXPECTED

REPO = Path(__file__).resolve().parents[2]
NS = "default"


def checkout(dest: Path) -> Path:
    """The repository's files as a fresh clone has them (tracked and new, not ignored ones;
    symbolic links as links)."""
    files = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    for name in filter(None, files):
        src = REPO / os.fsdecode(name)
        if src.is_symlink() or src.is_file():
            (dest / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / os.fsdecode(name), follow_symlinks=False)
    return dest


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """A checkout and the environment of a user on it (the cluster's URL only)."""
    root = checkout(tmp_path_factory.mktemp("clone"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "PYTHONPATH"))}
    env["IOLENS_ES_URL"] = f"http://127.0.0.1:{free_port()}"
    yield root, env
    stop_detached(root / "var" / "noida-db")


def iolens(clone: tuple[Path, dict[str, str]], *args: str) -> subprocess.CompletedProcess[str]:
    """``iolens ARGS`` in the checkout (its own ``pipeline`` package), output captured."""
    root, env = clone
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli.main", *args],
        cwd=root,
        env=env | {"COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def counts(clone: tuple[Path, dict[str, str]]) -> dict[str, int]:
    """Documents per data stream of :data:`EXPECTED` in the demo's cluster."""
    es = Elasticsearch(clone[1]["IOLENS_ES_URL"])
    es.indices.refresh(index=f"*-{NS}")
    return {s: int(es.count(index=f"{s}-{NS}")["count"]) for s in EXPECTED}


@pytest.fixture(scope="module")
def first(clone: tuple[Path, dict[str, str]]) -> subprocess.CompletedProcess[str]:
    """The first demo."""
    return iolens(clone, "demo")


def test_the_demo_indexes_every_stream_and_shows_what_each_found(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str]
) -> None:
    assert first.returncode == 0, first.stderr
    assert counts(clone) == EXPECTED
    out = first.stdout
    assert "10 files in 5 drop directories under var/demo/drops (10 copied now)" in out
    assert "group 'luns', await 1.12 over 10 windows" in out
    # fio: the first mixed interval of the two hosts (reads and writes)
    assert "05:25:01 │ 48,568 │ 122.4 │ 160.4 │ 195.1 │  2,359.3" in out
    # sysstat: loop3, slowed from 06:35:44, faulty from window 6 (ends 06:36:58), 73 s after
    assert "vm/loop3 indicted among the LUNs of peer group 'luns' on await" in out
    assert "faulty from 2026-11-22 06:36:58 UTC (10 faulty windows)" in out
    assert "persistence rank 1 in the newest ranking" in out
    # Darshan: sample-badost's slow OST
    assert "job 6265799 (ior), writes at 673.3 MiB/s on its critical path" in out
    assert "ior-posix.out.00001507: 98.8% of the critical path, on OST 14" in out
    assert "cause slow_ost (darshan): OST 14 is slow" in out
    # events: the six request types of the test server
    assert "event log: 300 requests in 6 clusters (workload model)" in out
    assert "ReqStart Fork TaskStart Seg[cpu_ns=15.1ms] TaskEnd" in out
    assert (clone[0] / "var" / "demo" / "report.html").is_file()
    assert "the embedded server keeps running" in out
    # the run that stopped left no lease behind: another instance takes each job at once
    es = Elasticsearch(clone[1]["IOLENS_ES_URL"])
    leases = es.search(index="iolens-leases", query={"match_all": {}})["hits"]["hits"]
    assert {h["_id"]: h["_source"]["expires_ms"] for h in leases} == {
        f"peer.{NS}": 0,
        f"incident.{NS}": 0,
    }


def test_a_second_demo_indexes_nothing_new_and_says_so(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str]
) -> None:
    again = iolens(clone, "demo")
    assert again.returncode == 0, again.stderr
    assert "nothing new indexed: the demo's files were delivered to this cluster already" in (
        again.stdout
    )
    assert "(10 copied now)" not in again.stdout
    # quiet at the default log level: the notices were said by the first run, the rest is routine
    assert " INFO " not in again.stderr and " WARNING " not in again.stderr, again.stderr
    assert "vm/loop3 indicted" in again.stdout  # the findings are still shown
    assert counts(clone) == EXPECTED


def test_everyday_commands_show_the_demo_without_flags(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str]
) -> None:
    status = iolens(clone, "status")
    assert status.returncode == 0, status.stderr
    for name in ("randrw_clat_hist.1.log", "peer_fault.csv", "sample-badost.darshan", "http.jsonl"):
        assert name in status.stdout
    assert "spool: 0 documents waiting" in status.stdout
    # each file with the cluster it was delivered to: the one status names
    [cluster] = re.findall(r"cluster id: (iolens:[0-9a-f]+)", status.stdout)
    row = next(line for line in status.stdout.splitlines() if "peer_fault.csv" in line)
    assert cluster in row
    assert "percentiles aggregation is not available on this cluster" in status.stdout
    assert status.stderr == ""
    report = iolens(clone, "report")
    assert report.returncode == 0, report.stderr
    assert "report.html: 13 plots in 4 sections" in report.stderr
    assert "older data shown for logs-darshan.job, logs-iolens.io_diagnosis" in report.stderr
    page = (clone[0] / "report.html").read_text()
    assert "Nothing in this range in logs-darshan.job: its newest data is shown" in page
    dead = iolens(clone, "deadletter", "list")
    assert dead.returncode == 0, dead.stderr
    assert "rejected input" in dead.stdout
    stats = iolens(clone, "darshan", "stats")
    assert stats.returncode == 0, stats.stderr
    assert "jobs: 3 (3 with I/O)" in stats.stdout


def test_the_demo_refuses_a_configuration_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pipeline.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["--config", "site.yaml", "demo"]) == 2
    assert "--config site.yaml: the demo makes its own configuration" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_where_the_demo_puts_things(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--dir: all under it; a checkout: config/pipeline.yaml's state and server; elsewhere: the
    user's data and state directories (XDG on Linux)."""
    from pipeline.demo.layout import DemoLayout, choose_layout, demo_config

    given = choose_layout(Path("d"), tmp_path)  # relative to where the demo runs, made absolute
    d = tmp_path / "d"
    assert given == DemoLayout(d, d / "state", d / "noida-db", d / "iolens.yaml")
    assert given.report == d / "report.html"
    config = demo_config(given)
    assert config["state_dir"] == str(d / "state")
    assert config["embedded"] == {"data_dir": str(d / "noida-db")}
    assert [x["path"] for x in config["drops"]] == [
        str(d / "drops" / t) for t in ("fio", "sadf", "darshan", "slurm", "events")
    ]
    assert config["drops"][4]["schema"] == "http_server"  # the bundled schema, by name

    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "pipeline.yaml").write_text(
        "state_dir: /srv/st\nembedded: {data_dir: /srv/db}\n"
    )
    assert choose_layout(None, tmp_path) == DemoLayout(
        Path("var/demo"), Path("/srv/st"), Path("/srv/db"), None
    )

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    data = tmp_path / "share" / "iolens" / "demo"
    assert choose_layout(None, tmp_path / "d") == DemoLayout(
        data, tmp_path / "state" / "iolens" / "demo", data / "noida-db", data / "iolens.yaml"
    )


def test_a_demo_into_a_new_cluster_says_what_was_delivered_elsewhere(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str]
) -> None:
    root = clone[0]
    stop_detached(root / "var" / "noida-db")
    shutil.rmtree(root / "var" / "noida-db")  # a new cluster; the registry in var/state stays
    held = iolens(clone, "demo")
    assert held.returncode == 0, held.stderr
    assert "nothing new indexed: 10 of the demo's files were delivered to another cluster" in (
        held.stdout
    )
    assert "To read them into this cluster: iolens demo --redeliver" in held.stdout
    assert "not read (delivered to another cluster): 10" in held.stdout
    again = iolens(clone, "demo", "--redeliver")
    assert again.returncode == 0, again.stderr
    assert "vm/loop3 indicted" in again.stdout
    assert counts(clone) == EXPECTED
