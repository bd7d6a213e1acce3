"""CHANGELOG.md keeps the Keep a Changelog 1.1.0 form, its newest release being the version the
package carries (``pipeline.__version__``, which pyproject.toml reads)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pipeline

ROOT = Path(__file__).resolve().parents[2]
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def headings(level: int) -> list[str]:
    """The changelog's headings of one level, in order, without their hashes."""
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.findall(rf"^{'#' * level} (.+)$", text, re.M)


def test_unreleased_on_top_then_the_version_of_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pipeline.__version__"}
    version = pipeline.__version__
    releases = headings(2)
    assert releases[0] == "[Unreleased]"
    assert re.fullmatch(rf"\[{re.escape(version)}\] - \d{{4}}-\d{{2}}-\d{{2}}", releases[1])


def test_releases_are_versions_with_dates() -> None:
    for heading in headings(2)[1:]:
        assert re.fullmatch(r"\[\d+\.\d+\.\d+\S*\] - \d{4}-\d{2}-\d{2}", heading), heading


def test_changes_are_grouped_by_kind() -> None:
    assert set(headings(3)) <= KINDS
