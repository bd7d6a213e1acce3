"""Reading Darshan binary logs with pydarshan, only the modules iolens needs.

The job record, the command line and the module list are read first (what
``darshan.DarshanReport(path, read_all=False)`` reads, but the mount table, which the analyses
do not use); then only the POSIX, MPI-IO, STDIO and LUSTRE records, through darshan-util's C
API as pydarshan 3.5 binds it (reference/darshan-iominer.md 2.1 and 3). DXT segments and
heatmaps are skipped: they can be far larger than the counters and the analyses do not need
them. No DataFrame conversion happens (it doubles the cost).

``import darshan`` costs about half a second, so it happens once per process; logs are read in
long-lived worker processes (:class:`pipeline.formats.darshan.pool.DarshanPool`).
"""

from __future__ import annotations

import os
from typing import Any, NotRequired, TypedDict

import numpy as np

from pipeline.errors import ConfigError
from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import epoch_problem
from pipeline.records.darshan_log import DATA_MODULES, DarshanLog, Layout, ModuleTable


def _darshan() -> Any:
    try:
        import darshan
    except ImportError:
        raise ConfigError("the darshan package is missing: pip install darshan") from None
    return darshan


def read_darshan(path: str | os.PathLike[str]) -> DarshanLog:
    """Read one Darshan log (format 3.x) into a
    :class:`~pipeline.records.darshan_log.DarshanLog`.

    The records are read with darshan-util's C API as pydarshan binds it
    (``darshan.backend.cffi_backend``: ``log_open``, ``darshan_log_get_record``...), straight
    into one buffer per module: the same records ``DarshanReport.mod_read_all_records`` gives,
    without building a Python dict and two arrays per record.

    Args:
        path: the ``.darshan`` file; it must be complete (Darshan writes logs at
            ``MPI_Finalize`` and renames them from ``*.darshan_partial`` when done).

    Returns:
        The log's header, POSIX / MPI-IO / STDIO tables, their file names and Lustre layouts.

    Raises:
        ParseError: darshan-util cannot open or decode it (not a Darshan log, truncated, a
            format older than 3.0, a damaged region, job times outside 1970-9999); line 0
            stands for the whole file.
        ConfigError: the darshan package is not installed.
    """
    name = os.fspath(path)
    backend = _backend()
    log = backend.log_open(name)
    if log["handle"] == backend.ffi.NULL:
        raise ParseError(name, 0, "not a readable Darshan log (darshan-util cannot open it)")
    try:
        return _read(backend, log, name)
    except ParseError:
        raise
    except Exception as err:  # darshan-util reports damage as assorted errors
        raise ParseError(name, 0, f"Darshan log could not be decoded: {err}") from None
    finally:
        # darshan-util closes (frees) the handle itself when the name records cannot be read;
        # closing it again would free it twice
        if not log.get(_CLOSED):
            backend.log_close(log)


def _backend() -> Any:
    _darshan()
    from darshan.backend import cffi_backend

    return cffi_backend


_CLOSED = "iolens_closed"
"""Key set in pydarshan's log dict once darshan-util has closed the handle itself."""


class _JobRecord(TypedDict):
    """The job record as pydarshan's ``log_get_job`` gives it: the job id, ``uid``,
    ``nprocs``, start and end (``*_sec`` epoch seconds plus ``*_nsec`` nanoseconds), the run
    time in seconds, the log format version and the ``key=value`` metadata of the log."""

    jobid: int
    uid: int
    nprocs: int
    start_time_sec: int
    start_time_nsec: NotRequired[int]
    end_time_sec: int
    end_time_nsec: NotRequired[int]
    run_time: float
    log_ver: NotRequired[str]
    metadata: NotRequired[dict[str, str] | None]


class _ModuleInfo(TypedDict):
    """A module of the log as pydarshan's ``log_get_modules`` gives it: its index in the
    log's module table and whether Darshan ran out of memory for its records."""

    idx: int
    partial_flag: NotRequired[bool]


def _read(backend: Any, log: Any, name: str) -> DarshanLog:
    """Everything :func:`read_darshan` reads; each darshan-util call that reports an error
    raises :class:`ParseError`. The name records come last: when darshan-util cannot read
    them it closes the handle (``darshan_log_get_name_records``), so nothing may use it after.
    """
    meta, exe = _job(backend, log, name)
    modules: dict[str, _ModuleInfo] = backend.log_get_modules(log)
    tables: dict[str, ModuleTable] = {}
    for mod in DATA_MODULES:
        if mod in modules:
            tables[mod] = _module(backend, log, mod, modules[mod]["idx"], name)
    layouts = _lustre(backend, log, modules["LUSTRE"]["idx"], name) if "LUSTRE" in modules else {}
    ids = {int(i) for t in tables.values() for i in t.ids.tolist()}
    names = {i: n for i, n in _names(backend, log, name).items() if i in ids}
    start, end = _job_times(meta, name)
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
        exe=exe,
        lib_ver=str(extra.get("lib_ver", "")),
        hints=str(extra.get("h", "")),
        modules={m: len(tables[m]) if m in tables else 0 for m in modules}
        | ({"LUSTRE": len(layouts)} if "LUSTRE" in modules else {}),
        partial=tuple(m for m, v in modules.items() if v.get("partial_flag")),
        tables=tables,
        names=names,
        layouts=layouts,
    )


