"""The live update's predictive band pooled with persistence, the weight learnt on other sources.

At the 50% cut of the runs without a stated range the live update's median CRPS is 1.10 x
persistence's (`benchmarks/results/live_backtest.md`), run for run about a tie (the median of the
per-run ratios 0.99), and each loses badly where the other is right: a run that jumps late is
followed by persistence and not by the curve, a run still rising by the curve and not by
persistence. A linear pool of the two predictive distributions, ``w`` persistence and ``1 - w``
the live update, is the standard way to combine such forecasts (stacking of predictive
distributions, Yao, Vehtari, Simpson & Gelman 2018): its CRPS is the pooled CRPS less the energy
distance between the two, so it gains exactly where they disagree, and its band is wider there.

The weight is learnt without the held-out run's source, as the live path would learn it from the
population: per cut, the ``w`` on a grid of 0, 0.05, ..., 1 with the lowest mean CRPS over the
runs of the other sources (each run weighted equally). Both leave-one-source-out splits, the
backtests' own forecasters and seeds (so that ``w = 0`` is the backtest's bayesgrpo row and
``w = 1`` its persistence row, checked):

- ``no stated range``: the live backtest's split (the live-path issue's);
- ``stated range given``: the forecast backtest's (the calibration issue's).

The pool's draws are the first ``round(w S)`` of persistence's ``S`` draws and the last
``S - round(w S)`` of the live update's (each forecast's draws are independent, so this is a
draw of the mixture). Per-run scores for every ``w`` are cached in ``benchmarks/_scratch/live_pool``.

Usage::

    python benchmarks/experiments/live_pool.py    # -> results/live_pool.md (about 8 min, cached)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
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
from live_backtest import code_hash, range_kinds, without_stated_range  # noqa: E402

RESULTS = HERE / "results"
SCRATCH = BENCHMARKS / "_scratch" / "live_pool"
REFERENCE = {
    "no stated range": BENCHMARKS / "results" / "live_backtest_forecast_runs.csv",
    "stated range given": BENCHMARKS / "results" / "loso" / "backtest_forecast_runs.csv",
}
CUTS = (0.1, 0.25, 0.5)
N_DRAWS = 1000
WEIGHTS = tuple(np.round(np.linspace(0.0, 1.0, 21), 2))

logger = logging.getLogger("live_pool")


def pooled(bayes: np.ndarray, persistence: np.ndarray, weight: float) -> np.ndarray:
    """A draw of the linear pool: ``weight`` persistence, ``1 - weight`` the live update."""
    n_persistence = round(weight * persistence.shape[0])
    return np.concatenate([persistence[:n_persistence], bayes[n_persistence:]], axis=0)


def run_rows(table, forecasters, run_id: str, source: str, kind: str) -> list[dict]:
    """One run's scores at every cut and weight (the backtests' seeds and scoring)."""
    from bayesgrpo.evaluate.backtest.cuts import (
        FINAL_FRACTION,
        MIN_OBSERVED,
        cut_points,
        run_points,
        run_seed,
    )
    from bayesgrpo.evaluate.backtest.forecast import _baseline_draws, _bayes_draws, score_forecast

    points = run_points(table, run_id)
    rewards = points["reward"].to_numpy(dtype=float)
    reward_range = float(rewards.max() - rewards.min())
    n_final_run = max(1, math.ceil(FINAL_FRACTION * len(points)))
    run = table.select([run_id])
    rows = []
    for fraction in CUTS:
        cut = cut_points(points, fraction)
        if len(cut.observed) < MIN_OBSERVED or cut.held_out.empty:
            continue
        target = cut.held_out["step"].to_numpy(dtype=float)
        y = cut.held_out["reward"].to_numpy(dtype=float)
        bayes, status, path, _ = _bayes_draws(
            forecasters[run_id], run, cut, target, run_seed(0, run_id, fraction, "bayesgrpo"), fraction
        )
        persistence, _ = _baseline_draws(
            "persistence", cut, target, N_DRAWS, run_seed(0, run_id, fraction, "persistence"), {}
        )
        for weight in WEIGHTS:
            scored = score_forecast(
                pooled(bayes, persistence, weight), y, reward_range, min(n_final_run, y.size)
            )
            rows.append(
                {
                    "run_id": run_id,
                    "source": source,
                    "range": kind,
                    "cut": fraction,
                    "weight": weight,
                    "path": path,
                    "status": status,
                    **scored,
                }
            )
    return rows


def split_rows(table, populations, split: str, kinds: dict[str, str]) -> pd.DataFrame:
    """Every run's rows of one split, cached per run."""
    from bayesgrpo.evaluate.backtest import source_groups
    from bayesgrpo.evaluate.backtest.forecast import live_forecasters

    sources = {run: source for source, runs in source_groups(table).items() for run in runs}
    key = json.dumps({"split": split, "code": code_hash(), "cuts": CUTS, "weights": WEIGHTS}, sort_keys=True)
    folder = SCRATCH / hashlib.sha256(key.encode()).hexdigest()[:12]
    folder.mkdir(parents=True, exist_ok=True)
    # seeded as each backtest seeds them: the live backtest asks one run at a time, the forecast
    # backtest the whole table
    if split == "no stated range":
        forecasters = {}
        for run_id in table.run_ids:
            forecasters |= live_forecasters({run_id: populations[run_id]}, [run_id], N_DRAWS, 0)
    else:
        forecasters = live_forecasters(populations, list(table.run_ids), N_DRAWS, 0)
    frames = []
    for run_id in table.run_ids:
        path = folder / f"{hashlib.sha256(run_id.encode()).hexdigest()[:16]}.csv"
        if not path.exists():
            start = time.perf_counter()
            pd.DataFrame(run_rows(table, forecasters, run_id, sources[run_id], kinds[run_id])).to_csv(
                path, index=False
            )
            logger.info("%s, %s: %.1f s", split, run_id, time.perf_counter() - start)
        frames.append(pd.read_csv(path))
    return pd.concat(frames, ignore_index=True)


