"""iolens as a site installs it: the wheel built from the checkout (sdist first, then the wheel
from the sdist, as ``python -m build`` does), installed with pip into a fresh virtual
environment, run as a user in a home directory outside any checkout: ``iolens demo`` (which
starts the embedded server of the installed package), ``status``, ``report`` and ``server
stop`` on its data; then ``iolens setup`` and ``iolens ingest`` of the fio logs shipped in the
package against the suite's server. Built and installed once per suite (the install fetches
iolens's dependencies)."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from elasticsearch import Elasticsearch

import pipeline
from pipeline.sink.embedded import free_port, stop_detached

sys.path.insert(0, str(Path(__file__).parent))
from demo_expected import EXPECTED
from test_demo import checkout

REPO = Path(__file__).resolve().parents[2]
MAX_WHEEL_BYTES = 15_000_000
"""The wheel's size limit: 15 MB."""


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from a copy of the checkout as a fresh clone has it."""
    src = checkout(tmp_path_factory.mktemp("src"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(src)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out


@pytest.fixture(scope="module")
def wheel(dist: Path) -> Path:
    [whl] = dist.glob("iolens-*.whl")
    return whl


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Iterator[dict[str, str]]:
    """A user's environment: a fresh venv with the wheel installed, a home outside the checkout,
    and the URL of a cluster nobody else uses."""
    root = tmp_path_factory.mktemp("user")
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    bin_dir = root / "venv" / "bin"
    subprocess.run(
        [str(bin_dir / "pip"), "install", "--quiet", str(wheel)],
        check=True,
        capture_output=True,
        timeout=900,
    )
    home = root / "home"
    home.mkdir()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "XDG"))
    }
    env |= {
        "HOME": str(home),
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "IOLENS_ES_URL": f"http://127.0.0.1:{free_port()}",
        "COLUMNS": "200",
    }
    yield env
    stop_detached(home / ".local" / "share" / "iolens" / "demo" / "noida-db")


def iolens(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``iolens ARGS``, run in the user's home."""
    return subprocess.run(
        ["iolens", *args], cwd=env["HOME"], env=env, capture_output=True, text=True, timeout=600
    )


def test_the_wheel_holds_what_iolens_reads_at_run_time(wheel: Path) -> None:
    assert wheel.stat().st_size <= MAX_WHEEL_BYTES
    assert wheel.name == f"iolens-{pipeline.__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    assets = REPO / "pipeline" / "assets"
    shipped = {
        str(p.relative_to(REPO))
        for p in assets.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert shipped <= names, sorted(shipped - names)
    for must in (
        "pipeline/assets/mappings/index_template.metrics-fio.histogram.json",
        "pipeline/assets/config/pipeline.yaml",
        "pipeline/assets/config/schemas/http_server.yaml",
        "pipeline/assets/kibana/rules/07-storage-incident.json",
        "pipeline/assets/demo/fio/node01/randrw_clat_hist.1.log",
        "pipeline/assets/demo/incident/recording.json",
        "pipeline/assets/demo/incident/fio/seg0006/lun3_clat_hist.1.log.gz",
        "pipeline/assets/demo/incident/sadf/lab.csv",
        "pipeline/lab/mpiio_writer.c",
        "pipeline/lab/delayfs.py",
    ):
        assert must in names, must


def test_the_sdist_holds_every_asset_and_no_checkout_links(dist: Path, wheel: Path) -> None:
    """``python -m build`` made the wheel from the sdist: the sdist holds the same assets, and
    neither the checkout's links (mappings/, kibana/, config/) nor the tests, which need it."""
    [sdist] = dist.glob("iolens-*.tar.gz")
    top = f"iolens-{pipeline.__version__}/"
    assert sdist.name == f"{top[:-1]}.tar.gz"
    with tarfile.open(sdist) as tar:
        names = {n.removeprefix(top) for n in tar.getnames()}
    in_wheel = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("pipeline/assets/")}
    assert len(in_wheel) > 90
    assert in_wheel <= names
    assert not names & {"mappings", "kibana", "config", "tests"}


