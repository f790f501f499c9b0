"""Noise that shrinks as the reward nears a bound of its range (calibration issue, point 2).

The model's noise is one scale a run (Student-t): a logged reward scatters about its curve by the
same amount early and late. A GRPO reward that is a score (an accuracy, a pass rate on 0 .. 1) is a
mean over a batch of bounded outcomes, whose spread goes as ``sqrt(m (1 - m))`` of its level ``m``:
near the top of its range it scatters far less than at its middle. Two measurements:

1. **In the data.** Each bundled run cut into windows of a tenth of its points (at least 8); in each,
   the level ``m`` (the window's mean, a share of the run's range: the stated one, else its logged
   span) and the local noise sd (``sd(diff) / sqrt 2``, free of a slow trend). Within runs (each
   run's own means taken out), the slope of ``log sd`` on ``log sqrt(m (1 - m))``: 0 where the
   noise does not change with the level, 1 where it goes as a batch mean of 0/1 outcomes. A 90%
   interval from resampling runs.
2. **In the forecasts, after the fact.** The live update as shipped (leave one source out; each
   run's stated range given, as the forecast backtest does, and none given, as the live backtest
   does), its predictive draws redrawn: the curve draws plus Student-t noise of scale
   ``sigma * g(m(t)) / g_ref``, ``g(m) = max(m (1 - m), FLOOR) ** (gamma / 2)``, ``m`` the draw's
   curve as a share of the update's range, ``g_ref`` the root mean square of ``g`` over the
   prefix's points under the same draw (so that the noise averaged over the prefix, what the
   homoscedastic fit estimated, is kept). ``gamma = 0`` is the shipped band itself, and every
   gamma rescales the same noise draws. The fit itself is not changed: a probe of what a
   level-dependent noise in the model could buy, not the model.

Usage::

    python benchmarks/experiments/noise_by_level.py   # about a minute; -> results/noise_by_level.md
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _loso import loso_populations  # noqa: E402
from _markdown import command_line, machine_line, markdown_table, write_result  # noqa: E402
from live_backtest import range_kinds, without_stated_range  # noqa: E402

RESULTS = HERE / "results"
CUTS = (0.1, 0.25, 0.5)
N_DRAWS = 1000
GAMMAS = (0.0, 1.0, 1.5)
#: Smallest ``m (1 - m)`` (a level within about 1% of a bound): the noise never vanishes.
FLOOR = 0.01
WINDOW_SHARE, WINDOW_MIN = 0.1, 8
BOOTSTRAP = 2000


def level_windows(table: Any, kinds: dict[str, str]) -> pd.DataFrame:
    """Per run and window: its kind of range, the level as a share of the range, the local noise sd."""
    rows = []
    for run_id in table.run_ids:
        points = table.points[table.points["run_id"] == run_id].dropna(subset=["reward"]).sort_values("step")
        reward = points["reward"].to_numpy(dtype=float)
        meta = table.runs.set_index("run_id").loc[run_id]
        if kinds[run_id] == "stated":
            lower, upper = float(meta["reward_min"]), float(meta["reward_max"])
        else:
            lower, upper = float(reward.min()), float(reward.max())
        if upper <= lower:
            continue
        share = (reward - lower) / (upper - lower)
        width = max(WINDOW_MIN, len(share) // 10)
        for start in range(0, len(share) - width + 1, width):
            window = share[start : start + width]
            sd = float(np.std(np.diff(window), ddof=1) / np.sqrt(2.0))
            if sd > 0:
                rows.append({"run_id": run_id, "range": kinds[run_id], "level": window.mean(), "sd": sd})
    return pd.DataFrame(rows)


def within_run_slope(windows: pd.DataFrame) -> tuple[float, float]:
    """The slope of log sd on log sqrt(m (1 - m)) with each run's means taken out, and its R^2."""
    x = np.log(np.sqrt(np.clip(windows["level"] * (1 - windows["level"]), FLOOR, None)))
    y = np.log(windows["sd"])
    groups = windows["run_id"]
    xc = x - x.groupby(groups).transform("mean")
    yc = y - y.groupby(groups).transform("mean")
    slope = float((xc * yc).sum() / (xc**2).sum())
    r2 = float(1 - ((yc - slope * xc) ** 2).sum() / (yc**2).sum())
    return slope, r2


