"""Darshan job logs as one in-memory shape, from the binary log or from ``darshan-parser`` text.

A :class:`DarshanLog` holds a job's header and, per module (POSIX, MPI-IO, STDIO), one
:class:`ModuleTable`: record ids, ranks and the integer and float counters as 2-d arrays with
their Darshan names, plus the file names and the Lustre layout of each record. The binary reader
(:mod:`pipeline.shippers.darshan_read`, pydarshan) and :func:`parse_darshan_text` both produce
it, so everything downstream is the same for both inputs.

Conventions (reference/darshan-iominer.md 2.1, 4, 7):

* record ids are uint64 hashes of the file name; rank −1 marks a record reduced over all ranks;
* counters of −1 mean "not monitored" (old module versions) and are kept as they are;
* timestamps (``*_F_*_TIMESTAMP``) are seconds from job start, 0 meaning "never happened";
* the Lustre layout: stripe size, stripe count and OST indices, from the 3.5 component layout
  (``LUSTRE_COMP<i>_STRIPE_SIZE``, ``LUSTRE_COMP<i>_STRIPE_COUNT``,
  ``LUSTRE_COMP<i>_OST_ID_<k>``) or the older names (``LUSTRE_STRIPE_SIZE``,
  ``LUSTRE_STRIPE_WIDTH``, ``LUSTRE_OST_ID_<k>``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import MAX_LONG, epoch_problem

DATA_MODULES: tuple[str, ...] = ("POSIX", "MPI-IO", "STDIO")
"""The modules whose records iolens reads: POSIX and STDIO carry the bytes, MPI-IO the
collective/independent split (joined to POSIX by record id)."""

INTERFACE_MODULES: Mapping[str, str] = {
    "POSIX": "POSIX",
    "MPI-IO": "MPI-IO",
    "STDIO": "STDIO",
    "H5F": "HDF5",
    "H5D": "HDF5",
    "PNETCDF_FILE": "PnetCDF",
    "PNETCDF_VAR": "PnetCDF",
    "DFS": "DAOS",
    "DAOS": "DAOS",
}
"""Darshan module -> I/O interface name in ``darshan.job.interfaces``."""

STD_STREAM_IDS: frozenset[int] = frozenset(
    {14734109647742566553, 15920181672442173319, 7238257241479193519}
)
"""Record ids of ``<STDIN>``, ``<STDOUT>`` and ``<STDERR>`` (hashes of the names), which
identify the standard streams in anonymized logs where the names are hashed too."""

STD_STREAM_NAMES: frozenset[str] = frozenset({"<STDIN>", "<STDOUT>", "<STDERR>"})


@dataclass(frozen=True)
class Layout:
    """A file's Lustre layout (the first component of a PFL layout).

    Attributes:
        stripe_size: bytes per stripe.
        stripe_count: stripes (OSTs) of the component.
        osts: Lustre OST indices the file's stripes are on (of all components), ascending.
    """

    stripe_size: int
    stripe_count: int
    osts: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class ModuleTable:
    """The records of one Darshan module.

    Attributes:
        module: ``POSIX``, ``MPI-IO`` or ``STDIO``.
        ids: record ids, shape ``(n,)`` uint64.
        ranks: ranks, shape ``(n,)`` int64 (−1: reduced over all ranks).
        counters: integer counters, shape ``(n, len(counter_names))`` int64.
        fcounters: float counters, shape ``(n, len(fcounter_names))`` float64.
        counter_names / fcounter_names: Darshan's names of the columns.
    """

    module: str
    ids: npt.NDArray[np.uint64]
    ranks: npt.NDArray[np.int64]
    counters: npt.NDArray[np.int64]
    fcounters: npt.NDArray[np.float64]
    counter_names: tuple[str, ...]
    fcounter_names: tuple[str, ...]
    _index: dict[str, tuple[bool, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # shared by every table of the same columns (read-only)
        object.__setattr__(self, "_index", _column_index(self.counter_names, self.fcounter_names))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def has(self, name: str) -> bool:
        """Whether the module has counter ``name`` (e.g. ``POSIX_F_SLOWEST_RANK_TIME``)."""
        return name in self._index

    def col(self, name: str) -> npt.NDArray[np.float64]:
        """Counter ``name`` of every record as float64, shape ``(n,)``; zeros when absent.

        −1 ("not monitored") is returned as 0, so sums and shares ignore it.
        """
        where = self._index.get(name)
        if where is None:
            return np.zeros(len(self), dtype=np.float64)
        is_float, i = where
        src = self.fcounters if is_float else self.counters
        out = src[:, i].astype(np.float64)
        out[out < 0] = 0.0
        return out

    def block(self, names: tuple[str, ...]) -> npt.NDArray[np.float64]:
        """Counters ``names`` of every record as one float64 array, shape ``(n, len(names))``;
        absent counters and −1 ("not monitored") read as 0."""
        int_at, int_cols, float_at, float_cols = _gather_plan(
            self.counter_names, self.fcounter_names, names
        )
        out = np.zeros((len(self), len(names)), dtype=np.float64)
        if int_at:
            out[:, int_at] = self.counters[:, int_cols]
        if float_at:
            out[:, float_at] = self.fcounters[:, float_cols]
        np.maximum(out, 0.0, out=out)
        return out

    def select(self, mask: npt.NDArray[np.bool_]) -> ModuleTable:
        """The records where ``mask`` is true."""
        return ModuleTable(
            self.module,
            self.ids[mask],
            self.ranks[mask],
            self.counters[mask],
            self.fcounters[mask],
            self.counter_names,
            self.fcounter_names,
        )


@functools.lru_cache(maxsize=16)
def _column_index(
    counter_names: tuple[str, ...], fcounter_names: tuple[str, ...]
) -> dict[str, tuple[bool, int]]:
    """Counter name -> (is a float counter, column), for :meth:`ModuleTable.col`."""
    index = {name: (False, i) for i, name in enumerate(counter_names)}
    index.update({name: (True, i) for i, name in enumerate(fcounter_names)})
    return index


@functools.lru_cache(maxsize=64)
def _gather_plan(
    counter_names: tuple[str, ...], fcounter_names: tuple[str, ...], names: tuple[str, ...]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Where ``names`` sit: (output columns, integer counter columns, output columns, float
    counter columns); absent names appear in neither."""
    ints = {n: i for i, n in enumerate(counter_names)}
    floats = {n: i for i, n in enumerate(fcounter_names)}
    int_at = [j for j, n in enumerate(names) if n in ints]
    float_at = [j for j, n in enumerate(names) if n in floats]
    return (
        int_at,
        [ints[names[j]] for j in int_at],
        float_at,
        [floats[names[j]] for j in float_at],
    )