def cross_fitted(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's row at the weight learnt on the other sources' runs at its cut."""
    chosen = []
    for (source, cut), part in frame.groupby(["source", "cut"]):
        others = frame[(frame["source"] != source) & (frame["cut"] == cut)]
        weight = others.groupby("weight")["crps"].mean().idxmin()
        chosen.append(part[part["weight"] == weight].assign(learnt_weight=weight))
    return pd.concat(chosen, ignore_index=True)


def check_against_backtest(frame: pd.DataFrame, split: str) -> float:
    """The largest difference of the ``w = 0`` and ``w = 1`` rows' CRPS from the backtest's."""
    reference = pd.read_csv(REFERENCE[split]).set_index(["run_id", "cut", "method"])["crps"]
    worst = 0.0
    for weight, method in ((0.0, "bayesgrpo"), (1.0, "persistence")):
        mine = frame[frame["weight"] == weight].set_index(["run_id", "cut"])["crps"]
        theirs = reference.xs(method, level="method").reindex(mine.index)
        worst = max(worst, float((mine - theirs).abs().max()))
    return worst


def main() -> None:
    """Score every weight on both splits, learn the weights across sources, write the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    kinds = range_kinds(bundled)
    tables = {"no stated range": without_stated_range(bundled), "stated range given": bundled}
    rows, weights, checks = [], [], {}
    for split, table in tables.items():
        frame = split_rows(table, populations, split, kinds)
        checks[split] = check_against_backtest(frame, split)
        persistence = frame[frame["weight"] == 1.0].set_index(["run_id", "cut"])["crps"]
        learnt = cross_fitted(frame)
        weights.append(
            learnt.groupby("cut")["learnt_weight"]
            .agg(["min", "median", "max"])
            .reset_index()
            .assign(split=split)
        )
        variants = {
            "live update (w = 0, as shipped)": frame[frame["weight"] == 0.0],
            "pool, w learnt on other sources": learnt,
            "pool, w = 0.5": frame[frame["weight"] == 0.5],
            "persistence (w = 1)": frame[frame["weight"] == 1.0],
        }
        for label, at_weight in variants.items():
            for kind in ("all", "unstated", "stated"):
                part = at_weight if kind == "all" else at_weight[at_weight["range"] == kind]
                for cut, at in part.groupby("cut"):
                    index = pd.MultiIndex.from_arrays([at["run_id"], at["cut"]])
                    rows.append(
                        {
                            "split": split,
                            "forecast": label,
                            "runs": kind,
                            "cut": cut,
                            "n": len(at),
                            "cover50": at["cover50"].mean(),
                            "cover90": at["cover90"].mean(),
                            "crps_median": at["crps"].median(),
                            "vs_persistence": at["crps"].median() / persistence.reindex(index).median(),
                            "crps_mean": at["crps"].mean(),
                            "final_error_median": at["final_abs_error"].median(),
                        }
                    )
    summary = pd.DataFrame(rows)
    learnt_weights = pd.concat(weights, ignore_index=True)[["split", "cut", "min", "median", "max"]]
    lines = [
        "# The live update pooled with persistence (leave one source out)",
        "",
        "Command: `python benchmarks/experiments/live_pool.py` (after `python benchmarks/live_backtest.py` "
        f"and `python benchmarks/backtest.py --split loso`; {time.perf_counter() - start:.0f} s, 2 cores; "
        f"code {code_hash()})",
        "",
        "60 bundled runs, each updated by the population fitted without its source at 10/25/50% of its "
        "steps, with the backtests' own forecasters and seeds (largest CRPS difference of the w = 0 and "
        "w = 1 rows from the backtests' bayesgrpo and persistence rows: "
        + ", ".join(f"{split} {value:.1e}" for split, value in checks.items())
        + "). The pool's weight `w` on persistence is learnt per cut on the runs of the other sources "
        "(lowest mean CRPS). cover50/cover90: mean over runs of the share of later points in the band; "
        "crps: a run's mean CRPS in units of its logged range, median / mean over runs; vs_persistence: "
        "median CRPS over persistence's median on the same runs.",
        "",
        markdown_table(summary),
        "",
        "## The learnt weights (over the held-out sources)",
        "",
        markdown_table(learnt_weights),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "live_pool.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
