"""``darshan-parser`` text -> :class:`~pipeline.records.darshan_log.DarshanLog`.

darshan-util's ``darshan-parser LOG`` prints a header of ``# key: value`` lines (``darshan log
version``, ``exe``, ``uid``, ``jobid``, ``start_time``, ``end_time``, ``nprocs``, ``run time``,
``metadata: lib_ver = ...``, ``metadata: h = <hints>``), then one tab-separated line per
counter (reference/darshan-iominer.md 4, its format as quoted there)::

    <module>\t<rank>\t<record id>\t<counter>\t<value>\t<file name>\t<mount pt>\t<fs type>

Integers are printed plain, floats as ``%.6f``, some Lustre fields as ``N/A``; rank −1 marks a
shared file reduced over all ranks.
Timestamps of the header are epoch seconds; ``*_F_*_TIMESTAMP`` counters are seconds from the
job start. The shapes (:class:`DarshanLog`, :class:`ModuleTable`, :class:`Layout`) live in
:mod:`pipeline.records.darshan_log` and are importable from here too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import MAX_LONG, epoch_problem
from pipeline.records.darshan_log import DATA_MODULES, DarshanLog, Layout, ModuleTable

__all__ = [
    "parse_darshan_text",
]

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
    text = _Text(path)
    for n, raw in enumerate(lines, start=1):
        line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        line = line.rstrip("\r\n")
        if not line:
            continue
        if line.startswith("#"):
            text.header_line(line, n)
        else:
            text.counter_line(line, n)
    return text.log()


_NO_VERSION = "not darshan-parser output: no '# darshan log version' line"


@dataclass
class _Text:
    """What :func:`parse_darshan_text` gathers, line by line.

    Attributes:
        path: the file name, for errors.
        header: header key -> value (``meta:<key>`` for ``metadata:`` lines); header_at: the
            line of each key.
        rows: module -> (rank, record id) -> counter -> value, for the data modules.
        order: module -> its counters in the order first seen.
        names: record id -> file name; lustre: record id -> LUSTRE counter -> value.
        counts: module -> the (rank, record id) pairs seen (every module).
    """

    path: str
    header: dict[str, str] = field(default_factory=dict)
    header_at: dict[str, int] = field(default_factory=dict)
    rows: dict[str, dict[tuple[int, int], dict[str, float]]] = field(default_factory=dict)
    order: dict[str, dict[str, None]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    lustre: dict[int, dict[str, float]] = field(default_factory=dict)
    counts: dict[str, set[tuple[int, int]]] = field(default_factory=dict)

    def header_line(self, line: str, n: int) -> None:
        """A ``#`` line: keep ``# key: value`` (the first of each key; every ``metadata``)."""
        m = _HEADER.match(line)
        if m is None:
            return
        key, value = m.group(1).strip(), m.group(2)
        if key == "metadata":
            k, _, v = value.partition("=")
            self.header["meta:" + k.strip()] = v.strip()
        elif key not in self.header:
            self.header[key] = value.strip()
            self.header_at[key] = n

    def counter_line(self, line: str, n: int) -> None:
        """A counter line (see :func:`parse_darshan_text` for what is refused)."""
        if "darshan log version" not in self.header:
            raise ParseError(self.path, n, _NO_VERSION)
        fields = line.split("\t")
        if len(fields) < 5:
            raise ParseError(self.path, n, f"expected 8 tab-separated fields, found {len(fields)}")
        module, rank_s, id_s, counter, value_s = fields[:5]
        rank, rec = _rank_and_id(rank_s, id_s, self.path, n)
        value = _value(counter, value_s, self.path, n)
        self.counts.setdefault(module, set()).add((rank, rec))
        if module == "LUSTRE":
            self.lustre.setdefault(rec, {})[counter] = value
            return
        if module not in DATA_MODULES:
            return
        if len(fields) >= 6 and rec not in self.names:
            self.names[rec] = fields[5]
        self.rows.setdefault(module, {}).setdefault((rank, rec), {})[counter] = value
        self.order.setdefault(module, {})[counter] = None

    def log(self) -> DarshanLog:
        """The :class:`DarshanLog` of the lines read."""
        if "darshan log version" not in self.header:
            raise ParseError(self.path, 1, _NO_VERSION)
        tables = {mod: _table(mod, self.rows[mod], tuple(self.order[mod])) for mod in self.rows}
        _check_header(self.path, self.header, self.header_at)
        return _log_from_header(
            self.path, self.header, self.counts, tables, self.names, _layouts(self.lustre)
        )


def _rank_and_id(rank_s: str, id_s: str, path: str, n: int) -> tuple[int, int]:
    """A counter line's rank (64-bit signed) and record id (64-bit unsigned).

    Raises:
        ParseError: either is not such an integer.
    """
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
    return rank, rec


def _value(counter: str, value_s: str, path: str, n: int) -> float:
    """A counter's value; ``N/A`` and empty read as −1 ("not monitored").

    Raises:
        ParseError: not a finite number below 2^63 in magnitude.
    """
    try:
        value = float(value_s) if value_s not in ("N/A", "") else -1.0
    except ValueError:
        raise ParseError(path, n, f"{counter} value {value_s[:40]!r} is not a number") from None
    if not abs(value) < MAX_LONG:
        raise ParseError(
            path, n, f"{counter} value {value_s[:40]!r} is not a finite number below 2^63"
        )
    return value


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
        return _header_number(header, key, default)

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


def _header_number(header: dict[str, str], key: str, default: float = 0.0) -> float:
    """Header value ``key`` as a number; ``default`` when absent or not a number."""
    try:
        return float(header.get(key, default))
    except ValueError:
        return default