@dataclass(frozen=True, eq=False)
class DarshanLog:
    """One Darshan log, as far as iolens needs it.

    Attributes:
        path: where it was read.
        version: log format version (``3.10``, ``3.41``).
        jobid: the scheduler job id as a string (``"6265799"``).
        uid: the user id.
        nprocs: MPI processes.
        start_s / end_s: job start and end, epoch seconds (with ns where the format has them).
        run_time_s: Darshan's run time: ``end - start`` (+1 for formats < 3.4, whose times have
            1 s resolution; reference/darshan-iominer.md 1).
        exe: the command line (possibly anonymized or empty).
        lib_ver: the Darshan runtime version; hints: the MPI-IO hints string (``h``).
        modules: every module in the log (DXT, H5D... too) -> records read from it (0 for the
            modules iolens does not read; LUSTRE: the layouts).
        partial: modules that ran out of memory (``partial_flag``): their tables are incomplete.
        tables: POSIX / MPI-IO / STDIO tables, where present.
        names: record id -> file name (only the ids of ``tables``).
        layouts: record id -> Lustre layout, for files on Lustre.
    """

    path: str
    version: str
    jobid: str
    uid: int
    nprocs: int
    start_s: float
    end_s: float
    run_time_s: float
    exe: str
    lib_ver: str
    hints: str
    modules: Mapping[str, int]
    partial: tuple[str, ...]
    tables: Mapping[str, ModuleTable]
    names: Mapping[int, str]
    layouts: Mapping[int, Layout]

    @property
    def records(self) -> int:
        """Records read: those of the POSIX, MPI-IO and STDIO tables and the Lustre layouts
        (from ``modules``, so the count stays when the tables are dropped after analysis)."""
        return sum(self.modules.get(m, 0) for m in (*DATA_MODULES, "LUSTRE"))


