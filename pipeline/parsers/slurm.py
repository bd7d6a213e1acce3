"""Slurm job accounting as ``sacct --parsable2`` (or ``--parsable``) prints it: lines -> records.

``sacct --jobs 4478544 --parsable2
--format=JobID,JobIDRaw,User,JobName,Start,End,Elapsed,State,NNodes,NTasks,NodeList``
(job 4478544 of NERSC's Edison: times and nodes from pytokio's cached records, the other
values filled in as tests/data/slurm/README.md says)::

    JobID|JobIDRaw|User|JobName|Start|End|Elapsed|State|NNodes|NTasks|NodeList
    4478544|4478544|glock|vpicio_uni|2017-03-20T01:59:02|2017-03-20T02:11:38|00:12:36|COMPLETED|128||nid0[5301-5428]
    4478544.batch|4478544.batch||batch|2017-03-20T01:59:02|2017-03-20T02:11:38|00:12:36|COMPLETED|1|1|nid05301

The first line is the header; values are separated by ``|``. ``--parsable`` ends every line,
the header included, with one more ``|``; ``--parsable2`` does not. Both are read: the header
says which. Columns are found by name, in any order; unknown columns are ignored. Required:
``JobID`` or ``JobIDRaw``, ``Start`` and ``End`` (sacct(1), "Job Accounting Fields").

``Start``/``End`` are local time of the host that ran sacct (its ``TZ``), ``YYYY-MM-DDTHH:MM:SS``,
or Unix seconds with ``SLURM_TIME_FORMAT=%s``; ``Unknown`` (not started or still running) and
``None`` mean no time. The parser is told the time zone (``tz``, default UTC); on a DST fold the
first occurrence is taken. ``Elapsed`` is ``[D-]HH:MM:SS``. ``NodeList`` is a Slurm hostlist
(``nid0[5301-5303,5310],login1``), expanded here as ``scontrol show hostnames`` would.

Each row is one job, or one step of it (``.batch``, ``.extern``, ``.0``, ...): steps are kept as
records of their own; ``job_id`` joins them to their job (and Darshan's ``jobid`` to both).

This module is pure: lines in, :class:`SlurmJob` records and
:class:`~pipeline.parsers.errors.ParseError` values (file, line, reason) out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from pipeline.parsers.errors import ParseError
from pipeline.parsers.limits import MAX_EXACT, epoch_digits, epoch_problem, zoned_epoch
from pipeline.parsers.table import HeaderedLines

SACCT_FORMAT = (
    "JobID,JobIDRaw,User,JobName,Partition,Account,Start,End,Elapsed,State,ExitCode,"
    "NNodes,NTasks,NCPUS,NodeList"
)
"""The ``--format`` list :func:`sacct_command` asks for: every column the parser reads."""

COLUMNS: dict[str, str] = {
    "jobid": "JobID",
    "jobidraw": "JobIDRaw",
    "user": "User",
    "jobname": "JobName",
    "partition": "Partition",
    "account": "Account",
    "start": "Start",
    "end": "End",
    "elapsed": "Elapsed",
    "state": "State",
    "exitcode": "ExitCode",
    "nnodes": "NNodes",
    "allocnodes": "AllocNodes",
    "ntasks": "NTasks",
    "ncpus": "NCPUS",
    "alloccpus": "AllocCPUS",
    "nodelist": "NodeList",
}
"""Recognised header names (matched case-insensitively) -> sacct's spelling."""

NO_TIME = frozenset({"", "unknown", "none"})
NO_NODES = frozenset({"", "none assigned", "(null)", "none"})
MAX_HOSTS = 1_000_000
"""A hostlist expanding to more names than this is refused (a typo like ``n[1-999999999]``)."""


