"""``metrics-iolens.peer_anomaly`` documents of a LUN compared and of a LUN a window skipped
(a gap in its data): every field they carry is mapped, with a compatible type (the stream's
mapping is strict)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline.sink.documents import DocContext, PeerVerdict, peer_anomaly_document

MAPPINGS = Path(__file__).resolve().parents[2] / "mappings"
TYPES = {"keyword": str, "constant_keyword": str, "date": str, "long": int, "double": float}


def mapped(stream: str) -> dict[str, str]:
    out: dict[str, str] = {}

    def walk(props: dict[str, Any], prefix: str) -> None:
        for key, value in props.items():
            if "properties" in value:
                walk(value["properties"], f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value["type"]

    for name in ("iolens-ecs@mappings", f"{stream}@package"):
        body = json.loads((MAPPINGS / f"component_template.{name}.json").read_text())
        walk(body["template"]["mappings"]["properties"], "")
    return out


def leaves(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def verdict(**change: Any) -> PeerVerdict:
    base: dict[str, Any] = {
        "group": "lun",
        "metric": "await",
        "host": "srvA",
        "device": "loop0",
        "window_index": 5,
        "start_s": 1795661719.0,
        "end_s": 1795661778.0,
        "span_s": 60.0,
        "score": 0.0,
        "distance": 0.25,
        "threshold": 1.117,
        "bins": 7,
        "anomalous": False,
        "faulty": False,
        "samples": 60,
    }
    return PeerVerdict(**(base | change))


@pytest.mark.parametrize(
    "v",
    [verdict(), verdict(distance=None, samples=0, skipped="too_few_samples", bins=5)],
    ids=["compared", "skipped"],
)
def test_peer_anomaly_fields_are_mapped(v: PeerVerdict) -> None:
    types = mapped("metrics-iolens.peer_anomaly")
    doc = peer_anomaly_document(DocContext("t", "a"), v, 1.0)
    json.dumps(doc.source, allow_nan=False)
    for field, value in leaves(dict(doc.source)).items():
        assert field in types, f"{field} is not mapped"
        for x in value if isinstance(value, list) else [value]:
            want = TYPES.get(types[field], object)
            assert isinstance(x, want) or (want is float and isinstance(x, int)), (field, x)
    peer = doc.source["iolens"]["peer"]
    assert peer["samples"] == v.samples
    if v.skipped is None:
        assert "skipped" not in peer and doc.source["iolens"]["actual"] == [0.25]
    else:
        assert peer["skipped"] == "too_few_samples" and doc.source["iolens"]["actual"] == []
