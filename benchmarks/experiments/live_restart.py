"""The live update started again from its most probable draw when its first mode is a local one.

The live update's Laplace fit starts its optimiser at the prior's mean. On a run cut mid-rise the
posterior can have two modes (the rise goes on, or it is levelling off), and the optimiser can
stop at the lesser one. The importance weights around it then fail (Pareto k above 0.7) and,
before 2026-11-28, the MCMC fallback started its walkers around that same mode and answered from
it. Since then :func:`bayesgrpo.model.laplace.condition_run` starts the fit again from the most
probable importance draw when that draw beats the mode by more than ``RESTART_MARGIN`` in log
posterior (and keeps the new mode only if it does too).

Here every update the stopping backtest makes under leave one source out (every 5% of each of the
60 bundled runs, each run's stated range given, seed 0, 1,000 draws: ``benchmarks/backtest.py
--split loso``) is made twice, with the restart and without it (``RESTART_MARGIN`` set to
infinity), and each update whose weights failed is listed: the path that answered, the log
posterior of the mode each started its draws from, and the forecast of the run's last step (5%,
50%, 95%) against the run's smoothed end.

Usage::

    python benchmarks/experiments/live_restart.py   # -> results/live_restart.md (about 4 minutes)
"""

from __future__ import annotations

import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations  # noqa: E402
from _markdown import markdown_table  # noqa: E402

RESULTS = HERE / "results"
CHECK_EVERY = 0.05


def updates_of(table, populations, restart: bool) -> pd.DataFrame:
    """One row per update: its path, Pareto k, the log posterior at the mode its draws came from,
    and its forecast of the run's last step.
    """
    import bayesgrpo.questions.live as live_module
    from bayesgrpo.evaluate.backtest import planned_horizon, run_points
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model import laplace
    from bayesgrpo.model.draws import reward_at

    conditioned = {}
    condition_run = live_module.condition_run

    def recording(prior, t, y, noise_scale, **kwargs):
        """``condition_run``, keeping what it was given (to score its mode)."""
        conditioned["args"] = (prior, t, y, noise_scale, kwargs["likelihood_weight"])
        return condition_run(prior, t, y, noise_scale, **kwargs)

    margin = laplace.RESTART_MARGIN
    laplace.RESTART_MARGIN = margin if restart else float("inf")
    live_module.condition_run = recording
    forecasters: dict[int, live_module.LiveForecaster] = {}
    rows = []
    try:
        for run_id in table.run_ids:
            population = populations[run_id]
            live = forecasters.setdefault(
                id(population), live_module.LiveForecaster(population, n_draws=1000, random_seed=0)
            )
            run = table.select([run_id])
            steps = run_points(table, run_id)["step"].to_numpy(dtype=float)
            grid = steps[0] + np.arange(1, round(1 / CHECK_EVERY)) * CHECK_EVERY * (steps[-1] - steps[0])
            index = np.searchsorted(steps, grid, side="right") - 1
            for now in np.unique(steps[index[(index >= 1) & (index < len(steps) - 1)]]):
                prefix = run.points[run.points["step"] <= now].reset_index(drop=True)
                update = live.update(
                    RunsTable(points=prefix, runs=run.runs, report=run.report), horizon=planned_horizon(run)
                )
                posterior = update.posterior
                prior, t, y, noise_scale, weight = conditioned["args"]
                at_mode = laplace.log_posterior(posterior.mode, prior, t, y, noise_scale, weight)[0]
                end = reward_at(update.curve_draws, np.array([update.horizon_step]))[:, 0, 0]
                rows.append(
                    {
                        "run_id": run_id,
                        "step": float(now),
                        "progress": float(now / steps[-1]),
                        "path": posterior.method,
                        "pareto_k": float(posterior.pareto_k),
                        "log_posterior_at_mode": float(at_mode),
                        "end_q05": float(np.quantile(end, 0.05)),
                        "end_q50": float(np.quantile(end, 0.5)),
                        "end_q95": float(np.quantile(end, 0.95)),
                    }
                )
    finally:
        laplace.RESTART_MARGIN = margin
        live_module.condition_run = condition_run
    return pd.DataFrame(rows)


def main() -> None:
    """Both passes, the updates whose answer changed, the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from bayesgrpo.evaluate.backtest import source_group
    from bayesgrpo.evaluate.backtest.stopping import scored_run
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    table = load_bundled(warn=False)
    populations = loso_populations(table)
    merged = updates_of(table, populations, restart=False).merge(
        updates_of(table, populations, restart=True),
        on=["run_id", "step", "progress"],
        suffixes=("_before", "_now"),
    )
    columns = ["path", "pareto_k", "log_posterior_at_mode", "end_q05", "end_q50", "end_q95"]
    same = np.all([np.isclose(merged[f"{c}_before"], merged[f"{c}_now"]) for c in columns[1:]], axis=0) & (
        merged["path_before"] == merged["path_now"]
    )
    failed = merged[merged["pareto_k_before"] > 0.7]
    sources = {row["run_id"]: source_group(row) for row in table.runs.to_dict("records")}
    changed = merged[~same]

    def quantiles(row, which: str) -> str:
        """The forecast end's 5%, 50% and 95% of one pass."""
        return " / ".join(f"{getattr(row, f'end_q{q}_{which}'):.3f}" for q in ("05", "50", "95"))

    rows = []
    for row in changed.itertuples(index=False):
        scored = scored_run(table, row.run_id, 0.05)
        rows.append(
            {
                "run": row.run_id,
                "progress": round(row.progress, 2),
                "before: path (k)": f"{row.path_before} ({row.pareto_k_before:.2f})",
                "now: path (k)": f"{row.path_now} ({row.pareto_k_now:.2f})",
                "log posterior at the mode, before / now": f"{row.log_posterior_at_mode_before:.1f} / "
                f"{row.log_posterior_at_mode_now:.1f}",
                "end before, 5/50/95%": quantiles(row, "before"),
                "end now, 5/50/95%": quantiles(row, "now"),
                "run's smoothed end": round(float(scored.smooth[-1]), 3),
            }
        )
    lines = [
        "# The live update started again from its most probable draw",
        "",
        "Command: `python benchmarks/experiments/live_restart.py` "
        f"({time.perf_counter() - start:.0f} s, 2 cores)",
        "",
        f"Every update of the leave-one-source-out stopping backtest's checks ({len(merged)}: every 5% of "
        "each of the 60 bundled runs, stated ranges given, seed 0, 1,000 draws), made without the restart "
        "(as before 2026-11-28) and with it. Without it the importance weights failed (Pareto k > 0.7) in "
        f"{len(failed)} updates, answered by the MCMC fallback; with it {len(changed)} answers changed "
        f"(every other update is the same), of {len(set(changed['run_id']))} runs of "
        f"{', '.join(sorted({sources[r] for r in changed['run_id']})) or 'no source'}, listed below. "
        "The forecast is of the run's last step (its curve: 5% / 50% / 95%), "
        "against the run's smoothed end (centred mean over 5% of its points); the log posterior is of "
        "the update's own data, at the mode its draws were made around.",
        "",
        markdown_table(pd.DataFrame(rows)) if rows else "(no update changed)",
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_restart.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
