"""Issue 25: stop decisions on an update whose latest points are pooled into one.

``stop_confirmation.py`` and ``stop_predictive.py`` found that a plateau stop lands in a dip because
the live update *fits* the dip: the latest points bend the curve flat, and the rule reads the
bent curve. Here every update used for a stop decision first pools the run's points of the latest
``POOL_SHARE`` of its horizon into one point (their mean reward at the last logged step), so a dip
bends the curve as one point would. :class:`PooledForecaster` does it around
``LiveForecaster.update``; nothing in the package changes. The plateau rules (k = 1, 2 with
``Confirmed``) and the fixed budgets are run through the stopping backtest, pooled and not (the
same seeds), on the bundled runs under leave one source out and on the simulated runs of known
truth (``stopping_simulated.py``, 16 a shape), with and without a stated range. Measures as
``stop_confirmation.py``.

Usage::

    python benchmarks/experiments/stop_pooled.py   # writes results/stop_pooled.md (about 10 min)
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
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from _loso import loso_populations
from _markdown import machine_line, markdown_table
from stop_confirmation import summary
from stopping_simulated import dip_at, runs_table, scored_on_truth, simulate

from bayesgrpo.logs.table import RunsTable
from bayesgrpo.questions.live import LiveForecaster

RESULTS = HERE / "results"
#: Share of the horizon whose latest points are pooled into one.
POOL_SHARE = 0.05


class PooledForecaster(LiveForecaster):
    """A live forecaster whose updates see the run's latest ``POOL_SHARE`` of its horizon as one point."""

    pool_share: float = 0.0

    def update(self, run: RunsTable, *, horizon: float | None = None):  # type: ignore[override]
        """The update of ``run`` with its latest points pooled (unchanged when ``pool_share`` is 0)."""
        points = run.points[np.isfinite(run.points["reward"].to_numpy(dtype=float))].sort_values("step")
        if self.pool_share > 0 and horizon is not None and len(points) > 5:
            last = float(points["step"].iloc[-1])
            recent = points["step"] > last - self.pool_share * float(horizon)
            if 2 <= int(recent.sum()) < len(points) - 2:
                pooled = points[recent].iloc[[-1]].copy()
                pooled["reward"] = float(points.loc[recent, "reward"].mean())
                run = RunsTable(
                    points=pd.concat([points[~recent], pooled], ignore_index=True),
                    runs=run.runs,
                    report=run.report,
                )
        return super().update(run, horizon=horizon)


def rules() -> dict:
    """Plateau rules at k = 1, 2 and the fixed budgets."""
    from bayesgrpo.evaluate.backtest import FixedFraction
    from bayesgrpo.questions.stopping import Confirmed, PlateauRule

    out: dict = {f"fixed {f}": FixedFraction(f) for f in (0.5, 0.6)}
    for eps in (0.01, 0.02, 0.03):
        for prob in (0.8, 0.9):
            for k in (1, 2):
                out[f"plateau eps={eps} p={prob} k={k}"] = Confirmed(PlateauRule(eps, prob, relative=True), k)
    return out


def forecasters(populations: dict, run_ids, share: float) -> dict:
    """One forecaster per distinct population, pooling ``share``, seeded as the stopping backtest
    seeds its own (so that the rows ``as shipped`` equal ``stop_confirmation_loso.md``'s).
    """
    from bayesgrpo.evaluate.backtest.cuts import run_seed

    made: dict[int, PooledForecaster] = {}
    out = {}
    for run_id in run_ids:  # the stopping backtest's order, which its seeds follow
        population = populations[run_id]
        if id(population) not in made:
            seed = run_seed(0, "live", len(made))
            forecaster = PooledForecaster(population, n_draws=1000, random_seed=seed)
            forecaster.pool_share = share
            made[id(population)] = forecaster
        out[run_id] = made[id(population)]
    return out


def main() -> None:
    """Both sets of runs, pooled and not; the tables."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from bayesgrpo.evaluate.backtest import run_points, stopping_backtest
    from bayesgrpo.model.datasets import bundled_population, load_bundled
    from bayesgrpo.questions.live import stated_reward_range

    start = time.perf_counter()
    sections = []
    bundled = load_bundled(warn=False)
    loso = loso_populations(bundled)
    stated = {r["run_id"]: stated_reward_range(r) is not None for r in bundled.runs.to_dict("records")}
    points_sim, truth, runs = simulate(16, 0)
    shipped = bundled_population()
    for share in (0.0, POOL_SHARE):
        label = f"latest {share:.0%} pooled" if share else "as shipped"
        stops = stopping_backtest(
            bundled, forecasters(loso, bundled.run_ids, share), rules(), 0.05, random_seed=0
        )
        stops["dip"] = [
            dip_at(
                *(run_points(bundled, r.run_id)[c].to_numpy(float) for c in ("step", "reward")), r.stop_step
            )
            for r in stops.itertuples(index=False)
        ]
        stops["stated"] = stops["run_id"].map(stated)
        for is_stated, part in stops.groupby("stated"):
            kind = "stated range" if is_stated else "no stated range"
            sections += [
                f"## Bundled runs, {kind}, {label}",
                "",
                markdown_table(summary(part, "reward_vs_end")),
                "",
            ]
        for is_stated in (False, True):
            table = runs_table(points_sim, runs, is_stated)
            population = dict.fromkeys(table.run_ids, shipped)
            found = stopping_backtest(
                table, forecasters(population, table.run_ids, share), rules(), 0.05, random_seed=0
            )
            scored = scored_on_truth(found, points_sim, truth)
            kind = "stated range" if is_stated else "no stated range"
            sections += [
                f"## Simulated runs ({len(runs)}, true curve), {kind}, {label}",
                "",
                markdown_table(summary(scored, "vs_end")),
                "",
            ]
    lines = [
        "# Stop decisions on an update whose latest points are pooled into one (issue 25)",
        "",
        "Command: `python benchmarks/experiments/stop_pooled.py`  ",
        f"Machine: {machine_line()}; {time.perf_counter() - start:.0f} s (serial).",
        "",
        (
            f"`latest {POOL_SHARE:.0%} pooled`: every update a rule decides on sees the run's points "
            f"of the latest {POOL_SHARE:.0%} of its horizon as one point (their mean at the last "
            "logged step); `as shipped`: the same forecasters (same seeds) without pooling. Bundled "
            "runs: populations fitted without the run's source; simulated runs: the shipped "
            "population. Columns as `stop_confirmation.md` (vs_end: reward given up against the "
            "run's end, bundled: smoothed logged reward, simulated: the true curve)."
        ),
        "",
        *sections,
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "stop_pooled.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
