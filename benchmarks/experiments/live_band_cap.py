"""The live band's mid-run stretch held inside the reward range the update uses.

The live update stretches its predictive band's spread about the median in the middle of a run
without a stated range (``bayesgrpo/questions/band_stretch.py``; x8.25 / x4.5 / x2.2 above at 40 /
50 / 60% of a run still rising). Tried as a user would, on the first half of the Unsloth Qwen3 4B
notebook run (`bayesgrpo stop half.csv --horizon 312`), the answer reads "reward at step 312:
-6.02 [-7.23, 5.63]" with eps "a share of the reward range -10.8 .. -1.75": the band's top lies
7.4 above the top of the range the update itself uses, where the curve cannot go (the curve's
levels are inside those bounds) and the run never went (it ended near -5.7).

Variant: the stretch moves a quantile no further out than the range's bound on its side (a
quantile already beyond it as drawn stays where it was): ``min(stretched, max(drawn, upper))``
above the median, ``max(stretched, min(drawn, lower))`` below. A monotone map of the draws, like
the stretch. Scored on the forecasts ``benchmarks/live_band_stretch.py`` caches (the live path's
updates, no range given, at 40 / 50 / 60% of each run), with the factors learnt without each
run's source (what the backtests score), as drawn, stretched, and stretched then held inside the
range; the range of each update is read from the same update run again (its bounds do not depend
on the random seed).

Usage::

    python benchmarks/live_band_stretch.py                 # the cached forecasts (once, ~3 min)
    python benchmarks/experiments/live_band_cap.py         # -> results/live_band_cap.md
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
from _loso import loso_populations  # noqa: E402
from _markdown import markdown_table  # noqa: E402
from live_band_stretch import (  # noqa: E402
    KNOTS,
    cached_forecasts,
    cross_fitted_stretches,
    per_run_scores,
    stretch_factors,
    stretched_quantiles,
    summary_rows,
)

RESULTS = HERE / "results"


def update_bounds() -> pd.DataFrame:
    """Per run and knot: the lower and upper reward bounds the live update used, in units of the
    run's logged range (as the cached quantiles are).
    """
    from live_backtest import without_stated_range

    from bayesgrpo.evaluate.backtest import cut_points, live_forecasters, planned_horizon
    from bayesgrpo.evaluate.backtest.cuts import prefix_table, run_points
    from bayesgrpo.model.datasets import load_bundled

    bundled = load_bundled(warn=False)
    table = without_stated_range(bundled)
    populations = loso_populations(bundled)
    lives = live_forecasters(populations, table.run_ids, 200, 0, band_stretch=dict.fromkeys(table.run_ids))
    rows = []
    for run_id in table.run_ids:
        run = table.select([run_id])
        points = run_points(run, run_id)
        spread = float(points["reward"].max() - points["reward"].min())
        for cut in KNOTS:
            cut_at = cut_points(points, cut)
            if cut_at.held_out.empty or len(cut_at.observed) < 5 or spread <= 0:
                continue
            update = lives[run_id].update(prefix_table(run, cut_at.observed), horizon=planned_horizon(run))
            assert update.data is not None
            rows.append(
                {
                    "run_id": run_id,
                    "cut": cut,
                    "lower": float(update.data.lower[0]) / spread,
                    "upper": float(update.data.upper[0]) / spread,
                }
            )
    return pd.DataFrame(rows)


def held_inside(drawn: np.ndarray, stretched: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Stretched quantiles moved no further out than the bound on their side (a drawn quantile
    already beyond it stays).
    """
    median = drawn[:, [49]]
    above = np.minimum(stretched, np.maximum(drawn, upper[:, None]))
    below = np.maximum(stretched, np.minimum(drawn, lower[:, None]))
    return np.where(drawn >= median, above, below)


def main() -> None:
    """Score the band as drawn, stretched, and stretched inside the range; write the report."""
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    frame = cached_forecasts(0, 1000)
    from bayesgrpo.model.datasets import load_bundled

    stretches = cross_fitted_stretches(load_bundled(warn=False))
    bounds = update_bounds()
    frame = frame.merge(bounds, on=["run_id", "cut"], how="left", validate="many_to_one")
    if frame[["lower", "upper"]].isna().any().any():
        raise SystemExit("an update's bounds are missing")
    rows = []
    beyond = []
    for cut, at in frame.groupby("cut"):
        at = at.reset_index(drop=True)
        factors = stretch_factors(at, [stretches[run_id] for run_id in at["run_id"]])
        drawn = stretched_quantiles(at, np.ones((len(at), 2)))
        stretched = stretched_quantiles(at, factors)
        inside = held_inside(drawn, stretched, at["lower"].to_numpy(), at["upper"].to_numpy())
        for band, q in (
            ("as drawn", drawn),
            ("stretched (shipped)", stretched),
            ("stretched, inside the range", inside),
        ):
            rows += summary_rows(cut, band, per_run_scores(at, q))
        over = (
            pd.DataFrame(
                {
                    "run_id": at["run_id"],
                    "rising": at["rising"],
                    "above": stretched[:, 94] > at["upper"].to_numpy(),
                    "by": (stretched[:, 94] - at["upper"].to_numpy()).clip(min=0),
                }
            )
            .groupby(["run_id", "rising"], as_index=False)
            .first()
        )
        beyond.append(
            {
                "cut": cut,
                "updates": len(over),
                "stretched 95% above the upper bound": int(over["above"].sum()),
                "of them rising": int((over["above"] & over["rising"]).sum()),
                "by, median (share of the logged range)": float(over.loc[over["above"], "by"].median())
                if over["above"].any()
                else 0.0,
            }
        )
    table = pd.DataFrame(rows).round(3)
    lines = [
        "# The live band's mid-run stretch held inside the reward range the update uses",
        "",
        f"Command: `python benchmarks/experiments/live_band_cap.py` ({time.perf_counter() - start:.0f} s, "
        "2 cores; the forecasts of `benchmarks/live_band_stretch.py`, seed 0, 1000 draws).",
        "",
        "The live path's updates (leave one source out, no range given) at 40 / 50 / 60% of each bundled "
        "run, scored on every later point: coverage of the 50% and 90% predictive bands (mean over runs) and "
        "the CRPS (99 quantiles; units of the run's logged range; median and mean over runs). `stretched "
        "(shipped)`: the factors learnt without the run's source, as the backtests score it; `inside the "
        "range`: a stretched quantile moves no further out than the update's reward bound on its side.",
        "",
        "## How often the stretched band leaves the range",
        "",
        markdown_table(pd.DataFrame(beyond).round(3)),
        "",
        "## Scores",
        "",
        markdown_table(table),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_band_cap.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
