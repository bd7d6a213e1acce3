"""The Kibana saved objects in ``kibana/``: import shape, references, fields against ``mappings/``.

What Lens operations accept is taken from Kibana 8.x Lens (``operations/definitions``):
percentile and the metric operations take numbers or ``histogram``, terms takes keyword,
numbers, booleans and IPs, date_histogram takes dates.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from pipeline.cli.main import main
from pipeline.errors import ConfigError
from pipeline.kibana import (
    DEFAULT_DIR,
    REQUIRED,
    TYPES,
    build,
    dumps_pretty,
    from_ndjson,
    load,
    to_ndjson,
    write_layout,
)

ROOT = Path(__file__).resolve().parents[2]
KIBANA = ROOT / "kibana"
MAPPINGS = ROOT / "mappings"

NUMERIC = {"long", "integer", "short", "byte", "double", "float", "half_float", "scaled_float"}
ACCEPTS: Mapping[str, set[str]] = {
    **{
        op: NUMERIC | {"histogram"}
        for op in ("percentile", "percentile_rank", "average", "min", "max", "sum", "median")
    },
    "standard_deviation": NUMERIC,
    "unique_count": NUMERIC | {"keyword", "boolean", "ip", "date"},
    "terms": NUMERIC | {"keyword", "boolean", "ip"},
    "date_histogram": {"date"},
    "range": NUMERIC,
    # Lens ``last_value.tsx``: string, boolean, number, ip and date fields (top_metrics/top_hits)
    "last_value": NUMERIC | {"keyword", "boolean", "ip", "date"},
}
DATASET = re.compile(r'data_stream\.dataset\s*:\s*"([^"]+)"')
QUERY_FIELD = re.compile(r"([A-Za-z_@][\w.@]*)\s*:")
RECORDS = "___records___"


def _fields(props: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for name, spec in props.items():
        if "properties" in spec:
            out |= _fields(spec["properties"], f"{prefix}{name}.")
        else:
            out[prefix + name] = spec.get("type", "object")
    return out


def stream_fields() -> dict[str, dict[str, str]]:
    """Data stream name -> field -> mapped type, from its index template's component templates."""
    streams: dict[str, dict[str, str]] = {}
    for path in sorted(MAPPINGS.glob("index_template.*.json")):
        name = path.name.removeprefix("index_template.").removesuffix(".json")
        fields: dict[str, str] = {}
        for part in json.loads(path.read_text())["composed_of"]:
            comp = MAPPINGS / f"component_template.{part}.json"
            if comp.exists():
                mappings = json.loads(comp.read_text())["template"].get("mappings", {})
                fields |= _fields(mappings.get("properties", {}))
        streams[name] = fields
    return streams


STREAMS = stream_fields()
OBJECTS = load(KIBANA)
BY_KEY = {(o["type"], o["id"]): o for o in OBJECTS}
VIEWS = {o["id"]: o for o in OBJECTS if o["type"] == "index-pattern"}


def view_streams(view: Mapping[str, Any]) -> list[str]:
    """The data streams a data view's title matches (any namespace)."""
    patterns = [p.strip() for p in view["attributes"]["title"].split(",")]
    return [s for s in STREAMS if any(fnmatch.fnmatch(f"{s}-default", p) for p in patterns)]


def lens_problems(lens: Mapping[str, Any]) -> list[str]:
    """What is wrong with a Lens object's layers, columns and fields (empty when nothing)."""
    problems: list[str] = []
    state = lens["attributes"]["state"]
    layers = state["datasourceStates"]["formBased"]["layers"]
    refs = {r["name"]: r["id"] for r in lens["references"]}
    query = state["query"]["query"]
    datasets = DATASET.findall(query)
    for layer_id, layer in layers.items():
        view = VIEWS.get(refs.get(f"indexpattern-datasource-layer-{layer_id}", ""))
        if view is None:
            problems.append(f"layer {layer_id}: no data view reference")
            continue
        streams = view_streams(view)
        if datasets:
            streams = [s for s in streams if s.split("-", 1)[1] in datasets]
        if len(streams) != 1:
            problems.append(f"layer {layer_id}: {view['id']} with {query!r} is {streams} streams")
            continue
        fields = STREAMS[streams[0]]
        if set(layer["columnOrder"]) != set(layer["columns"]):
            problems.append(f"layer {layer_id}: columnOrder differs from columns")
        for cid, col in layer["columns"].items():
            op, field = col["operationType"], col.get("sourceField")
            if op == "count" and field == RECORDS:
                continue
            if field not in fields:
                problems.append(f"{cid}: {field} is not mapped in {streams[0]}")
            elif op not in ACCEPTS:
                problems.append(f"{cid}: operation {op} is not checked here")
            elif fields[field] not in ACCEPTS[op]:
                problems.append(f"{cid}: {op} does not take {field} ({fields[field]})")
            params = col.get("params", {})
            for extra in params.get("secondaryFields", []):  # multi-terms
                if fields.get(extra) not in ACCEPTS["terms"]:
                    problems.append(f"{cid}: terms does not take {extra} ({fields.get(extra)})")
            if op == "last_value" and fields.get(params.get("sortField")) != "date":
                problems.append(f"{cid}: last_value sorts by {params.get('sortField')}, not a date")
        for name in QUERY_FIELD.findall(query):
            if name not in fields:
                problems.append(f"query names {name}, not mapped in {streams[0]}")
    return problems


