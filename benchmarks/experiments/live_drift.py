"""A wider live predictive band for runs without a stated range: a drift term, a range mixture.

The live backtest (``benchmarks/live_backtest.py``: leave one source out, no stated range, cuts
at 10/25/50%) finds the live update's 90% predictive band holding 68-80% of later logged points,
and carrying the last value forward holding 58% at the 10% cut: runs wander after a cut in ways no
saturating curve of the prefix foresees. This experiment adds to every predictive draw a drift
that grows like a random walk with the distance ahead: ``drift_sd * sqrt(dt) * z`` in units of
the run's normalising range (``CurveDraws.reward_scale``), ``dt`` the progress since the last
logged point (a share of the run's planned steps), ``z`` standard normal. The curve band, and so
every stop decision, is untouched.

A second variant widens the band where the live update is most sure of what it cannot know: the
whole range of a run without a stated range. The update normalises the run by a whole range
estimated from its prefix's range with the *median* share a prefix at that progress holds of its
run's range among the population's runs (``questions.live.prefix_placement``). The mixture
instead gives each draw the share of a random population run, and scales the draw's change from
the curve at the last logged step by the median share over that share (a run whose prefix holds
less of its range has more gain to come): ``range mixture``.

``drift_sd`` is chosen honestly: for each source, the value that brings the 90% coverage of the
*other* sources' points closest to 90% (leave one source out of the calibration too), and that
choice is scored on the held-out source. The same live updates serve every value (common random
numbers), so the table shows each value's effect alone.

Usage::

    python benchmarks/experiments/live_drift.py   # writes results/live_drift.md (~2 min)
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
from _loso import loso_populations
from _markdown import command_line, machine_line, markdown_table
from live_backtest import range_kinds, without_stated_range

RESULTS = HERE / "results"
BACKTEST_ROWS = BENCHMARKS / "results" / "live_backtest_forecast_runs.csv"
CUTS = (0.1, 0.25, 0.5)
DRIFT_SDS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
N_DRAWS = 1000
SEED = 0

logger = logging.getLogger("live_drift")


def held_out_draws(table, populations) -> list[dict]:
    """Each (run, cut): the live update's predictive draws of the held-out points, the points,
    their distance ahead, the run's normalising range and its logged range (the scores' unit).
    """
    from bayesgrpo.errors import LiveUpdateWarning
    from bayesgrpo.evaluate.backtest.cuts import (
        cut_points,
        planned_horizon,
        prefix_table,
        run_points,
        run_seed,
    )
    from bayesgrpo.questions.live import LiveForecaster

    forecasters: dict[int, LiveForecaster] = {}
    records = []
    for run_id in table.run_ids:
        population = populations[run_id]
        live = forecasters.setdefault(
            id(population), LiveForecaster(population, n_draws=N_DRAWS, random_seed=SEED)
        )
        run = table.select([run_id])
        points = run_points(table, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        logged_range = float(rewards.max() - rewards.min())
        if logged_range <= 0:
            continue
        horizon = planned_horizon(run)
        for fraction in CUTS:
            cut = cut_points(points, fraction)
            if len(cut.observed) < 3 or cut.held_out.empty:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LiveUpdateWarning)
                update = live.update(prefix_table(run, cut.observed), horizon=horizon)
            steps = cut.held_out["step"].to_numpy(dtype=float)
            seed = run_seed(SEED, run_id, fraction, "bayesgrpo")
            draws = update.reward_draws(steps, band="predictive", random_seed=seed)
            span = max(horizon - float(points["step"].iloc[0]), 1.0)
            records.append(
                {
                    "run_id": run_id,
                    "cut": fraction,
                    "draws": draws,
                    "y": cut.held_out["reward"].to_numpy(dtype=float),
                    "dt": (steps - update.step) / span,
                    "norm_range": float(np.asarray(update.curve_draws.reward_scale).ravel()[0]),
                    "logged_range": logged_range,
                    "z": np.random.default_rng(seed + 1).standard_normal(draws.shape),
                    "at_cut": update.reward_draws([update.step], band="curve")[:, 0],
                    "range_factor": range_factors(population.data, update, draws.shape[0], seed),
                }
            )
    return records


def range_factors(population_data, update, n: int, seed: int) -> np.ndarray:
    """Per draw, the median prefix share of the range over a random population run's share."""
    progress = float(update.data.t[0, update.data.mask[0]].max())
    own = np.array([source == "data" for source in population_data.bounds_source], dtype=bool)
    shares = []
    for i in np.flatnonzero(own):
        mask = population_data.mask[i]
        t, y = population_data.t[i, mask], population_data.y[i, mask]
        prefix = y[t <= progress]
        if prefix.size >= 2 and y.max() > y.min() and prefix.max() > prefix.min():
            shares.append(float(prefix.max() - prefix.min()) / float(y.max() - y.min()))
    if not shares:
        return np.ones(n)
    shares_array = np.array(shares)
    return np.median(shares_array) / np.random.default_rng(seed + 7).choice(shares_array, size=n)


