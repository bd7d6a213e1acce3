"""The renderer the demo's report test relies on tells a plot that drew nothing and a script
error (tests/demo/browser.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import plotly.graph_objects as go
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from browser import render

pytestmark = pytest.mark.integration


def test_a_plot_without_marks_and_a_script_error_are_told(tmp_path: Path) -> None:
    empty = go.Figure()
    drawn = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 3, 2], mode="lines+markers"))
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head></head><body>"
        + empty.to_html(full_html=False, include_plotlyjs=True, div_id="plot-0-0")
        + drawn.to_html(full_html=False, include_plotlyjs=False, div_id="plot-0-1")
        + "<script>notDefinedAnywhere();</script></body></html>",
        encoding="utf-8",
    )
    rendered = render(page, tmp_path)
    assert rendered.plots == ["plot-0-0", "plot-0-1"]
    assert rendered.drawn["plot-0-0"] == 0
    assert rendered.drawn["plot-0-1"] == 4  # the line and its three points
    assert rendered.errors == ["Uncaught ReferenceError: notDefinedAnywhere is not defined"]