def test_the_installed_demo_runs_outside_a_checkout(user: dict[str, str]) -> None:
    home = Path(user["HOME"])
    version = iolens(user, "--version")
    assert version.stdout.strip() == f"iolens {pipeline.__version__}"
    demo = iolens(user, "demo")
    assert demo.returncode == 0, demo.stderr
    data = home / ".local" / "share" / "iolens" / "demo"
    assert f"181 files of 5 drop types under {data / 'drops'} (181 copied now)" in demo.stdout
    assert "vm/loop8 indicted among the LUNs of peer group 'lab' on await" in demo.stdout
    assert "INCIDENT icRZ7sH-os-GefY2AQQ6-fXI  closed" in demo.stdout
    assert f"export IOLENS_CONFIG={data / 'iolens.yaml'}" in demo.stdout
    written = yaml.safe_load((data / "iolens.yaml").read_text())
    assert written["elasticsearch"] == {"url": user["IOLENS_ES_URL"]}  # the cluster it used
    assert written["state_dir"] == str(home / ".local" / "state" / "iolens" / "demo")
    assert (data / "report.html").is_file()
    state = home / ".local" / "state" / "iolens" / "demo"
    assert (state / "registry.sqlite").is_file()
    assert not (home / "var").exists()
    es = Elasticsearch(user["IOLENS_ES_URL"])
    es.indices.refresh(index="*-default")
    counts = {s: int(es.count(index=f"{s}-default")["count"]) for s in EXPECTED}
    assert counts == EXPECTED

    # the everyday commands find the demo through the configuration it wrote
    with_config = user | {"IOLENS_CONFIG": str(data / "iolens.yaml")}
    status = iolens(with_config, "status")
    assert status.returncode == 0, status.stderr
    assert "lab.csv" in status.stdout
    report = iolens(with_config, "report", "--out", "r.html")
    assert report.returncode == 0, report.stderr
    assert "r.html: 14 plots in 5 sections" in report.stderr
    stop = iolens(with_config, "server", "stop")
    assert stop.stdout == f"{data / 'noida-db'}: embedded server stopped\n"


def test_the_installed_setup_and_ingest_read_the_bundled_fio_logs(
    user: dict[str, str], es_url: str
) -> None:
    """``iolens --es-url URL setup``, then ``ingest --type fio-hist`` of the fio logs shipped in
    the package, into a namespace of their own: one histogram document per log line, once."""
    home = Path(user["HOME"])
    url = es_url
    shipped = subprocess.run(
        ["python", "-c", "from pipeline.assets import asset; print(asset('demo', 'fio'))"],
        cwd=home,
        env=user,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert "site-packages" in shipped
    logs = sorted(str(p) for p in (Path(shipped) / "node01").glob("*.log"))
    assert len(logs) == 2
    site = home / "site.yaml"
    site.write_text("elasticsearch: {namespace: site}\nstate_dir: site-state\n")
    setup = iolens(user, "--config", str(site), "--es-url", url, "setup")
    assert setup.returncode == 0, setup.stderr
    es = Elasticsearch(url)
    assert es.indices.exists_index_template(name="metrics-fio.histogram")
    args = ["--config", str(site), "--es-url", url, "ingest", "--type", "fio-hist", *logs]
    first = iolens(user, *args)
    assert first.returncode == 0, first.stderr
    assert "files read: 2   lines: 159   bad lines: 0   bad files: 0" in first.stdout
    es.indices.refresh(index="*-site")
    assert es.count(index="metrics-fio.histogram-site")["count"] == 159
    again = iolens(user, *args)  # every line was delivered: nothing is indexed twice
    assert again.returncode == 0, again.stderr
    es.indices.refresh(index="*-site")
    assert es.count(index="metrics-fio.histogram-site")["count"] == 159
    # iolens run on a drop directory of the other host's logs (78 + 78 lines)
    drop = f"fio-hist={Path(shipped) / 'node02'}"
    run = iolens(user, "--config", str(site), "--es-url", url, "run", "--once", "--drop", drop)
    assert run.returncode == 0, run.stderr
    es.indices.refresh(index="*-site")
    assert es.count(index="metrics-fio.histogram-site")["count"] == 159 + 156
    assert (home / "site-state" / "registry.sqlite").is_file()
