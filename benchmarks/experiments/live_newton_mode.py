"""The live update's mode by Newton's method (numpy) against SciPy's L-BFGS-B (live-path issue, point 4).

SciPy's ``optimize`` and ``special`` were most of the live path's import time in a fresh process
(``benchmarks/live_first_answer.py``): the first answer waited for them before it could start.
The live update now finds its Laplace mode with ``bayesgrpo.model.numerics.newton_minimize``
(central-difference gradient and Hessian in one batched call per iteration, eigenvalues floored,
Armijo line search) instead of ``scipy.optimize.minimize(method="L-BFGS-B")`` on a
central-difference gradient, as the package did before. This script answers whether that changes
what users get:

- every bundled run, with and without its stated range (as ``bayesgrpo stop`` sees a user's log),
  cut at 10%, 25% and 50% of its logged step span, updated by ``LiveForecaster`` on the shipped
  population (seed 1, 2000 draws), once with each optimiser;
- per update: the log posterior at each optimiser's mode (higher is the better mode), the largest
  difference between the modes, the path that answered, the Pareto k, the median and 90% band of
  the final reward, and the seconds the update took;
- for scale, the same update with Newton's method at another seed (2): how much an answer moves
  by the update's own Monte Carlo noise (importance sampling, its adaptive rounds, PSIS).

Usage::

    python benchmarks/experiments/live_newton_mode.py   # -> results/live_newton_mode.md, _runs.csv
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from _markdown import markdown_table
from live_backtest import without_stated_range

from bayesgrpo.evaluate.backtest.cuts import cut_points, planned_horizon, prefix_table, run_points
from bayesgrpo.model import laplace
from bayesgrpo.model.datasets import bundled_population, load_bundled
from bayesgrpo.questions.live import LiveForecaster

RESULTS = HERE / "results"
CUTS = (0.1, 0.25, 0.5)


def lbfgsb_fit(prior, t, y, noise_scale, likelihood_weight=1.0, start=None):
    """``laplace.laplace_fit`` as the package had it before: SciPy's L-BFGS-B (its ``"lbfgsb"`` optimizer)."""
    return ORIGINAL(prior, t, y, noise_scale, likelihood_weight, start, optimizer="lbfgsb")


def one_update(live: LiveForecaster, run, horizon: float, fit) -> dict:
    """One update with ``fit`` as the Laplace fit; what it found and answered."""
    modes: list[tuple[float, np.ndarray]] = []

    def recorded(prior, t, y, noise_scale, likelihood_weight=1.0, start=None):
        mode, cov = fit(prior, t, y, noise_scale, likelihood_weight, start)
        value = float(laplace.log_posterior(mode[None, :], prior, t, y, noise_scale, likelihood_weight)[0])
        modes.append((value, mode))
        return mode, cov

    laplace.laplace_fit = recorded  # condition_run calls it by its module name
    try:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            update = live.update(run, horizon=horizon)
        seconds = time.perf_counter() - start
    finally:
        laplace.laplace_fit = ORIGINAL
    low, median, high = update.final_interval(0.9)
    return {
        "log_posterior": modes[0][0],
        "mode": modes[0][1],
        "refits": len(modes) - 1,
        "method": update.method,
        "pareto_k": float(update.posterior.pareto_k),
        "final_median": median,
        "final_low": low,
        "final_high": high,
        "seconds": seconds,
    }


ORIGINAL = laplace.laplace_fit