_HEADER = re.compile(r"^#\s*([^:]+):\s?(.*)$")
_LUSTRE_OLD = re.compile(r"^LUSTRE_(STRIPE_SIZE|STRIPE_WIDTH|OST_ID_(\d+))$")
_LUSTRE_NEW = re.compile(r"^LUSTRE_COMP(\d+)_(STRIPE_SIZE|STRIPE_COUNT|OST_ID_(\d+))$")


def parse_darshan_text(lines: Iterable[bytes | str], path: str) -> DarshanLog:
    """Read the text that ``darshan-parser LOG`` (or ``--all``/``--base``) prints.

    The header is ``# key: value`` lines (``darshan log version``, ``exe``, ``uid``, ``jobid``,
    ``start_time``, ``end_time``, ``nprocs``, ``run time``, ``metadata: lib_ver = ...``,
    ``metadata: h = ...``; the ``mount entry`` lines are skipped); then one tab-separated line per
    counter: ``<module>\\t<rank>\\t<record id>\\t<counter>\\t<value>\\t<file name>\\t<mount
    point>\\t<fs type>`` (darshan-util's ``darshan-parser``; reference/darshan-iominer.md 4).
    Modules other than POSIX, MPI-IO, STDIO and LUSTRE are counted but not kept; ``--perf`` and
    ``--file`` summary sections (``#`` lines) are ignored.

    Args:
        lines: the text, line by line.
        path: the file name, for errors.

    Returns:
        The :class:`DarshanLog`; per module, the counters appear in the order first seen.

    Raises:
        ParseError: not darshan-parser output (no version line), a counter line without eight
            fields, a rank that is not a 64-bit integer or a record id not an unsigned one, a
            value that is not a finite number below 2^63 in magnitude, or a header number out
            of range (``nprocs``, ``uid``, times outside 1970-9999); the error names the line.
    """
    header: dict[str, str] = {}
    header_at: dict[str, int] = {}
    rows: dict[str, dict[tuple[int, int], dict[str, float]]] = {}
    order: dict[str, dict[str, None]] = {}
    names: dict[int, str] = {}
    lustre: dict[int, dict[str, float]] = {}
    counts: dict[str, set[tuple[int, int]]] = {}
    for n, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line:
            continue
        if line.startswith("#"):
            m = _HEADER.match(line)
            if m is None:
                continue
            key, value = m.group(1).strip(), m.group(2)
            if key == "metadata":
                k, _, v = value.partition("=")
                header["meta:" + k.strip()] = v.strip()
            elif key not in header:
                header[key] = value.strip()
                header_at[key] = n
            continue
        if "darshan log version" not in header:
            raise ParseError(path, n, "not darshan-parser output: no '# darshan log version' line")
        fields = line.split("\t")
        if len(fields) < 5:
            raise ParseError(path, n, f"expected 8 tab-separated fields, found {len(fields)}")
        module, rank_s, id_s, counter, value_s = fields[:5]
        try:
            rank, rec = int(rank_s[:64]), int(id_s[:64])
        except ValueError:
            rank, rec = -(2**64), -1
        if max(len(rank_s), len(id_s)) > 64:
            rank, rec = -(2**64), -1
        if not (-MAX_LONG - 1 <= rank <= MAX_LONG and 0 <= rec < 2**64):
            raise ParseError(
                path,
                n,
                f"rank {rank_s[:40]!r} or record id {id_s[:40]!r} is not a 64-bit integer "
                "(the id an unsigned one)",
            )
        try:
            value = float(value_s) if value_s not in ("N/A", "") else -1.0
        except ValueError:
            raise ParseError(path, n, f"{counter} value {value_s[:40]!r} is not a number") from None
        if not abs(value) < MAX_LONG:
            raise ParseError(
                path, n, f"{counter} value {value_s[:40]!r} is not a finite number below 2^63"
            )
        counts.setdefault(module, set()).add((rank, rec))
        if module == "LUSTRE":
            lustre.setdefault(rec, {})[counter] = value
            continue
        if module not in DATA_MODULES:
            continue
        if len(fields) >= 6 and rec not in names:
            names[rec] = fields[5]
        rows.setdefault(module, {}).setdefault((rank, rec), {})[counter] = value
        order.setdefault(module, {})[counter] = None
    if "darshan log version" not in header:
        raise ParseError(path, 1, "not darshan-parser output: no '# darshan log version' line")
    tables = {mod: _table(mod, rows[mod], tuple(order[mod])) for mod in rows}
    _check_header(path, header, header_at)
    return _log_from_header(path, header, counts, tables, names, _layouts(lustre))


