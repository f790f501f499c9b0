"""Stopping rules on simulated runs whose truth is known: steps saved, reward given up, the dip.

Runs are drawn from the shapes a user meets (rise then plateau, slow rise still climbing at the
end, late rise, flat, falling, peak then fall), 40 to 2,000 logged points each (log-uniform), on
a reward scale of 0..1 with a gain of 0.1-0.5. Their noise is as the bundled real runs show it:
each simulated run takes the per-point noise sd (as a share of the run's logged range) and the
lag-1 autocorrelation of one bundled run's residuals around its own smoothed curve, as AR(1)
noise, and that run's slow wander (what its residuals keep over windows of 5% of its points),
as an AR(1) of correlation length 5% of the run (``--no-slow-noise``: without it, as before).
Each run is assessed twice: with its reward range stated (0..1) and without.

Every rule of ``benchmarks/backtest.py`` runs online on every run (checks every 5% of it) on the
population shipped with bayesgrpo (no simulated run is in it). A stop at step ``s`` of a run of
true mean curve ``m`` is scored on the truth, as shares of the run's logged reward range:

* steps saved: ``(T - s) / T``;
* given up against the end: ``m(T) - m(s)`` (negative: the stop kept more than running on);
* given up against the best stop: ``max m - m(s)``;
* the **dip at the stop**: the smoothed logged reward at ``s`` (centred mean over 5% of the
  points) minus the mean logged reward over the 10% of the run around ``s``.

Usage::

    python benchmarks/stopping_simulated.py   # 16 runs a shape: results/stopping_simulated.md
    python benchmarks/stopping_simulated.py --per-shape 3   # quick
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table
from backtest import budget_verdict

from bayesgrpo.evaluate.backtest.smoothing import dip_at_stop as dip_at  # the experiments import it here

RESULTS = HERE / "results"
SCRATCH = HERE / "_scratch" / "stopping_simulated"
SHAPES = ("rise_plateau", "slow_rise", "late_rise", "flat", "falling", "peak_fall")
logger = logging.getLogger("stopping_simulated")


#: The slow wander's correlation length, as a share of a run's points (the dips the issue saw
#: last about 5-10% of a run).
SLOW_LENGTH = 0.05
#: Mean autocorrelation of an AR(1) of correlation length L within a window of L points (about
#: 0.74): what a window mean keeps of the slow variance.
_SLOW_KEPT = 0.74


def bundled_noise() -> pd.DataFrame:
    """Per bundled run: its residual sd around a centred rolling mean over 10% of its points
    (share of its logged range), the lag-1 autocorrelation of those residuals, and the sd of the
    slow wander (share of the range) that a rolling mean over 30% leaves and one over 10% absorbs.

    The slow sd is a moment estimate: around the 30% mean, the variance of the residuals' mean
    over windows of 5% of the points beyond what independent noise gives (``var / w``), divided by
    the share of a slow AR(1)'s variance such a window keeps.
    """
    from bayesgrpo.model.datasets import load_bundled

    table = load_bundled(warn=False)
    rows = []
    for run_id in table.run_ids:
        reward = table.run(run_id).sort_values("step")["reward"].to_numpy(dtype=float)
        reward = reward[np.isfinite(reward)]
        if reward.size < 20:
            continue
        window = max(3, int(0.1 * reward.size) | 1)
        smooth = pd.Series(reward).rolling(window, center=True, min_periods=1).mean().to_numpy()
        residual = reward - smooth
        span = float(reward.max() - reward.min())
        if span <= 0:
            continue
        rho = float(np.corrcoef(residual[:-1], residual[1:])[0, 1])
        wide = max(3, int(0.3 * reward.size) | 1)
        loose = reward - pd.Series(reward).rolling(wide, center=True, min_periods=1).mean().to_numpy()
        w = max(2, int(SLOW_LENGTH * reward.size))
        window_means = pd.Series(loose).rolling(w).mean().dropna().to_numpy()
        excess = float(window_means.var()) - float(loose.var()) / w
        slow = np.sqrt(max(excess, 0.0) / _SLOW_KEPT) / span
        rows.append(
            {
                "run_id": run_id,
                "sd_share": float(residual.std()) / span,
                "rho": max(rho, 0.0),
                "slow_share": slow,
            }
        )
    return pd.DataFrame(rows)


def mean_curve(shape: str, t: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The true mean reward of a run of ``shape`` at progress ``t`` (0..1), on a 0..1 scale."""
    base, gain = rng.uniform(0.1, 0.4), rng.uniform(0.1, 0.5)
    if shape == "rise_plateau":
        return base + gain * (1 - np.exp(-t / rng.uniform(0.05, 0.2)))
    if shape == "slow_rise":
        return base + gain * (1 - np.exp(-t / rng.uniform(0.8, 2.0)))
    if shape == "late_rise":
        return base + gain / (1 + np.exp(-(t - rng.uniform(0.4, 0.7)) / rng.uniform(0.03, 0.08)))
    if shape == "flat":
        return np.full_like(t, base + gain / 2)
    if shape == "falling":
        return base + gain * (1 - t)
    if shape == "peak_fall":
        peak = rng.uniform(0.3, 0.6)
        rise = gain * (1 - np.exp(-t / rng.uniform(0.05, 0.15)))
        return base + rise - 0.6 * gain * np.clip(t - peak, 0, None) / (1 - peak)
    raise ValueError(shape)


