"""A run's points counted for what their autocorrelation leaves of them (calibration and live-path
issues).

The live update (and so the forecast backtest's bayesgrpo) weighs each of a run's (binned) points
as an independent Student-t observation of its curve. Logged GRPO/PPO rewards are not: a run
wanders about any curve of the family for stretches of many steps, and its points then pin the
curve's parameters far more tightly than they deserve. The misses of the backtests show it: runs
whose 90% band is a tenth of their range wide and holds none of their later points, all of them
above it at one cut and below it at the next (``verldata_ppo_Qwen2.5-0.5B`` at the 10% and 25%
cuts, ``loso/backtest_forecast_runs.csv``).

The standard answer is a tempered ("power") likelihood (Miller and Dunson 2019, "Robust Bayesian
inference via coarsening"; Grunwald's safe Bayes): the log likelihood times ``w`` in (0, 1], which
widens the curve's posterior as if there were ``w`` times as many points. The package's live
update takes it as ``LiveForecaster(likelihood_weight=w)`` (default 1); the backtests make their
own forecaster, so each variant sets the weight where the update conditions the run:

- ``w`` fixed at 0.5, 0.25 and 0.1;
- ``w`` from the run's own residuals: the lag-1 autocorrelation ``rho`` of its standardised
  residuals about the untempered mode's curve, ``w = (1 - rho) / (1 + rho)`` (the share of
  independent points an AR(1) series holds), ``rho`` floored at 0.

Scored as the forecast backtest (leave one source out, each run's stated range given) and as the
live backtest (no range given) score bayesgrpo, on the shared leave-one-source-out populations
(``benchmarks/_loso.py``), the same cuts, draws and seeds; the ``w = 1`` rows are the package as
it is, recomputed by the same code.

``--backtest W`` runs the leave-one-source-out backtest itself (``benchmarks/backtest.py --split
loso``: its forecasts, baselines, targets, stop rules and reliability) with every live update
tempered by ``W``, into ``results/live_tempered_backtest_w<W>/``; ``--live-backtest W`` the live
backtest (``benchmarks/live_backtest.py``, no stated range given) into
``results/live_tempered_live_backtest_w<W>/``.

Usage::

    python benchmarks/experiments/live_tempered.py                  # -> results/live_tempered.md
    python benchmarks/experiments/live_tempered.py --backtest 0.5   # -> results/live_tempered_backtest_w0.5/
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
import warnings
from collections.abc import Iterator
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

sys.path.insert(0, str(HERE))
from source_effects import STOP_RULES, bayes_rows, stop_rows, stop_summary, summary  # noqa: E402

RESULTS = HERE / "results"
SCRATCH = BENCHMARKS / "_scratch" / "live_tempered"
#: label -> the likelihood's weight: a number, or "ar1" (from the run's residuals)
VARIANTS: dict[str, float | str] = {
    "w 1 (as shipped)": 1.0,
    "w 0.5": 0.5,
    "w 0.35": 0.35,
    "w 0.25": 0.25,
    "w 0.15": 0.15,
    "w 0.1": 0.1,
    "w from AR(1) residuals": "ar1",
}
#: Fixed weights a held-out source's weight is chosen from (on the other sources' runs).
GRID = ("w 1 (as shipped)", "w 0.5", "w 0.35", "w 0.25", "w 0.15", "w 0.1")
#: Variants whose stop decisions are measured too (the stopping backtest's checks and rules).
STOP_VARIANTS = ("w 1 (as shipped)", "w 0.5", "w 0.35", "w 0.25")

logger = logging.getLogger("live_tempered")


def ar1_weight(prior: Any, t: np.ndarray, y: np.ndarray, noise_scale: np.ndarray) -> float:
    """``(1 - rho) / (1 + rho)`` of the lag-1 autocorrelation of a run's standardised residuals
    about the curve of its untempered posterior mode (``rho`` floored at 0; 1 with < 4 points).
    """
    from scipy import special

    from bayesgrpo.model.curves import reward_curve_by_levels
    from bayesgrpo.model.laplace import laplace_fit

    if len(t) < 4:
        return 1.0
    mode, _ = laplace_fit(prior, t, y, noise_scale)
    # the prior's names: r0, r1, the family's shape parameters, log_sigma
    shape = {name: np.exp(mode[2 + i]) for i, name in enumerate(prior.names[2:-1])}
    mean = reward_curve_by_levels(prior.curve, t, special.expit(mode[0]), special.expit(mode[1]), **shape)
    residual = (y - mean) / noise_scale
    residual = residual - residual.mean()
    rho = float(np.sum(residual[1:] * residual[:-1]) / max(np.sum(residual * residual), 1e-12))
    rho = min(max(rho, 0.0), 0.95)
    return (1.0 - rho) / (1.0 + rho)


@contextlib.contextmanager
def tempered(weight: float | str, weights_seen: list[float]) -> Iterator[None]:
    """Every live update made inside with the package's ``likelihood_weight`` set to ``weight``.

    The backtests make their own ``LiveForecaster`` (weight 1); the weight is set where the
    update conditions the run (``bayesgrpo.model.laplace._condition_run``), as
    ``LiveForecaster(likelihood_weight=...)`` sets it.
    """
    from bayesgrpo.model import laplace

    original = laplace._condition_run

    def condition(prior: Any, t: Any, y: Any, noise_scale: Any, **kwargs: Any) -> Any:
        t_, y_ = np.asarray(t, dtype=float), np.asarray(y, dtype=float)
        scale = np.ones_like(t_) if noise_scale is None else np.asarray(noise_scale, dtype=float)
        w = ar1_weight(prior, t_, y_, scale) if weight == "ar1" else float(weight)
        weights_seen.append(w)
        return original(prior, t, y, noise_scale, **{**kwargs, "likelihood_weight": w})

    laplace._condition_run = condition
    try:
        yield
    finally:
        laplace._condition_run = original


def variant_rows(label: str, weight: float | str, table: Any, populations: dict[str, Any]) -> pd.DataFrame:
    """Both splits' bayesgrpo rows under one weight (cached in :data:`SCRATCH`)."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = SCRATCH / f"{label.replace(' ', '_').replace('(', '').replace(')', '')}.csv"
    if path.exists():
        return pd.read_csv(path)
    weights: list[float] = []
    with tempered(weight, weights):
        frame = pd.concat(
            [
                bayes_rows(table, populations).assign(split="ranges given"),
                bayes_rows(without_stated_range(table), populations).assign(split="no range given"),
            ],
            ignore_index=True,
        )
    frame = frame.assign(variant=label, weight_median=float(np.median(weights)) if weights else 1.0)
    frame.to_csv(path, index=False)
    return frame