def slope_table(windows: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Per kind of range: windows, runs, the within-run slope with a 90% interval over runs, R^2."""
    out = []
    for kind, part in windows.groupby("range"):
        slope, r2 = within_run_slope(part)
        runs = part["run_id"].unique()
        by_run = {r: part[part["run_id"] == r] for r in runs}
        resampled = []
        for _ in range(BOOTSTRAP):
            pick = rng.choice(runs, size=len(runs), replace=True)
            frame = pd.concat(
                [by_run[r].assign(run_id=f"{r}#{i}") for i, r in enumerate(pick)], ignore_index=True
            )
            resampled.append(within_run_slope(frame)[0])
        lo, hi = np.quantile(resampled, [0.05, 0.95])
        out.append(
            {
                "range": kind,
                "windows": len(part),
                "runs": len(runs),
                "slope": slope,
                "slope_90": f"{lo:.2f} .. {hi:.2f}",
                "r2_within": r2,
            }
        )
    return pd.DataFrame(out)


def level_noise(share: np.ndarray, gamma: float) -> np.ndarray:
    """``g(m) = max(m (1 - m), FLOOR) ** (gamma / 2)`` of a level given as a share of the range."""
    clipped = np.clip(share, 0.0, 1.0)
    return np.maximum(clipped * (1.0 - clipped), FLOOR) ** (gamma / 2.0)


def redrawn(
    update: Any, prefix_steps: np.ndarray, steps: np.ndarray, gammas: tuple[float, ...], seed: int
) -> dict[float, np.ndarray]:
    """Per gamma, the update's predictive draws at ``steps`` (S, N) with their noise scaled by the
    level: the band as shipped (``LiveUpdate.reward_draws``, seeded by ``seed``), its noise (the
    predictive draws less the curve's) rescaled, the same noise for every gamma.
    """
    curve = np.asarray(update.reward_draws(steps, band="curve"))
    noise = np.asarray(update.reward_draws(steps, band="predictive", random_seed=seed)) - curve
    lower, upper, _ = update.reward_range
    width = upper - lower
    prefix_curve = np.asarray(update.reward_draws(prefix_steps, band="curve"))
    out = {}
    for gamma in gammas:
        ref = np.sqrt(np.mean(level_noise((prefix_curve - lower) / width, gamma) ** 2, axis=1, keepdims=True))
        out[gamma] = curve + noise * level_noise((curve - lower) / width, gamma) / ref
    return out


def probe_rows(table: Any, populations: dict[str, Any], kinds: dict[str, str], split: str) -> pd.DataFrame:
    """Every run, cut and gamma of one split: the redrawn forecast's scores."""
    from bayesgrpo.evaluate.backtest.cuts import (
        FINAL_FRACTION,
        MIN_OBSERVED,
        cut_points,
        planned_horizon,
        prefix_table,
        run_points,
    )
    from bayesgrpo.evaluate.backtest.forecast import live_forecasters, score_forecast
    from bayesgrpo.model.laplace import LiveUpdateWarning

    forecasters = live_forecasters(populations, table.run_ids, N_DRAWS, 0)
    rows = []
    for run_id in table.run_ids:
        run = table.select([run_id])
        points = run_points(run, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        spread = float(rewards.max() - rewards.min())
        if spread <= 0:
            continue
        n_final_run = max(1, int(np.ceil(FINAL_FRACTION * len(points))))
        for c, fraction in enumerate(CUTS):
            cut = cut_points(points, fraction)
            if len(cut.observed) < MIN_OBSERVED or cut.held_out.empty:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", LiveUpdateWarning)
                prefix = prefix_table(run, cut.observed)
                update = forecasters[run_id].update(prefix, horizon=planned_horizon(run))
            steps = cut.held_out["step"].to_numpy(dtype=float)
            y = cut.held_out["reward"].to_numpy(dtype=float)
            prefix_steps = cut.observed["step"].to_numpy(dtype=float)
            draws_by_gamma = redrawn(update, prefix_steps, steps, GAMMAS, seed=1000 * c + len(rows))
            for gamma, draws in draws_by_gamma.items():
                scored = score_forecast(draws, y, spread, min(n_final_run, len(y)))
                key = {"split": split, "run_id": run_id, "range": kinds[run_id], "cut": fraction}
                rows.append(key | {"gamma": gamma} | scored)
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per split, kind of runs, cut and gamma: the coverage means, median CRPS and LPD."""
    parts = [rows.assign(range="all"), rows]
    return (
        pd.concat(parts, ignore_index=True)
        .groupby(["split", "range", "cut", "gamma"], sort=False)
        .agg(
            runs=("run_id", "nunique"),
            cover50=("cover50", "mean"),
            cover90=("cover90", "mean"),
            crps_median=("crps", "median"),
            crps_mean=("crps", "mean"),
            lpd_median=("lpd", "median"),
            width90_median=("width90", "median"),
        )
        .reset_index()
    )


def main(argv: list[str] | None = None) -> int:
    """Measure the slope in the data, probe the forecasts, write ``results/noise_by_level.md``."""
    from bayesgrpo.model.datasets import load_bundled

    warnings.simplefilter("ignore")
    start = time.perf_counter()
    table = load_bundled(warn=False)
    kinds = range_kinds(table)
    rng = np.random.default_rng(0)
    windows = level_windows(table, kinds)
    slopes = slope_table(windows, rng)
    populations = loso_populations(table)
    rows = pd.concat(
        [
            probe_rows(table, populations, kinds, "stated ranges given"),
            probe_rows(without_stated_range(table), populations, kinds, "no range given"),
        ],
        ignore_index=True,
    )
    lines = [
        "# Noise that shrinks as the reward nears a bound of its range",
        "",
        f"Command: `{command_line('experiments/noise_by_level.py', argv)}`  ",
        f"Machine: {machine_line()}; {time.perf_counter() - start:.0f} s.",
        "",
        "## In the data: the local noise against the level, within runs",
        "",
        f"Windows of a tenth of each run's points (at least {WINDOW_MIN}); level and sd as shares of the "
        "run's range (stated, else its logged span). `slope`: of log sd on log sqrt(m (1 - m)), each run's "
        "own means taken out (0: no change with the level; 1: a batch mean of 0/1 outcomes); its 90% "
        f"interval from {BOOTSTRAP:,} resamples of runs; `r2_within`: the share of the within-run "
        "variance of log sd it explains.",
        "",
        markdown_table(slopes, floatfmt=".2f"),
        "",
        "## In the forecasts: the shipped fit, its predictive noise scaled by the level",
        "",
        f"Leave one source out, cuts {', '.join(f'{c:g}' for c in CUTS)}, {N_DRAWS} draws an update. "
        f"`gamma` 0: the band as shipped (`LiveUpdate.reward_draws`); 1 and 1.5: the noise scaled by "
        f"g(m) = max(m (1 - m), {FLOOR}) ** (gamma / 2), relative to its root mean square over the prefix. "
        "CRPS and width in units of the run's logged range; coverage a mean over runs.",
        "",
        markdown_table(summary(rows)),
        "",
    ]
    write_result(RESULTS / "noise_by_level.md", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