def ar1(n: int, rho: float, rng: np.random.Generator) -> np.ndarray:
    """Unit-variance AR(1) noise of length ``n``."""
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    scale = np.sqrt(1 - rho**2)
    for i in range(1, n):  # a loop over points of one simulated run, not over posterior draws
        x[i] = rho * x[i - 1] + scale * e[i]
    return x


def simulate(
    per_shape: int, seed: int, slow_noise: bool = True
) -> tuple[pd.DataFrame, dict[str, np.ndarray], pd.DataFrame]:
    """Points (run_id, step, reward), each run's true mean by step, and each run's settings.

    With ``slow_noise`` each run also wanders as its donor did: an AR(1) of correlation length
    :data:`SLOW_LENGTH` of the run, of the donor's slow sd (the dips of real runs).
    """
    rng = np.random.default_rng(seed)
    noise = bundled_noise()
    points, truth, runs = [], {}, []
    for shape in SHAPES:
        for k in range(per_shape):
            n = int(np.exp(rng.uniform(np.log(40), np.log(2000))))
            steps = np.arange(1, n + 1, dtype=float)
            mean = mean_curve(shape, steps / n, rng)
            donor = noise.iloc[int(rng.integers(len(noise)))]
            # the donor's sd is a share of its logged range; a logged range is about the
            # curve's own span plus the noise's reach (4 sd)
            span = float(mean.max() - mean.min())
            sd = float(donor.sd_share) * span / max(1 - 4 * float(donor.sd_share), 0.2) if span > 0 else 0.05
            sd = max(sd, 0.01)
            reward = mean + sd * ar1(n, float(donor.rho), rng)
            slow_sd = 0.0
            if slow_noise:  # the same scale conversion as the fast noise's
                slow_sd = (
                    float(donor.slow_share) * span / max(1 - 4 * float(donor.sd_share), 0.2)
                    if span > 0
                    else 0.0
                )
                reward = reward + slow_sd * ar1(n, float(np.exp(-1 / max(1.0, SLOW_LENGTH * n))), rng)
            run_id = f"sim_{shape}_{k:02d}"
            points.append(pd.DataFrame({"run_id": run_id, "step": steps, "reward": reward}))
            truth[run_id] = mean
            runs.append(
                {
                    "run_id": run_id,
                    "shape": shape,
                    "n_points": n,
                    "sd": sd,
                    "rho": float(donor.rho),
                    "slow_sd": slow_sd,
                }
            )
    return pd.concat(points, ignore_index=True), truth, pd.DataFrame(runs)


def runs_table(points: pd.DataFrame, runs: pd.DataFrame, stated: bool):
    """The simulated runs as a RunsTable, with or without a stated 0..1 range."""
    from bayesgrpo.logs.report import ReadReport
    from bayesgrpo.logs.table import RunsTable, coerce_metadata

    meta = pd.DataFrame(
        {
            "run_id": runs["run_id"],
            "total_steps": runs["n_points"].astype(float),
            "reward_min": 0.0 if stated else np.nan,
            "reward_max": 1.0 if stated else np.nan,
            "source": "simulated",
        }
    )
    return RunsTable(points=points, runs=coerce_metadata(meta), report=ReadReport())


