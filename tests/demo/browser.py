"""An HTML report rendered by headless Chromium (Debian's ``chromium``): what each plot drew and
the script errors of the page."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CATCH = (
    "<script>window.addEventListener('error', function (e) {"
    " var d = document.documentElement;"
    " d.setAttribute('data-errors', (d.getAttribute('data-errors') || '') + e.message + ' | ');"
    " });</script>"
)
"""Put first in the page: every uncaught script error is appended to an attribute of <html>."""


def chromium(*args: str) -> bytes:
    """Run headless Chromium; its standard output."""
    exe = shutil.which("chromium")
    assert exe is not None, "Debian's chromium is needed (make sysdeps installs it)"
    out = subprocess.run(
        [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
        capture_output=True,
        timeout=180,
        check=True,
    )
    return out.stdout


@dataclass(frozen=True)
class Rendered:
    """A report after Chromium ran its scripts.

    Attributes:
        plots: each plot's id (``plot-<section>-<figure>``), in page order.
        drawn: per plot, the marks it drew in its plotting area (lines, points and bars,
            heatmaps, boxes); 0 when it drew nothing, or no plot at all.
        errors: the page's uncaught script errors.
        dom: the page as rendered.
    """

    plots: list[str]
    drawn: dict[str, int]
    errors: list[str]
    dom: str


def render(report: Path, work: Path) -> Rendered:
    """Render ``report`` (a copy of it in ``work``, with the error catcher put first)."""
    page = report.read_text(encoding="utf-8")
    head = page.index("<head>") + len("<head>")
    copy = work / "rendered.html"
    copy.write_text(page[:head] + CATCH + page[head:], encoding="utf-8")
    plots = re.findall(r'<div id="(plot-\d+-\d+)"', page)
    dom = chromium("--virtual-time-budget=20000", "--dump-dom", copy.as_uri()).decode()
    starts = [dom.index(f'id="{p}"') for p in plots] + [len(dom)]
    drawn = {}
    for plot, (a, b) in zip(plots, itertools.pairwise(starts), strict=True):
        part = dom[a:b]
        if 'class="main-svg"' not in part:
            drawn[plot] = 0
            continue
        data = part[: part.find('class="infolayer"')]  # the plotting area (no legend, titles)
        drawn[plot] = len(re.findall(r'class="(?:js-line|point|hm|box)"', data))
    found = re.search(r'<html[^>]*data-errors="([^"]*)"', dom)
    errors = [e for e in (found.group(1).split(" | ") if found else []) if e.strip()]
    return Rendered(plots, drawn, errors, dom)


def layouts(page: str) -> dict[str, dict[str, Any]]:
    """Each plot's layout as the page hands it to ``Plotly.newPlot(id, data, layout, config)``
    (plot id -> layout)."""
    decoder = json.JSONDecoder()
    out = {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"(plot-\d+-\d+)",\s*', page):
        _data, at = decoder.raw_decode(page, m.end())
        while page[at] in " ,\n":
            at += 1
        out[m.group(1)], _ = decoder.raw_decode(page, at)
    return out
