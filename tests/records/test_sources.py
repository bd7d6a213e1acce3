"""pipeline/records/sources.py against the templates it is generated from (scripts/gen_records.py):
it is current, its TypedDicts have exactly the fields each template maps, and the generator
refuses what it does not understand instead of leaving a field out."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import types
import typing
from pathlib import Path
from types import ModuleType
from typing import Any, is_typeddict

import pytest

from pipeline.records import sources

ROOT = Path(__file__).resolve().parents[2]
MAPPINGS = ROOT / "mappings"


def load_generator() -> ModuleType:
    """scripts/gen_records.py as a module (scripts/ is not a package; registered in
    ``sys.modules`` as its dataclasses need)."""
    path = ROOT / "scripts" / "gen_records.py"
    spec = importlib.util.spec_from_file_location("gen_records", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


GEN = load_generator()


def template_fields(stream: str) -> set[str]:
    """The dotted paths of the fields the templates of ``stream`` map (an object without
    sub-fields, such as ``labels``, is one field), walked from the JSON files."""
    index = json.loads((MAPPINGS / f"index_template.{stream}.json").read_text())
    found: set[str] = set()

    def walk(properties: dict[str, Any], prefix: str) -> None:
        for name, spec in properties.items():
            if "properties" in spec:
                walk(spec["properties"], f"{prefix}{name}.")
            else:
                found.add(prefix + name)

    for name in index["composed_of"]:
        path = MAPPINGS / f"component_template.{name}.json"
        if path.exists():
            template = json.loads(path.read_text())["template"]
            walk(template.get("mappings", {}).get("properties", {}), "")
    return found


def typed_fields(cls: Any, prefix: str = "") -> set[str]:
    """The dotted paths of the leaves of TypedDict ``cls`` (a ``histogram`` is a leaf)."""
    found: set[str] = set()
    for key, hint in typing.get_type_hints(cls).items():
        options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        nested = [h for h in options if is_typeddict(h) and h is not sources.Histogram]
        if nested:
            found |= typed_fields(nested[0], f"{prefix}{key}.")
        else:
            found.add(prefix + key)
    return found


def test_the_generated_module_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert GEN.main(["--check"]) == 0
    assert capsys.readouterr().err == ""
    assert GEN.build(MAPPINGS) == (ROOT / "pipeline" / "records" / "sources.py").read_text()


@pytest.mark.parametrize(
    ("stream", "root"),
    [
        ("metrics-sysstat.diskio", sources.SysstatDiskioSource),
        ("metrics-fio.histogram", sources.FioHistogramSource),
        ("logs-slurm.job", sources.SlurmJobSource),
    ],
)
def test_a_streams_typed_dict_has_the_fields_of_its_templates(stream: str, root: Any) -> None:
    assert typed_fields(root) == template_fields(stream)


def test_the_field_types() -> None:
    disk = typing.get_type_hints(sources.SysstatDiskioSysstatDisk)
    assert disk["await"] is float and disk["interval_s"] is float
    clat = typing.get_type_hints(sources.FioHistogramFioClatNs)
    assert (clat["histogram"], clat["samples"], clat["p99_9"]) == (sources.Histogram, int, float)
    assert typing.get_type_hints(sources.Histogram) == {"values": list[float], "counts": list[int]}
    slurm = typing.get_type_hints(sources.SlurmJobSlurmJob)
    assert (slurm["start"], slurm["nodes"], slurm["node_count"]) == (str, str | list[str], int)
    common = typing.get_type_hints(sources.CommonSource)
    assert (common["@timestamp"], common["labels"]) == (str, dict[str, str])
    model = typing.get_type_hints(sources.IolensWorkloadModelIolensWorkloadModel)
    assert (model["resources"], model["separation"]) == (dict[str, float], float | None)


def test_the_common_fields_are_shared_until_a_stream_extends_them() -> None:
    diskio = typing.get_type_hints(sources.SysstatDiskioSource)
    assert (diskio["host"], diskio["event"]) == (sources.CommonHost, sources.CommonEvent)
    incident = typing.get_type_hints(sources.IolensIncidentSource)
    assert incident["event"] is sources.IolensIncidentEvent
    assert set(typing.get_type_hints(sources.IolensIncidentEvent)) == {
        "kind", "module", "dataset", "created", "duration", "start", "end",
    }  # fmt: skip


@pytest.fixture
def mappings(tmp_path: Path) -> Path:
    """A copy of mappings/ to change."""
    return Path(shutil.copytree(MAPPINGS, tmp_path / "mappings"))


def edit(path: Path, change: Any) -> None:
    """Apply ``change`` to the JSON object in ``path``."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_generator_refuses_an_unknown_field_type(mappings: Path) -> None:
    name = "component_template.metrics-fio.histogram@package.json"

    def add(data: Any) -> None:
        clat = data["template"]["mappings"]["properties"]["fio"]["properties"]["clat_ns"]
        clat["properties"]["where"] = {"type": "geo_point"}

    edit(mappings / name, add)
    with pytest.raises(GEN.MappingError) as err:
        GEN.build(mappings)
    assert str(err.value) == f"{name}: field fio.clat_ns.where: unknown field type 'geo_point'"