def _accessors(vis: Mapping[str, Any]) -> list[tuple[str, set[str]]]:
    """(layer id, column ids) the visualization shows."""
    if "layers" in vis:
        return [
            (
                layer["layerId"],
                set(layer["accessors"])
                | {layer[k] for k in ("xAccessor", "splitAccessor") if k in layer},
            )
            for layer in vis["layers"]
        ]
    return [(vis["layerId"], {c["columnId"] for c in vis["columns"]})]


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: f"{o['type']}/{o['id']}")
def test_every_object_has_the_import_shape(obj: Mapping[str, Any]) -> None:
    assert set(REQUIRED) <= obj.keys()
    assert obj["managed"] is False
    assert obj["coreMigrationVersion"] == "8.8.0"
    assert obj["typeMigrationVersion"] == {"index-pattern": "8.0.0"}.get(obj["type"], "8.9.0")
    assert obj["id"].startswith("iolens-")
    path = KIBANA / obj["type"] / f"{obj['id']}.json"
    assert path.read_text(encoding="utf-8") == dumps_pretty(obj), "not in the canonical form"


def test_the_set_has_six_dashboards_and_a_view_per_family() -> None:
    titles = sorted(o["attributes"]["title"] for o in OBJECTS if o["type"] == "dashboard")
    assert titles == [
        "[iolens] HPC I/O",
        "[iolens] Incidents",
        "[iolens] LUN health",
        "[iolens] Pipeline health",
        "[iolens] Requests",
        "[iolens] fio latency",
    ]
    covered = {s for v in VIEWS.values() for s in view_streams(v)}
    assert covered == set(STREAMS) - {"logs-slurm.job"}


def test_every_reference_resolves() -> None:
    for obj in OBJECTS:
        for ref in obj["references"]:
            assert (ref["type"], ref["id"]) in BY_KEY, f"{obj['id']} -> {ref}"


@pytest.mark.parametrize("view", VIEWS.values(), ids=lambda v: v["id"])
def test_data_views_match_streams_without_type_conflicts(view: Mapping[str, Any]) -> None:
    streams = view_streams(view)
    assert streams, f"{view['attributes']['title']} matches no data stream"
    assert view["attributes"]["timeFieldName"] == "@timestamp"
    types: dict[str, set[str]] = {}
    for s in streams:
        assert STREAMS[s]["@timestamp"] == "date"
        for field, kind in STREAMS[s].items():
            types.setdefault(field, set()).add(kind)
    conflicts = {f: k for f, k in types.items() if len(k) > 1}
    assert not conflicts
    for field in view["attributes"].get("fieldFormatMap", {}):
        assert field in types


@pytest.mark.parametrize("lens", [o for o in OBJECTS if o["type"] == "lens"], ids=lambda o: o["id"])
def test_lens_fields_exist_with_a_type_the_operation_accepts(lens: Mapping[str, Any]) -> None:
    assert lens["attributes"]["visualizationType"] in {"lnsXY", "lnsDatatable"}
    assert lens_problems(lens) == []
    state = lens["attributes"]["state"]
    layers = state["datasourceStates"]["formBased"]["layers"]
    for layer_id, shown in _accessors(state["visualization"]):
        assert shown <= set(layers[layer_id]["columns"])


def test_the_field_check_can_fail() -> None:
    lens = copy.deepcopy(BY_KEY["lens", "iolens-lens-fio-histogram-percentiles"])
    layer = lens["attributes"]["state"]["datasourceStates"]["formBased"]["layers"]["L0"]
    layer["columns"]["h99"]["sourceField"] = "fio.clat_ns.histgram"
    layer["columns"]["h50"]["sourceField"] = "fio.ddir"  # a percentile of a keyword
    assert lens_problems(lens) == [
        "h50: percentile does not take fio.ddir (keyword)",
        "h99: fio.clat_ns.histgram is not mapped in metrics-fio.histogram",
    ]
    lens["attributes"]["state"]["query"]["query"] = ""  # metrics-fio.* spans two streams
    assert lens_problems(lens) == [
        "layer L0: iolens-dv-metrics-fio with '' is "
        "['metrics-fio.histogram', 'metrics-fio.latency'] streams"
    ]


def test_the_sort_field_and_multi_terms_checks_can_fail() -> None:
    table = copy.deepcopy(BY_KEY["lens", "iolens-lens-incident-table"])
    columns = table["attributes"]["state"]["datasourceStates"]["formBased"]["layers"]["L0"]
    columns["columns"]["start"]["params"]["sortField"] = "iolens.incident.lun"
    assert lens_problems(table) == [
        "start: last_value sorts by iolens.incident.lun, not a date",
    ]
    fio = copy.deepcopy(BY_KEY["lens", "iolens-lens-incident-fio-jobs"])
    layer = fio["attributes"]["state"]["datasourceStates"]["formBased"]["layers"]["L0"]
    layer["columns"]["job"]["params"]["secondaryFields"] = ["fio.clat_ns.histogram"]
    assert lens_problems(fio) == ["job: terms does not take fio.clat_ns.histogram (None)"]