def _check_header(path: str, header: dict[str, str], at: dict[str, int]) -> None:
    """Refuse header numbers the analysis cannot use: ``nprocs`` and ``uid`` that are not
    whole numbers in ``[0, 2^63)``, times outside 1970-9999, a run time that is not finite.

    Raises:
        ParseError: naming the header line.
    """
    for key in ("nprocs", "uid"):
        text = header.get(key, "0")
        digits = text.lstrip("0") or "0"
        if not (digits.isascii() and digits.isdigit() and len(digits) < 20) or (
            int(digits) > MAX_LONG
        ):
            raise ParseError(path, at[key], f"{key} {text[:40]!r} is not a whole number >= 0")
    for key in ("start_time", "end_time", "run time"):
        try:
            value = float(header.get(key, "0"))
        except ValueError:
            continue  # absent: the defaults of _log_from_header apply
        problem = epoch_problem(value) if key != "run time" else None
        if key == "run time" and not abs(value) < MAX_LONG:
            problem = "not a finite number"
        if problem is not None:
            raise ParseError(path, at[key], f"{key} {header[key][:40]!r} is {problem}")


def _table(
    module: str, recs: dict[tuple[int, int], dict[str, float]], names: tuple[str, ...]
) -> ModuleTable:
    keys = list(recs)
    ints = tuple(c for c in names if "_F_" not in c)
    floats = tuple(c for c in names if "_F_" in c)
    counters = np.array([[recs[k].get(c, 0.0) for c in ints] for k in keys], dtype=np.int64)
    fcounters = np.array([[recs[k].get(c, 0.0) for c in floats] for k in keys], dtype=np.float64)
    return ModuleTable(
        module,
        np.array([k[1] for k in keys], dtype=np.uint64),
        np.array([k[0] for k in keys], dtype=np.int64),
        counters.reshape(len(keys), len(ints)),
        fcounters.reshape(len(keys), len(floats)),
        ints,
        floats,
    )


def _layouts(lustre: dict[int, dict[str, float]]) -> dict[int, Layout]:
    """Lustre layouts from either naming generation; the first component (lowest number) of a
    3.5 layout gives the stripe size and count, every component's OSTs are kept."""
    out: dict[int, Layout] = {}
    for rec, c in lustre.items():
        comps: dict[int, dict[str, float]] = {}
        size = count = -1
        osts: set[int] = set()
        for name, v in c.items():
            if (m := _LUSTRE_NEW.match(name)) is not None:
                if m.group(3) is not None:
                    if v >= 0:
                        osts.add(int(v))
                else:
                    comps.setdefault(int(m.group(1)), {})[m.group(2)] = v
            elif (m := _LUSTRE_OLD.match(name)) is not None:
                if m.group(2) is not None:
                    if v >= 0:
                        osts.add(int(v))
                elif m.group(1) == "STRIPE_SIZE":
                    size = int(v)
                elif m.group(1) == "STRIPE_WIDTH":
                    count = int(v)
        if comps:
            first = comps[min(comps)]
            size = int(first.get("STRIPE_SIZE", -1))
            count = int(first.get("STRIPE_COUNT", -1))
        out[rec] = Layout(max(size, 0), max(count, 0), tuple(sorted(osts)))
    return out


def _log_from_header(
    path: str,
    header: dict[str, str],
    counts: dict[str, set[tuple[int, int]]],
    tables: dict[str, ModuleTable],
    names: dict[int, str],
    layouts: dict[int, Layout],
) -> DarshanLog:
    def num(key: str, default: float = 0.0) -> float:
        try:
            return float(header.get(key, default))
        except ValueError:
            return default

    start, end = num("start_time"), num("end_time")
    return DarshanLog(
        path=path,
        version=header.get("darshan log version", ""),
        jobid=header.get("jobid", ""),
        uid=int(num("uid")),
        nprocs=int(num("nprocs")),
        start_s=start,
        end_s=end,
        run_time_s=num("run time", end - start + 1),
        exe=header.get("exe", ""),
        lib_ver=header.get("meta:lib_ver", ""),
        hints=header.get("meta:h", ""),
        modules={m: len(v) for m, v in counts.items()},
        partial=(),
        tables=tables,
        names=names,
        layouts=layouts,
    )
