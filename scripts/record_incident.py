"""Pack a finished ``iolens lab`` run into the demo's incident recording.

    sudo make lab ARGS="--dir /tmp/lab"          # a real run: LUNs, fio, sadc, MPI-IO, Darshan
    .venv/bin/python scripts/record_incident.py /tmp/lab pipeline/assets/demo/incident

Takes what the lab's drop directories hold after the run, as ``iolens run`` read them: the
fio latency-histogram logs (gzip-compressed, which the fio drop reads as they are), the ``sadf
-d`` CSV of every LUN, the Darshan logs of every job and their Slurm records; and writes
``recording.json`` from the lab's ``result.json`` (its timeline, the slowed LUN, each LUN's
device and mount point, the jobs and the incident the lab found). ``iolens demo`` ships the
recording through the pipeline like its other drops (``pipeline/demo/data.py``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

PARAMS = (
    "luns",
    "slow",
    "delay_ms",
    "onset_s",
    "duration_s",
    "recovery_s",
    "segment_s",
    "rate_iops",
    "log_ms",
    "interval_ms",
    "sla_ms",
    "mpi_ranks",
)
"""The lab parameters the recording keeps (the others say where the lab ran)."""
INCIDENT = ("id", "lun", "start", "end", "windows", "fio_breaches", "fio_jobs", "jobs")
"""The incident fields the recording keeps, as the lab found them."""


def recording(result: dict[str, Any]) -> dict[str, Any]:
    """``recording.json`` from the lab's ``result.json``."""
    found = [doc["iolens"]["incident"] for doc in result["incidents"]]
    return {
        "host": result["host"],
        "t0_s": result["t0_s"],
        "onset_s": result["onset_s"],
        "fault_end_s": result["fault_end_s"],
        "end_s": result["end_s"],
        "slow_lun": result["slow_lun"],
        "luns": result["luns"],
        "params": {k: result["params"][k] for k in PARAMS},
        "jobs": [
            {k: j[k] for k in ("job_id", "name", "luns", "ntasks", "start_s", "end_s", "state")}
            for j in result["jobs"]
        ],
        "incidents": [{k: i.get(k) for k in INCIDENT} for i in found],
    }


def pack(lab: Path, out: Path) -> list[Path]:
    """Copy the lab's drops under ``out``; the files written. The fio logs are gzip-compressed
    as ``gzip`` does it, the header holding the log's name and modification time (so packing
    one run twice gives the same bytes, and each file its own leading bytes: see
    :func:`distinct_identities`)."""
    drops = lab / "drops"
    written = []
    for src in sorted((drops / "fio").glob("*/*_clat_hist.*.log")):
        dest = out / "fio" / src.relative_to(drops / "fio")
        dest = dest.with_name(dest.name + ".gz")
        dest.parent.mkdir(parents=True, exist_ok=True)
        mtime = int(src.stat().st_mtime)
        with src.open("rb") as f, gzip.GzipFile(dest, "wb", compresslevel=9, mtime=mtime) as g:
            shutil.copyfileobj(f, g)
        written.append(dest)
    for sub, pattern in (("sadf", "*.csv"), ("darshan", "*.darshan"), ("slurm", "*.txt")):
        for src in sorted((drops / sub).glob(pattern)):
            dest = out / sub / src.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            written.append(dest)
    return written


def distinct_identities(files: list[Path]) -> list[tuple[Path, Path]]:
    """Pairs of ``files`` whose fingerprints (iolens's file identity, the leading bytes up to
    the first newline byte) are equal: their documents would share ids, and the second file's
    would be taken for the first's."""
    from pipeline.settings import ShipperSettings
    from pipeline.shippers.identity import identify

    size = ShipperSettings().fingerprint_bytes
    seen: dict[str, Path] = {}
    clashes = []
    for f in files:
        ident = identify(f, size, whole_file=True)
        assert ident is not None, f
        if ident.fingerprint in seen:
            clashes.append((seen[ident.fingerprint], f))
        seen.setdefault(ident.fingerprint, f)
    return clashes


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("lab", type=Path, help="the lab directory of a finished run (--dir)")
    p.add_argument("out", type=Path, help="the recording's directory (replaced)")
    args = p.parse_args(argv)
    result_file = args.lab / "result.json"
    if not result_file.is_file():
        print(f"{result_file}: no result; run the lab to its end first", file=sys.stderr)
        return 2
    result = json.loads(result_file.read_text(encoding="utf-8"))
    if len(result["incidents"]) != 1:
        print(f"the lab found {len(result['incidents'])} incidents, not one", file=sys.stderr)
        return 2
    for sub in ("fio", "sadf", "darshan", "slurm"):
        shutil.rmtree(args.out / sub, ignore_errors=True)
    written = pack(args.lab, args.out)
    clashes = distinct_identities([f for f in written if f.suffix == ".gz"])
    if clashes:
        for a, b in clashes:
            print(f"{a} and {b} have the same fingerprint", file=sys.stderr)
        return 2
    meta = args.out / "recording.json"
    meta.write_text(json.dumps(recording(result), indent=2) + "\n", encoding="utf-8")
    size = sum(f.stat().st_size for f in [*written, meta])
    print(f"{len(written) + 1} files, {size / 2**20:.2f} MiB, in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