def scored_on_truth(stops: pd.DataFrame, points: pd.DataFrame, truth: dict[str, np.ndarray]) -> pd.DataFrame:
    """Each stop scored on the true curve, and its dip, as shares of the run's logged range."""
    rows = []
    by_run = {run_id: frame.sort_values("step") for run_id, frame in points.groupby("run_id")}
    for row in stops.itertuples(index=False):
        frame = by_run[row.run_id]
        reward = frame["reward"].to_numpy(dtype=float)
        steps = frame["step"].to_numpy(dtype=float)
        mean = truth[row.run_id]
        span = float(reward.max() - reward.min())
        i = int(np.searchsorted(steps, row.stop_step, side="right") - 1)
        i = min(max(i, 0), len(steps) - 1)
        rows.append(
            {
                "run_id": row.run_id,
                "rule": row.rule,
                "kind": row.kind,
                "stopped": bool(row.stopped),
                "steps_saved": float(row.steps_saved),
                "stop_fraction": float(row.stop_step) / float(steps[-1]),
                "vs_end": (mean[-1] - mean[i]) / span,
                "vs_best": (mean.max() - mean[i]) / span,
                "dip": dip_at(steps, reward, float(row.stop_step)),
            }
        )
    return pd.DataFrame(rows)


def shape_table(scored: pd.DataFrame, rules: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """Per kind of range, shape of run and rule (of ``rules``): the mean steps saved, share of the
    run at the stop, reward given up against the end and dip.
    """
    return (
        scored[scored["rule"].isin(rules)]
        .groupby(["range", "shape", "rule"], sort=False)
        .agg(
            steps_saved=("steps_saved", "mean"),
            stop_fraction=("stop_fraction", "mean"),
            vs_end=("vs_end", "mean"),
            dip=("dip", "mean"),
        )
        .reset_index()
    )


def summary(scored: pd.DataFrame) -> pd.DataFrame:
    """Per rule: means of the measures, whether it is on the frontier against the end."""
    grouped = scored.groupby("rule", sort=False)
    table = pd.DataFrame(
        {
            "kind": grouped["kind"].first(),
            "steps_saved": grouped["steps_saved"].mean(),
            "vs_end": grouped["vs_end"].mean(),
            "vs_best": grouped["vs_best"].mean(),
            "dip": grouped["dip"].mean(),
            "share_stopped": grouped["stopped"].mean(),
        }
    ).reset_index()
    on = []
    for row in table.itertuples(index=False):
        better = table[
            (table["steps_saved"] >= row.steps_saved)
            & (table["vs_end"] <= row.vs_end)
            & ((table["steps_saved"] > row.steps_saved) | (table["vs_end"] < row.vs_end))
        ]
        on.append(better.empty)
    table["on_frontier"] = on
    return table.sort_values("steps_saved", ascending=False)


def main() -> None:
    """Simulate, run every rule, score on the truth, write the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-shape", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-every", type=float, default=0.05)
    parser.add_argument(
        "--no-slow-noise", action="store_true", help="AR(1) noise only, without the slow wander (as before)"
    )
    parser.add_argument(
        "--skip-calibration", action="store_true", help="leave out the stop probability judged on the truth"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    from backtest import stopping_rules
    from live_backtest import code_hash

    from bayesgrpo.evaluate.backtest import stopping_backtest
    from bayesgrpo.model.datasets import bundled_population

    points, truth, runs = simulate(args.per_shape, args.seed, slow_noise=not args.no_slow_noise)
    population = bundled_population()
    settings = {"per_shape": args.per_shape, "seed": args.seed, "check": args.check_every}
    if not args.no_slow_noise:  # (runs without it keep their earlier cache key)
        settings["slow"] = SLOW_LENGTH
    settings["code"] = code_hash()  # a change to the live update or the rules re-runs them
    key = json.dumps(settings)
    tag = hashlib.sha256(key.encode()).hexdigest()[:12]
    SCRATCH.mkdir(parents=True, exist_ok=True)
    scored_parts, seconds = [], {}
    for stated in (True, False):
        label = "stated range" if stated else "no stated range"
        path = SCRATCH / f"{tag}_{'stated' if stated else 'unstated'}.csv"
        start, cached = time.perf_counter(), path.exists()
        if cached:
            stops = pd.read_csv(path)
        else:
            table = runs_table(points, runs, stated)
            stops = stopping_backtest(
                table,
                dict.fromkeys(table.run_ids, population),
                stopping_rules(),
                check_every_fraction=args.check_every,
                random_seed=args.seed,
            )
            stops.to_csv(path, index=False)
        seconds[label] = elapsed(path, start, cached)
        scored = scored_on_truth(stops, points, truth).assign(range=label)
        scored_parts.append(scored)
    scored = pd.concat(scored_parts, ignore_index=True)
    scored = scored.merge(runs[["run_id", "shape"]], on="run_id")
    scored.to_csv(RESULTS / "stopping_simulated_runs.csv", index=False)

    machine = machine_line()
    lines = [
        "# Stopping rules on simulated runs of known truth",
        "",
        f"Command: `python benchmarks/stopping_simulated.py --per-shape {args.per_shape}"
        + (" --no-slow-noise" if args.no_slow_noise else "")
        + "`  ",
        f"Machine: {machine}. "
        + "; ".join(f"{k}: {v:.0f} s" for k, v in seconds.items())
        + " (the times of the runs that filled the cache, when it was used)"
        + ".",
        "",
        f"{len(runs)} runs ({args.per_shape} of each of {', '.join(SHAPES)}), {runs['n_points'].min()}-"
        f"{runs['n_points'].max()} logged points, noise sd {runs['sd'].median():.3f} median (AR(1), lag-1 "
        f"autocorrelation {runs['rho'].median():.2f} median, from the bundled runs' residuals"
        + (
            ""
            if args.no_slow_noise
            else f"; plus a slow wander, AR(1) of correlation length {SLOW_LENGTH:.0%} of the run, sd "
            f"{runs['slow_sd'].mean():.3f} mean ({(runs['slow_sd'] > 0).mean():.0%} of runs have one), from "
            "what the bundled runs' residuals keep over 5% windows"
        )
        + "). Measures "
        "are shares of each run's logged range, on the true curve: `vs_end` = m(end) - m(stop) (the "
        "headline: what stopping gave up against running on), `vs_best` = max m - m(stop), `dip` = the "
        "smoothed logged reward at the stop minus its mean over the 10% of the run around it. Raw rows: "
        "`stopping_simulated_runs.csv`. Targets: a posterior rule dominating `fixed 0.5` and `fixed 0.6` "
        "against the end, >= 45% saved at <= 1% given up, mean dip within 1%.",
        "",
        "## Against the targets",
        "",
    ]
    tables = {}
    for label, part in scored.groupby("range", sort=False):
        tables[label] = summary(part)
        lines += budget_verdict(tables[label], label)
    lines.append("")
    for label, table in tables.items():
        lines += [f"## {label}: every rule", "", markdown_table(table), ""]
    by_shape = shape_table(
        scored, ["guarded budget 0.5", "plateau eps=0.01 p=0.9", "plateau eps=0.02 p=0.9", "fixed 0.5"]
    )
    lines += [
        "## By shape (the default rule `guarded budget 0.5`, two plateau rules and `fixed 0.5`)",
        "",
        "On a flat or falling run the right answer is to stop early: `stop_fraction` says how early.",
        "",
        markdown_table(by_shape),
        "",
    ]
    if not args.skip_calibration:
        lines += calibration_section(points, truth, runs, population, args, tag)
    (RESULTS / "stopping_simulated.md").write_text("\n".join(lines))
    print("\n".join(lines))


def elapsed(path: Path, start: float, cached: bool) -> float:
    """Seconds the work cached at ``path`` took: measured now and saved beside it when it was just
    done, read back when the cache was used (the time of reading it, if none was saved).
    """
    record = path.with_suffix(".seconds")
    if cached and record.exists():
        return float(record.read_text())
    seconds = time.perf_counter() - start
    record.write_text(f"{seconds:.1f}")
    return seconds


def brier(probability: pd.Series, came_true: pd.Series) -> float:
    """The mean squared difference of stated probabilities and outcomes (0 or 1)."""
    return float(((probability - came_true.astype(float)) ** 2).mean())


#: The eps of the reliability section (shares of the range the update uses), as the bundled
#: runs' (``backtest.py``) are judged.
CALIBRATION_EPS = (0.01, 0.02)


def calibration_section(
    points: pd.DataFrame, truth: dict[str, np.ndarray], runs: pd.DataFrame, population, args, tag: str
) -> list[str]:
    """The rule's P(curve gain < eps) at every check, judged on the true curve and on the smoothed
    logged reward the bundled runs are judged on (cached beside the stops).
    """
    from bayesgrpo.evaluate.backtest import stop_probability_calibration

    parts, seconds = [], 0.0
    for stated in (True, False):
        label = "stated range" if stated else "no stated range"
        path = SCRATCH / f"{tag}_{'stated' if stated else 'unstated'}_calibration.csv"
        start, cached = time.perf_counter(), path.exists()
        if cached:
            checks = pd.read_csv(path)
        else:
            table = runs_table(points, runs, stated)
            population_of = dict.fromkeys(table.run_ids, population)
            common = {
                "eps_values": CALIBRATION_EPS,
                "check_every_fraction": args.check_every,
                "random_seed": args.seed,
            }
            checks = stop_probability_calibration(table, population_of, reference=truth, **common).rename(
                columns={"smoothed_gain": "logged_gain", "smoothed_below": "logged_below"}
            )
            checks.to_csv(path, index=False)
        seconds += elapsed(path, start, cached)
        parts.append(checks.assign(range=label))
    checks = pd.concat(parts, ignore_index=True).merge(runs[["run_id", "shape"]], on="run_id")
    checks.to_csv(RESULTS / "stopping_simulated_calibration_runs.csv", index=False)
    rows = []
    for (label, eps), part in checks.groupby(["range", "eps"], sort=False):
        high = part[part["probability"] >= 0.9]
        rows.append(
            {
                "range": label,
                "eps": eps,
                "checks": len(part),
                "checks_p_ge_0.9": len(high),
                "mean_p": high["probability"].mean(),
                "true_gain_below": high["below"].mean(),
                "smoothed_logged_gain_below": high["logged_below"].mean(),
                "brier_truth": brier(part["probability"], part["below"]),
                "brier_logged": brier(part["probability"], part["logged_below"]),
            }
        )
    return [
        "## Is the stop probability right? Judged on the truth",
        "",
        (
            f"At every check (every {args.check_every:g} of a run; {len(checks) // len(CALIBRATION_EPS)} "
            f"checks, {seconds:.0f} s) the live update's P(gain of the curve to the run's "
            "last step < eps) (eps a share of the bounds the update used, as the plateau rule asks it) is "
            "set against the true curve's gain (`true_gain_below`) and against the gain of the smoothed "
            "logged reward (each run's cross-validated window, `smoothed_logged_gain_below`), the outcome "
            "the bundled runs can only be judged on (`backtest.py`'s reliability section, with the "
            "calibration issue's bar: of the checks at P >= 0.9, at least 85% come true). The probability "
            "is about the curve; on these runs the curve is known. Raw rows: "
            "`stopping_simulated_calibration_runs.csv`."
        ),
        "",
        markdown_table(pd.DataFrame(rows)),
        "",
        (
            "By stated probability (`calibration_table`): `observed_share` on the true curve, "
            "`observed_logged` on the smoothed logged reward."
        ),
        "",
        *[
            line
            for label, part in checks.groupby("range", sort=False)
            for line in (f"### {label}", "", markdown_table(reliability_bins(part)), "")
        ],
    ]


def reliability_bins(checks: pd.DataFrame) -> pd.DataFrame:
    """``calibration_table`` of the checks on the truth, with the share that came true on the
    smoothed logged reward beside it.
    """
    from bayesgrpo.evaluate.backtest import calibration_table

    on_truth = calibration_table(checks)
    on_logged = calibration_table(checks.assign(below=checks["logged_below"]))
    return on_truth.assign(observed_logged=on_logged["observed_share"].to_numpy())


if __name__ == "__main__":
    main()
