"""Offline diagnosis of real sysstat variants at 30 hosts: a restart record first costs nothing.

A file sadc started at boot (``sa1 --boot``) begins with a restart record, which sadf prints
before the first header. The fault recording (``tests/data/sysstat/peer_fault_sadf_d.csv``,
540 s x 7 devices) is replicated as ``--hosts`` hosts (host names ``vm01``...), once plain and
once with that restart row first, and :func:`pipeline.jobs.peer_recording.load` reads each set
(the columnar reader); the per-line reader, which such files fell back to before, is timed
beside them. Each reading runs ``--repeat`` times; the best is printed, with the ratio to the
plain files.

    .venv/bin/python bench/sysstat_variants.py [--hosts 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.jobs.peer_recording import Recording, load, load_lines  # noqa: E402

RECORDING = ROOT / "tests" / "data" / "sysstat" / "peer_fault_sadf_d.csv"
RESTART = b"vm;-1;2026-11-22 06:32:44 UTC;LINUX-RESTART\t(2 CPU)\n"


def write_hosts(out: Path, hosts: int, restart: bool) -> list[Path]:
    """One CSV per host: the recording with its host renamed (and the restart row first)."""
    data = RECORDING.read_bytes()
    paths = []
    for h in range(1, hosts + 1):
        name = f"vm{h:02d}".encode()
        body = (RESTART if restart else b"") + data
        path = out / f"vm{h:02d}_sadf_d.csv"
        renamed = body.replace(b"\nvm;", b"\n" + name + b";").replace(b"vm;-1", name + b";-1")
        path.write_bytes(renamed)
        paths.append(path)
    return paths


def best(fn: Callable[[], Recording], repeat: int) -> tuple[float, Recording]:
    """Fastest wall time of ``repeat`` runs, s, and the last result."""
    times, rec = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        rec = fn()
        times.append(time.perf_counter() - t)
    assert rec is not None
    return min(times), rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "plain").mkdir()
        (Path(tmp) / "boot").mkdir()
        plain = write_hosts(Path(tmp) / "plain", args.hosts, False)
        boot = write_hosts(Path(tmp) / "boot", args.hosts, True)
        t_plain, r_plain = best(lambda: load(plain, 15.0), args.repeat)
        t_boot, r_boot = best(lambda: load(boot, 15.0), args.repeat)
        t_lines, r_lines = best(lambda: load_lines(boot, 15.0), args.repeat)
    luns = len(r_plain.samples)
    assert len(r_boot.samples) == len(r_lines.samples) == luns == 7 * args.hosts
    assert all(len(r_boot.samples[k]) == len(v) for k, v in r_plain.samples.items())
    print(f"{args.hosts} hosts, {luns} LUNs, 540 one-second samples each (best of {args.repeat})")
    print(f"{'reading':<40} {'s':>8} {'x plain':>8}")
    for label, t in [
        ("plain files (columnar)", t_plain),
        ("restart record first (columnar)", t_boot),
        ("restart record first (per-line, before)", t_lines),
    ]:
        print(f"{label:<40} {t:8.3f} {t / t_plain:8.2f}")


if __name__ == "__main__":
    main()