@pytest.mark.parametrize(
    "dash", [o for o in OBJECTS if o["type"] == "dashboard"], ids=lambda o: o["id"]
)
def test_dashboard_panels_resolve_and_fit_the_grid(dash: Mapping[str, Any]) -> None:
    refs = {r["name"]: (r["type"], r["id"]) for r in dash["references"]}
    cells: set[tuple[int, int]] = set()
    panels = dash["attributes"]["panelsJSON"]
    assert panels
    for panel in panels:
        key = refs[f"{panel['panelIndex']}:{panel['panelRefName']}"]
        assert key[0] == panel["type"] == "lens" and key in BY_KEY
        grid = panel["gridData"]
        assert grid["i"] == panel["panelIndex"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 48
        area = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not area & cells, f"panel {panel['panelIndex']} overlaps another"
        cells |= area
    assert len(refs) == len(panels)


def test_the_ndjson_encodes_string_attributes_one_object_per_line() -> None:
    lines = build(KIBANA).splitlines()
    assert len(lines) == len(OBJECTS)
    objects = [json.loads(line) for line in lines]
    assert [(o["type"], o["id"]) for o in objects] == sorted(
        ((o["type"], o["id"]) for o in objects), key=lambda k: (TYPES.index(k[0]), k[1])
    )
    for obj in objects:
        attrs = obj["attributes"]
        if obj["type"] == "dashboard":
            assert isinstance(attrs["panelsJSON"], str)
            assert isinstance(attrs["optionsJSON"], str)
            assert isinstance(attrs["kibanaSavedObjectMeta"]["searchSourceJSON"], str)
            assert isinstance(json.loads(attrs["panelsJSON"]), list)
        if obj["type"] == "lens":
            assert isinstance(attrs["state"], dict)
        if "fieldFormatMap" in attrs:
            assert isinstance(attrs["fieldFormatMap"], str)


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for kind in TYPES
        for p in sorted((root / kind).glob("*.json"))
    }


def test_the_ndjson_round_trips_to_the_git_layout(tmp_path: Path) -> None:
    written = write_layout(from_ndjson(build(KIBANA)), tmp_path)
    assert len(written) == len(OBJECTS)
    assert _tree(tmp_path) == _tree(KIBANA)


def test_unpacking_an_export_drops_export_only_keys() -> None:
    line = json.loads(build(KIBANA).splitlines()[-1])
    line |= {"created_at": "2026-01-01T00:00:00.000Z", "updated_at": "x", "version": "WzEsMV0="}
    export = json.dumps(line) + '\n{"exportedCount":1,"missingRefCount":0}\n'
    (obj,) = from_ndjson(export)
    assert obj == BY_KEY[obj["type"], obj["id"]]


def test_the_loader_refuses_misplaced_and_incomplete_objects(tmp_path: Path) -> None:
    view = dict(VIEWS["iolens-dv-metrics-fio"])
    (tmp_path / "index-pattern").mkdir()
    (tmp_path / "index-pattern" / "other.json").write_text(json.dumps(view))
    with pytest.raises(ConfigError, match=r"name it index-pattern/iolens-dv-metrics-fio\.json"):
        load(tmp_path)
    del view["typeMigrationVersion"]
    with pytest.raises(ConfigError, match="lacks typeMigrationVersion"):
        to_ndjson([view])
    with pytest.raises(ConfigError, match="no saved objects"):
        load(tmp_path / "empty")
    with pytest.raises(ConfigError, match="share a type and id"):
        to_ndjson([VIEWS["iolens-dv-metrics-fio"]] * 2)


def test_every_file_of_a_saved_object_type_is_loaded() -> None:
    """Only the type directories are read: watches or rules beside them are not objects."""
    assert DEFAULT_DIR.resolve() == KIBANA.resolve()
    assert len(_tree(KIBANA)) == len(OBJECTS)


def test_the_cli_builds_and_unpacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "objects.ndjson"
    assert main(["kibana", "build", "--out", str(out), "--dir", str(KIBANA)]) == 0
    assert out.read_text(encoding="utf-8") == build(KIBANA)
    assert main(["kibana", "unpack", "--from", str(out), "--dir", str(tmp_path / "git")]) == 0
    assert _tree(tmp_path / "git") == _tree(KIBANA)
    assert main(["kibana", "build"]) == 2
    missing = tmp_path / "missing.ndjson"
    assert main(["kibana", "unpack", "--from", str(missing), "--dir", str(tmp_path / "g")]) == 2
    assert f"{missing}: cannot read" in capsys.readouterr().err
    # never into the installed package: unpack names where it writes
    assert main(["kibana", "unpack", "--from", str(out)]) == 2
    assert "kibana unpack needs --dir DIR" in capsys.readouterr().err
