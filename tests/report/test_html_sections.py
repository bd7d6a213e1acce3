"""The report's views other than fio's, from documents shaped as the pipeline writes them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pipeline.report.html import build, figure_count

T0 = datetime(2026, 11, 22, 10, tzinfo=UTC)


def at(minute: int) -> str:
    return f"2026-11-22T10:{minute:02d}:00.000Z"


DOCS: dict[str, list[dict[str, Any]]] = {
    "metrics-sysstat.diskio": [
        {
            "@timestamp": at(m),
            "host": {"name": "fs001"},
            "system": {"diskio": {"name": dev}},
            "sysstat": {"disk": {"await": 2.0 + m + k, "util": 10.0 * k}},
        }
        for m in range(5)
        for k, dev in enumerate(("dm-0", "dm-3"))
    ],
    "metrics-iolens.persistence": [
        {
            "@timestamp": at(59),
            "iolens": {"persistence": {"lun": lun, "group": "0", "value": v, "rank": r}},
        }
        for r, (lun, v) in enumerate((("fs001/dm-3", 16), ("fs001/dm-0", 8)), start=1)
    ],
    "logs-darshan.job": [
        {
            "@timestamp": at(m),
            "darshan": {
                "job": {
                    "exe": "ior",
                    "id": m,
                    "bytes_read": 2**30 * (m + 1),
                    "bytes_written": 2**29,
                    "critical_bytes_per_s": 2**28 / (m + 1),
                    "nprocs": 64,
                }
            },
        }
        for m in range(3)
    ],
    "logs-iolens.io_diagnosis": [
        {
            "@timestamp": at(1),
            "iolens": {
                "io_diagnosis": {
                    "factors": {
                        "ost_count": 24.0,
                        "small": 0.5,
                        "small_1k": 0.2,
                        "non_consec": 0.1,
                        "coll": 0.0,
                        "proc_per_ost": 2.7,
                    }
                }
            },
        }
    ],
    "metrics-lmt.ost": [
        {
            "@timestamp": at(m),
            "lmt": {
                "ost": {
                    "name": f"OST000{k}",
                    "read_bytes_per_s": 1e8,
                    "write_bytes_per_s": 2e8,
                    "interval_s": 60.0,
                }
            },
        }
        for m in range(3)
        for k in range(2)
    ],
    "logs-iolens.request": [
        {
            "@timestamp": at(m % 60),
            "iolens": {
                "request": {
                    "model": "http_server",
                    "cluster": m % 3,
                    "duration_ms": 15.0 * (m % 3 + 1),
                    "outlier": m == 7,
                }
            },
        }
        for m in range(30)
    ],
    "metrics-iolens.service_rate": [
        {
            "@timestamp": at(m),
            "iolens": {"service_rate": {"stage": s, "rate_per_s": r, "throughput_per_s": 180.0}},
        }
        for m in range(3)
        for s, r in (("sink", 183.0), ("produce", 2400.0))
    ],
}


def fetch(stream: str, fields: Sequence[str], sort: Sequence[str]) -> list[Mapping[str, Any]]:
    return list(DOCS.get(stream, []))


def test_every_view_draws_its_documents() -> None:
    page, shown, empty = build(fetch, T0, T0.replace(hour=11))
    assert [s.title for s in shown] == ["LUN health", "HPC I/O", "Requests", "Pipeline health"]
    assert empty == ["fio"]
    counts = {s.title: len(s.figures) for s in shown}
    assert counts == {"LUN health": 3, "HPC I/O": 3, "Requests": 2, "Pipeline health": 1}
    assert figure_count(shown) == 9
    lun = shown[0].figures
    assert [t.name for t in lun[0].data] == ["fs001/dm-0", "fs001/dm-3"]
    assert list(lun[2].data[0].y) == ["fs001/dm-3", "fs001/dm-0"]  # ranked, highest first
    requests = shown[2].figures
    assert sorted(t.name for t in requests[0].data) == [f"http_server #{c}" for c in range(3)]
    assert list(requests[1].data[1].y) == [0, 1, 0]  # the one outlier, in cluster 1
    rates = shown[3].figures[0]
    assert {t.name: list(t.y) for t in rates.data} == {
        "produce": [2400.0] * 3,
        "sink": [183.0] * 3,
    }
    assert page.count('<div id="plot-') == 9


def test_nothing_in_range_is_said() -> None:
    page, shown, empty = build(lambda *_a: [], T0, T0.replace(hour=11))
    assert shown == [] and empty == ["fio", "lun", "hpc", "requests", "pipeline"]
    assert "No data in this range for: fio, lun, hpc, requests, pipeline." in page
