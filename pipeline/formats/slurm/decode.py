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
(``nid0[5301-5303,5310],login1``), expanded as ``scontrol show hostnames`` would (the field
values are read by :mod:`pipeline.formats.slurm.values`).

Each row is one job, or one step of it (``.batch``, ``.extern``, ``.0``, ...): steps are kept as
records of their own; ``job_id`` joins them to their job (and Darshan's ``jobid`` to both).

This module is pure: lines in, :class:`SlurmJob` records and
:class:`~pipeline.parsers.errors.ParseError` values (file, line, reason) out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, tzinfo
from typing import TypedDict

from pipeline.formats.slurm.values import expand_hostlist, parse_count, parse_elapsed, parse_time
from pipeline.parsers.errors import ParseError
from pipeline.parsers.table import HeaderedLines

__all__ = [
    "COLUMNS",
    "SACCT_FORMAT",
    "SacctHeader",
    "SacctParser",
    "SlurmJob",
    "is_header",
    "parse_row",
    "parse_sacct",
    "sacct_command",
]

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
                " its rows up to the next header are dead-lettered",
            )
        return cls(line, len(fields), trailing, pos)


def is_header(line: str) -> bool:
    """True for a sacct header line: a value is ``JobID`` or ``JobIDRaw`` (any case) and none
    starts with a digit (every data row has a numeric job id; column names have none)."""
    values = [f.strip() for f in line.split("|")]
    return any(v.lower() in ("jobid", "jobidraw") for v in values) and not any(
        v[:1].isdigit() for v in values
    )


def parse_row(
    fields: list[str], header: SacctHeader, path: str, line_no: int, tz: tzinfo = UTC
) -> SlurmJob:
    """Turn one split data row into a :class:`SlurmJob`.

    Raises:
        ParseError: wrong number of values (a value holding ``|``?), an empty job id, a bad
            time, duration, count or hostlist.
    """
    get = _getter(_row_values(fields, header, path, line_no), header)
    raw, shown = get("jobidraw"), get("jobid")
    ident = raw or shown
    if not ident:
        raise ParseError(path, line_no, "empty JobID/JobIDRaw")
    job_id, dot, step = ident.partition(".")
    try:
        typed = _typed_values(get, tz)
    except ValueError as err:
        raise ParseError(path, line_no, str(err)) from None
    return SlurmJob(
        id=ident,
        job_id=job_id,
        display_id=shown or ident,
        step=step if dot else None,
        **_text_values(get),
        **typed,
    )


class _TextValues(TypedDict):
    """The :class:`SlurmJob` fields kept as text (None when missing or empty)."""

    user: str | None
    name: str | None
    partition: str | None
    account: str | None
    state: str | None
    exit_code: str | None


class _TypedValues(TypedDict):
    """The :class:`SlurmJob` fields parsed from text: seconds, counts and host names."""

    start_s: float | None
    end_s: float | None
    elapsed_s: float | None
    nodes: tuple[str, ...]
    node_count: int | None
    tasks: int | None
    cpus: int | None


def _text_values(get: Callable[[str], str | None]) -> _TextValues:
    """The :class:`SlurmJob` fields kept as text (None when missing or empty); ``state`` is the
    first word of ``State``."""
    state = get("state")
    return {
        "user": get("user") or None,
        "name": get("jobname") or None,
        "partition": get("partition") or None,
        "account": get("account") or None,
        "state": state.split()[0] if state else None,
        "exit_code": get("exitcode") or None,
    }


def _row_values(fields: list[str], header: SacctHeader, path: str, line_no: int) -> list[str]:
    """The row's values, the trailing empty one of ``--parsable`` dropped.

    Raises:
        ParseError: no trailing ``|`` under a ``--parsable`` header, or not as many values as
            the header has columns.
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
    return fields


def _getter(fields: list[str], header: SacctHeader) -> Callable[[str], str | None]:
    """A row's column (``COLUMNS`` key) -> its stripped value, None when the header lacks it."""

    def get(key: str) -> str | None:
        i = header.pos.get(key)
        return None if i is None else fields[i].strip()

    return get


def _typed_values(get: Callable[[str], str | None], tz: tzinfo) -> _TypedValues:
    """The :class:`SlurmJob` fields read by :mod:`~pipeline.formats.slurm.values`: times,
    elapsed, counts and nodes (``get``: a column's stripped value, None when absent).

    Raises:
        ValueError: a bad time, duration, count or hostlist.
    """
    elapsed_text = get("elapsed")
    nodes_text = get("nodelist")
    return {
        "start_s": parse_time(get("start") or "", tz),
        "end_s": parse_time(get("end") or "", tz),
        "elapsed_s": parse_elapsed(elapsed_text) if elapsed_text else None,
        "nodes": tuple(expand_hostlist(nodes_text)) if nodes_text is not None else (),
        "node_count": parse_count(get("nnodes") or get("allocnodes"), "NNodes"),
        "tasks": parse_count(get("ntasks"), "NTasks"),
        "cpus": parse_count(get("ncpus") or get("alloccpus"), "NCPUS"),
    }


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
