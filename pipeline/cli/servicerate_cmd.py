"""``iolens servicerate``: online non-blocking service-rate estimates (seed 003).

``iolens servicerate simulate [--service det|exp] [--rho X] [--mu N] [--horizon S]
[--change-at S --mu2 N] [--seed N] [--json]`` runs the estimator of
:mod:`pipeline.reducers.service_rate` on an exactly simulated producer -> FIFO (64 items) ->
consumer whose service rate is known (:mod:`pipeline.reducers.service_rate_sim`), and prints
each estimate beside the truth: its error, whether it converged, the share of sampling periods
that were usable and its confidence, then a summary (median error, share within 10 % and
20 %). Use it to see how far to trust the estimates of a stage at a given utilisation
(``--rho``, arrivals per service capacity): close to exact when the stage is busy, too low
and flagged ``low`` when it is mostly starved.

``--t0-ms``, ``--cap-ms`` and ``--q`` set the estimator's first and longest sampling period
and its quantile; ``--jitter`` makes the simulated monitor oversleep like a Python thread.
``--method seed`` runs the seed's method as written instead (it may conclude that it failed:
how often is printed); ``--waits`` hands the adaptive estimator how long the consumer waited
in each period, as the pipeline's queue does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from functools import partial
from typing import TextIO

from pipeline.cli.subcommand import Subparsers, add_actions, add_command
from pipeline.errors import ConfigError
from pipeline.records.json import JsonObject
from pipeline.reducers.seed_rate import SeedRateEstimator
from pipeline.reducers.service_rate import ServiceRateEstimator
from pipeline.reducers.service_rate_sim import Scenario, Scored, SimResult, simulate, summarise


def add_parser(sub: Subparsers, name: str) -> None:
    """Register the subcommand and its actions."""
    p = add_command(sub, name, "online service-rate estimates and how far to trust them", __doc__)
    acts = add_actions(p)
    s = acts.add_parser("simulate", help="estimates on a simulated queue against the truth")
    s.add_argument("--service", choices=["det", "exp"], default="exp", help="service times")
    s.add_argument("--rho", type=float, default=0.95, help="arrival rate / service rate")
    s.add_argument("--mu", type=float, default=10_000.0, help="service rate, items/s")
    s.add_argument("--horizon", type=float, default=4.0, help="simulated seconds (4)")
    s.add_argument("--change-at", type=float, help="time (s) the service rate becomes --mu2")
    s.add_argument("--mu2", type=float, help="service rate after --change-at, items/s")
    s.add_argument("--seed", type=int, default=0, help="random seed (0)")
    s.add_argument("--t0-ms", type=float, default=1.0, help="first sampling period, ms (1)")
    s.add_argument("--cap-ms", type=float, default=10.0, help="longest sampling period (10)")
    s.add_argument("--q", type=float, default=0.9, help="quantile, in (0, 1) (0.9)")
    s.add_argument("--jitter", type=float, default=0.0, help="monitor oversleep, relative sd")
    s.add_argument("--json", action="store_true", help="one JSON object per estimate")
    s.add_argument(
        "--method", choices=["adaptive", "seed"], default="adaptive", help="estimator (adaptive)"
    )
    s.add_argument("--waits", action="store_true", help="report waits (as the pipeline does)")


def scored_dict(s: Scored) -> JsonObject:
    """An estimate and its truth as JSON-able values (rates in items/s, times in s)."""
    return {
        "time_s": s.time_s,
        "true_per_s": s.true_per_s,
        "error": s.error,
        "mixed": s.mixed,
        **dataclasses.asdict(s.estimate),
    }


def _scenario(args: argparse.Namespace) -> Scenario:
    """The scenario of the options.

    Raises:
        ConfigError: ``--change-at`` without ``--mu2`` (or the reverse), or a bad value.
    """
    if (args.change_at is None) != (args.mu2 is None):
        raise ConfigError("--change-at and --mu2 go together: give both or neither")
    try:
        return Scenario(
            service=args.service,
            mu_per_s=args.mu,
            rho=args.rho,
            horizon_s=args.horizon,
            change_at_s=args.change_at,
            mu2_per_s=args.mu2,
            seed=args.seed,
            jitter=args.jitter,
        )
    except ValueError as err:
        raise ConfigError(f"servicerate simulate: {err}") from None


def _simulate(args: argparse.Namespace, out: TextIO) -> int:
    sc = _scenario(args)
    try:
        kind = SeedRateEstimator if args.method == "seed" else ServiceRateEstimator
        estimator = partial(kind, t0_s=args.t0_ms / 1e3, cap_s=args.cap_ms / 1e3, q=args.q)
        result = simulate(sc, estimator, waits=args.waits)
    except ValueError as err:
        raise ConfigError(f"servicerate simulate: {err} (check --t0-ms, --cap-ms, --q)") from None
    if args.json:
        for s in result.estimates:
            out.write(json.dumps(scored_dict(s)) + "\n")
        if result.last is not None:
            out.write(json.dumps({"in_progress": scored_dict(result.last)}) + "\n")
        summary = dataclasses.asdict(summarise(result.estimates))
        tail: JsonObject = {"summary": summary, "periods": result.periods}
        if args.method == "seed":
            tail["method_failed"] = result.failures
        out.write(json.dumps(tail) + "\n")
        return 0
    _print_text(out, result)
    return 0


def _row(s: Scored) -> str:
    e = s.estimate
    return (
        f"{s.time_s:7.3f} {e.rate_per_s:11.1f} {s.true_per_s:10.1f} {s.error:+7.1%}"
        f"{'*' if s.mixed else ' '} {e.statistic:8s} {e.period_s * 1e3:6.2f} "
        f"{e.usable_fraction:6.0%} {'yes' if e.converged else 'no':>4s} {e.confidence:>5s}\n"
    )


def _pct(v: float | None, spec: str = ".0%") -> str:
    return "-" if v is None else format(v, spec)


def _print_text(out: TextIO, result: SimResult) -> None:
    sc = result.scenario
    change = (
        f", rate {sc.mu2_per_s:g}/s from {sc.change_at_s:g} s" if sc.change_at_s is not None else ""
    )
    out.write(
        f"{sc.service} service at {sc.mu_per_s:g}/s{change}; Poisson arrivals at "
        f"{sc.rho * sc.mu_per_s:g}/s (rho {sc.rho:g}); FIFO {sc.capacity}; "
        f"{sc.horizon_s:g} s, seed {sc.seed}\n"
        "   time   estimate/s     true/s   error  statistic T(ms) usable conv  conf\n"
    )
    for s in result.estimates:
        out.write(_row(s))
    if result.last is not None:
        out.write("at the end, not converged:\n" + _row(result.last))
    out.write(_summary_text(result))
    if result.failures:
        out.write(
            f"method failed {result.failures} times: no sampling period without waiting (the "
            "seed method cannot monitor this stage; --method adaptive estimates it anyway)\n"
        )


def _summary_text(result: SimResult) -> str:
    sm = summarise(result.estimates)
    mixed = sum(s.mixed for s in result.estimates)
    if sm.estimates == 0:
        return (
            f"no converged estimate in {result.periods} periods: too few clean periods, or "
            "too few items in them, to pin the rate down (the stage is starved most of the "
            "time, or the horizon is short)\n"
        )
    text = (
        f"{sm.estimates} estimate{'' if sm.estimates == 1 else 's'}"
        f"{f' (and {mixed} spanning the change, marked *, left out)' if mixed else ''}: "
        f"median error {_pct(sm.median_error, '+.1%')} (|error| "
        f"{_pct(sm.median_abs_error, '.1%')}), within 10% "
        f"{_pct(sm.within_10)}, within 20% {_pct(sm.within_20)}; median usable fraction "
        f"{_pct(sm.usable_fraction)}; {sm.low_confidence} low confidence\n"
    )
    if sm.low_confidence:
        text += (
            "low confidence: few periods were clean (the stage was mostly starved), and clean "
            "periods favour slow service, so the rate is likely too low\n"
        )
    return text


def run(args: argparse.Namespace) -> int:
    """Run the action; returns 0.

    Raises:
        ConfigError: bad or inconsistent options.
    """
    if args.action == "simulate":
        return _simulate(args, sys.stdout)
    raise ConfigError(f"unknown action {args.action!r}")