@dataclass(frozen=True)
class SlurmJob:
    """One row of sacct: a job (allocation) or one of its steps.

    Attributes:
        id: the unique id: ``JobIDRaw`` when the output has it, else ``JobID``
            (``4478544``, ``4478544.batch``, ``4478544.1``; an array task ``7001_1`` has the raw
            id ``7002``).
        job_id: ``id`` before the first ``.`` (the job a step belongs to; Darshan's ``jobid``).
            Without ``JobIDRaw`` an array task or a heterogeneous component keeps its suffix
            (``7001_1``, ``7100+0``).
        display_id: the ``JobID`` column as sacct prints it (``7001_1.batch``, ``7100+0``);
            equals ``id`` when the output has no ``JobID`` column.
        step: None for the job itself, else the step name after the first ``.``
            (``batch``, ``extern``, ``interactive``, ``0``, ``1``, ...).
        user, name, partition, account: ``User``, ``JobName``, ``Partition``, ``Account``;
            None when the column is missing or empty (sacct leaves ``User`` and ``Partition``
            empty on steps).
        start_s, end_s: ``Start``/``End`` as Unix seconds (UTC); None for ``Unknown``/``None``.
        elapsed_s: ``Elapsed`` in seconds.
        state: the first word of ``State`` (``CANCELLED by 12345`` -> ``CANCELLED``).
        exit_code: ``ExitCode`` as printed, ``<exit status>:<signal>`` (``0:0``, ``0:15``).
        node_count: ``NNodes`` (or ``AllocNodes``).
        tasks: ``NTasks`` (empty on the job line: None).
        cpus: ``NCPUS`` (or ``AllocCPUS``).
        nodes: ``NodeList`` expanded, in hostlist order, zero padding kept; ``()`` for
            ``None assigned``.
    """

    id: str
    job_id: str
    display_id: str
    step: str | None
    user: str | None = None
    name: str | None = None
    partition: str | None = None
    account: str | None = None
    start_s: float | None = None
    end_s: float | None = None
    elapsed_s: float | None = None
    state: str | None = None
    exit_code: str | None = None
    node_count: int | None = None
    tasks: int | None = None
    cpus: int | None = None
    nodes: tuple[str, ...] = ()


def sacct_command(
    *,
    jobs: Sequence[str] = (),
    starttime: str | None = None,
    endtime: str | None = None,
    sacct: str = "sacct",
) -> list[str]:
    """The argv that prints what :class:`SacctParser` reads, for some jobs or a time window.

    ``sacct --parsable2 --format=SACCT_FORMAT`` plus ``--jobs J,K`` or ``--allusers
    --starttime S --endtime E`` (sacct(1)). Start/End come out in the caller's ``TZ``: run it
    with ``TZ=UTC`` (or tell the parser the zone), or with ``SLURM_TIME_FORMAT=%s`` for Unix
    seconds.

    Raises:
        ValueError: neither jobs nor a start time is given.
    """
    argv = [sacct, "--parsable2", f"--format={SACCT_FORMAT}"]
    if jobs:
        return [*argv, f"--jobs={','.join(jobs)}"]
    if starttime is None:
        raise ValueError("sacct_command needs jobs or a starttime")
    argv += ["--allusers", f"--starttime={starttime}"]
    return [*argv, f"--endtime={endtime}"] if endtime is not None else argv