def main(argv: list[str] | None = None) -> None:
    """Both optimisers on every update; the table and the raw rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=None, help="the first N bundled runs only")
    args = parser.parse_args(argv)
    table = load_bundled(warn=False)
    population = bundled_population()
    run_ids = table.run_ids[: args.runs] if args.runs else table.run_ids
    rows = []
    started = time.perf_counter()
    for kind, source in (("stated", table), ("unstated", without_stated_range(table))):
        for run_id in run_ids:
            one = source.select([run_id])
            if kind == "stated" and one.runs[["reward_min", "reward_max"]].isna().any(axis=None):
                continue  # no stated range: the unstated rows hold it
            points = run_points(one, run_id)
            horizon = planned_horizon(one)
            for cut in CUTS:
                prefix = prefix_table(one, cut_points(points, cut).observed)
                answers = {}
                for name, fit, seed in (
                    ("lbfgsb", lbfgsb_fit, 1),
                    ("newton", ORIGINAL, 1),
                    ("seed2", ORIGINAL, 2),
                ):
                    live = LiveForecaster(population, random_seed=seed)
                    answers[name] = one_update(live, prefix, horizon, fit)
                old, new, other = answers["lbfgsb"], answers["newton"], answers["seed2"]
                rows.append(
                    {
                        "run_id": run_id,
                        "range": kind,
                        "cut": cut,
                        "lp_lbfgsb": old["log_posterior"],
                        "lp_newton": new["log_posterior"],
                        "mode_max_diff": float(np.max(np.abs(old["mode"] - new["mode"]))),
                        "refits_lbfgsb": old["refits"],
                        "refits_newton": new["refits"],
                        "method_lbfgsb": old["method"],
                        "method_newton": new["method"],
                        "k_lbfgsb": old["pareto_k"],
                        "k_newton": new["pareto_k"],
                        "median_lbfgsb": old["final_median"],
                        "median_newton": new["final_median"],
                        "band_lbfgsb": old["final_high"] - old["final_low"],
                        "band_newton": new["final_high"] - new["final_low"],
                        "median_seed2": other["final_median"],
                        "band_seed2": other["final_high"] - other["final_low"],
                        "range_width": float(points["reward"].max() - points["reward"].min()),
                        "s_lbfgsb": old["seconds"],
                        "s_newton": new["seconds"],
                    }
                )
    elapsed = time.perf_counter() - started
    frame = pd.DataFrame(rows)
    frame.to_csv(RESULTS / "live_newton_mode_runs.csv", index=False, float_format="%.6g")
    width = frame["range_width"].where(frame["range_width"] > 0, 1.0)
    frame["lp_gain"] = frame["lp_newton"] - frame["lp_lbfgsb"]
    frame["median_shift"] = (frame["median_newton"] - frame["median_lbfgsb"]).abs() / width
    frame["band_ratio"] = frame["band_newton"] / frame["band_lbfgsb"]
    frame["seed_shift"] = (frame["median_seed2"] - frame["median_newton"]).abs() / width
    frame["seed_band_ratio"] = frame["band_seed2"] / frame["band_newton"]
    summary = (
        frame.groupby(["range", "cut"])
        .agg(
            updates=("run_id", "size"),
            newton_higher=("lp_gain", lambda g: int((g > 1e-6).sum())),
            lbfgsb_higher=("lp_gain", lambda g: int((g < -1e-6).sum())),
            worst_lp_gain=("lp_gain", "min"),
            median_mode_diff=("mode_max_diff", "median"),
            max_mode_diff=("mode_max_diff", "max"),
            same_path=("method_newton", lambda s: int((s == frame.loc[s.index, "method_lbfgsb"]).sum())),
            median_shift_median=("median_shift", "median"),
            median_shift_max=("median_shift", "max"),
            band_ratio_min=("band_ratio", "min"),
            band_ratio_max=("band_ratio", "max"),
            seed_shift_median=("seed_shift", "median"),
            seed_shift_max=("seed_shift", "max"),
            seed_band_ratio_min=("seed_band_ratio", "min"),
            seed_band_ratio_max=("seed_band_ratio", "max"),
            s_lbfgsb=("s_lbfgsb", "median"),
            s_newton=("s_newton", "median"),
        )
        .reset_index()
    )
    machine = f"{platform.machine()}, Python {platform.python_version()}"
    lines = [
        "# The live update's mode: Newton's method (numpy) against L-BFGS-B (SciPy)",
        "",
        "Command: `python benchmarks/experiments/live_newton_mode.py`  ",
        f"Machine: {machine}, {time.strftime('%Y-%m-%d')}; {elapsed:.0f} s.",
        "",
        "Every bundled run on the shipped population, with its stated range (where it states one) and "
        "without (as a user's log), cut at 10/25/50% of its logged steps; one update per optimiser, same "
        "seed. `newton_higher` / `lbfgsb_higher`: updates whose first mode has the higher log posterior "
        "(by more than 1e-6); `worst_lp_gain`: the lowest log-posterior difference (Newton minus "
        "L-BFGS-B); mode differences in the unconstrained parameters; `same_path`: updates answered by "
        "the same path (importance or ensemble MCMC); `median_shift`: the final reward's median moved, as "
        "a share of the run's logged range; `band_ratio`: the 90% band of the final reward, Newton over "
        "L-BFGS-B; `seed_*`: the same between two seeds of the Newton update (1 and 2), the update's own "
        "Monte Carlo noise, for scale; seconds: the median update.",
        "",
        markdown_table(summary),
        "",
    ]
    (RESULTS / "live_newton_mode.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
