"""Issue 25: a stop rule on the *predictive* probability of the smoothed logged gain.

The plateau rule stops when the curve's remaining gain is below ``eps`` with probability ``p``. A
noisy run's prefix that ends in a dip reads as flat, and the rule stops at the low point. The
stop probability that came out calibrated under leave one source out (``backtest.py --split
loso``, its calibration table) is a different one: the probability that the run's *smoothed
logged* reward gains less than ``eps`` from here to the run's end, with the points logged so far
as they are and the later ones drawn (curve plus a logged point's noise), each draw smoothed
like the reference. A dip lowers the smoothed level now and so raises the gain still to come:
the rule should not stop in one. Here it is a stop rule:

    stop at a check when P(smoothed gain from now to the horizon < eps x range) >= p

with the smoothing window a share of the run's *planned* points (known online), run at the
backtest's checks (every 5% of a run), on the 60 bundled runs under leave one source out (the
cached populations of ``benchmarks/_loso.py``), runs with and without a stated range apart,
beside the shipped plateau rule at the same checks and the fixed budgets. Measures as
``stop_confirmation.py``: steps saved, reward given up against the run's end (smoothed logged
reward, ``backtest.py``'s measure), the dip at the stop.

Beside it, the plateau rule with a veto (``plateau, not in a dip``): no stop while the latest 5%
of the run's planned points sit low in the update's own predictive band (their mean PIT more than
two standard errors below 0.5); and the plateau rule asked of an update whose latest 5% of points
were pooled into one (``plateau, latest window as one point``: their mean reward at the check's
step), so that a dip in them bends the curve as one point would.

Usage::

    python benchmarks/experiments/stop_predictive.py   # writes results/stop_predictive.md
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
from live_backtest import range_kinds
from stopping_simulated import dip_at

RESULTS = HERE / "results"
EPS = (0.01, 0.02, 0.03)
PROBS = (0.8, 0.9)
CHECKS = (1, 2)
#: The smoothing window of the predictive rule, a share of the run's planned points.
WINDOW_SHARE = 0.05


def predictive_gain_draws(
    update, rewards: np.ndarray, i: int, future_steps: np.ndarray, window: int, seed: int
):
    """Draws (S,) of the smoothed logged gain from point ``i`` to the last planned point."""
    future = update.reward_draws(future_steps, band="predictive", random_seed=seed)
    full = np.concatenate([np.broadcast_to(rewards[: i + 1], (future.shape[0], i + 1)), future], axis=1)
    half = window // 2
    n = full.shape[1]
    now = full[:, max(0, i - half) : min(n, i + half + 1)].mean(axis=1)
    end = full[:, max(0, n - 1 - half) :].mean(axis=1)
    return end - now


def recent_dip(update, steps: np.ndarray, rewards: np.ndarray, window: int) -> bool:
    """Whether the latest ``window`` logged points sit low in the update's own predictive band: their
    mean PIT more than two standard errors below 0.5 (a calibrated band's PITs are uniform).
    """
    recent_steps, recent = steps[-window:], rewards[-window:]
    draws = update.reward_draws(recent_steps)
    pit = (draws < recent[None, :]).mean(axis=0)
    return bool(pit.mean() < 0.5 - 2.0 * np.sqrt(1.0 / (12.0 * len(recent))))


def pooled_update(live, run, points: pd.DataFrame, i: int, window: int, horizon: float):
    """The update of the prefix up to point ``i`` with its latest ``window`` points replaced by one
    point (their mean step and mean reward): a dip in them counts as one point, not ``window``.
    """
    from bayesgrpo.logs.table import RunsTable

    prefix = points.iloc[: i + 1]
    if window < 2 or len(prefix) <= window + 2:
        return None
    head, tail = prefix.iloc[:-window], prefix.iloc[-window:]
    last = tail.iloc[[-1]].copy()
    last["step"] = float(tail["step"].iloc[-1])  # the check's step: the update's "now"
    last["reward"] = float(tail["reward"].mean())
    pooled = pd.concat([head, last], ignore_index=True).assign(run_id=run.run_ids[0])
    table = RunsTable(points=pooled, runs=run.runs, report=run.report)
    try:
        return live.update(table, horizon=horizon)
    except (ValueError, ArithmeticError):
        return None


def run_rows(run_id: str, table, live, kind: str) -> list[dict]:
    """Every rule's stop on one run, scored."""
    from bayesgrpo.evaluate.backtest.cuts import planned_horizon, run_points, run_seed
    from bayesgrpo.evaluate.backtest.smoothing import reward_given_up, smoothed_reward
    from bayesgrpo.evaluate.backtest.stopping import SMOOTHING_FRACTION, check_indices, update_at_check
    from bayesgrpo.evaluate.baselines import stop_fixed_fraction
    from bayesgrpo.questions.stopping import PlateauRule

    points = run_points(table, run_id)
    steps = points["step"].to_numpy(dtype=float)
    rewards = points["reward"].to_numpy(dtype=float)
    run = table.select([run_id])
    horizon = planned_horizon(run)
    last = float(steps[-1])
    interval = float(np.median(np.diff(steps))) if len(steps) > 1 else 1.0
    stops: dict[str, float | None] = {f"fixed {f}": stop_fixed_fraction(steps, last, f) for f in (0.5, 0.6)}
    rules = {}
    for eps in EPS:
        for prob in PROBS:
            for k in CHECKS:
                rules[f"plateau eps={eps} p={prob} k={k}"] = ("curve", eps, prob, k)
                rules[f"predictive eps={eps} p={prob} k={k}"] = ("predictive", eps, prob, k)
                rules[f"plateau, not in a dip, eps={eps} p={prob} k={k}"] = ("vetoed", eps, prob, k)
                rules[f"plateau, latest window as one point, eps={eps} p={prob} k={k}"] = (
                    "pooled",
                    eps,
                    prob,
                    k,
                )
    streak = dict.fromkeys(rules, 0)
    for name in rules:
        stops[name] = None
    for i in check_indices(points, 0.05):
        pending = [name for name in rules if stops[name] is None]
        if not pending:
            break
        update = update_at_check(live, run, points, i, horizon)
        if update is None:
            continue
        unit = float(np.ravel(update.curve_draws.reward_scale)[0])
        future_steps = np.arange(steps[i] + interval, last + 0.5 * interval, interval)
        planned_points = i + 1 + len(future_steps)
        window = max(1, int(WINDOW_SHARE * planned_points))
        gain = predictive_gain_draws(
            update, rewards, i, future_steps, window, run_seed(0, "predictive", run_id, i)
        )
        in_dip = recent_dip(update, steps[: i + 1], rewards[: i + 1], window)
        pooled = pooled_update(live, run, points, i, window, horizon)
        for name in pending:
            how, eps, prob, k = rules[name]
            if how == "pooled":
                says_stop = pooled is not None and (
                    PlateauRule(eps, prob, relative=True)
                    .decide(pooled.curve_draws, steps[i], horizon_step=last)[0]
                    .decision
                    == "stop"
                )
            elif how in ("curve", "vetoed"):
                says_stop = (
                    PlateauRule(eps, prob, relative=True)
                    .decide(update.curve_draws, steps[i], horizon_step=last)[0]
                    .decision
                    == "stop"
                ) and not (how == "vetoed" and in_dip)
            else:
                says_stop = float((gain < eps * unit).mean()) >= prob
            streak[name] = streak[name] + 1 if says_stop else 0
            if streak[name] >= k:
                stops[name] = float(steps[i])
    smooth = smoothed_reward(rewards, SMOOTHING_FRACTION)
    spread = float(rewards.max() - rewards.min()) or 1.0
    rows = []
    for name, stop in stops.items():
        stop_step = last if stop is None else float(stop)
        _, vs_end = reward_given_up(smooth, spread, steps, stop_step)
        rows.append(
            {
                "run_id": run_id,
                "range": kind,
                "rule": name,
                "steps_saved": (last - stop_step) / last,
                "vs_end": vs_end,
                "dip": dip_at(steps, rewards, stop_step),
                "stopped": stop is not None and stop_step < last,
            }
        )
    return rows


def main() -> None:
    """Every run under leave one source out; the tables."""
    warnings.simplefilter("ignore")
    from bayesgrpo.evaluate.backtest.forecast import live_forecasters
    from bayesgrpo.model.datasets import load_bundled

    start = time.perf_counter()
    bundled = load_bundled(warn=False)
    populations = loso_populations(bundled)
    kinds = range_kinds(bundled)
    # the forecasters the stopping backtest makes (one per population, seeded as it seeds them)
    live = live_forecasters(populations, bundled.run_ids, 1000, 0)
    rows = []
    for run_id in bundled.run_ids:
        rows += run_rows(run_id, bundled, live[run_id], kinds[run_id])
    frame = pd.DataFrame(rows)
    seconds = time.perf_counter() - start
    sections = []
    for kind in ("unstated", "stated"):
        part = frame[frame["range"] == kind]
        table = (
            part.groupby("rule", sort=False)
            .agg(
                steps_saved=("steps_saved", "mean"),
                vs_end=("vs_end", "mean"),
                dip=("dip", "mean"),
                stopped=("stopped", "mean"),
            )
            .reset_index()
        )
        fixed = table.set_index("rule")
        for budget in ("fixed 0.5", "fixed 0.6"):
            table[f"beats_{budget.replace(' ', '_')}"] = (
                table["steps_saved"] >= fixed.loc[budget, "steps_saved"]
            ) & (table["vs_end"] <= fixed.loc[budget, "vs_end"])
        table["meets_target"] = (
            (table["steps_saved"] >= 0.45) & (table["vs_end"] <= 0.01) & (table["dip"].abs() <= 0.01)
        )
        label = "no stated range" if kind == "unstated" else "stated range"
        sections += [
            f"## Bundled runs, {label} ({part['run_id'].nunique()} runs)",
            "",
            markdown_table(table),
            "",
        ]
    lines = [
        "# A stop rule on the predictive probability of the smoothed logged gain (issue 25)",
        "",
        f"Command: `python benchmarks/experiments/stop_predictive.py` ({seconds:.0f} s on 2 cores)",
        "",
        "60 bundled runs, each checked every 5% of its steps with a live update from the population fitted "
        "without its source (leave one source out). `plateau`: the shipped "
        "`PlateauRule(eps, p, relative=True)` (the curve's gain); `predictive`: stop when the "
        "probability that "
        "the smoothed *logged* reward gains less than eps x range from the check to the run's end is "
        "at least "
        f"p (window {WINDOW_SHARE:.0%} of the run's planned points; logged points as they are, later ones "
        "drawn with their noise); `k`: asked to say stop at k checks in a row. steps_saved, vs_end (reward "
        "given up against the run's end, share of its logged range; negative: the stop kept more), dip "
        "(smoothed reward at the stop minus the mean over the 10% of the run around it), stopped: means over "
        "runs. meets_target: >= 45% saved at <= 1% given up, |dip| <= 1%.",
        "",
        *sections,
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "stop_predictive.md").write_text("\n".join(lines))
    frame.to_csv(BENCHMARKS / "_scratch" / "stop_predictive_runs.csv", index=False)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