def chosen_on_other_sources(frame: pd.DataFrame, sources: dict[str, str]) -> pd.DataFrame:
    """Each split's rows with, for every held-out source, the weight of :data:`GRID` whose mean
    CRPS over the *other* sources' runs (all cuts) is lowest: the weight a user's run of a new
    source would get from the bundled runs.
    """
    frame = frame.assign(source=frame["run_id"].map(sources))
    chosen = []
    for split, rows in frame[frame["variant"].isin(GRID)].groupby("split", sort=False):
        for source in rows["source"].unique():
            others = rows[rows["source"] != source]
            best = others.groupby("variant")["crps"].mean().idxmin()
            picked = rows[(rows["source"] == source) & (rows["variant"] == best)]
            chosen.append(picked.assign(variant="w chosen on other sources", chosen=best, split=split))
    return pd.concat(chosen, ignore_index=True)


def variant_stops(label: str, weight: float | str, table: Any, populations: dict[str, Any]) -> pd.DataFrame:
    """The stopping backtest's rows of :data:`STOP_RULES` under one weight (cached)."""
    path = SCRATCH / f"stops_{label.replace(' ', '_').replace('(', '').replace(')', '')}.csv"
    if path.exists():
        return pd.read_csv(path)
    with tempered(weight, []):
        frame = stop_rows(table, populations).assign(variant=label)
    frame.to_csv(path, index=False)
    return frame


