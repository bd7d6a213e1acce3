"""Drishti-style insights and the server-side causes of the diagnosis, on real logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.formats.darshan.read import read_darshan
from pipeline.reducers.darshan_job import analyze
from pipeline.reducers.insights import insights
from pipeline.reducers.io_diagnosis import Evidence, LmtWindow, diagnose, lmt_window


@pytest.mark.parametrize(("nodes", "code"), [(2, "M08"), (128, "M09"), (4, "M10")])
def test_aggregators_against_the_node_count(darshan_inputs: Path, nodes: int, code: str) -> None:
    # VPIC-IO's hints: cb_nodes=4
    a = analyze(read_darshan(darshan_inputs / "sample.darshan"))
    found = insights(a.job, a.files, a.log.hints, nodes)
    assert [i.code for i in found if i.code.startswith("M")] == ["M05", code]
    assert [i.code for i in insights(a.job, a.files, a.log.hints)][-1] == "M05"


def test_imbalanced_io_findings_match_drishtis(shared_darshan_logs: Path) -> None:
    a = analyze(read_darshan(shared_darshan_logs / "imbalanced_io" / "imbalanced-io.darshan"))
    found = {i.code: i for i in insights(a.job, a.files, a.log.hints)}
    # Drishti reports P05, P06, P07, P08, P18 and P19 (among others) on this log
    assert {"P05", "P06", "P07", "P08", "P17", "P18", "P19"} <= found.keys()
    assert found["P05"].message.startswith("67675 of 67861 reads (100%)")
    assert found["P17"].message == "a rank spent 33.4 s in metadata operations (open, stat...)"
    assert all(i.level == "high" for c, i in found.items() if c in {"P05", "P06", "P18"})


def test_lmt_load_names_a_busy_ost_of_a_critical_file(darshan_inputs: Path) -> None:
    a = analyze(read_darshan(darshan_inputs / "sample-badost.darshan"))
    # OST 14 carries 400 MiB/s while the others carry 20: far more than the job's own traffic
    rates = {o: (400.0 if o == 14 else 20.0) * 2**20 for o in range(24)}
    d = diagnose(a, evidence=Evidence(lmt=LmtWindow(rates)))
    [load] = [c for c in d.causes if c.kind == "ost_load"]
    assert (load.ost, load.source) == (14, "lmt")
    assert load.files[0].endswith("ior-posix.out.00001507")
    assert "OST 14 carried" in load.message


def test_lmt_window_averages_each_ost() -> None:
    rows = [
        {"lmt": {"ost": {"index": 3, "read_bytes_per_s": 1.0, "write_bytes_per_s": 3.0}}},
        {"lmt": {"ost": {"index": 3, "read_bytes_per_s": 0.0, "write_bytes_per_s": 2.0}}},
        {"lmt": {"ost": {"index": 5, "read_bytes_per_s": 7.0, "write_bytes_per_s": 0.0}}},
    ]
    assert lmt_window(rows).bytes_per_s == {3: 3.0, 5: 7.0}
