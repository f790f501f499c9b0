"""What any forecast could reach on the backtests' held-out points: forecasts that know the future.

The calibration issue asks the bayesgrpo forecast for a median CRPS of at most 0.8 x the best
baseline's at the 10/25/50% cuts; the live-path issue asks the live update for at most 0.85 x
persistence's. A CRPS is paid for the noise of the points it scores as well as for the forecast's
error, so there is a floor no forecast goes below, however good: the one paid by a forecast that
knows the run's future curve exactly and its noise. This script measures that floor on the
backtests' own held-out points (every bundled run, the same cuts, the same later points, the same
units: the run's logged reward range) and sets it against the targets, as
``benchmarks/stopping_oracle.py`` does for the stop rules.

Forecasts that know the future (each scored on the held-out points exactly as the backtests score
a forecast, :func:`bayesgrpo.evaluate.backtest.forecast.score_forecast`, 1,000 draws):

- ``future level``: the best *constant* forecast, the held-out points' own mean and sd at every
  point (what persistence would be if it knew the level and spread to come);
- ``future curve, w``: at each held-out point a normal centred on the mean of the other held-out
  points in a centred window of ``w`` of them (the point itself left out, so it is not told its own
  value), with the held-out points' noise sd about that running mean (the point's own residual
  variance ``s^2 (1 + 1/(w-1))`` corrected to ``s^2``); ``w`` 2.5%, 5%, 10% and 25% of the held-out
  points (at least 5);
- ``knowing the future, best``: per run and cut, the lowest CRPS of the five above: an oracle
  over the windows too;
- ``noise floor``: not a forecast but the expected CRPS of one that knows every later point's
  mean exactly, under normal noise of the sd the held-out points' successive differences give
  (:func:`noise_floor`).

The running mean of the future has its own error (smaller with a wider window, biased on a rise),
so the forecasts above are not the perfect forecast, but each knows far more than a forecast from
the prefix can; the noise floor is what even the perfect one pays. Where the best of them does not
reach a target's ratio, no forecast of the prefix is expected to.

Persistence and the best baseline are read from the backtests' per-run tables
(``benchmarks/results/live_backtest_forecast_runs.csv``; the baselines see only the prefix, so
their rows are the same in the forecast backtest's leave-one-source-out table), and the bayesgrpo
rows from both: the live path given no range (live-path issue) and the forecast backtest given
each run's stated range (calibration issue, ``results/loso/backtest_forecast_runs.csv``).

Usage::

    python benchmarks/experiments/forecast_oracle.py    # -> results/forecast_oracle.md (seconds)
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(BENCHMARKS))
from _markdown import markdown_table  # noqa: E402
from live_backtest import range_kinds  # noqa: E402

RESULTS = HERE / "results"
LIVE_RUNS = BENCHMARKS / "results" / "live_backtest_forecast_runs.csv"
LOSO_RUNS = BENCHMARKS / "results" / "loso" / "backtest_forecast_runs.csv"
CUTS = (0.1, 0.25, 0.5)
N_DRAWS = 1000
#: Windows of the running mean of the future, as shares of the held-out points.
WINDOW_SHARES = (0.025, 0.05, 0.1, 0.25)
MIN_WINDOW = 5
#: The targets: live-path issue (vs persistence), calibration issue (vs the best baseline).
LIVE_TARGET = 0.85
CALIBRATION_TARGET = 0.8
#: Per run and cut, the lowest CRPS of the forecasts that know the future.
BEST = "knowing the future, best"
BASELINES = ("persistence", "exp_least_squares", "scalerl_sigmoid", "domhan_ensemble")


def running_mean_leave_one_out(y: np.ndarray, window: int) -> np.ndarray:
    """At each point, the mean of the other points in a centred window of ``window`` points
    (shifted inward at the ends so that every window holds ``window`` points).

    Parameters
    ----------
    y : ndarray, shape (n,)
    window : int
        At least 2 and at most ``n``.

    Returns
    -------
    ndarray, shape (n,)
    """
    n = y.size
    cumulative = np.concatenate([[0.0], np.cumsum(y)])
    half = window // 2
    starts = np.clip(np.arange(n) - half, 0, n - window)
    sums = cumulative[starts + window] - cumulative[starts]
    return (sums - y) / (window - 1)


def future_curve_draws(y: np.ndarray, window: int, rng: np.random.Generator) -> np.ndarray:
    """Draws of the ``future curve`` oracle (see the module docstring), shape ``(N_DRAWS, n)``."""
    centre = running_mean_leave_one_out(y, window)
    residual_variance = float(np.mean((y - centre) ** 2))
    noise_sd = math.sqrt(residual_variance / (1.0 + 1.0 / (window - 1)))
    return centre[None, :] + noise_sd * rng.standard_normal((N_DRAWS, y.size))


def future_level_draws(y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Draws of the ``future level`` oracle: the held-out points' own mean and sd, constant."""
    return float(y.mean()) + float(y.std()) * rng.standard_normal((N_DRAWS, y.size))


