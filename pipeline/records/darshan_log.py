"""Darshan job logs as one in-memory shape, from the binary log or from ``darshan-parser`` text.

A :class:`DarshanLog` holds a job's header and, per module (POSIX, MPI-IO, STDIO), one
:class:`ModuleTable`: record ids, ranks and the integer and float counters as 2-d arrays with
their Darshan names, plus the file names and the Lustre layout of each record. The binary reader
(:mod:`pipeline.formats.darshan.read`, pydarshan) and the text parser
(:func:`pipeline.formats.darshan.decode.parse_darshan_text`) both produce it, so everything
downstream is the same for both inputs.

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
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

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
