"""The live path given the span of a user's earlier runs of the same recipe (``update(reach=...)``).

The live backtest (leave one source out, no stated range, cuts 10/25/50%) places a run's whole
range from its prefix alone; a run flat at its start is then normalised by little more than its
noise, and a late rise lies outside every draw (the misses of ``live_drift.md``,
``live_range.md``). A user who tunes a recipe often has earlier runs of it: the same reward, logged
to the end. ``LiveForecaster.update(reach=(low, high))`` widens the run's whole range to cover
what those runs logged (the Optuna pruner passes its finished trials' span so). Here every run of
a source with at least two runs is updated twice at each cut, on the same leave-one-source-out
population (no run of its source in it) and without its stated range: as shipped, and with
``reach`` = the lowest and highest logged reward of the *other* runs of its source (earlier runs of
the recipe, whole). Scored as the live backtest scores (predictive band, units of the run's logged
range).

Usage::

    python benchmarks/experiments/live_sibling_reach.py   # writes results/live_sibling_reach.md
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations
from _markdown import command_line, machine_line, markdown_table
from live_backtest import range_kinds, without_stated_range

RESULTS = HERE / "results"
CUTS = (0.1, 0.25, 0.5)
N_DRAWS = 1000
SEED = 0


def rows(table, populations, groups: dict[str, list[str]]) -> pd.DataFrame:
    """Per (run, cut, variant): coverage of the 50% and 90% predictive bands, CRPS, final error."""
    from bayesgrpo.errors import LiveUpdateWarning
    from bayesgrpo.evaluate import scores
    from bayesgrpo.evaluate.backtest.cuts import (
        cut_points,
        planned_horizon,
        prefix_table,
        run_points,
        run_seed,
    )
    from bayesgrpo.questions.live import LiveForecaster

    forecasters: dict[int, LiveForecaster] = {}
    out = []
    for source, run_ids in groups.items():
        if len(run_ids) < 2:
            continue
        logged = {r: run_points(table, r)["reward"].to_numpy(dtype=float) for r in run_ids}
        for run_id in run_ids:
            siblings = np.concatenate([logged[r] for r in run_ids if r != run_id])
            siblings = siblings[np.isfinite(siblings)]
            reach = (float(siblings.min()), float(siblings.max()))
            population = populations[run_id]
            live = forecasters.setdefault(
                id(population), LiveForecaster(population, n_draws=N_DRAWS, random_seed=SEED)
            )
            run, points = table.select([run_id]), run_points(table, run_id)
            rewards = points["reward"].to_numpy(dtype=float)
            logged_range = float(rewards.max() - rewards.min())
            if logged_range <= 0:
                continue
            horizon = planned_horizon(run)
            for fraction in CUTS:
                cut = cut_points(points, fraction)
                if len(cut.observed) < 3 or cut.held_out.empty:
                    continue
                y = cut.held_out["reward"].to_numpy(dtype=float)
                steps = cut.held_out["step"].to_numpy(dtype=float)
                n_final = max(1, int(np.ceil(0.05 * len(y))))
                for variant, given in (("as shipped", None), ("siblings' span", reach)):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", LiveUpdateWarning)
                        update = live.update(prefix_table(run, cut.observed), horizon=horizon, reach=given)
                    seed = run_seed(SEED, run_id, fraction, "bayesgrpo")
                    draws = update.reward_draws(steps, band="predictive", random_seed=seed)
                    out.append(
                        {
                            "source": source,
                            "run_id": run_id,
                            "cut": fraction,
                            "variant": variant,
                            "cover50": float(scores.interval_coverage(draws, y, 0.5).mean()),
                            "cover90": float(scores.interval_coverage(draws, y, 0.9).mean()),
                            "crps": float(scores.crps_from_draws(draws, y, logged_range).mean()),
                            "final_abs_error": scores.final_reward_error(
                                draws[:, -n_final:], y[-n_final:], logged_range
                            ),
                            "above_all": float((y > draws.max(axis=0)).mean()),
                        }
                    )
    return pd.DataFrame(out)


def summary(frame: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    """Per variant, kind of run and cut: mean coverage, median CRPS and final error."""
    frame = frame.assign(kind=frame["run_id"].map(kinds))
    parts = [frame.assign(kind="all"), frame]
    return (
        pd.concat(parts, ignore_index=True)
        .groupby(["kind", "cut", "variant"], sort=True)
        .agg(
            n=("run_id", "size"),
            cover50=("cover50", "mean"),
            cover90=("cover90", "mean"),
            above_all=("above_all", "mean"),
            crps_median=("crps", "median"),
            final_err_median=("final_abs_error", "median"),
        )
        .reset_index()
    )


def main(argv: list[str] | None = None) -> None:
    """Both variants on every run with siblings; write the table."""
    from bayesgrpo.evaluate.backtest import source_groups
    from bayesgrpo.model.datasets import load_bundled

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    table = without_stated_range(bundled)
    frame = rows(table, populations, source_groups(bundled))
    seconds = time.perf_counter() - start
    lines = [
        "# The live path given the span of earlier runs of the same recipe",
        "",
        f"Command: `{command_line('experiments/live_sibling_reach.py', argv)}`  ",
        f"Machine: {machine_line()}; {seconds:.0f} s.",
        "",
        f"{frame['run_id'].nunique()} bundled runs of {frame['source'].nunique()} sources with two runs or "
        "more, each updated on the leave-one-source-out population without its stated range, as shipped "
        "and with `reach` = the span of the other runs of its source. `above_all`: the share of later "
        "points above every draw. CRPS and final error in units of the run's logged range.",
        "",
        markdown_table(summary(frame, range_kinds(bundled))),
        "",
    ]
    (RESULTS / "live_sibling_reach.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