def tempered_backtest(weight: float) -> int:
    """The leave-one-source-out backtest (``benchmarks/backtest.py``) with its live updates tempered."""
    import backtest

    out = RESULTS / f"live_tempered_backtest_w{weight:g}"
    with tempered(weight, []):
        backtest.main(["--split", "loso", "--quiet", "--output-dir", str(out)])
    name_command(out, weight)
    return 0


def tempered_live_backtest(weight: float) -> int:
    """The live backtest (``benchmarks/live_backtest.py``: no stated range given) with its live
    updates tempered; its forecasts cached apart from the untempered ones.
    """
    import live_backtest

    out = RESULTS / f"live_tempered_live_backtest_w{weight:g}"
    live_backtest.SCRATCH = BENCHMARKS / "_scratch" / f"live_backtest_tempered_w{weight:g}"
    with tempered(weight, []):
        live_backtest.main(["--output-dir", str(out)])
    name_command(out, weight, "--live-backtest")
    return 0


def name_command(out: Path, weight: float, flag: str = "--backtest") -> None:
    """The result files' command line as the command that wrote them (not the backtest's own)."""
    command = f"Command: `python benchmarks/experiments/live_tempered.py {flag} {weight:g}`  "
    for path in out.glob("*.md"):
        lines = path.read_text().split("\n")
        lines = [command if line.startswith("Command: ") else line for line in lines]
        path.write_text("\n".join(lines))


