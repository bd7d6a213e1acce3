"""The README is a front door (short), and every relative link in it and in docs/ resolves.

A link resolves when its file exists (relative to the page) and, when it names an anchor in a
Markdown file, a heading there has that anchor (GitHub's and MkDocs' slug of the heading text,
or an explicit ``{#id}``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 250
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(text: str) -> str:
    """The anchor of a heading's text, as GitHub and Python-Markdown's toc make it."""
    text = re.sub(r"[^\w\s-]", "", text.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """Every anchor a Markdown page defines through its headings."""
    found = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        explicit = re.search(r"\{#([^}]+)\}\s*$", heading)
        found.add(explicit.group(1) if explicit else slug(heading))
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links of ``page`` that lead to no file or to no heading."""
    broken = []
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            broken.append(target)
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    return broken


def test_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES


def test_readme_links_resolve() -> None:
    assert broken_links(ROOT / "README.md") == []


def test_readme_leads_to_the_documentation() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/index.md)" in readme
    assert "(docs/lab.md)" in readme


@pytest.mark.parametrize(
    "page", sorted((ROOT / "docs").rglob("*.md")), ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_docs_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title `x`\n\n[ok](#title-x) [gone](b.md) [no](a.md#nope)\n")
    assert broken_links(tmp_path / "a.md") == ["b.md", "a.md#nope"]
