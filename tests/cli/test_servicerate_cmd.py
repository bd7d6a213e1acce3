"""``iolens servicerate simulate``: estimates against the truth, as text and as JSON."""

from __future__ import annotations

import dataclasses
import json
from functools import partial

import pytest

from pipeline.cli.main import main
from pipeline.reducers.service_rate import ServiceRateEstimator
from pipeline.reducers.service_rate_sim import Scenario, simulate, summarise


def test_json_lines_are_the_simulation_and_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["servicerate", "simulate", "--rho", "1.5", "--horizon", "2", "--seed", "3", "--json"]
    assert main(argv) == 0
    *rows, last = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = simulate(
        Scenario(service="exp", rho=1.5, horizon_s=2.0, seed=3),
        partial(ServiceRateEstimator, t0_s=0.001, cap_s=0.01, q=0.9),
    )
    in_progress = [r["in_progress"] for r in rows if "in_progress" in r]
    rows = [r for r in rows if "in_progress" not in r]
    assert len(rows) == len(expected.estimates) >= 2
    for row, s in zip(rows, expected.estimates, strict=True):
        assert (row["time_s"], row["rate_per_s"], row["error"]) == (
            s.time_s,
            s.estimate.rate_per_s,
            s.error,
        )
        assert row["true_per_s"] == 10_000.0
        assert row["converged"] is True
        assert set(row) >= {"usable_fraction", "confidence", "quantile_per_s", "mean_per_s"}
    assert len(in_progress) == (expected.last is not None)
    assert last == {
        "summary": dataclasses.asdict(summarise(expected.estimates)),
        "periods": expected.periods,
    }


def test_text_shows_each_estimate_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["servicerate", "simulate", "--service", "det", "--rho", "1.5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "det service at 10000/s; Poisson arrivals at 15000/s (rho 1.5); FIFO 64; 4 s, seed 0"
    )
    rows = [line.split() for line in out[2:] if line.startswith(" ")]
    assert len(rows) >= 5
    times = [float(row[0]) for row in rows]
    assert times == sorted(times) and times[0] > 0 and times[-1] <= 4.0
    for _time, rate, true, error, statistic, period_ms, usable, conv, conf in rows:
        assert (rate, true, error, statistic, period_ms) == (
            "10000.0",
            "10000.0",
            "+0.0%",
            "mean",
            "10.00",
        )
        assert (usable, conv, conf) == ("100%", "yes", "high")
    assert out[-1] == (
        f"{len(rows)} estimates: median error +0.0% (|error| 0.0%), within 10% 100%, "
        "within 20% 100%; median usable fraction 100%; 0 low confidence"
    )


def test_text_marks_the_estimate_across_the_change(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["servicerate", "simulate", "--rho", "1.5", "--change-at", "2", "--mu2", "5000"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert ", rate 5000/s from 2 s;" in out.splitlines()[0]
    assert sum("*" in line for line in out.splitlines()) == 2  # the row and the summary
    assert "(and 1 spanning the change, marked *, left out)" in out
    assert "within 20% 100%" in out


def test_low_utilisation_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["servicerate", "simulate", "--rho", "0.3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-3] == "at the end, not converged:"
    assert out[-2].split()[-2:] == ["no", "low"]
    assert out[-1].startswith("no converged estimate in ")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--change-at", "1"], "--change-at and --mu2 go together"),
        (["--rho", "0"], "mu_per_s, rho, horizon_s and capacity must be positive"),
        (["--q", "1.5"], "q must be in (0, 1), got 1.5 (check --t0-ms, --cap-ms, --q)"),
    ],
)
def test_bad_options_exit_2_naming_them(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["servicerate", "simulate", *extra]) == 2
    assert message in capsys.readouterr().err


def test_an_action_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["servicerate"])
    assert exc.value.code == 2
    assert "ACTION" in capsys.readouterr().err


def test_the_seed_method_says_how_often_it_failed(capsys: pytest.CaptureFixture[str]) -> None:
    from pipeline.reducers.seed_rate import SeedRateEstimator

    argv = ["servicerate", "simulate", "--method", "seed", "--rho", "0.3", "--horizon", "0.5"]
    assert main([*argv, "--json"]) == 0
    last = json.loads(capsys.readouterr().out.splitlines()[-1])
    expected = simulate(Scenario(service="exp", rho=0.3, horizon_s=0.5), SeedRateEstimator)
    assert last["method_failed"] == expected.failures > 0
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"method failed {expected.failures} times: no sampling period without waiting" in out


def test_with_waits_a_half_used_stage_is_estimated(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["servicerate", "simulate", "--rho", "0.5", "--horizon", "2", "--json"]
    assert main([*argv, "--waits"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    expected = simulate(Scenario(service="exp", rho=0.5, horizon_s=2.0), waits=True)
    got = [r["rate_per_s"] for r in rows if "rate_per_s" in r]
    assert got == [s.estimate.rate_per_s for s in expected.estimates] and got
    assert rows[-1]["summary"]["within_10"] == 1.0