def _split_top(text: str) -> list[str]:
    """Split a hostlist at the commas outside brackets."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise ValueError("nested '['")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError("']' without '['")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise ValueError("'[' without ']'")
    parts.append("".join(cur))
    return parts


def _expand_range(body: str) -> list[str]:
    """``0008,0012-0013`` -> ``['0008', '0012', '0013']`` (width of each lower bound kept)."""
    out: list[str] = []
    for item in body.split(","):
        lo, sep, hi = item.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"bad range {item!r} (expected N or N-M)")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"range {item!r} runs backwards")
        if len(out) + b - a + 1 > MAX_HOSTS:
            raise ValueError(f"more than {MAX_HOSTS} hosts")
        out.extend(f"{n:0{len(lo)}d}" for n in range(a, b + 1))
    return out


_PIECE = re.compile(r"([^\[\]]*)(?:\[([^\[\]]*)\])?")


def expand_hostlist(text: str) -> list[str]:
    """Expand a Slurm hostlist into host names, as ``scontrol show hostnames`` does.

    ``nid0[5301-5303,5310],login1`` -> ``nid05301 nid05302 nid05303 nid05310 login1``. A
    range keeps the width of its lower bound (``[08-10]`` -> ``08 09 10``; ``[8-10]`` ->
    ``8 9 10``), as Slurm's hostlist.c does. Several bracket groups in one name expand to their
    product (``r[1-2]n[1-2]`` -> ``r1n1 r1n2 r2n1 r2n2``); text after a bracket is a suffix.
    Duplicates are kept, in order. ``None assigned``, ``(null)`` and ``""`` give ``[]``.

    Raises:
        ValueError: unbalanced or nested brackets, a range that is not ``N`` or ``N-M`` or
            runs backwards, an empty name, or more than ``MAX_HOSTS`` names.
    """
    text = text.strip()
    if text.lower() in NO_NODES:
        return []
    hosts: list[str] = []
    for expr in _split_top(text):
        if not expr:
            raise ValueError(f"empty host name in {text!r}")
        names = [""]
        for m in _PIECE.finditer(expr):
            literal, body = m.group(1), m.group(2)
            if body == "":
                raise ValueError(f"empty brackets in {expr!r}")
            choices = _expand_range(body) if body is not None else [""]
            names = [n + literal + c for n in names for c in choices]
            if len(names) + len(hosts) > MAX_HOSTS:
                raise ValueError(f"more than {MAX_HOSTS} hosts")
        hosts.extend(names)
    return hosts


def parse_elapsed(text: str) -> float:
    """Seconds from a Slurm duration: ``[D-]HH:MM:SS``, ``MM:SS[.mmm]``, ``D-HH[:MM]``.

    sacct prints ``Elapsed`` as ``HH:MM:SS`` or ``D-HH:MM:SS``; the CPU-time columns
    (``TotalCPU``) as ``MM:SS.mmm`` below an hour (sacct(1), "Job Accounting Fields").

    Raises:
        ValueError: not a duration, or one of 2^53 s or more.
    """
    days, sep, clock = text.strip().rpartition("-")
    if sep and not days.isdigit():
        raise ValueError(f"not a duration: {text!r}")
    parts = clock.split(":")
    if sep:
        parts += ["0"] * (3 - len(parts))
    elif len(parts) == 2:
        parts.insert(0, "0")
    if len(parts) != 3 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"not a duration: {text!r}")
    try:
        seconds = float(parts[2])
    except ValueError:
        raise ValueError(f"not a duration: {text!r}") from None
    if not math.isfinite(seconds) or seconds < 0 or parts[2].startswith(("+", "-")):
        raise ValueError(f"not a duration: {text!r}")
    try:
        whole = (int(days or 0) * 24 + int(parts[0])) * 3600 + int(parts[1]) * 60
    except ValueError:  # more digits than int() converts
        raise ValueError(f"duration out of range: {text[:40]!r}") from None
    if whole >= MAX_EXACT or whole + seconds >= MAX_EXACT:
        raise ValueError(f"duration out of range: {text[:40]!r}")
    return whole + seconds


def parse_time(text: str, tz: tzinfo = UTC) -> float | None:
    """Unix seconds from a sacct time: ``2017-03-20T01:59:02`` in ``tz``, or Unix seconds.

    ``Unknown``, ``None`` and ``""`` give None. A value with its own offset
    (``...+02:00``) keeps that offset.

    Raises:
        ValueError: anything else, or a time before 1970 or beyond the year 9999.
    """
    text = text.strip()
    if text.lower() in NO_TIME:
        return None
    seconds = epoch_digits(text)
    if seconds is None:
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"not a sacct time: {text[:40]!r}") from None
        if "T" not in text:
            raise ValueError(f"not a sacct time: {text[:40]!r}")
        seconds = zoned_epoch(when, tz)
    problem = epoch_problem(seconds)
    if problem is not None:
        raise ValueError(f"time {text[:40]!r} is {problem}")
    return seconds


@dataclass(frozen=True)
class SacctHeader:
    """Where each recognised column sits in the rows under one sacct header line.

    Attributes:
        line: the header line as read (persist it with the offset to resume mid-file).
        width: number of ``|``-separated values of a row, the trailing empty one of
            ``--parsable`` not counted.
        trailing: the header ends with ``|`` (``--parsable``): so does every row.
        pos: recognised column (``COLUMNS`` key, lower case) -> position.
    """

    line: str
    width: int
    trailing: bool
    pos: dict[str, int]

    @classmethod
    def parse(cls, line: str, path: str, line_no: int) -> SacctHeader:
        """Read a sacct header line.

        Raises:
            ParseError: a required column is missing (``JobID``/``JobIDRaw``, ``Start``, ``End``)
                or a column appears twice.
        """
        fields = line.split("|")
        trailing = len(fields) > 1 and fields[-1] == ""
        if trailing:
            fields.pop()
        pos: dict[str, int] = {}
        for i, name in enumerate(fields):
            key = name.strip().lower()
            if key in pos:
                raise ParseError(path, line_no, f"column {name.strip()!r} appears twice")
            if key in COLUMNS:
                pos[key] = i
        missing = [c for c in ("start", "end") if c not in pos]
        if "jobid" not in pos and "jobidraw" not in pos:
            missing.insert(0, "jobid")
        if missing:
            names = ", ".join("JobID or JobIDRaw" if c == "jobid" else COLUMNS[c] for c in missing)
            raise ParseError(
                path,
                line_no,
                f"sacct header without {names} (run sacct --parsable2 --format={SACCT_FORMAT});"
                " rows up to the next header are skipped",
            )
        return cls(line, len(fields), trailing, pos)


def is_header(line: str) -> bool:
    """True for a sacct header line: a value is ``JobID`` or ``JobIDRaw`` (any case) and none
    starts with a digit (every data row has a numeric job id; column names have none)."""
    values = [f.strip() for f in line.split("|")]
    return any(v.lower() in ("jobid", "jobidraw") for v in values) and not any(
        v[:1].isdigit() for v in values
    )


def _int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()):
        raise ValueError(f"{name} is not a whole number >= 0: {value[:40]!r}")
    digits = value.lstrip("0") or "0"
    if len(digits) > 16 or int(digits) >= MAX_EXACT:
        raise ValueError(f"{name} is out of range (>= 2^53): {value[:40]!r}")
    return int(digits)


def parse_row(
    fields: list[str], header: SacctHeader, path: str, line_no: int, tz: tzinfo = UTC
) -> SlurmJob:
    """Turn one split data row into a :class:`SlurmJob`.

    Raises:
        ParseError: wrong number of values (a value holding ``|``?), an empty job id, a bad
            time, duration, count or hostlist.
    """
    if header.trailing:
        if not fields or fields[-1] != "":
            raise ParseError(path, line_no, "row without the trailing '|' of sacct --parsable")
        fields = fields[:-1]
    if len(fields) != header.width:
        raise ParseError(
            path,
            line_no,
            f"{len(fields)} value(s), the header has {header.width} (a value holding '|'?)",
        )

    def get(key: str) -> str | None:
        i = header.pos.get(key)
        return None if i is None else fields[i].strip()

    raw, shown = get("jobidraw"), get("jobid")
    ident = raw or shown
    if not ident:
        raise ParseError(path, line_no, "empty JobID/JobIDRaw")
    job_id, dot, step = ident.partition(".")
    try:
        start = parse_time(get("start") or "", tz)
        end = parse_time(get("end") or "", tz)
        elapsed_text = get("elapsed")
        elapsed = parse_elapsed(elapsed_text) if elapsed_text else None
        nodes_text = get("nodelist")
        nodes = tuple(expand_hostlist(nodes_text)) if nodes_text is not None else ()
        node_count = _int(get("nnodes") or get("allocnodes"), "NNodes")
        tasks = _int(get("ntasks"), "NTasks")
        cpus = _int(get("ncpus") or get("alloccpus"), "NCPUS")
    except ValueError as err:
        raise ParseError(path, line_no, str(err)) from None
    state = get("state")
    return SlurmJob(
        id=ident,
        job_id=job_id,
        display_id=shown or ident,
        step=step if dot else None,
        user=get("user") or None,
        name=get("jobname") or None,
        partition=get("partition") or None,
        account=get("account") or None,
        start_s=start,
        end_s=end,
        elapsed_s=elapsed,
        state=state.split()[0] if state else None,
        exit_code=get("exitcode") or None,
        node_count=node_count,
        tasks=tasks,
        cpus=cpus,
        nodes=nodes,
    )


class SacctParser(HeaderedLines[SacctHeader, SlurmJob]):
    """Parses sacct ``--parsable2``/``--parsable`` lines chunk by chunk, remembering the header.

    A tail reads a file in chunks, so the header that names a chunk's columns may have come in
    an earlier chunk: :attr:`header_line` is that header's text (persist it with the offset and
    pass it back to resume). A later line that is itself a header (outputs of several sacct
    runs appended to one file) replaces it. The only state is that header; no I/O.

    Args:
        path: the input file, for errors.
        header_line: the header in force before the first line fed (None at a file's start).
        tz: the time zone sacct printed Start/End in (the ``TZ`` of the host that ran it).
    """

    no_header = "row before the sacct header line (run sacct without --noheader)"

    def is_header(self, line: str) -> bool:
        """A sacct header line (it names ``JobID`` or ``JobIDRaw``)."""
        return is_header(line)

    def parse_header(self, line: str, line_no: int) -> SacctHeader:
        """:meth:`SacctHeader.parse`."""
        return SacctHeader.parse(line, self.path, line_no)

    def parse_row(self, line: str, header: SacctHeader, line_no: int) -> SlurmJob:
        """One ``|``-separated row."""
        return parse_row(line.split("|"), header, self.path, line_no, self.tz)


def parse_sacct(
    lines: Iterable[bytes | str],
    path: str,
    first_line_no: int = 1,
    header_line: str | None = None,
    tz: tzinfo = UTC,
) -> Iterator[SlurmJob | ParseError]:
    """Parse ``sacct --parsable2`` (or ``--parsable``) lines into records, or errors.

    Args:
        lines: consecutive lines of one file, without their ``\\n``.
        path: the file, for errors.
        first_line_no: 1-based number of the first line.
        header_line: the header in force before the first line (when resuming mid-file).
        tz: the time zone of Start/End (default UTC).

    Yields:
        A :class:`SlurmJob` per row, in file order; a ParseError per bad line.
    """
    yield from SacctParser(path, header_line, tz).feed(lines, first_line_no)