def scored(records: list[dict], drift_sd: float, mixture: bool = False) -> pd.DataFrame:
    """Per (run, cut): coverage of the 50% and 90% bands, CRPS and final-reward error, with the
    drift and (``mixture``) the range mixture.
    """
    from bayesgrpo.evaluate import scores

    rows = []
    for r in records:
        draws = r["draws"]
        if mixture:
            at_cut = r["at_cut"][:, None]
            draws = at_cut + (draws - at_cut) * r["range_factor"][:, None]
        draws = draws + drift_sd * r["norm_range"] * np.sqrt(np.maximum(r["dt"], 0.0)) * r["z"]
        n_final = max(1, int(np.ceil(0.05 * len(r["y"]))))
        rows.append(
            {
                "run_id": r["run_id"],
                "cut": r["cut"],
                "drift_sd": drift_sd,
                "mixture": mixture,
                "cover50": float(scores.interval_coverage(draws, r["y"], 0.5).mean()),
                "cover90": float(scores.interval_coverage(draws, r["y"], 0.9).mean()),
                "crps": float(scores.crps_from_draws(draws, r["y"], r["logged_range"]).mean()),
                "final_abs_error": scores.final_reward_error(
                    draws[:, -n_final:], r["y"][-n_final:], r["logged_range"]
                ),
            }
        )
    return pd.DataFrame(rows)


def nested_choice(frame: pd.DataFrame, groups: dict[str, str]) -> pd.DataFrame:
    """For each source, the drift whose 90% coverage over the other sources (mean over their runs
    and the three cuts) is closest to 0.9; the held-out source's rows at that drift.
    """
    frame = frame.assign(source=frame["run_id"].map(groups))
    chosen = []
    for source, rows in frame.groupby("source"):
        others = frame[frame["source"] != source]
        coverage = others.groupby("drift_sd")["cover90"].mean()
        best = float((coverage - 0.9).abs().idxmin())
        chosen.append(rows[rows["drift_sd"] == best].assign(chosen_from_others=best))
    return pd.concat(chosen, ignore_index=True)


def summary(
    frame: pd.DataFrame, persistence: pd.DataFrame, kinds: dict[str, str], label: str
) -> pd.DataFrame:
    """Per cut: mean coverage, median CRPS, its ratio to persistence's on the same pairs, final error."""
    merged = frame.merge(persistence, on=["run_id", "cut"], how="inner")
    merged["kind"] = merged["run_id"].map(kinds)
    rows = []
    for subset, part in (
        ("all", merged),
        *((k, merged[merged["kind"] == k]) for k in ("stated", "unstated")),
    ):
        for cut, rows_cut in part.groupby("cut"):
            rows.append(
                {
                    "variant": label,
                    "runs": subset,
                    "cut": cut,
                    "n": len(rows_cut),
                    "cover50": rows_cut["cover50"].mean(),
                    "cover90": rows_cut["cover90"].mean(),
                    "crps_median": rows_cut["crps"].median(),
                    "crps_vs_persistence": rows_cut["crps"].median() / rows_cut["crps_persistence"].median(),
                    "final_err_median": rows_cut["final_abs_error"].median(),
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    """Run the live updates once, score every drift, choose it per source from the others, write."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from bayesgrpo.evaluate.backtest import source_groups
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    table = without_stated_range(bundled)
    kinds = range_kinds(bundled)
    groups = {run: source for source, runs in source_groups(bundled).items() for run in runs}
    records = held_out_draws(table, populations)
    logger.info("%d live updates in %.0f s", len(records), time.perf_counter() - start)
    frame = pd.concat([scored(records, sd) for sd in DRIFT_SDS], ignore_index=True)
    mixtures = {sd: scored(records, sd, mixture=True) for sd in (0.0, 0.1, 0.2)}
    backtest = pd.read_csv(BACKTEST_ROWS)
    persistence = backtest[backtest["method"] == "persistence"][["run_id", "cut", "crps"]].rename(
        columns={"crps": "crps_persistence"}
    )
    nested = nested_choice(frame, groups)
    table_rows = [
        summary(frame[frame["drift_sd"] == sd], persistence, kinds, f"drift_sd {sd:g}") for sd in DRIFT_SDS
    ]
    table_rows.append(summary(nested, persistence, kinds, "drift_sd chosen on the other sources"))
    table_rows += [
        summary(rows, persistence, kinds, f"range mixture, drift_sd {sd:g}") for sd, rows in mixtures.items()
    ]
    result = pd.concat(table_rows, ignore_index=True)
    choices = nested.groupby("source")["chosen_from_others"].first()
    above = pd.DataFrame(
        [
            {
                "cut": r["cut"],
                "runs": kinds[r["run_id"]],
                "points": len(r["y"]),
                "above_every_draw": int((r["draws"] < r["y"]).all(axis=0).sum()),
            }
            for r in records
        ]
    )
    above = above.groupby(["cut", "runs"], as_index=False)[["points", "above_every_draw"]].sum()
    above["share"] = above["above_every_draw"] / above["points"]
    RESULTS.mkdir(exist_ok=True)
    lines = [
        "# A drift term in the live predictive band",
        "",
        f"Command: `{command_line('experiments/live_drift.py', None)}`  ",
        f"Machine: {machine_line()}; {len(records)} live updates, "
        f"{time.perf_counter() - start:.0f} s in all.",
        "",
        (__doc__ or "").split("Usage::")[0].strip(),
        "",
        "Persistence's CRPS comes from `benchmarks/results/live_backtest_forecast_runs.csv` (the same "
        "runs and cuts). Targets of the live-path issue at every cut: cover90 0.88-0.92, median CRPS "
        "<= 0.85 x persistence.",
        "",
        f"Chosen on the other sources: drift_sd {choices.min():g} to {choices.max():g} "
        f"(median {choices.median():g}) over the {len(choices)} held-out sources.",
        "",
        markdown_table(result[result["runs"] == "all"].drop(columns="runs")),
        "",
        "## Later points above every one of the draws (as shipped, no drift)",
        "",
        markdown_table(above),
        "",
        "## By runs with and without a stated range in their metadata (never given to the update)",
        "",
        markdown_table(result[result["runs"] != "all"]),
        "",
    ]
    (RESULTS / "live_drift.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