def _job(backend: Any, log: Any, name: str) -> tuple[_JobRecord, str]:
    """The job record (pydarshan's ``log_get_job`` dict) and the command line.

    Raises:
        ParseError: either is damaged.
    """
    ffi, lib = backend.ffi, backend.libdutil
    if lib.darshan_log_get_job(log["handle"], ffi.new("struct darshan_job *")) < 0:
        raise ParseError(name, 0, "the Darshan log's job record is damaged")
    meta: _JobRecord = backend.log_get_job(log)
    exe = ffi.new("char[]", 4096)
    if lib.darshan_log_get_exe(log["handle"], exe) < 0:
        raise ParseError(name, 0, "the Darshan log's command line is damaged")
    return meta, ffi.string(exe).decode("utf-8", "replace").strip()


def _job_times(meta: _JobRecord, name: str) -> tuple[float, float]:
    """The job's start and end, epoch seconds.

    Raises:
        ParseError: either lies outside 1970-9999 (:func:`~pipeline.parsers.limits.epoch_problem`).
    """
    start = meta["start_time_sec"] + meta.get("start_time_nsec", 0) / 1e9
    end = meta["end_time_sec"] + meta.get("end_time_nsec", 0) / 1e9
    for what, t in (("start", start), ("end", end)):
        problem = epoch_problem(float(t))
        if problem is not None:
            raise ParseError(name, 0, f"the job's {what} time ({t:g} s) is {problem}")
    return start, end


STRUCTS = {
    "POSIX": "struct darshan_posix_file **",
    "MPI-IO": "struct darshan_mpiio_file **",
    "STDIO": "struct darshan_stdio_file **",
}
"""darshan-util's record struct of each module read."""


def _module(backend: Any, log: Any, mod: str, idx: int, name: str) -> ModuleTable:
    """Every record of one module, copied whole into one buffer and viewed as arrays.

    A record is ``{id u64, rank i64, counters i64[C], fcounters f64[F]}`` without padding
    (darshan-util's ``struct darshan_<mod>_file``); darshan-util fills the buffer it is given,
    so one is allocated for the module and reused for every record.

    Raises:
        ParseError: darshan-util reports an error (a damaged or cut module region) rather
            than the end of the records.
    """
    cnames = tuple(backend.counter_names(mod))
    fnames = tuple(backend.fcounter_names(mod))
    layout = _record_dtype(backend, mod, len(cnames), len(fnames))
    recs = np.frombuffer(_records(backend, log, mod, idx, name, layout.itemsize), dtype=layout)
    return ModuleTable(
        mod,
        recs["id"].copy(),
        recs["rank"].copy(),
        recs["counters"].copy(),
        recs["fcounters"].copy(),
        cnames,
        fnames,
    )


def _record_dtype(backend: Any, mod: str, counters: int, fcounters: int) -> np.dtype[Any]:
    """The numpy view of one record of ``mod``.

    Raises:
        ConfigError: the installed darshan-util's record has another size.
    """
    layout = np.dtype(
        [
            ("id", "<u8"),
            ("rank", "<i8"),
            ("counters", "<i8", (counters,)),
            ("fcounters", "<f8", (fcounters,)),
        ]
    )
    size = backend.ffi.sizeof(STRUCTS[mod].rstrip(" *"))
    if layout.itemsize != size:
        raise ConfigError(
            f"this darshan package's {mod} record is {size} bytes, not the {layout.itemsize} "
            "iolens reads: install darshan 3.5"
        )
    return layout


def _records(backend: Any, log: Any, mod: str, idx: int, name: str, size: int) -> bytes:
    """The bytes of every record of module ``idx``, ``size`` bytes each.

    Raises:
        ParseError: darshan-util reports an error rather than the end of the records.
    """
    ffi, lib = backend.ffi, backend.libdutil
    buf = ffi.new("void **")
    get, raw, handle = lib.darshan_log_get_record, ffi.buffer, log["handle"]
    chunks: list[bytes] = []
    try:
        while (got := get(handle, idx, buf)) >= 1:
            chunks.append(raw(buf[0], size)[:])
    finally:
        if buf[0] != ffi.NULL:
            lib.darshan_free(buf[0])
    if got < 0:
        raise ParseError(name, 0, f"the Darshan log's {mod} records are damaged or cut")
    return b"".join(chunks)


_LUSTRE_HEAD = np.dtype(
    [("id", "<u8"), ("rank", "<i8"), ("num_comps", "<i8"), ("num_stripes", "<i8")]
)
"""The fixed start of darshan-util 3.5's ``struct darshan_lustre_record``: the base record,
``num_comps`` and ``num_stripes`` (the ``comps`` and ``ost_ids`` pointers follow)."""
_NO_COMPONENT = bytes(16)


