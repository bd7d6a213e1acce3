"""``iolens report`` on the demo data, rendered by headless Chromium: every plot drawn."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from elasticsearch import Elasticsearch
from PIL import Image

from pipeline.cli.main import main
from pipeline.cli.report_cmd import when
from pipeline.demo.data import lay_out
from pipeline.errors import ConfigError
from pipeline.jobs.main_job import MainJob
from pipeline.settings import load_settings
from pipeline.sink.search import refresh

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "config" / "demo.yaml"

pytestmark = pytest.mark.integration


def chromium(*args: str) -> bytes:
    exe = shutil.which("chromium")
    assert exe is not None, "Debian's chromium is needed (make sysdeps installs it)"
    out = subprocess.run(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        timeout=120,
        check=True,
    )
    return out.stdout


def test_report_of_the_demo_data_renders_every_plot(
    es_url: str, client: Elasticsearch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ns = f"rp{uuid.uuid4().hex[:8]}"
    settings = load_settings(DEMO)
    es = settings.elasticsearch.model_copy(update={"url": es_url, "namespace": ns})
    lay_out(tmp_path / "drops")  # the demo's files, but only its fio drop is read here
    fio = settings.drops[0].model_copy(update={"path": str(tmp_path / "drops" / "fio")})
    assert fio.type == "fio-hist"
    settings = settings.model_copy(
        update={"elasticsearch": es, "state_dir": str(tmp_path / "state"), "drops": (fio,)}
    )
    with MainJob(settings, client) as job:
        job.run_once()
    for stream in ("metrics-fio.latency", "metrics-fio.histogram"):
        refresh(client, f"{stream}-{ns}")
    config = tmp_path / "iolens.yaml"
    config.write_text(f"elasticsearch: {{namespace: {ns}}}\n")
    out = tmp_path / "report.html"
    # the demo's fio run: 2026-11-22 05:25 UTC
    args = ["--config", str(config), "--es-url", es_url, "report", "--out", str(out)]
    assert main([*args, "--since", "2026-11-22", "--until", "2026-11-23"]) == 0
    said = capsys.readouterr().err
    assert "6 plots in 1 sections; no data for lun, hpc, requests, pipeline" in said
    page = out.read_text()
    assert "<script src=" not in page  # plotly.js is inline: no network needed
    ids = re.findall(r'<div id="(plot-\d+-\d+)"', page)
    assert ids == [f"plot-0-{k}" for k in range(6)]

    # Chromium runs the page's scripts: each plot has its SVG and drawn traces
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", out.as_uri()).decode()
    starts = [dom.index(f'id="{i}"') for i in ids] + [len(dom)]
    for i, (a, b) in enumerate(itertools.pairwise(starts)):
        part = dom[a:b]
        assert 'class="main-svg"' in part, ids[i]
        drawn = re.findall(r'class="(?:trace scatter|trace bars|hm)[^"]*"', part)
        assert drawn, f"{ids[i]} drew nothing"
        assert 'class="js-line"' in part or 'class="point"' in part or "hm" in part
    shot = tmp_path / "report.png"
    chromium(
        "--virtual-time-budget=10000",
        "--window-size=1280,3600",
        f"--screenshot={shot}",
        out.as_uri(),
    )
    with Image.open(shot) as img:
        colours = img.convert("RGB").getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200  # plots, not a blank page


def test_times_and_durations() -> None:
    now = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    assert when("6h", now) == datetime(2026, 11, 22, 6, 0, tzinfo=UTC)
    assert when("7d", now) == datetime(2026, 11, 15, 12, 0, tzinfo=UTC)
    assert when("2026-11-22", now) == datetime(2026, 11, 22, tzinfo=UTC)
    assert when("2026-11-22T05:25:00+01:00", now).utcoffset() is not None
    with pytest.raises(ConfigError, match="neither an ISO 8601 time nor a duration"):
        when("yesterday", now)
