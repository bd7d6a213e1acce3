"""Write ``sacct_4478544.txt`` from pytokio's cached sacct records of job 4478544.

Usage: ``python tests/data/slurm/make_sacct_4478544.py ../shared/data/pytokio/sample.slurm
tests/data/slurm/sacct_4478544.txt``

The input is pytokio's JSON cache (``jobidraw``, ``start``, ``end``, expanded ``nodelist`` per
job and step). The output is what ``sacct --parsable2
--format=JobID,JobIDRaw,User,JobName,Start,End,Elapsed,State,NNodes,NTasks,NodeList`` prints:
the job first, then ``batch``, ``extern`` and the numbered steps, node lists compressed into
Slurm hostlist syntax. Columns the cache does not hold are filled in by the constants below
(see README.md).
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

HEADER = "JobID|JobIDRaw|User|JobName|Start|End|Elapsed|State|NNodes|NTasks|NodeList"
USER = "glock"  # from the Darshan log name glock_vpicio_uni_id4478544_...
JOB_NAME = "vpicio_uni"  # the Darshan log's executable
STATE = "COMPLETED"
STEP_TASKS = "2048"  # the Darshan log's nprocs (step .6); the other steps are assumed alike


def compress(hosts: list[str]) -> str:
    """Slurm hostlist syntax for names ``<prefix><digits>``, as Cray's sacct prints them.

    Consecutive numbers of one prefix and width form ``lo-hi`` ranges; leading zeros every
    number shares move in front of the brackets (``nid0[5301-5428]``).
    """
    groups: dict[tuple[str, int], list[int]] = {}
    for host in sorted(set(hosts)):
        m = re.fullmatch(r"(.*?)(\d+)", host)
        if m is None:
            raise ValueError(f"no numeric suffix: {host}")
        groups.setdefault((m[1], len(m[2])), []).append(int(m[2]))
    parts = []
    for (prefix, width), nums in groups.items():
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        runs: list[list[int]] = []
        for n in nums:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        zeros = min(width - len(str(n)) for n in nums)
        width -= zeros
        ranges = [f"{a:0{width}d}" + (f"-{b:0{width}d}" if b != a else "") for a, b in runs]
        parts.append(f"{prefix}{'0' * zeros}[{','.join(ranges)}]")
    return ",".join(parts)


def elapsed(start: str, end: str) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S"
    secs = int((datetime.strptime(end, fmt) - datetime.strptime(start, fmt)).total_seconds())
    days, rest = divmod(secs, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def order(jobidraw: str) -> tuple[int, int]:
    step = jobidraw.partition(".")[2]
    fixed = {"": (0, 0), "batch": (1, 0), "extern": (2, 0)}
    return fixed[step] if step in fixed else (3, int(step))


def main(src: str, dst: str) -> None:
    records = json.loads(Path(src).read_text())
    lines = [HEADER]
    for key in sorted(records, key=order):
        rec = records[key]
        raw = rec["jobidraw"]
        step = raw.partition(".")[2]
        user = USER if not step else ""
        name = {"batch": "batch", "extern": "extern"}.get(step, JOB_NAME)
        tasks = {"": "", "batch": "1", "extern": str(len(rec["nodelist"]))}.get(step, STEP_TASKS)
        lines.append(
            "|".join(
                [
                    raw,
                    raw,
                    user,
                    name,
                    rec["start"],
                    rec["end"],
                    elapsed(rec["start"], rec["end"]),
                    STATE,
                    str(len(rec["nodelist"])),
                    tasks,
                    compress(rec["nodelist"]),
                ]
            )
        )
    Path(dst).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
