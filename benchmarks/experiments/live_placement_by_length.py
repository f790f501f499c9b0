"""The estimated range placed by the population's runs of a similar length
(``LiveForecaster.placement_neighbours``).

A run without a stated range is normalised by the whole range its prefix implies: the prefix's
range over the median share of their whole range the population's own-range runs had spanned at
the same progress (``bayesgrpo.questions.live.prefix_placement``). On the bundled runs that share
depends on the run's length: at 10% of a run the 21 notebook runs planned for at most 150 steps had
spanned a median 94% of their whole range, the 15 longer ones 58% (at 25%: 100% against 60%). Read
from all of them, a long run's range is estimated too narrow early (its curve cannot climb where it
goes, ``live_long_headroom.py``) and a short run's too wide. Here the share is read from the
``k`` runs of the nearest planned steps (log scale), each run updated by the population fitted
without its source (so its own source's runs never place it), and scored on its later points.

Usage::

    python benchmarks/_loso.py                                    # the populations (once)
    python benchmarks/experiments/live_placement_by_length.py     # -> results/live_placement_by_length.md
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
sys.path.insert(0, str(HERE))
from _loso import loso_populations  # noqa: E402
from _markdown import markdown_table  # noqa: E402
from live_band_early import LONG_RUN_STEPS, planned_steps  # noqa: E402
from live_band_stretch import LEVELS, per_run_scores  # noqa: E402

RESULTS = HERE / "results"
#: Runs the share is read from (0: all of the population's own-range runs, the default).
NEIGHBOURS = (0, 5, 8, 12, 16)
CUTS = (0.1, 0.25, 0.5)


def scored_variants(
    cuts, variants: Mapping[Any, Mapping[str, Any]], column: str, seed: int, n_draws: int
) -> pd.DataFrame:
    """Per run, cut and variant: the live update's 99 quantiles scored on the later points, with the
    same points' persistence CRPS (the last logged reward carried forward with the prefix's own
    spread, as the live backtest's persistence).

    Parameters
    ----------
    cuts : sequence of float
    variants : mapping of value to mapping
        ``value -> LiveForecaster fields`` each update is made with (``value`` fills ``column``).
    column : str
    seed, n_draws : int

    Returns
    -------
    DataFrame
        One row per run, cut and variant (``length``: ``long`` or ``short``, planned steps above
        :data:`LONG_RUN_STEPS` or not); runs read as a score on 0 .. 1 are left out.
    """
    from live_backtest import without_stated_range

    from bayesgrpo.evaluate.backtest import cut_points, live_forecasters, planned_horizon, source_group
    from bayesgrpo.evaluate.backtest.cuts import prefix_table, run_points
    from bayesgrpo.evaluate.baselines import forecast_persistence
    from bayesgrpo.evaluate.scores import crps_from_draws
    from bayesgrpo.model.datasets import load_bundled

    bundled = load_bundled(warn=False)
    table = without_stated_range(bundled)
    sources = {str(row["run_id"]): source_group(row) for row in bundled.runs.to_dict("records")}
    lives = live_forecasters(loso_populations(bundled), table.run_ids, n_draws, seed)
    frames = []
    for run_id in table.run_ids:
        length = "long" if planned_steps()[run_id] > LONG_RUN_STEPS else "short"
        run = table.select([run_id])
        points = run_points(run, run_id)
        spread = float(points["reward"].max() - points["reward"].min())
        for cut in cuts:
            cut_at = cut_points(points, cut)
            if cut_at.held_out.empty or len(cut_at.observed) < 5:
                continue
            steps = cut_at.held_out["step"].to_numpy(dtype=float)
            y = cut_at.held_out["reward"].to_numpy(dtype=float) / spread
            persistence = forecast_persistence(
                cut_at.observed["step"].to_numpy(dtype=float),
                cut_at.observed["reward"].to_numpy(dtype=float),
                steps,
                n_draws=n_draws,
                random_seed=seed,
            )
            persistence_crps = float(np.mean(crps_from_draws(persistence.draws / spread, y)))
            for value, fields in variants.items():
                live = dataclasses.replace(lives[run_id], **fields)
                update = live.update(prefix_table(run, cut_at.observed), horizon=planned_horizon(run))
                if update.reward_range[2] != "estimated":
                    break  # read as a score on 0 .. 1: no estimated range to place
                draws = update.reward_draws(steps, band="predictive")
                q = np.quantile(draws, LEVELS, axis=0).T / spread
                frame = pd.DataFrame(q, columns=[f"q{i}" for i in range(len(LEVELS))])
                scored = per_run_scores(
                    frame.assign(run_id=run_id, rising=False, range="unstated", y=y), q
                ).assign(
                    cut=cut,
                    length=length,
                    source=sources[run_id],
                    below_median=float(np.mean(y < q[:, 49])),
                    persistence_crps=persistence_crps,
                    **{column: value},
                )
                frames.append(scored)
    return pd.concat(frames, ignore_index=True)


def summarise(scored: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Coverage, share below the median, CRPS (median, mean, median against persistence)."""
    scored = scored.assign(vs_persistence=scored["crps"] / scored["persistence_crps"])
    return (
        scored.groupby(by)
        .agg(
            runs=("run_id", "nunique"),
            cover50=("cover50", "mean"),
            cover90=("cover90", "mean"),
            below_median=("below_median", "mean"),
            crps_median=("crps", "median"),
            crps_mean=("crps", "mean"),
            vs_persistence_median=("vs_persistence", "median"),
        )
        .reset_index()
    )


