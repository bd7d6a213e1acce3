"""Documents: every field we emit is mapped with a compatible type; ids are deterministic."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipeline.formats.fio.encode import FioSource, RecordFields, histogram_document
from pipeline.formats.fio.window import WindowTracker, histogram_stats
from pipeline.records.core import FioHistRow, LineRef
from pipeline.records.fio_bins import BinLayout
from pipeline.reducers.histogram import LatencyHistogram
from pipeline.sink.documents import DocContext, LatencyKey, iso_ms, latency_document
from pipeline.sink.templates import mappings_dir

NS = BinLayout(29, 0, "ns")
PCTS = (50.0, 90.0, 95.0, 99.0, 99.9)
COMPATIBLE = {
    "keyword": (str,),
    "constant_keyword": (str,),
    "date": (str,),
    "long": (int,),
    "integer": (int,),
    "double": (float, int),
    "histogram": (dict,),
}


def mapped_types(stream: str) -> dict[str, str]:
    out: dict[str, str] = {}

    def walk(props: dict[str, Any], prefix: str) -> None:
        for key, value in props.items():
            if "properties" in value:
                walk(value["properties"], f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value["type"]

    for name in ("iolens-ecs@mappings", f"{stream}@package"):
        body = json.loads((mappings_dir() / f"component_template.{name}.json").read_text())
        walk(body["template"]["mappings"]["properties"], "")
    return out


def leaves(doc: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, dict) and not {"values", "counts"} <= value.keys():
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def sample_histogram_doc() -> Any:
    """Built the way the tailer builds it, from a placed record and its histogram."""
    row = FioHistRow(1101, 1, 4096, np.array([5, 700, 904]), np.array([1, 30, 2]))
    placed = WindowTracker(1000, 1767225600000, False).place(row)
    hist = LatencyHistogram.from_sparse(NS, row.bin_idx, row.counts)
    values, counts = hist.nonempty()
    rec = RecordFields(
        time_ms=row.time_ms,
        ddir="write",
        bs=row.bs,
        window_ms=(placed.start_ms, placed.end_ms),
        interval_ms=(placed.interval_start_ms, placed.interval_end_ms, placed.interval_ms),
        bins=(NS.nbins, NS.unit, NS.coarseness),
        clat_ns={**histogram_stats(hist, PCTS), "histogram": {"values": values, "counts": counts}},
    )
    src = FioSource("node01", "2", "randrw", "/d/randrw_clat_hist.2.log", "abc")
    ref = LineRef("1:2:abc", src.path, 12, 67000)
    return histogram_document(
        DocContext("default", "shipper1"), src, rec, ref, 61000, 1767225700000.0
    )


def sample_latency_doc() -> Any:
    h = LatencyHistogram.from_sparse(NS, np.array([700, 800]), np.array([10, 1]))
    key = LatencyKey("job", "node01", "2", "mixed", 1767225600000, 1000, "window")
    return latency_document(
        DocContext("default", "shipper1"), key, histogram_stats(h, PCTS), 4, 1767225700000.0
    )


@pytest.mark.parametrize(
    ("stream", "make"),
    [
        ("metrics-fio.histogram", sample_histogram_doc),
        ("metrics-fio.latency", sample_latency_doc),
    ],
)
def test_every_emitted_field_is_mapped_compatibly(stream: str, make: Any) -> None:
    mapped = mapped_types(stream)
    doc = make()
    for field, value in leaves(dict(doc.source)).items():
        assert field in mapped, f"{field} is not mapped in {stream}"
        assert isinstance(value, COMPATIBLE[mapped[field]]), (field, mapped[field], value)


def test_histogram_document_fields() -> None:
    doc = sample_histogram_doc()
    s = doc.source
    assert doc.index == "metrics-fio.histogram-default"
    assert s["@timestamp"] == "2026-01-01T00:00:01.101Z"
    assert s["event"]["dataset"] == s["data_stream"]["dataset"] == "fio.histogram"
    assert s["fio"]["ddir"] == "write"
    assert s["fio"]["window"] == {"start_ms": 1767225600000, "end_ms": 1767225601101}
    assert s["fio"]["interval"] == {"start_ms": 1767225600000, "end_ms": 1767225601000, "ms": 1000}
    hist = s["fio"]["clat_ns"]["histogram"]
    assert hist == {
        "values": [5.0, NS.midpoints_ns[700], NS.midpoints_ns[904]],
        "counts": [1, 30, 2],
    }
    assert s["fio"]["clat_ns"]["samples"] == 33
    assert s["fio"]["clat_ns"]["min"] == 5.0
    assert doc.refs[0].line_no == 12
    assert sample_histogram_doc().doc_id == doc.doc_id  # deterministic


def test_latency_document_id_changes_with_its_inputs() -> None:
    doc = sample_latency_doc()
    assert doc.source["iolens"] == {"scope": "job", "method": "window"}
    assert doc.source["host"] == {"name": "node01"}
    assert doc.source["@timestamp"] == iso_ms(1767225601000)
    h = LatencyHistogram.from_sparse(NS, np.array([700]), np.array([10]))
    key = LatencyKey("job", "node01", "2", "mixed", 1767225600000, 1000, "window")
    other = latency_document(DocContext(), key, histogram_stats(h, PCTS), 3, 0.0)
    assert other.doc_id != doc.doc_id


@pytest.mark.parametrize(
    ("epoch_ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (999.4, "1970-01-01T00:00:00.999Z"),
        (1795633339215.766779, "2026-11-25T19:02:19.215Z"),
        (1_700_000_000_000, "2023-11-14T22:13:20.000Z"),
    ],
)
def test_iso_ms_truncates_to_the_millisecond(epoch_ms: float, text: str) -> None:
    assert iso_ms(epoch_ms) == text


def _iso_ms_by_datetime(epoch_ms: float) -> str:
    dt = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return dt.isoformat(timespec="milliseconds")[:-6] + "Z"


@given(
    st.floats(min_value=-62_135_596_800_000.0, max_value=253_402_300_799_999.0)
    | st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999)
    | st.integers(0, 10**6).map(lambda k: 1_795_633_339_000 + k / 1000)
)
def test_iso_ms_writes_what_datetime_writes(epoch_ms: float) -> None:
    """Every time :class:`datetime` holds, fractions at the microsecond's rounding edges
    included, and the same second twice in a row."""
    assert iso_ms(epoch_ms) == _iso_ms_by_datetime(epoch_ms)
    assert iso_ms(epoch_ms) == _iso_ms_by_datetime(epoch_ms)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e17])
def test_iso_ms_refuses_what_datetime_refuses(bad: float) -> None:
    with pytest.raises((ValueError, OverflowError)):
        iso_ms(bad)
