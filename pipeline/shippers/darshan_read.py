"""Reading Darshan binary logs with pydarshan, only the modules iolens needs.

``darshan.DarshanReport(path, read_all=False)`` reads the header, the job record, the command
line, the mounts and the module list (about 0.05 ms); then only POSIX, MPI-IO, STDIO and LUSTRE
records are read, as numpy arrays (pydarshan 3.5, reference/darshan-iominer.md 2.1 and 3). DXT
segments and heatmaps are skipped: they can be far larger than the counters and the analyses do
not need them. No DataFrame conversion happens (it doubles the cost).

``import darshan`` costs about half a second, so it happens once per process; logs are read in
long-lived worker processes (:class:`pipeline.shippers.darshan_pool.DarshanPool`).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from pipeline.errors import ConfigError
from pipeline.parsers.darshan import DATA_MODULES, DarshanLog, Layout, ModuleTable
from pipeline.parsers.errors import ParseError


def _darshan() -> Any:
    try:
        import darshan
    except ImportError:
        raise ConfigError("the darshan package is missing: pip install darshan") from None
    return darshan


def read_darshan(path: str | os.PathLike[str]) -> DarshanLog:
    """Read one Darshan log (format 3.x) into a :class:`~pipeline.parsers.darshan.DarshanLog`.

    Args:
        path: the ``.darshan`` file; it must be complete (Darshan writes logs at
            ``MPI_Finalize`` and renames them from ``*.darshan_partial`` when done).

    Returns:
        The log's header, POSIX / MPI-IO / STDIO tables, their file names and Lustre layouts.

    Raises:
        ParseError: pydarshan cannot open or decode it (not a Darshan log, truncated, a format
            older than 3.0); the reason carries pydarshan's message. Line 0 stands for the
            whole file.
        ConfigError: the darshan package is not installed.
    """
    name = os.fspath(path)
    darshan = _darshan()
    try:
        report = darshan.DarshanReport(name, read_all=False)
    except Exception as err:  # pydarshan raises RuntimeError, ValueError, OSError...
        raise ParseError(name, 0, f"not a readable Darshan log: {err}") from None
    try:
        return _read(report, name)
    except ParseError:
        raise
    except Exception as err:
        raise ParseError(name, 0, f"Darshan log could not be decoded: {err}") from None
    finally:
        cleanup = getattr(report, "_cleanup", None)
        if cleanup is not None:
            cleanup()


def _read(report: Any, name: str) -> DarshanLog:
    from darshan.backend import cffi_backend as backend

    meta = report.metadata["job"]
    modules: dict[str, Any] = dict(report.modules)
    tables: dict[str, ModuleTable] = {}
    for mod in DATA_MODULES:
        if mod not in modules:
            continue
        report.mod_read_all_records(mod, dtype="numpy", warnings=False)
        recs = report.records[mod]
        tables[mod] = _stack(
            mod, recs, tuple(backend.counter_names(mod)), tuple(backend.fcounter_names(mod))
        )
    layouts: dict[int, Layout] = {}
    if "LUSTRE" in modules:
        report.mod_read_all_lustre_records(dtype="numpy", warnings=False)
        for rec in report.records["LUSTRE"]:
            layouts[int(rec["id"])] = _layout(rec)
    ids = {int(i) for t in tables.values() for i in t.ids.tolist()}
    names = {i: n for i, n in report.name_records.items() if i in ids}
    start = meta["start_time_sec"] + meta.get("start_time_nsec", 0) / 1e9
    end = meta["end_time_sec"] + meta.get("end_time_nsec", 0) / 1e9
    extra = meta.get("metadata", {}) or {}
    return DarshanLog(
        path=name,
        version=str(meta.get("log_ver", "")),
        jobid=str(meta["jobid"]),
        uid=int(meta["uid"]),
        nprocs=int(meta["nprocs"]),
        start_s=float(start),
        end_s=float(end),
        run_time_s=float(meta["run_time"]),
        exe=str(report.metadata.get("exe", "")).strip(),
        lib_ver=str(extra.get("lib_ver", "")),
        hints=str(extra.get("h", "")),
        modules={m: len(tables[m]) if m in tables else 0 for m in modules},
        partial=tuple(m for m, v in modules.items() if v.get("partial_flag")),
        tables=tables,
        names=names,
        layouts=layouts,
        mounts=tuple((str(a), str(b)) for a, b in report.mounts),
    )


def _stack(mod: str, recs: Any, cnames: tuple[str, ...], fnames: tuple[str, ...]) -> ModuleTable:
    n = len(recs)
    if n == 0:
        return ModuleTable(
            mod,
            np.zeros(0, np.uint64),
            np.zeros(0, np.int64),
            np.zeros((0, len(cnames)), np.int64),
            np.zeros((0, len(fnames)), np.float64),
            cnames,
            fnames,
        )
    ids = np.fromiter((r["id"] for r in recs), dtype=np.uint64, count=n)
    ranks = np.fromiter((r["rank"] for r in recs), dtype=np.int64, count=n)
    counters = np.stack([r["counters"] for r in recs]).astype(np.int64, copy=False)
    fcounters = np.stack([r["fcounters"] for r in recs]).astype(np.float64, copy=False)
    return ModuleTable(mod, ids, ranks, counters, fcounters, cnames, fnames)


def _layout(rec: Any) -> Layout:
    comps = rec["components"] or []
    osts: set[int] = set()
    size = count = 0
    for i, comp in enumerate(comps):
        c = comp["counters"]
        if i == 0:
            size, count = max(int(c[0]), 0), max(int(c[1]), 0)
        osts.update(int(o) for o in np.asarray(comp["ost_ids"]).tolist() if o >= 0)
    return Layout(size, count, tuple(sorted(osts)))
