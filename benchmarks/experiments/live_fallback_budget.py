"""How long the live update's MCMC fallback must run: its time and accuracy for ensembles of
other sizes and lengths, against a long run of the same ensemble.

The fallback (``laplace.ensemble_draws``: emcee's affine-invariant ensemble, 40 walkers, 400
steps discarded and 600 kept) answered in 2.06 s median, 2.33 s at the slowest, on the machine of
2026-12-02 (``results/live_fallback.md``), where the live-path issue asks for 2 s. Each of the
benchmark's 12 bundled runs, cut at half its steps, is updated on the shipped population with the
fallback forced, once per ensemble setting (walkers, burn-in, kept steps), and once with a long
ensemble (40 walkers, 2,000 + 8,000 steps) as the reference. Reported per setting: the update's
time, emcee's ESS, and the error of its answer against the reference: the largest difference of
a parameter's mean in reference posterior sd, the worst ratio of a parameter's sd to the
reference's, and the difference of the final reward's 5% / 50% / 95% quantiles in reference sd.
The module's constants are set for each setting (``ENSEMBLE_WALKERS``, ``ENSEMBLE_BURN``,
``ENSEMBLE_STEPS``); nothing else changes.

Usage::

    python benchmarks/experiments/live_fallback_budget.py   # results/live_fallback_budget.md
"""

from __future__ import annotations

import argparse
import os
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

RESULTS = HERE / "results"
#: (walkers, burn-in steps, kept steps); the first is the shipped setting.
SETTINGS = [(40, 400, 600), (40, 300, 450), (40, 200, 300), (64, 200, 300), (80, 150, 250), (80, 100, 200)]
REFERENCE = (40, 2000, 8000)
QUANTILES = ["q05", "q50", "q95"]


def main() -> None:
    """Run every setting on every run and write the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from live_fallback import half_runs

    from bayesgrpo.model import laplace
    from bayesgrpo.model.datasets import bundled_population, load_bundled
    from bayesgrpo.questions.live import LiveForecaster

    forced = LiveForecaster(bundled_population(), random_seed=1, pareto_k_limit=-1.0)

    def update(run: object, setting: tuple[int, int, int]) -> tuple[object, float]:
        laplace.ENSEMBLE_WALKERS, laplace.ENSEMBLE_BURN, laplace.ENSEMBLE_STEPS = setting
        start = time.perf_counter()
        answer = forced.update(run)
        return answer, time.perf_counter() - start

    rows = []
    for run_id, prefix in half_runs(load_bundled(warn=False), args.runs):  # live_fallback.py's runs
        forced.update(prefix)  # the run's population prior, built once
        reference, _ = update(prefix, REFERENCE)
        ref_theta = reference.posterior.theta
        ref_mean, ref_sd = ref_theta.mean(axis=0), ref_theta.std(axis=0)
        horizon = reference.horizon_step
        ref_final = reference.quantiles([horizon], band="curve")
        ref_final_draws = reference.reward_draws([horizon], band="curve")[:, 0]
        for setting in SETTINGS:
            answer, seconds = update(prefix, setting)
            theta = answer.posterior.theta
            final = answer.quantiles([horizon], band="curve")
            rows.append(
                {
                    "run": run_id[:40],
                    "walkers": setting[0],
                    "burn": setting[1],
                    "steps": setting[2],
                    "seconds": seconds,
                    "ess": answer.posterior.ess,
                    "mean_err_sd": float(np.max(np.abs(theta.mean(axis=0) - ref_mean) / ref_sd)),
                    "sd_ratio_worst": float(np.max(np.abs(np.log(theta.std(axis=0) / ref_sd)))),
                    "final_q_err_sd": float(
                        np.max(np.abs(final[QUANTILES].to_numpy() - ref_final[QUANTILES].to_numpy()))
                        / ref_final_draws.std()
                    ),
                }
            )
        laplace.ENSEMBLE_WALKERS, laplace.ENSEMBLE_BURN, laplace.ENSEMBLE_STEPS = SETTINGS[0]
        print(pd.DataFrame(rows[-len(SETTINGS) :]).to_string(index=False), flush=True)
    frame = pd.DataFrame(rows)
    frame["sd_ratio_worst"] = np.exp(frame["sd_ratio_worst"])  # the worst ratio, above or below 1
    summary = (
        frame.groupby(["walkers", "burn", "steps"], sort=False)
        .agg(
            seconds_median=("seconds", "median"),
            seconds_max=("seconds", "max"),
            ess_min=("ess", "min"),
            ess_median=("ess", "median"),
            mean_err_sd_median=("mean_err_sd", "median"),
            mean_err_sd_max=("mean_err_sd", "max"),
            sd_ratio_worst_max=("sd_ratio_worst", "max"),
            final_q_err_sd_median=("final_q_err_sd", "median"),
            final_q_err_sd_max=("final_q_err_sd", "max"),
        )
        .reset_index()
    )
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    lines = [
        "# How long the live update's MCMC fallback must run",
        "",
        f"Command: `python benchmarks/experiments/live_fallback_budget.py --runs {args.runs}`  ",
        f"Machine: {machine}, {time.strftime('%Y-%m-%d')}. Reference: {REFERENCE[0]} walkers, "
        f"{REFERENCE[1]} + {REFERENCE[2]} steps, per run.",
        "",
        "Per setting (walkers, steps discarded, steps kept), over the runs: the fallback update's time, "
        "emcee's ESS, the largest difference of a parameter's mean from the reference's in reference sd "
        "(`mean_err_sd`), the worst ratio of a parameter's sd to the reference's, above or below 1 "
        "(`sd_ratio_worst`), and the largest difference of the final reward's 5/50/95% curve quantiles "
        "in reference sd (`final_q_err_sd`).",
        "",
        markdown_table(summary),
        "",
        "## Every run",
        "",
        markdown_table(frame),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_fallback_budget.md").write_text("\n".join(lines))
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
