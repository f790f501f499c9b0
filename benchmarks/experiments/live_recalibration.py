"""A recalibrated predictive band: each side's spread stretched by a factor learnt on other sources.

The live backtest's split (``benchmarks/live_backtest.py``: leave one source out, no stated
range, cuts at 10/25/50%), the live path as shipped. The forecast's quantiles at every later
point are stretched about its median, ``q' = median + c (q - median)``, with one factor for the
upper and one for the lower side per cut, chosen so that 5% of later points lie beyond each
side's 90% bound (mean over runs) on the runs of *the other sources* (cross-fitted by source:
no run's factor is learnt from its own source). This is the post-hoc recalibration the
calibration issue names as an option: what it buys in coverage and what it costs in CRPS.

Each forecast is kept as 99 quantiles a point; the CRPS is the quantile-score average over
them (twice the mean pinball loss), close to the CRPS of the 1,000 draws.

Usage::

    python benchmarks/experiments/live_recalibration.py   # writes results/live_recalibration.md
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
from _markdown import markdown_table
from live_backtest import range_kinds, without_stated_range

RESULTS = HERE / "results"
CUTS = (0.1, 0.25, 0.5)
LEVELS = np.linspace(0.01, 0.99, 99)
#: Stretch factors searched, each side.
FACTORS = np.round(np.concatenate([np.arange(0.5, 3.0, 0.05), np.arange(3.0, 12.01, 0.25)]), 3)


def forecasts() -> pd.DataFrame:
    """Every later point of every run and cut: its reward and the forecast's 99 quantiles."""
    from bayesgrpo.evaluate.backtest.populations import source_group
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.questions.live import LiveForecaster

    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    kinds = range_kinds(bundled)
    table = without_stated_range(bundled)
    sources = {row["run_id"]: source_group(row) for row in bundled.runs.to_dict("records")}
    forecasters: dict[int, LiveForecaster] = {}
    frames = []
    for run_id in table.run_ids:
        population = populations[run_id]
        if id(population) not in forecasters:
            forecasters[id(population)] = LiveForecaster(
                population, n_draws=1000, random_seed=len(forecasters)
            )
        run = table.select([run_id])
        points = run.points
        first, last = float(points["step"].min()), float(points["step"].max())
        spread = float(points["reward"].max() - points["reward"].min())
        for cut in CUTS:
            at = first + cut * (last - first)
            prefix = RunsTable(points=points[points["step"] <= at], runs=run.runs, report=run.report)
            later = points[points["step"] > at]
            draws = forecasters[id(population)].update(prefix, horizon=last).reward_draws(later["step"])
            quantiles = np.quantile(draws, LEVELS, axis=0).T / spread
            frame = pd.DataFrame(quantiles, columns=[f"q{i}" for i in range(len(LEVELS))])
            frames.append(
                frame.assign(
                    run_id=run_id,
                    source=sources[run_id],
                    range=kinds[run_id],
                    cut=cut,
                    y=later["reward"].to_numpy(dtype=float) / spread,
                )
            )
    return pd.concat(frames, ignore_index=True)


def stretched(frame: pd.DataFrame, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The quantiles stretched about the median, one factor per row and side, shape (N, 99)."""
    q = frame[[f"q{i}" for i in range(len(LEVELS))]].to_numpy()
    median = q[:, [49]]
    factor = np.where(q >= median, upper[:, None], lower[:, None])
    return median + factor * (q - median)


def side_share(frame: pd.DataFrame, factor: float, side: str) -> float:
    """Mean over runs of the share of points beyond one side's 90% bound, stretched by ``factor``."""
    q05, q50, q95 = (frame[f"q{i}"].to_numpy() for i in (4, 49, 94))
    if side == "upper":
        beyond = frame["y"].to_numpy() > q50 + factor * (q95 - q50)
    else:
        beyond = frame["y"].to_numpy() < q50 + factor * (q05 - q50)
    return float(pd.Series(beyond).groupby(frame["run_id"].to_numpy()).mean().mean())


def fitted_factor(frame: pd.DataFrame, side: str) -> float:
    """The factor that puts 5% of points beyond a side (mean over runs), from the grid."""
    shares = np.array([side_share(frame, factor, side) for factor in FACTORS])
    return float(FACTORS[np.argmin(np.abs(shares - 0.05))])


def scores(frame: pd.DataFrame, q: np.ndarray) -> pd.DataFrame:
    """Per run: coverage of the 50% and 90% bands, mean CRPS (quantile-score average)."""
    y = frame["y"].to_numpy()[:, None]
    pinball = np.maximum(LEVELS * (y - q), (LEVELS - 1.0) * (y - q))
    out = pd.DataFrame(
        {
            "run_id": frame["run_id"].to_numpy(),
            "range": frame["range"].to_numpy(),
            "cover90": (y[:, 0] >= q[:, 4]) & (y[:, 0] <= q[:, 94]),
            "cover50": (y[:, 0] >= q[:, 24]) & (y[:, 0] <= q[:, 74]),
            "crps": 2.0 * pinball.mean(axis=1),
        }
    )
    return out.groupby(["run_id", "range"], as_index=False).mean()


def main() -> None:
    """Forecast, cross-fit the factors by source, score, write the table."""
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    frame = forecasts()
    forecast_seconds = time.perf_counter() - start
    rows, factors = [], []
    for cut, at in frame.groupby("cut"):
        lower = np.ones(len(at))
        upper = np.ones(len(at))
        for source in at["source"].unique():
            held = (at["source"] == source).to_numpy()
            rest = at[~held]
            lower[held], upper[held] = fitted_factor(rest, "lower"), fitted_factor(rest, "upper")
        factors.append(
            {
                "cut": cut,
                "lower_median": float(np.median(lower)),
                "lower_range": f"{lower.min():.2f}-{lower.max():.2f}",
                "upper_median": float(np.median(upper)),
                "upper_range": f"{upper.min():.2f}-{upper.max():.2f}",
            }
        )
        ones = np.ones(len(at))
        for label, q in (
            ("as shipped", stretched(at, ones, ones)),
            ("recalibrated", stretched(at, lower, upper)),
        ):
            per_run = scores(at, q)
            for kind in ("all", "unstated", "stated"):
                part = per_run if kind == "all" else per_run[per_run["range"] == kind]
                rows.append(
                    {
                        "band": label,
                        "range": kind,
                        "cut": cut,
                        "n": len(part),
                        "cover50": part["cover50"].mean(),
                        "cover90": part["cover90"].mean(),
                        "crps_median": part["crps"].median(),
                    }
                )
    summary = pd.DataFrame(rows).sort_values(["range", "band", "cut"], kind="stable")
    lines = [
        "# A predictive band recalibrated on other sources (live path, leave one source out)",
        "",
        f"Command: `python benchmarks/experiments/live_recalibration.py` ({forecast_seconds:.0f} s of "
        "forecasts on 2 cores)",
        "",
        "60 bundled runs, each updated by the population fitted without its source, no stated range given, "
        "cut at 10/25/50% of its steps. `recalibrated`: each forecast's quantiles stretched about its median "
        "by one factor a side and cut, learnt on the runs of the other sources so that 5% of their later "
        "points lie beyond each side's 90% bound. cover50/cover90: mean over runs of the share of later "
        "points inside the 50%/90% band; crps_median: median over runs of the mean CRPS (quantile-score "
        "average of 99 quantiles) in units of the run's logged range.",
        "",
        "## The factors (over the held-out sources)",
        "",
        markdown_table(pd.DataFrame(factors)),
        "",
        "## Scores",
        "",
        markdown_table(summary.reset_index(drop=True)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_recalibration.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
