"""The live update's MCMC fallback: its time and effective draws, and how close it is to importance sampling.

Each bundled run, cut at half its steps, is updated on the shipped population twice: as shipped
(importance sampling, unless its weights fail) and with the fallback forced
(``LiveForecaster(pareto_k_limit=-1)``: emcee's ensemble on the same one-run posterior). Reported
per run: the time of each update, the fallback's ESS, and the difference of the two answers'
parameter means in units of the importance posterior's sd.

Usage::

    python benchmarks/live_fallback.py --runs 12   # writes results/live_fallback.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table

RESULTS = HERE / "results"


def half_runs(table: Any, n_runs: int) -> list[tuple[str, Any]]:
    """``n_runs`` bundled runs spread over the table, each cut at half its steps: ``(run_id, prefix)``."""
    from bayesgrpo.evaluate.backtest.cuts import cut_points, prefix_table, run_points

    run_ids = table.run_ids[:: max(1, len(table.run_ids) // n_runs)][:n_runs]
    return [
        (run_id, prefix_table(table.select([run_id]), cut_points(run_points(table, run_id), 0.5).observed))
        for run_id in run_ids
    ]


def main() -> None:
    """Time both paths on cut bundled runs and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from bayesgrpo.model import laplace
    from bayesgrpo.model.datasets import bundled_population, load_bundled
    from bayesgrpo.questions.live import LiveForecaster

    population = bundled_population()
    shipped = LiveForecaster(population, random_seed=1)
    forced = LiveForecaster(population, random_seed=1, pareto_k_limit=-1.0)
    rows = []
    for run_id, prefix in half_runs(load_bundled(warn=False), args.runs):
        shipped.update(prefix)  # the population prior of this run, built once for both timings
        start = time.perf_counter()
        first = shipped.update(prefix)
        importance_s = time.perf_counter() - start
        start = time.perf_counter()
        second = forced.update(prefix)
        fallback_s = time.perf_counter() - start
        sd = first.posterior.theta.std(axis=0)
        shift = np.abs(second.posterior.theta.mean(axis=0) - first.posterior.theta.mean(axis=0)) / sd
        rows.append(
            {
                "run": run_id[:48],
                "points": int(first.posterior.n_points),
                "pareto_k": first.posterior.pareto_k,
                "shipped_path": first.method,
                "shipped_s": importance_s,
                "fallback_s": fallback_s,
                "fallback_ess": second.posterior.ess,
                "max_mean_shift_in_sd": float(shift.max()),
            }
        )
    frame = pd.DataFrame(rows)
    machine = machine_line()
    lines = [
        "# The live update's MCMC fallback",
        "",
        f"Command: `python benchmarks/live_fallback.py --runs {args.runs}`  ",
        f"Machine: {machine}.",
        "",
        "Each run cut at half its steps, updated on the shipped population as shipped and with the "
        f"fallback forced (emcee's ensemble, {laplace.ENSEMBLE_WALKERS} walkers, {laplace.ENSEMBLE_BURN} + "
        f"{laplace.ENSEMBLE_STEPS} steps). Times are whole updates (the run's population prior built "
        "before).",
        "",
        f"Fallback: median {frame['fallback_s'].median():.2f} s (slowest {frame['fallback_s'].max():.2f} s), "
        f"ESS {frame['fallback_ess'].min():.0f}-{frame['fallback_ess'].max():.0f}; as shipped: median "
        f"{1000 * frame['shipped_s'].median():.0f} ms. The two answers' parameter means differ by at most "
        f"{frame['max_mean_shift_in_sd'].max():.2f} posterior sd.",
        "",
        markdown_table(frame),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_fallback.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
