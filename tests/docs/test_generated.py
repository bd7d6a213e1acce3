"""The generated reference pages under docs/reference/ are what scripts/gen_docs.py gives now.

Each page is regenerated in memory from its source (the mappings, the configuration's JSON
Schema, the command line's parser, the error messages of pipeline/) and compared with the file.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_generator() -> ModuleType:
    """scripts/gen_docs.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = load_generator()


@pytest.mark.parametrize("name", sorted(GEN.PAGES))
def test_generated_page_is_current(name: str) -> None:
    path = ROOT / "docs" / "reference" / name
    expected = re.sub(r"[ \t]+\n", "\n", GEN.PAGES[name]())
    assert path.read_text(encoding="utf-8") == expected, (
        f"docs/reference/{name} is stale: run `make docs` (or python scripts/gen_docs.py)"
    )


def test_check_mode_reports_a_stale_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in GEN.PAGES:
        (tmp_path / name).write_text((ROOT / "docs" / "reference" / name).read_text())
    (tmp_path / "cli.md").write_text("# out of date\n")
    monkeypatch.setattr(GEN, "OUT", tmp_path)
    monkeypatch.setattr(GEN, "ROOT", tmp_path.parent)
    assert GEN.main(["--check"]) == 1
    assert "cli.md" in capsys.readouterr().err
    assert (tmp_path / "cli.md").read_text() == "# out of date\n"


def test_every_data_stream_is_documented() -> None:
    fields = (ROOT / "docs" / "reference" / "fields.md").read_text(encoding="utf-8")
    for template in (ROOT / "mappings").glob("index_template.*.json"):
        stream = template.name.removeprefix("index_template.").removesuffix(".json")
        assert f"## {stream} " in fields


def test_every_field_has_a_description() -> None:
    fields = (ROOT / "docs" / "reference" / "fields.md").read_text(encoding="utf-8")
    empty = re.findall(r"^\| `([^`]+)` \| [^|]+ \|[^|]*\|\s*\|$", fields, re.M)
    assert not empty, f"fields without a description in scripts/field_descriptions.yaml: {empty}"
