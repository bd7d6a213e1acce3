"""The IOMiner test data set, indexed once per session into the embedded server.

Six Darshan jobs (five on 2024-03-05, one the evening before, outside the period the tests
load) with their files, their Slurm records (allocations and some steps) and LMT rows of three
OSTs, as documents of the data streams ``logs-darshan.job``, ``logs-darshan.file``,
``logs-slurm.job`` and ``metrics-lmt.ost`` in namespace ``iominer``, following the field
contract. The templates in ``mappings/`` for these streams are installed first when they exist
(they are strict, so a document off the contract fails here).

The jobs, modelled on the cases of seed 004 §III-F:

====  =====  ======  ==================================================================
job   procs  nodes   what it does
====  =====  ======  ==================================================================
1001      1      1   reads 2 GB, writes 0.5 GB (post-processing)
1002     16      1   IOR, one shared file of exactly 1 GB (10^9 bytes) on 4 OSTs
1003   1024     32   "Physics1.1": 1024 ranks write one 20 GB checkpoint on one OST,
                     rank 0 writes a small-request log; 0.4 GB/s over 50 s of I/O
1004   2048     64   VPIC-like: two 32 GB collective phases 84 s apart; 2 GB/s over its
                     32 s of I/O, though bytes / (last end - first start) is 0.55 GB/s
1005     64      4   "App1": three 4 GB outputs written 90 s apart; 0.4 GB/s
1006      8      1   30 GB written the evening before (outside the period)
====  =====  ======  ==================================================================
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from elasticsearch import Elasticsearch

from pipeline.reducers.sweep import covering_set
from pipeline.sink.capabilities import detect
from pipeline.sink.templates import TemplateObject, install, load_templates

NAMESPACE = "iominer"
START = "2024-03-05T00:00:00Z"
END = "2024-03-06T00:00:00Z"
STREAMS = ("logs-darshan.job", "logs-darshan.file", "logs-slurm.job", "metrics-lmt.ost")


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _ecs(kind: str, dataset: str) -> dict[str, Any]:
    return {
        "data_stream": {"type": kind, "dataset": dataset, "namespace": NAMESPACE},
        "event": {"dataset": dataset, "module": dataset.split(".")[0], "kind": "event"},
        "ecs": {"version": "8.11.0"},
    }


def _record_id(name: str) -> str:
    """Darshan's record id: a uint64 hash of the name, as a decimal string."""
    return str(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"))


def io(
    nbytes: int,
    ops: int,
    start: float,
    end: float,
    *,
    small: int = 0,
    small_1k: int = 0,
    consec: int | None = None,
    coll: int = 0,
) -> dict[str, Any]:
    """One direction of a file: bytes, requests, shares and the busy interval (s)."""
    return {
        "bytes": nbytes,
        "ops": ops,
        "small": small,
        "small_1k": small_1k,
        "consec": max(ops - 1, 0) if consec is None else consec,
        "coll": coll,
        "start": start,
        "end": end,
    }


NO_IO = io(0, 0, 0.0, 0.0)


def file_fields(
    name: str,
    *,
    nprocs: int,
    read: dict[str, Any] = NO_IO,
    write: dict[str, Any] = NO_IO,
    osts: list[int],
    stripe_count: int,
) -> dict[str, Any]:
    """``darshan.file.*`` of one file, with Darshan's 0 meaning "never" for unused directions."""
    used = [d for d in (read, write) if d["end"] > d["start"]]
    start = min(d["start"] for d in used)
    end = max(d["end"] for d in used)
    f: dict[str, Any] = {
        "record_id": _record_id(name),
        "name": name,
        "module": "POSIX",
        "nprocs": nprocs,
        "shared": nprocs > 1,
        "start_s": start,
        "end_s": end,
        "busy_s": end - start,
        "read_start_s": read["start"],
        "read_end_s": read["end"],
        "write_start_s": write["start"],
        "write_end_s": write["end"],
        "read_time_s": read["end"] - read["start"],
        "write_time_s": write["end"] - write["start"],
        "meta_time_s": 0.02,
        "stripe_size": 1048576,
        "stripe_count": stripe_count,
        "osts": osts,
        "proc_per_ost": nprocs / stripe_count,
    }
    for key, d in (("read", read), ("write", write)):
        f[f"bytes_{'read' if key == 'read' else 'written'}"] = d["bytes"]
        f[f"{key}s"] = d["ops"]
        f[f"consec_{key}s"] = d["consec"]
        f[f"seq_{key}s"] = d["consec"]
        f[f"small_{key}s"] = d["small"]
        f[f"small_1k_{key}s"] = d["small_1k"]
        f[f"coll_{key}s"] = d["coll"]
        f[f"indep_{key}s"] = 0
    return f


JOBS: list[dict[str, Any]] = [
    {
        "id": "1001",
        "user": "bob",
        "exe": "postproc",
        "nprocs": 1,
        "nodes": 1,
        "start": "2024-03-05T08:00:00Z",
        "run_time_s": 600.0,
        "pattern": "1-1",
        "interface": "POSIX",
        "files": [
            file_fields(
                "/scratch/bob/run1/input.dat",
                nprocs=1,
                read=io(2_000_000_000, 2000, 5.0, 45.0),
                osts=[3],
                stripe_count=1,
            ),
            file_fields(
                "/scratch/bob/run1/summary.dat",
                nprocs=1,
                write=io(500_000_000, 500, 500.0, 520.0),
                osts=[4],
                stripe_count=1,
            ),
        ],
    },
    {
        "id": "1002",
        "user": "ann",
        "exe": "ior",
        "nprocs": 16,
        "nodes": 1,
        "start": "2024-03-05T09:00:00Z",
        "run_time_s": 10.0,
        "pattern": "N-1",
        "interface": "POSIX",
        "files": [
            file_fields(
                "/scratch/ann/ior/testfile",
                nprocs=16,
                write=io(1_000_000_000, 1000, 2.0, 4.0, small=1000, consec=984),
                osts=[0, 1, 2, 3],
                stripe_count=4,
            )
        ],
    },
    {
        "id": "1003",
        "user": "cid",
        "exe": "flash4",
        "nprocs": 1024,
        "nodes": 32,
        "start": "2024-03-05T10:00:00Z",
        "run_time_s": 60.0,
        "pattern": "N-1",
        "interface": "POSIX",
        "files": [
            file_fields(
                "/scratch/cid/flash/input.nml",
                nprocs=1,
                read=io(1_000_000, 1, 0.5, 1.5, small=1, consec=0),
                osts=[2],
                stripe_count=1,
            ),
            file_fields(
                "/scratch/cid/flash/run.log",
                nprocs=1,
                write=io(8_000_000, 8000, 0.0, 12.0, small=8000, small_1k=8000, consec=7999),
                osts=[5],
                stripe_count=1,
            ),
            file_fields(
                "/scratch/cid/flash/ckpt_0001.h5",
                nprocs=1024,
                write=io(19_980_000_000, 20480, 10.0, 44.0, small=20480, consec=19456),
                osts=[7],
                stripe_count=1,
            ),
            file_fields(
                "/scratch/cid/flash/stats.dat",
                nprocs=12,
                write=io(12_000_000, 12, 40.0, 50.0, small=12, consec=0),
                osts=[9],
                stripe_count=1,
            ),
        ],
    },
    {
        "id": "1004",
        "user": "dan",
        "exe": "vpicio_uni",
        "nprocs": 2048,
        "nodes": 64,
        "start": "2024-03-05T11:00:00Z",
        "run_time_s": 120.0,
        "pattern": "N-1",
        "interface": "MPI-IO collective",
        "interfaces": ["POSIX", "MPI-IO", "HDF5"],
        "files": [
            file_fields(
                f"/scratch/dan/vpic/field_{part}.h5",
                nprocs=2048,
                write=io(32_000_000_000, 4096, t0, t0 + 16.0, consec=2048, coll=4096),
                osts=list(range(first, first + 8)),
                stripe_count=8,
            )
            for part, t0, first in (("a", 0.0, 8), ("b", 100.0, 16))
        ],
    },
    {
        "id": "1005",
        "user": "eve",
        "exe": "climate",
        "nprocs": 64,
        "nodes": 4,
        "start": "2024-03-05T12:00:00Z",
        "run_time_s": 400.0,
        "pattern": "N-1",
        "interface": "MPI-IO collective",
        "interfaces": ["POSIX", "MPI-IO", "PnetCDF"],
        "files": [
            file_fields(
                f"/scratch/eve/climate/out_{k:03d}.nc",
                nprocs=64,
                write=io(4_000_000_000, 1000, t0, t0 + 10.0, consec=936, coll=1000),
                osts=list(range(8)),
                stripe_count=8,
            )
            for k, t0 in ((0, 100.0), (1, 200.0), (2, 300.0))
        ],
    },
    {
        "id": "1006",
        "user": "bob",
        "exe": "postproc",
        "nprocs": 8,
        "nodes": 1,
        "start": "2024-03-04T23:00:00Z",
        "run_time_s": 300.0,
        "pattern": "N-N",
        "interface": "POSIX",
        "files": [
            file_fields(
                f"/scratch/bob/run0/part{k}.dat",
                nprocs=1,
                write=io(3_750_000_000, 3750, 10.0, 250.0),
                osts=[k],
                stripe_count=1,
            )
            for k in range(8)
        ],
    },
]


def _union(files: list[dict[str, Any]], lo: str, hi: str) -> float:
    return covering_set([f[lo] for f in files], [f[hi] for f in files]).union


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def job_document(job: dict[str, Any]) -> dict[str, Any]:
    """The ``logs-darshan.job`` document, its job-level fields derived from its files."""
    files = job["files"]
    start = _at(job["start"])
    bytes_read = sum(f["bytes_read"] for f in files)
    bytes_written = sum(f["bytes_written"] for f in files)
    total = bytes_read + bytes_written
    ops = sum(f["reads"] + f["writes"] for f in files)
    io_time = _union(files, "start_s", "end_s")
    read_time = _union(files, "read_start_s", "read_end_s")
    write_time = _union(files, "write_start_s", "write_end_s")
    span = max(f["end_s"] for f in files) - min(f["start_s"] for f in files)
    nprocs = job["nprocs"]
    fields: dict[str, Any] = {
        "id": job["id"],
        "uid": 50000 + int(job["id"]) % 100,
        "user": job["user"],
        "exe": job["exe"],
        "nprocs": nprocs,
        "start": _iso(start),
        "end": _iso(start + timedelta(seconds=job["run_time_s"])),
        "run_time_s": job["run_time_s"],
        "bytes_read": bytes_read,
        "bytes_written": bytes_written,
        "reads": sum(f["reads"] for f in files),
        "writes": sum(f["writes"] for f in files),
        "read_ratio": _ratio(bytes_read, total),
        "seq_ratio": _ratio(sum(f["seq_reads"] + f["seq_writes"] for f in files), ops),
        "consec_ratio": _ratio(sum(f["consec_reads"] + f["consec_writes"] for f in files), ops),
        "small_ratio": _ratio(sum(f["small_reads"] + f["small_writes"] for f in files), ops),
        "small_1k_ratio": _ratio(
            sum(f["small_1k_reads"] + f["small_1k_writes"] for f in files), ops
        ),
        "sharing_ratio": nprocs / len(files),
        "pattern": job["pattern"],
        "interfaces": job.get("interfaces", ["POSIX", "STDIO"]),
        "interface": job["interface"],
        "collective": any(f["coll_writes"] + f["coll_reads"] > 0 for f in files),
        "ost_count": len({o for f in files for o in f["osts"]}),
        "file_count": len(files),
        "size_class": "One" if nprocs == 1 else "Small" if nprocs <= 1024 else "Medium",
        "no_io": total == 0,
        "io_time_s": io_time,
        "read_time_s": read_time,
        "write_time_s": write_time,
        "naive_bytes_per_s": _ratio(total, span),
        "critical_bytes_per_s": _ratio(total, io_time),
        "darshan_bytes_per_s": _ratio(total, io_time),
        "read_bytes_per_s": _ratio(bytes_read, read_time),
        "write_bytes_per_s": _ratio(bytes_written, write_time),
    }
    log = {
        "id": f"L{job['id']}",
        "name": f"{job['user']}_{job['exe']}_id{job['id']}.darshan",
        "version": "3.41",
    }
    return {
        "@timestamp": _iso(start),
        **_ecs("logs", "darshan.job"),
        "darshan": {"job": {k: v for k, v in fields.items() if v is not None}, "log": log},
    }


def file_documents(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``logs-darshan.file`` documents; ``@timestamp`` is the job start + the file's."""
    start = _at(job["start"])
    return [
        {
            "@timestamp": _iso(start + timedelta(seconds=f["start_s"])),
            **_ecs("logs", "darshan.file"),
            "darshan": {"job": {"id": job["id"]}, "log": {"id": f"L{job['id']}"}, "file": f},
        }
        for f in job["files"]
    ]


def slurm_documents(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's allocation record (``id`` = ``job_id``, no step) and, for some, steps."""
    start = _at(job["start"]) - timedelta(seconds=30)
    elapsed = job["run_time_s"] + 60.0
    nodes = [f"nid{int(job['id']) * 100 + k:05d}" for k in range(job["nodes"])]
    records: list[tuple[str, str | None, int, int, list[str]]] = [
        (job["id"], None, job["nodes"], job["nprocs"], nodes)
    ]
    if job["id"] == "1003":
        records += [("1003.batch", "batch", 1, 1, nodes[:1]), ("1003.0", "0", 32, 1024, nodes)]
    if job["id"] == "1004":
        records += [("1004.extern", "extern", 64, 64, nodes)]
    docs = []
    for ident, step, count, tasks, hosts in records:
        fields: dict[str, Any] = {
            "id": ident,
            "job_id": job["id"],
            "step": step,
            "user": job["user"],
            "name": job["exe"] if step is None else step,
            "start": _iso(start),
            "end": _iso(start + timedelta(seconds=elapsed)),
            "elapsed_s": elapsed,
            "state": "COMPLETED",
            "node_count": count,
            "tasks": tasks,
            "nodes": hosts,
        }
        docs.append(
            {
                "@timestamp": _iso(start),
                **_ecs("logs", "slurm.job"),
                "slurm": {"job": {k: v for k, v in fields.items() if v is not None}},
            }
        )
    return docs


LMT_OSTS = (5, 7, 9)
LMT_TIMES = (
    "2024-03-05T10:00:10Z",
    "2024-03-05T10:00:15Z",
    "2024-03-05T10:00:20Z",
    "2024-03-05T10:00:25Z",
)


def lmt_documents() -> list[dict[str, Any]]:
    """Three OSTs x four 5 s intervals during job 1003's checkpoint (OST 7 carries it), and
    one interval of OST 5 the evening before (outside the period)."""
    docs = []
    rows = [(t, o) for t in LMT_TIMES for o in LMT_OSTS] + [("2024-03-04T23:59:55Z", 5)]
    for k, (when, ost) in enumerate(rows):
        written = 2_900_000_000 if ost == 7 else 1_000_000 * (k + 1)
        docs.append(
            {
                "@timestamp": when,
                **_ecs("metrics", "lmt.ost"),
                "lmt": {
                    "ost": {
                        "name": f"scratch-OST{ost:04x}",
                        "fs": "scratch",
                        "index": ost,
                        "read_bytes": 0,
                        "write_bytes": written,
                        "read_bytes_per_s": 0.0,
                        "write_bytes_per_s": written / 5.0,
                        "interval_s": 5.0,
                        "reset": False,
                        "gap": False,
                    }
                },
            }
        )
    return docs


def documents() -> Iterator[tuple[str, dict[str, Any]]]:
    """(data stream, document) for the whole data set."""
    for job in JOBS:
        yield f"logs-darshan.job-{NAMESPACE}", job_document(job)
        for doc in file_documents(job):
            yield f"logs-darshan.file-{NAMESPACE}", doc
        for doc in slurm_documents(job):
            yield f"logs-slurm.job-{NAMESPACE}", doc
    for doc in lmt_documents():
        yield f"metrics-lmt.ost-{NAMESPACE}", doc


def _templates() -> list[TemplateObject]:
    """The index templates of STREAMS in mappings/ and the component templates they use."""
    objects = load_templates()
    index = [
        o
        for o in objects
        if o.kind == "index" and any(f"{s}-*" in o.body.get("index_patterns", []) for s in STREAMS)
    ]
    used = {name for o in index for name in o.body.get("composed_of", [])}
    return [o for o in objects if o.kind == "component" and o.name in used] + index


@pytest.fixture(scope="session")
def iominer_period() -> tuple[str, str]:
    """The period the tests load: 2024-03-05 (UTC), as ISO-8601 start and exclusive end."""
    return START, END


@pytest.fixture(scope="session")
def iominer_ns(es_url: str) -> str:
    """Namespace of the indexed IOMiner data set (templates installed when they exist)."""
    client = Elasticsearch(es_url, request_timeout=30)
    try:
        objects = _templates()
        if objects:
            install(client, objects, detect(client))
        ops: list[dict[str, Any]] = []
        for stream, doc in documents():
            ops += [{"create": {"_index": stream}}, doc]
        resp = client.bulk(operations=ops, refresh=True)
        failed = [i for i in resp["items"] if i["create"].get("error")]
        assert not failed, failed[:3]
    finally:
        client.close()
    return NAMESPACE