def noise_floor(y: np.ndarray) -> float:
    """The expected CRPS of a forecast that knows every later point's mean, under normal noise of
    the sd the held-out points' successive differences give: ``s / sqrt(pi)``, ``s^2`` half the
    mean squared difference (a slow trend adds little to it; noise correlated from step to step
    makes it smaller, so the floor is, if anything, set low).
    """
    if y.size < 2:
        return float("nan")
    noise_sd = math.sqrt(float(np.mean(np.diff(y) ** 2)) / 2.0)
    return noise_sd / math.sqrt(math.pi)


def oracle_rows(table) -> pd.DataFrame:
    """Every run's and cut's oracle scores, on the backtests' held-out points."""
    from bayesgrpo.evaluate.backtest.cuts import FINAL_FRACTION, MIN_OBSERVED, cut_points, run_points
    from bayesgrpo.evaluate.backtest.forecast import score_forecast

    rows = []
    for number, run_id in enumerate(table.run_ids):
        points = run_points(table, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        reward_range = float(rewards.max() - rewards.min())
        if reward_range <= 0:
            continue
        n_final = max(1, math.ceil(FINAL_FRACTION * len(points)))
        for cut in CUTS:
            parts = cut_points(points, cut)
            if len(parts.observed) < MIN_OBSERVED or parts.held_out.empty:
                continue
            y = parts.held_out["reward"].to_numpy(dtype=float)
            rng = np.random.default_rng([number, int(cut * 100)])
            forecasts = {"future level": future_level_draws(y, rng)}
            for share in WINDOW_SHARES:
                window = min(y.size, max(MIN_WINDOW, round(share * y.size)))
                if window >= 3:
                    forecasts[f"future curve, w {share:.1%}"] = future_curve_draws(y, window, rng)
            for method, draws in forecasts.items():
                scored = score_forecast(draws, y, reward_range, min(n_final, y.size))
                rows.append({"run_id": run_id, "cut": cut, "method": method, **scored, "n_held_out": y.size})
            rows.append(
                {
                    "run_id": run_id,
                    "cut": cut,
                    "method": "noise floor",
                    "crps": noise_floor(y) / reward_range,
                    "cover90": np.nan,
                    "n_held_out": y.size,
                }
            )
    frame = pd.DataFrame(rows)
    knowing = frame[frame["method"].str.startswith("future")]
    best = knowing.loc[knowing.groupby(["run_id", "cut"])["crps"].idxmin()].assign(method=BEST)
    return pd.concat([frame, best], ignore_index=True)


def summary(
    oracles: pd.DataFrame, live: pd.DataFrame, loso: pd.DataFrame, kinds: dict[str, str]
) -> pd.DataFrame:
    """Per cut and kind of run: median CRPS of each forecast, and the ratios the targets name."""
    bayes_live = live[live["method"] == "bayesgrpo"].assign(method="bayesgrpo, live (no range given)")
    bayes_loso = loso[loso["method"] == "bayesgrpo"].assign(method="bayesgrpo, ranges given")
    baselines = live[live["method"].isin(BASELINES)]
    columns = ["run_id", "cut", "method", "crps", "cover90"]
    parts = (oracles, bayes_live, bayes_loso, baselines)
    scored = pd.concat([part[columns] for part in parts], ignore_index=True)
    scored["range"] = scored["run_id"].map(kinds)
    rows = []
    for cut in CUTS:
        for kind in ("all", "stated", "unstated"):
            part = scored[(scored["cut"] == cut) & ((scored["range"] == kind) if kind != "all" else True)]
            medians = part.groupby("method")["crps"].median()
            runs = part.loc[part["method"] == "persistence", "run_id"].nunique()
            persistence = medians["persistence"]
            best_name = min(BASELINES, key=lambda name: medians[name])
            for method, value in medians.items():
                if method in BASELINES and method not in ("persistence", best_name):
                    continue
                rows.append(
                    {
                        "cut": cut,
                        "range": kind,
                        "runs": runs,
                        "method": method,
                        "crps_median": value,
                        "vs_persistence": value / persistence,
                        "best_baseline": best_name,
                        "vs_best_baseline": value / medians[best_name],
                        "cover90": part.loc[part["method"] == method, "cover90"].mean(),
                    }
                )
    return pd.DataFrame(rows)


def verdicts(table: pd.DataFrame) -> list[str]:
    """Per cut and kind of run: whether the best oracle reaches each issue's ratio."""
    lines = []
    best = table[table["method"] == BEST]
    floors = table[table["method"] == "noise floor"].set_index(["cut", "range"])
    for row in best.itertuples():
        floor = floors.loc[(row.cut, row.range)]
        live_ok = row.vs_persistence <= LIVE_TARGET
        calibration_ok = row.vs_best_baseline <= CALIBRATION_TARGET
        lines.append(
            f"- cut {row.cut:g}, {row.range} ({row.runs} runs): the best forecast knowing the future, "
            f"{row.vs_persistence:.2f} x persistence ({'reaches' if live_ok else 'does NOT reach'} "
            f"the live path's {LIVE_TARGET}), {row.vs_best_baseline:.2f} x the best baseline, "
            f"{row.best_baseline} ({'reaches' if calibration_ok else 'does NOT reach'} the calibration "
            f"issue's {CALIBRATION_TARGET}); the noise floor {floor.vs_persistence:.2f} x persistence, "
            f"{floor.vs_best_baseline:.2f} x the best baseline."
        )
    return lines


def main() -> None:
    """Score the oracles, read the backtests' rows, write ``results/forecast_oracle.md``."""
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    table = load_bundled(warn=False)
    kinds = range_kinds(table)
    oracles = oracle_rows(table)
    live = pd.read_csv(LIVE_RUNS)
    loso = pd.read_csv(LOSO_RUNS)
    held = live[live["method"] == "persistence"].set_index(["run_id", "cut"])["n_held_out"]
    mine = oracles[oracles["method"] == "future level"].set_index(["run_id", "cut"])["n_held_out"]
    if not held.sort_index().equals(mine.sort_index()):
        raise SystemExit("the oracles' held-out points are not the backtests': rerun the backtests first")
    table_rows = summary(oracles, live, loso, kinds)
    seconds = time.perf_counter() - start
    lines = [
        "# What any forecast could reach: forecasts that know the future",
        "",
        f"Command: `python benchmarks/experiments/forecast_oracle.py` ({seconds:.0f} s, 2 cores)",
        "",
        f"{oracles['run_id'].nunique()} bundled runs cut at 10/25/50% of their steps, scored on the same "
        "later points as the backtests (median over runs of a run's mean CRPS, in units of its logged range; "
        "cover90: mean over runs of the share of later points in the 90% band). The forecasts that know the "
        "future are described in the script's docstring; persistence, the best baseline and the bayesgrpo "
        "rows are the backtests' own (`live_backtest_forecast_runs.csv`, `loso/backtest_forecast_runs.csv`). "
        f"Targets: the live path <= {LIVE_TARGET} x persistence; the forecast <= {CALIBRATION_TARGET} x "
        "the best baseline; the best baseline is the one with the lowest median at that cut and kind of run.",
        "",
        "## Does knowing the future curve reach the targets?",
        "",
        *verdicts(table_rows),
        "",
        "## Median CRPS, every forecast",
        "",
        markdown_table(table_rows),
        "",
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "forecast_oracle.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