def _lustre(backend: Any, log: Any, idx: int, name: str) -> dict[int, Layout]:
    """Lustre layouts by record id: the first component's stripe size and count (its first
    two counters; 0 without a component), and the OSTs of all components (``num_stripes`` ids
    in ``ost_ids``, negative ids left out; darshan-util 3.5 presents older records as one
    component).

    Per record only bytes are copied (the fixed start, the first component's two counters,
    the OST ids); the layouts are then made from three arrays: the OSTs of each record sorted
    and deduplicated in one ``lexsort``.

    Raises:
        ConfigError: the installed darshan-util's Lustre record is another one.
        ParseError: as :func:`_lustre_bytes`.
    """
    if backend.ffi.offsetof("struct darshan_lustre_record", "num_stripes") != 24:
        raise ConfigError(
            "this darshan package's Lustre record is not the one iolens reads: install darshan 3.5"
        )
    heads, comps, osts = _lustre_bytes(backend, log, idx, name)
    head = np.frombuffer(heads, dtype=_LUSTRE_HEAD)
    first = np.frombuffer(comps, dtype="<i8").reshape(-1, 2).clip(0)
    ost, owner = _record_osts(np.frombuffer(osts, dtype="<i8"), head["num_stripes"])
    ends = np.cumsum(np.bincount(owner, minlength=len(head))).tolist()
    flat = ost.tolist()
    out: dict[int, Layout] = {}
    at = 0
    for rid, size, count, end in zip(
        head["id"].tolist(), first[:, 0].tolist(), first[:, 1].tolist(), ends, strict=True
    ):
        out[rid] = Layout(size, count, tuple(flat[at:end]))
        at = end
    return out


def _lustre_bytes(backend: Any, log: Any, idx: int, name: str) -> tuple[bytes, bytes, bytes]:
    """Of every Lustre record: its fixed start, its first component's two counters (zeros
    without one), its OST ids; each kind concatenated.

    Raises:
        ParseError: darshan-util reports an error rather than the end of the records.
    """
    ffi, lib = backend.ffi, backend.libdutil
    buf = ffi.new("void **")
    typed = ffi.cast("struct darshan_lustre_record **", buf)
    get, raw, free, null, handle = (
        lib.darshan_log_get_record,
        ffi.buffer,
        lib.darshan_free,
        ffi.NULL,
        log["handle"],
    )
    heads: list[bytes] = []
    comps: list[bytes] = []
    osts: list[bytes] = []
    while (got := get(handle, idx, buf)) >= 1:
        rec = typed[0]
        heads.append(raw(rec, _LUSTRE_HEAD.itemsize)[:])
        comps.append(raw(rec.comps, 16)[:] if rec.num_comps > 0 else _NO_COMPONENT)
        n = rec.num_stripes
        if n > 0:
            osts.append(raw(rec.ost_ids, 8 * n)[:])
        free(buf[0])
        buf[0] = null
    if got < 0:
        raise ParseError(name, 0, "the Darshan log's LUSTRE records are damaged or cut")
    return b"".join(heads), b"".join(comps), b"".join(osts)


def _record_osts(ost: np.ndarray[Any, Any], stripes: np.ndarray[Any, Any]) -> tuple[Any, Any]:
    """The OST ids of all records (``stripes`` of record ``i`` belong to it) without negative
    ones, sorted and deduplicated per record: ``(ost, owner)``, owner ascending."""
    owner = np.repeat(np.arange(len(stripes)), stripes.clip(0))
    keep = ost >= 0
    ost, owner = ost[keep], owner[keep]
    order = np.lexsort((ost, owner))
    ost, owner = ost[order], owner[order]
    new = np.ones(len(ost), dtype=bool)
    new[1:] = (ost[1:] != ost[:-1]) | (owner[1:] != owner[:-1])
    return ost[new], owner[new]


def _names(backend: Any, log: Any, name: str) -> dict[int, str]:
    """Record id -> name, for every name record of the log (darshan-util's
    ``darshan_log_get_name_records``; what pydarshan's ``log_get_name_records`` returns).

    Raises:
        ParseError: the name records cannot be read. darshan-util has then closed the handle
            itself (it leaves the output array unset, which is how this is told): the log is
            marked so that it is not closed twice.
    """
    ffi, lib = backend.ffi, backend.libdutil
    nrecs = ffi.new("struct darshan_name_record **")
    cnt = ffi.new("int *")
    lib.darshan_log_get_name_records(log["handle"], nrecs, cnt)
    if nrecs[0] == ffi.NULL:
        log[_CLOSED] = True
        raise ParseError(name, 0, "the Darshan log's file names are damaged or cut")
    arr, string, free = nrecs[0], ffi.string, lib.darshan_free
    out: dict[int, str] = {}
    try:
        for i in range(cnt[0]):
            rec = arr[i]
            text = rec.name
            out[rec.id] = string(text).decode("utf-8", "replace")
            free(text)
    finally:
        free(arr)
    return out