def simulated_coverage(weights: tuple[float, ...] = (1.0, 0.5, 0.25), n_runs: int = 40) -> pd.DataFrame:
    """Coverage of later points on runs the model describes exactly (the live-path issue's test of
    the two bands, ``tests/questions/test_live_bands.py``): Weibull runs drawn from a Gaussian
    prior with its own Student-t noise, conditioned on their first quarter, under each weight.
    """
    from scipy import special

    from bayesgrpo.model.curves import reward_curve_by_levels
    from bayesgrpo.model.draws import CurveDraws, predictive_at, reward_at
    from bayesgrpo.model.laplace import GaussianRunPrior, condition_run

    names = ("r0", "r1", "tau", "k", "log_sigma")
    prior = GaussianRunPrior(
        "weibull", names, np.array([-1.0, 0.5, np.log(0.3), 0.0, np.log(0.05)]), np.eye(5) * 0.25, nu=30.0
    )
    n_steps, seen = 120, 30
    steps = np.arange(n_steps + 1, dtype=float)
    t = steps / n_steps
    rows = []
    for weight in weights:
        rng = np.random.default_rng(7)
        inside: dict[str, list[float]] = {"predictive": [], "curve": []}
        for run in range(n_runs):
            truth = rng.multivariate_normal(prior.mean, prior.cov)
            sigma = np.sqrt(np.exp(2 * truth[-1]) + prior.noise_floor**2)
            shape = {"tau": np.exp(truth[2]), "k": np.exp(truth[3])}
            mean = reward_curve_by_levels(
                "weibull", t, special.expit(truth[0]), special.expit(truth[1]), **shape
            )
            y = mean + sigma * rng.standard_t(prior.nu, size=t.size)
            posterior = condition_run(
                prior, t[:seen], y[:seen], n_draws=2000, random_seed=run, likelihood_weight=weight
            )
            natural = posterior.natural()
            draws = CurveDraws(
                curve="weibull",
                params={name: natural[name] for name in ("r0", "r1", "tau", "k")},
                step_scale=float(n_steps),
                horizon_step=float(n_steps),
                noise_sd=natural["sigma"],
                noise_df=prior.nu,
            )
            later = steps[seen:]
            for band, values in (
                ("predictive", predictive_at(draws, later, rng)[:, 0, :]),
                ("curve", reward_at(draws, later)[:, 0, :]),
            ):
                low, high = np.quantile(values, [0.05, 0.95], axis=0)
                inside[band].append(float(np.mean((y[seen:] >= low) & (y[seen:] <= high))))
        rows.append(
            {
                "weight": weight,
                "cover90_predictive": np.mean(inside["predictive"]),
                "cover90_curve": np.mean(inside["curve"]),
            }
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    """Every variant on both splits, then the comparison (or, with ``--backtest W``, the backtest)."""
    import argparse

    from bayesgrpo.model.datasets import load_bundled

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "--backtest", type=float, default=None, metavar="W", help="run backtest.py tempered by W"
    )
    parser.add_argument(
        "--live-backtest", type=float, default=None, metavar="W", help="run live_backtest.py tempered by W"
    )
    args = parser.parse_args(argv)
    if args.backtest is not None:
        return tempered_backtest(args.backtest)
    if args.live_backtest is not None:
        return tempered_live_backtest(args.live_backtest)

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.WARNING)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    table = load_bundled(warn=False)
    kinds = range_kinds(table)
    populations = loso_populations(table)
    frames = []
    for label, weight in VARIANTS.items():
        began = time.perf_counter()
        frames.append(variant_rows(label, weight, table, populations))
        logger.info("%s: %.0f s", label, time.perf_counter() - began)
    from bayesgrpo.evaluate.backtest import source_groups

    sources = {run_id: name for name, runs in source_groups(table).items() for run_id in runs}
    frame = pd.concat(frames, ignore_index=True)
    chosen = chosen_on_other_sources(frame, sources)
    frame = pd.concat([frame, chosen.drop(columns=["source", "chosen"])], ignore_index=True)
    frame.to_csv(RESULTS / "live_tempered_runs.csv", index=False)
    table_rows = summary(frame, kinds)
    weights = frame.groupby(["variant"], sort=False)["weight_median"].first().reset_index()
    picks = chosen.groupby(["split", "chosen"])["source"].nunique().rename("sources").reset_index()
    stops = pd.concat(
        [variant_stops(label, VARIANTS[label], table, populations) for label in STOP_VARIANTS],
        ignore_index=True,
    )
    lines = [
        "# A run's points counted for what their autocorrelation leaves of them",
        "",
        f"Command: `{command_line('experiments/live_tempered.py', argv)}`  ",
        f"Machine: {machine_line()}; {time.perf_counter() - start:.0f} s (variants cached in "
        "`benchmarks/_scratch/live_tempered`).",
        "",
        "Leave one source out (the shared populations); `ranges given`: each run's stated range given, "
        "as the forecast backtest; `no range given`: as the live backtest. The live update's log "
        "likelihood times `w`. Coverage a mean over runs; CRPS and the final-reward error in units of "
        "the run's logged range.",
        "",
        markdown_table(table_rows),
        "",
        "Median weight over the updates of each variant:",
        "",
        markdown_table(weights.dropna()),
        "",
        "`w chosen on other sources`: the weight each held-out source got (lowest mean CRPS over the "
        "other sources' runs at every cut, per split):",
        "",
        markdown_table(picks),
        "",
        "Stop decisions, the stopping backtest's split and rules (leave one source out, ranges given; "
        "checks every 5% of a run, the end smoothed over 5% of its points), each rule's live updates "
        f"tempered as above ({', '.join(STOP_RULES)}):",
        "",
        markdown_table(stop_summary(stops, kinds)),
        "",
        "Runs the model describes exactly (40 simulated Weibull runs, the live-path issue's band test: "
        "conditioned on their first quarter, the 90% bands over their later points):",
        "",
        markdown_table(simulated_coverage()),
        "",
    ]
    write_result(RESULTS / "live_tempered.md", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