def test_the_generator_refuses_an_unknown_parameter_and_dynamic_template(mappings: Path) -> None:
    name = "component_template.metrics-lmt.ost@package.json"

    def script(data: Any) -> None:
        ost = data["template"]["mappings"]["properties"]["lmt"]["properties"]["ost"]
        ost["properties"]["gap"]["script"] = {"source": "emit(true)"}

    edit(mappings / name, script)
    with pytest.raises(GEN.MappingError) as err:
        GEN.build(mappings)
    assert str(err.value) == f"{name}: field lmt.ost.gap: unknown parameter(s) script"

    shutil.copy(MAPPINGS / name, mappings / name)
    ecs = "component_template.iolens-ecs@mappings.json"
    edit(
        mappings / ecs,
        lambda data: data["template"]["mappings"]["dynamic_templates"].append(
            {"strings": {"match_mapping_type": "string", "mapping": {"type": "keyword"}}}
        ),
    )
    with pytest.raises(GEN.MappingError) as err:
        GEN.build(mappings)
    assert str(err.value) == (
        f"{ecs}: dynamic template strings: only a path_match '<object>.*' with "
        "match_mapping_type '*' and a mapping of a known field type is understood"
    )


def test_later_definitions_override_earlier_ones(mappings: Path) -> None:
    """The index template's own mappings come last: its ``sysstat.disk.tps`` is a long, and
    its dotted ``host.ip`` adds a field to the common ``host``."""

    def own(data: Any) -> None:
        data["template"] = {
            "mappings": {
                "properties": {
                    "sysstat": {"properties": {"disk": {"properties": {"tps": {"type": "long"}}}}},
                    "host.ip": {"type": "ip"},
                }
            }
        }

    edit(mappings / "index_template.metrics-sysstat.diskio.json", own)
    namespace: dict[str, Any] = {}
    exec(GEN.build(mappings), namespace)
    disk = typing.get_type_hints(namespace["SysstatDiskioSysstatDisk"])
    assert (disk["tps"], disk["rkB_s"]) == (int, float)
    hints = typing.get_type_hints(namespace["SysstatDiskioSource"])
    assert typing.get_type_hints(hints["host"]) == {"name": str, "ip": str}
    assert hints["host"].__name__ == "SysstatDiskioHost"
    assert typing.get_type_hints(namespace["FioHistogramSource"])["host"].__name__ == "CommonHost"


def test_check_mode_names_the_stale_module_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pipeline" / "records" / "sources.py"
    out.parent.mkdir(parents=True)
    out.write_text("# out of date\n")
    monkeypatch.setattr(GEN, "ROOT", tmp_path)
    monkeypatch.setattr(GEN, "OUT", out)
    assert GEN.main(["--check"]) == 1
    assert capsys.readouterr().err == (
        "stale generated module (regenerate: python scripts/gen_records.py):\n"
        "  pipeline/records/sources.py\n"
    )
    assert out.read_text() == "# out of date\n"
    assert GEN.main([]) == 0
    assert out.read_text() == GEN.build(MAPPINGS)
