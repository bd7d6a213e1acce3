"""The window method as indexed in Elasticsearch, against exact per-I/O percentiles.

A real fio run writes histogram logs and, for the same I/Os, per-I/O completion-latency logs
(``write_lat_log`` with ``log_avg_msec=0``). The pipeline indexes the histograms and merges them
per 1 s interval; the exact percentiles are those of the I/Os the merged records hold: fio writes
both logs in completion order, so record k of a direction holds the next ``samples`` I/Os of that
direction in the per-I/O log (checked bin for bin below).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from elasticsearch import Elasticsearch

from pipeline.jobs.main_job import MainJob
from pipeline.records.fio_bins import plat_val_to_idx
from pipeline.settings import settings_from_mapping
from pipeline.sink.search import iter_hits, refresh

RUN_START = "2026-01-01T00:00:00Z"
RUN_START_MS = 1767225600000
TOLERANCE = {"p50": 0.03, "p90": 0.03, "p99": 0.05}


def ingest(fio_run: Path, es_url: str, state: Path, namespace: str) -> None:
    settings = settings_from_mapping(
        {
            "elasticsearch": {"url": es_url, "namespace": namespace},
            "state_dir": str(state),
            "drops": [{"type": "fio-hist", "path": str(fio_run), "host": "node01"}],
            "fio": {"run_start": RUN_START, "settle_s": 0},
        }
    )
    client = Elasticsearch(es_url)
    job = MainJob(settings, client)
    try:
        summary = job.run_once()
    finally:
        job.close()
        client.close()
    assert summary.bad_lines == 0


def exact_values(fio_run: Path, records: list[dict]) -> dict[tuple[int, str], list[np.ndarray]]:
    """Per (interval start, ddir): the per-I/O clat values of the records assigned to it."""
    out: dict[tuple[int, str], list[np.ndarray]] = defaultdict(list)
    by_job: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_job[r["fio"]["job"]].append(r)
    for job, recs in by_job.items():
        clat = np.loadtxt(fio_run / f"xc_clat.{job}.log", delimiter=",", dtype=np.int64)
        per_dir = {d: clat[clat[:, 2] == code, 1] for code, d in enumerate(("read", "write"))}
        pos = dict.fromkeys(per_dir, 0)
        for r in sorted(recs, key=lambda r: r["fio"]["log"]["line"]):
            fio = r["fio"]
            d, n = fio["ddir"], fio["clat_ns"]["samples"]
            vals = per_dir[d][pos[d] : pos[d] + n]
            pos[d] += n
            assert vals.size == n
            # the record's histogram is exactly these I/Os, bin for bin
            hist = fio["clat_ns"].get("histogram", {"values": [], "counts": []})
            idx = np.bincount([plat_val_to_idx(int(v)) for v in vals], minlength=1856)
            assert idx[np.nonzero(idx)].tolist() == hist["counts"]
            out[(fio["interval"]["start_ms"], d)].append(vals)
    return out


def span_values(fio_run: Path, records: list[dict]) -> dict[tuple[int, str], np.ndarray]:
    """Per (interval start, ddir): clat values of the I/Os whose completion time (ms, from the
    per-I/O log) lies in the span the interval's records of each job cover."""
    spans: dict[tuple[str, int, str], list[int]] = {}
    for r in records:
        fio = r["fio"]
        key = (fio["job"], fio["interval"]["start_ms"], fio["ddir"])
        lo, hi = fio["window"]["start_ms"] - RUN_START_MS, fio["window"]["end_ms"] - RUN_START_MS
        cur = spans.setdefault(key, [lo, hi])
        spans[key] = [min(cur[0], lo), max(cur[1], hi)]
    out: dict[tuple[int, str], list[np.ndarray]] = defaultdict(list)
    for job in {k[0] for k in spans}:
        clat = np.loadtxt(fio_run / f"xc_clat.{job}.log", delimiter=",", dtype=np.int64)
        for (j, start, ddir), (lo, hi) in spans.items():
            if j != job:
                continue
            t = clat[:, 0]
            code = ("read", "write").index(ddir)
            inside = (clat[:, 2] == code) & ((t > lo) | ((lo == 0) & (t == 0))) & (t <= hi)
            out[(start, ddir)].append(clat[inside, 1])
    return {k: np.concatenate(v) for k, v in out.items()}


@pytest.mark.integration
def test_window_percentiles_match_exact_per_io_percentiles(
    fio_run: Path, es_url: str, tmp_path: Path
) -> None:
    ns = f"acc{uuid.uuid4().hex[:8]}"
    ingest(fio_run, es_url, tmp_path / "state", ns)
    client = Elasticsearch(es_url)
    refresh(client, f"metrics-fio.histogram-{ns}")
    refresh(client, f"metrics-fio.latency-{ns}")
    sort = [{"fio.log.line": "asc"}, {"log.file.path": "asc"}]
    records = [
        h["_source"]
        for h in iter_hits(client, f"metrics-fio.histogram-{ns}", {"match_all": {}}, sort)
    ]
    latency = {
        (h["_source"]["fio"]["interval"]["start_ms"], h["_source"]["fio"]["ddir"]): h["_source"][
            "fio"
        ]["clat_ns"]
        for h in iter_hits(
            client,
            f"metrics-fio.latency-{ns}",
            {"term": {"iolens.scope": "cluster"}},
            [{"fio.interval.start_ms": "asc"}, {"fio.ddir": "asc"}],
        )
    }
    client.close()
    exact = exact_values(fio_run, records)
    last_end = min(
        max(r["fio"]["window"]["end_ms"] for r in records if r["fio"]["job"] == job)
        for job in ("1", "2")
    )
    full = sorted(k for k in exact if k[0] >= RUN_START_MS and k[0] + 1000 <= last_end)
    assert len(full) >= 6  # 3 full seconds x read/write at least
    for start, ddir in full:
        values = np.concatenate(exact[(start, ddir)])
        merged = latency[(start, ddir)]
        assert merged["samples"] == values.size
        for key, tol in TOLERANCE.items():
            want = np.percentile(values, float(key[1:]), method="inverted_cdf")
            assert abs(merged[key] - want) <= tol * want, (start, ddir, key, merged[key], want)
    # The same bound with the I/Os picked by completion timestamp: those in the span
    # (first window start, last window end] the interval's records cover, per job.
    spans = span_values(fio_run, records)
    for start, ddir in full:
        values = spans[(start, ddir)]
        merged = latency[(start, ddir)]
        assert abs(values.size - merged["samples"]) <= 0.01 * merged["samples"]
        for key, tol in TOLERANCE.items():
            want = np.percentile(values, float(key[1:]), method="inverted_cdf")
            assert abs(merged[key] - want) <= tol * want, (start, ddir, key, merged[key], want)
    # mixed = read + write
    for start, _ in full:
        assert latency[(start, "mixed")]["samples"] == (
            latency[(start, "read")]["samples"] + latency[(start, "write")]["samples"]
        )
