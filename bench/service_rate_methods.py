"""The two service-rate estimators side by side on the queue simulator (seed 003).

``adaptive`` (:class:`pipeline.reducers.service_rate.ServiceRateEstimator`, the default, fed
how long the end waited in each period as the pipeline's queue measures it), the same without
the waits (``adaptive, no waits``: only periods without waiting, as before) and ``seed``
(:class:`pipeline.reducers.seed_rate.SeedRateEstimator`, the seed as written) run on
the same simulated queues (:mod:`pipeline.reducers.service_rate_sim`, reading end, capacity 64,
first period 1 ms, longest 10 ms): offered loads 0.3 to 1.5 with deterministic and exponential
service at 10 000 items/s, and rate changes 10k -> 14k and 14k -> 10k at offered load 0.7 and
0.9 (``rho`` is the load on the first rate; the producer keeps its rate, so after 10k -> 14k at
0.7 the stage is used at 0.5), and a monitor that oversleeps its period by ``|N(0, 1 %)|`` and
``|N(0, 5 %)|`` like a sleeping thread. Fixed seeds; the same seeds for every method.

Per case and method, over the seeds: converged estimates (those spanning the change left
out), their share within 10 % of the truth, the median error of each run's last converged
estimate, in how many runs a converged estimate made wholly after the change came within
10 % of the new rate (re-converged), and how often the seed method concluded it failed.

Usage::

    .venv/bin/python bench/service_rate_methods.py            # 3 seeds
    .venv/bin/python bench/service_rate_methods.py --seeds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))

from pipeline.reducers.seed_rate import SeedRateEstimator  # noqa: E402
from pipeline.reducers.service_rate import RateEstimator, ServiceRateEstimator  # noqa: E402
from pipeline.reducers.service_rate_sim import Scenario, SimResult, simulate  # noqa: E402

METHODS: dict[str, tuple[Callable[[], RateEstimator], bool]] = {
    "adaptive": (ServiceRateEstimator, True),
    "adaptive, no waits": (ServiceRateEstimator, False),
    "seed": (SeedRateEstimator, False),
}
"""Each method's estimator and whether the monitor reports how long the end waited."""


@dataclass(frozen=True)
class Case:
    """One row group: a scenario without its seed."""

    name: str
    service: str
    rho: float
    mu: float = 10_000.0
    mu2: float | None = None
    horizon_s: float = 4.0
    jitter: float = 0.0

    def scenario(self, seed: int) -> Scenario:
        """The scenario of this case with ``seed``; a change comes halfway."""
        change = self.horizon_s / 2 if self.mu2 is not None else None
        return Scenario(
            service="det" if self.service == "det" else "exp",
            mu_per_s=self.mu,
            rho=self.rho,
            horizon_s=self.horizon_s,
            change_at_s=change,
            mu2_per_s=self.mu2,
            seed=seed,
            jitter=self.jitter,
        )


def cases() -> list[Case]:
    """The steady loads, then the rate changes."""
    out = [
        Case(f"{svc} rho {rho}", svc, rho)
        for svc in ("det", "exp")
        for rho in (0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.5)
    ]
    for rho in (0.7, 0.9):
        for mu, mu2 in ((10_000.0, 14_000.0), (14_000.0, 10_000.0)):
            name = f"exp rho {rho} {mu / 1000:.0f}k->{mu2 / 1000:.0f}k"
            out.append(Case(name, "exp", rho, mu, mu2, horizon_s=8.0))
    for jitter in (0.01, 0.05):  # a sleeping monitor thread misses its period
        out.append(Case(f"exp rho 1.1, periods +{jitter:.0%} jitter", "exp", 1.1, jitter=jitter))
    return out


def row(case: Case, method: str, runs: list[SimResult]) -> str:
    """The markdown row of ``method`` on ``case``."""
    kept = [s for r in runs for s in r.estimates if not s.mixed]
    within = sum(abs(s.error) <= 0.10 for s in kept)
    share = f"{within / len(kept):.0%}" if kept else "-"
    finals = [r.estimates[-1].error for r in runs if r.estimates]
    final = f"{statistics.median(finals):+.1%}" if finals else "-"
    again = "n/a"
    if case.mu2 is not None:
        t = case.horizon_s / 2
        ok = sum(
            any(s.time_s - s.estimate.span_s >= t and abs(s.error) <= 0.10 for s in r.estimates)
            for r in runs
        )
        again = f"{ok}/{len(runs)}"
    failed = sum(r.failures for r in runs)
    return (
        f"| {case.name} | {method} | {len(kept)} | {share} | {final} | {again} | "
        f"{failed / len(runs):.0f} |"
    )


def main(argv: list[str] | None = None) -> int:
    """Run every case with both methods and print the table."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seeds", type=int, default=3, help="runs per case (seeds 0..N-1)")
    args = p.parse_args(argv)
    print(
        "| case | method | converged | within 10 % | final error (median) | re-converged "
        "| method failed (per run) |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in cases():
        for method, (make, waits) in METHODS.items():
            runs = [simulate(case.scenario(seed), make, waits=waits) for seed in range(args.seeds)]
            print(row(case, method, runs), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