def cross_fitted_choice(scored: pd.DataFrame) -> pd.DataFrame:
    """Per cut: each source's runs scored at the neighbour count with the lowest mean CRPS on the
    other sources' runs at that cut (what a count chosen on these runs would give a source it never
    saw), against the default (all runs).
    """
    rows = []
    for cut, part in scored.groupby("cut"):
        chosen = []
        for source, own in part.groupby("source"):
            others = part[part["source"] != source]
            best = others.groupby("neighbours")["crps"].mean().idxmin()
            chosen.append(own[own["neighbours"] == best].assign(chosen=best))
        picked = pd.concat(chosen)
        drawn = part[part["neighbours"] == 0]
        for length, rows_of in (("all", None), ("long", "long"), ("short", "short")):
            a = drawn if rows_of is None else drawn[drawn["length"] == rows_of]
            b = picked if rows_of is None else picked[picked["length"] == rows_of]
            rows.append(
                {
                    "cut": cut,
                    "length": length,
                    "runs": b["run_id"].nunique(),
                    "k chosen (over sources)": "{:g}-{:g}".format(b["chosen"].min(), b["chosen"].max()),
                    "cover90: all -> chosen": f"{a['cover90'].mean():.3f} -> {b['cover90'].mean():.3f}",
                    "cover50": f"{a['cover50'].mean():.3f} -> {b['cover50'].mean():.3f}",
                    "median CRPS": f"{a['crps'].median():.3f} -> {b['crps'].median():.3f}",
                    "mean CRPS": f"{a['crps'].mean():.3f} -> {b['crps'].mean():.3f}",
                }
            )
    return pd.DataFrame(rows)


def main() -> None:
    """Update the runs at each cut and neighbour count, score, write the report."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    variants = {k: {"placement_neighbours": k or None} for k in NEIGHBOURS}
    scored = scored_variants(CUTS, variants, "neighbours", args.seed, args.draws)
    lines = [
        "# The estimated range placed by runs of a similar length",
        "",
        "Command: `python benchmarks/experiments/live_placement_by_length.py` "
        f"({time.perf_counter() - start:.0f} s; seed {args.seed}, {args.draws} draws). The bundled runs "
        "given no range whose update estimates it, each updated by the population fitted without its "
        "source, `LiveForecaster(placement_neighbours=k)` (k = 0: the share read from all the "
        "population's own-range runs, the default before this experiment; 12 is the default since). "
        "Scored on the later points in units of the run's "
        "logged range: predictive 50% / 90% coverage and share of later points below the median (mean "
        "over runs), CRPS (99 quantiles; median and mean over runs) and its median ratio to "
        f"persistence's on the same points. `long`: planned for more than {LONG_RUN_STEPS:g} steps.",
        "",
        "## By length",
        "",
        markdown_table(summarise(scored, ["length", "cut", "neighbours"])),
        "",
        "## All runs without a stated range",
        "",
        markdown_table(summarise(scored, ["cut", "neighbours"])),
        "",
        "## The count chosen without the run's source",
        "",
        "Per cut, each source's runs get the count of the grid with the lowest mean CRPS on the other "
        "sources' runs (long and short together).",
        "",
        markdown_table(cross_fitted_choice(scored)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    scored.to_csv(RESULTS / "live_placement_by_length_runs.csv", index=False)
    (RESULTS / "live_placement_by_length.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
