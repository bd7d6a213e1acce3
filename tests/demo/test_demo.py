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
from browser import layouts, render
from demo_expected import EXPECTED

from pipeline.demo.data import recording

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
    assert "181 files of 5 drop types under var/demo/drops (181 copied now)" in out
    assert "trained on the incident recording's warm-up (until 13:37:56 UTC): group 'lab', " in out
    assert "await 3.73 over 9 windows" in out
    # first the incident the lab found live, with its id, on the LUN it slowed
    rec = recording()
    assert out.index("INCIDENT ") < out.index("fio: cluster-wide completion latency")
    assert "INCIDENT icRZ7sH-os-GefY2AQQ6-fXI  closed  13:38:00 -> 13:41:10 UTC (190 s)" in out
    assert f"LUN           {rec.slow_lun} mounted at /tmp/lab/storage/mnt/lun3" in out
    assert "18 faulty windows, record score up to 100, persistence rank 1" in out
    assert "6 intervals over p95 < 10 ms: vm/lun3.1" in out
    assert "48956032 (mpiio)" in out
    # fio: 30 s intervals; the fault's shows p95 above 20 ms (its delay)
    assert "13:39:00 │  12,000 │ 229.8 │ 20,726.9 │ 41,506.1 │ 63,963.1 │" in out
    # sysstat: the slowed LUN, faulty 24 s after the onset (13:37:56)
    assert f"{rec.slow_lun} indicted among the LUNs of peer group 'lab' on await" in out
    assert "faulty from 2026-11-29 13:38:20 UTC (18 faulty windows)" in out
    assert "persistence rank 1 in the newest ranking" in out
    # Darshan: the slowest job is a fio segment on the slowed LUN during the fault
    assert "Darshan: 89 jobs, 89 diagnosed; the slowest, job 48956035 (fio)" in out
    assert "critical file /tmp/lab/storage/mnt/lun3/fio.dat: 100.0% of the critical path" in out
    # events: the six request types of the test server
    assert "event log: 300 requests in 6 clusters (workload model)" in out
    assert "ReqStart Fork TaskStart" in out
    assert (clone[0] / "var" / "demo" / "report.html").is_file()
    assert "the embedded server keeps running" in out
    # the run that stopped left no lease behind: another instance takes each job at once
    es = Elasticsearch(clone[1]["IOLENS_ES_URL"])
    leases = es.search(index="iolens-leases", query={"match_all": {}})["hits"]["hits"]
    assert {h["_id"]: h["_source"]["expires_ms"] for h in leases} == {
        f"peer.{NS}": 0,
        f"incident.{NS}": 0,
    }


def test_the_demo_report_opens_with_the_incident_and_draws_every_plot(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    """The whole report of the demo, rendered by headless Chromium: the incident section first,
    every plot drawing marks, no script error."""
    report = clone[0] / "var" / "demo" / "report.html"
    page = report.read_text(encoding="utf-8")
    assert "<script src=" not in page  # plotly.js is inline: no network needed
    sections = re.findall(r"<h2>([^<]*)</h2>", page)
    assert sections == ["Incidents", "fio latency", "LUN health", "HPC I/O", "Requests"]
    incident = page[: page.index("<h2>fio latency</h2>")]
    assert recording().slow_lun in incident
    # every logarithmic axis is ticked where a reader reads values (no bare minor digits)
    log_axes = [
        (plot, name, axis)
        for plot, layout in layouts(page).items()
        for name, axis in layout.items()
        if name.startswith(("xaxis", "yaxis")) and axis.get("type") == "log"
    ]
    assert len(log_axes) == 8
    assert [(p, n) for p, n, a in log_axes if not a.get("tickvals") and a.get("dtick") != 1] == []
    rendered = render(report, tmp_path)
    assert rendered.errors == []
    assert rendered.plots[0] == "plot-0-0"  # the incident's figure comes first
    assert len(rendered.plots) == 14
    assert [p for p, marks in rendered.drawn.items() if marks == 0] == []


def test_a_second_demo_indexes_nothing_new_and_says_so(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str]
) -> None:
    again = iolens(clone, "demo")
    assert again.returncode == 0, again.stderr
    assert "nothing new indexed: the demo's files were delivered to this cluster already" in (
        again.stdout
    )
    assert "copied now" not in again.stdout
    # quiet at the default log level: the notices were said by the first run, the rest is routine
    assert " INFO " not in again.stderr and " WARNING " not in again.stderr, again.stderr
    assert "vm/loop8 indicted" in again.stdout  # the findings are still shown
    assert "INCIDENT icRZ7sH-os-GefY2AQQ6-fXI" in again.stdout
    assert counts(clone) == EXPECTED


def test_everyday_commands_show_the_demo_without_flags(
    clone: tuple[Path, dict[str, str]], first: subprocess.CompletedProcess[str]
) -> None:
    status = iolens(clone, "status")
    assert status.returncode == 0, status.stderr
    for name in ("randrw_clat_hist.1.log", "lab.csv", "sample-badost.darshan", "http.jsonl"):
        assert name in status.stdout
    assert "spool: 0 documents waiting" in status.stdout
    # each file with the cluster it was delivered to: the one status names
    [cluster] = re.findall(r"cluster id: (iolens:[0-9a-f]+)", status.stdout)
    row = next(line for line in status.stdout.splitlines() if "lab.csv" in line)
    assert cluster in row
    assert "percentiles aggregation is not available on this cluster" in status.stdout
    assert status.stderr == ""
    report = iolens(clone, "report")
    assert report.returncode == 0, report.stderr
    # the last 7 days, or each quiet stream's newest week: the same figures whatever the date
    assert "report.html: 14 plots in 5 sections; no data for pipeline" in report.stderr
    page = (clone[0] / "report.html").read_text()
    assert re.findall(r"<h2>([^<]*)</h2>", page)[0] == "Incidents"
    dead = iolens(clone, "deadletter", "list")
    assert dead.returncode == 0, dead.stderr
    assert "rejected input" in dead.stdout
    stats = iolens(clone, "darshan", "stats")
    assert stats.returncode == 0, stats.stderr
    assert "jobs: 89 (89 with I/O)" in stats.stdout


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
        str(d / "drops" / t)
        for t in ("incident/fio", "sadf", "darshan", "incident/slurm", "fio", "slurm", "events")
    ]
    assert config["drops"][6]["schema"] == "http_server"  # the bundled schema, by name

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
    assert "nothing new indexed: 181 of the demo's files were delivered to another cluster" in (
        held.stdout
    )
    assert "To read them into this cluster: iolens demo --redeliver" in held.stdout
    assert "not read (delivered to another cluster): 181" in held.stdout
    again = iolens(clone, "demo", "--redeliver")
    assert again.returncode == 0, again.stderr
    assert "vm/loop8 indicted" in again.stdout
    assert counts(clone) == EXPECTED
