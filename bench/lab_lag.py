"""How long after a real fault's onset each stream shows it, and the incident is searchable.

Runs the incident lab (``iolens lab``: real loop-device LUNs on a delaying FUSE file system,
fio and an MPI-IO job under Darshan, sadc every second, ``iolens run`` live into the embedded
server) one or more times and prints, per run, the seconds from the onset of the fault until
each of these was first searchable (polled every 2 s, so each figure is up to 2 s late):

* an fio interval of the slowed LUN's job over the SLA (``metrics-fio.latency``);
* a sysstat sample of the slowed LUN with await over the SLA (``metrics-sysstat.diskio``);
* a peer-comparison window marking it faulty (``metrics-iolens.peer_anomaly``);
* a Darshan diagnosis naming it (``logs-iolens.io_diagnosis``, cause ``anomalous_lun``);
* the incident (``logs-iolens.incident``).

No other tool joins these streams, so there is no reference to run beside it: the anchor is
the peer comparison's own bound (a fault is indicted within ``win_size + (k-1) * win_shift``
samples of its onset, seed 001 4.2.4), printed next to the measured lags.

Needs root, /dev/fuse, loop devices and the packages ``make lab`` installs. Usage::

    .venv/bin/python bench/lab_lag.py                       # the default lab once
    .venv/bin/python bench/lab_lag.py --runs 3 --slow 2 --delay-ms 10
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))

from pipeline.lab.observe import STREAMS  # noqa: E402
from pipeline.lab.params import LabParams, lab_config  # noqa: E402
from pipeline.lab.run import Lab  # noqa: E402
from pipeline.lab.storage import Storage  # noqa: E402
from pipeline.lab.text import LAG_NAMES  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--slow", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--onset", type=float, default=120.0)
    ap.add_argument("--duration", type=float, default=150.0)
    ap.add_argument("--recovery", type=float, default=120.0)
    ap.add_argument("--darshan-tarball", type=Path)
    args = ap.parse_args(argv)
    params = LabParams(
        lab_dir=ROOT / "bench" / "out" / "lab",
        slow=args.slow,
        delay_ms=args.delay_ms,
        onset_s=args.onset,
        duration_s=args.duration,
        recovery_s=args.recovery,
        port=0,
        namespace="benchlab",
        darshan_tarball=args.darshan_tarball,
    )
    peer = lab_config(params, params.lab_dir, Storage(str(params.lab_dir)), "host")["peer"]
    bound = peer["win_size"] + (peer["k"] - 1) * peer["win_shift"]
    lags: dict[str, list[float]] = {s: [] for s in STREAMS}
    for run in range(args.runs):
        result = Lab(params, say=lambda m: print(f"  {m}", file=sys.stderr)).run()
        print(f"run {run + 1}: {len(result.incidents)} incident(s)")
        for stream, lag in result.lags.items():
            print(
                f"  {LAG_NAMES[stream]:42s} " + (f"+{lag:5.0f} s" if lag is not None else "never")
            )
            if lag is not None:
                lags[stream].append(lag)
    print(
        f"\nmedian over {args.runs} run(s); the peer comparison's bound is {bound} samples "
        f"= {bound * peer['downsample_s']:g} s after the onset (seed 001 4.2.4):"
    )
    for stream, values in lags.items():
        shown = f"+{statistics.median(values):5.0f} s" if values else "never"
        print(f"  {LAG_NAMES[stream]:42s} {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
