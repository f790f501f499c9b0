"""Live single-run update: speed of the query, and agreement with a NUTS refit of the run.

A population is fitted (default sampler) on the bundled runs except a held-out set; each
held-out run is cut at 25% and 50% of its steps and conditioned on the population by
``bayesgrpo.questions.live`` (Laplace + adaptive importance sampling). Reported per query: the time of
the live update plus the stopping answer P(gain < eps) and the expected remaining gain, and the
same answers from NUTS on the same single-run posterior (same Gaussian population prior, same
Student-t likelihood, PyMC NUTS 4 x 1000 draws): the approximation is what is compared. Five
more queries per row clock each step of the update apart (:data:`STAGES`): where the time goes.

Usage::

    python benchmarks/live_update.py                 # 10 held-out runs, writes results/live_update.md
    python benchmarks/live_update.py --held-out 4 --draws 300
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _markdown import machine_line, markdown_table

RESULTS = HERE / "results"


#: The steps of ``LiveForecaster.update``, timed apart (they do not call one another): names in
#: ``bayesgrpo.questions.live.forecaster``'s namespace, where ``update`` looks them up.
STAGES = (
    "prepare",
    "condition_run",
    "run_curve_draws",
    "with_recent_rise",
    "recent_departure",
)


@contextlib.contextmanager
def stage_clocks(module: ModuleType, names: tuple[str, ...]) -> Iterator[dict[str, float]]:
    """Seconds spent in each of ``module``'s functions ``names`` while the block runs."""
    spent = dict.fromkeys(names, 0.0)
    originals = {name: getattr(module, name) for name in names}

    def clocked(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start

        return run

    for name, function in originals.items():
        setattr(module, name, clocked(name, function))
    try:
        yield spent
    finally:
        for name, function in originals.items():
            setattr(module, name, function)


def nuts_refit(prior, t, y, scale, draws: int, seed: int, likelihood_weight: float = 1.0) -> np.ndarray:
    """NUTS draws (S, P) of the single-run posterior the live update approximates (its likelihood
    tempered by the forecaster's ``likelihood_weight`` when that is below 1).
    """
    import pymc as pm
    import pytensor.tensor as pt

    from bayesgrpo.model.curves import get_curve, reward_curve_by_levels

    family = get_curve(prior.curve)
    with pm.Model():
        theta = pm.MvNormal("theta", mu=prior.mean, cov=prior.cov)
        shape = {name: pt.exp(theta[2 + i]) for i, name in enumerate(family.shape_params)}
        mean = reward_curve_by_levels(prior.curve, t, pt.sigmoid(theta[0]), pt.sigmoid(theta[1]), **shape)
        sigma = pt.sqrt(pt.exp(2 * theta[-1]) + prior.noise_floor**2) * scale
        if likelihood_weight == 1.0:
            pm.StudentT("y", nu=prior.nu, mu=mean, sigma=sigma, observed=y)
        else:
            noise = pm.StudentT.dist(nu=prior.nu, mu=mean, sigma=sigma)
            pm.Potential("y", likelihood_weight * pm.logp(noise, y).sum())
        idata = pm.sample(
            draws=draws,
            tune=draws,
            chains=4,
            cores=2,
            random_seed=seed,
            progressbar=False,
            target_accept=0.95,
            compute_convergence_checks=False,
        )
    return idata.posterior["theta"].stack(s=("chain", "draw")).transpose("s", ...).to_numpy()


def main() -> None:
    """Time live updates on every bundled run and compare them with a NUTS refit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--held-out", type=int, default=10)
    parser.add_argument("--draws", type=int, default=500, help="population fit draws (and tune) per chain")
    parser.add_argument("--nuts-draws", type=int, default=1000)
    parser.add_argument("--eps", type=float, default=0.01, help="gain threshold, share of the reward range")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--output", type=Path, default=RESULTS / "live_update.md")
    args = parser.parse_args()
    warnings.simplefilter("ignore")

    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.datasets import load_bundled
    from bayesgrpo.model.laplace import RunPosterior
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.questions.live import forecaster as live_module
    from bayesgrpo.questions.stopping import CurveDraws, expected_gain, prob_gain_below

    table = load_bundled(warn=False)
    rng = np.random.default_rng(args.seed)
    held_out = sorted(rng.choice(table.run_ids, size=args.held_out, replace=False).tolist())
    train = table.select([r for r in table.run_ids if r not in held_out])
    start = time.perf_counter()
    population = RewardModel().fit(
        train, draws=args.draws, tune=args.draws, random_seed=args.seed, progressbar=False
    )
    fit_seconds = time.perf_counter() - start
    live = LiveForecaster(population, n_draws=2000, random_seed=args.seed)

    rows = []
    for run_id in held_out:
        one = table.select([run_id])
        points = one.points[np.isfinite(one.points["reward"].to_numpy(dtype=float))]
        horizon = (
            float(one.runs["total_steps"].iloc[0])
            if pd.notna(one.runs["total_steps"].iloc[0])
            else float(points["step"].max())
        )
        for cut in (0.25, 0.5):
            kept = points[
                points["step"] <= points["step"].min() + cut * (points["step"].max() - points["step"].min())
            ]
            if len(kept) < 3:
                continue
            partial = RunsTable(points=kept.reset_index(drop=True), runs=one.runs, report=one.report)
            timings = []
            for _ in range(5):
                t0 = time.perf_counter()
                update = live.update(partial, horizon=horizon)
                answer = prob_gain_below(update.curve_draws, update.step, eps=args.eps, relative=True)[0]
                timings.append(time.perf_counter() - t0)
            # where the time goes: 5 more queries with each step of the update clocked (apart
            # from the timings above, which the clocks' own overhead stays out of)
            with stage_clocks(live_module, STAGES) as spent:
                started = time.perf_counter()
                for _ in range(5):
                    staged = live.update(partial, horizon=horizon)
                    prob_gain_below(staged.curve_draws, staged.step, eps=args.eps, relative=True)
                total = time.perf_counter() - started
            stage_ms = {f"{name}_ms": 1000 * spent[name] / 5 for name in STAGES}
            stage_ms["rest_ms"] = 1000 * total / 5 - sum(stage_ms.values())
            gain = expected_gain(update.curve_draws, update.step).iloc[0]
            post = update.posterior
            # the same posterior by NUTS, read through the same curve-draws code
            data = update.data  # the points as the live update normalised them
            mask = data.mask[0]
            theta = nuts_refit(
                post.prior,
                data.t[0, mask],
                data.y[0, mask],
                data.noise_scale[0, mask],
                args.nuts_draws,
                args.seed,
                live.likelihood_weight,
            )
            nuts = RunPosterior(
                post.prior, theta, post.mode, 0.0, float(len(theta)), post.n_points, 0.0
            ).natural()
            params = {k: v[:, None] for k, v in nuts.items() if k != "sigma"}
            nuts_draws = CurveDraws.from_model_data(params, data, population.curve)
            nuts_answer = prob_gain_below(nuts_draws, update.step, eps=args.eps, relative=True)[0]
            nuts_gain = expected_gain(nuts_draws, update.step).iloc[0]
            # 90% interval width in sd, floored at 0.001 of the reward range (a run on its plateau
            # has a gain interval of width ~0, where any difference is "infinitely many sd")
            gain_sd = max(
                float(nuts_gain["upper"] - nuts_gain["lower"]) / 3.29,
                1e-3 * float(np.ravel(nuts_draws.reward_scale)[0]),
            )
            rows.append(
                {
                    "run": run_id,
                    "cut": cut,
                    "points": post.n_points,
                    "live_ms_median": 1000 * float(np.median(timings)),
                    "first_ms": 1000 * timings[0],
                    "pareto_k": post.pareto_k,
                    "p_gain_below_live": float(answer),
                    "p_gain_below_nuts": float(nuts_answer),
                    "gain_live": float(gain["mean"]),
                    "gain_nuts": float(nuts_gain["mean"]),
                    "gain_diff_in_sd": abs(float(gain["mean"]) - float(nuts_gain["mean"])) / gain_sd,
                    **stage_ms,
                }
            )
            print(rows[-1], flush=True)

    frame = pd.DataFrame(rows)
    frame["abs_p_diff"] = (frame["p_gain_below_live"] - frame["p_gain_below_nuts"]).abs()
    stage_columns = [f"{name}_ms" for name in (*STAGES, "rest")]
    per_query = frame[stage_columns].sum(axis=1)
    stage_table = pd.DataFrame(
        {
            "step": [c.removesuffix("_ms") for c in stage_columns],
            "median_ms": [float(frame[c].median()) for c in stage_columns],
            "slowest_ms": [float(frame[c].max()) for c in stage_columns],
            "mean_share": [float((frame[c] / per_query).mean()) for c in stage_columns],
        }
    )
    lines = [
        "# Live single-run update: speed and agreement with NUTS",
        "",
        f"Command: `python benchmarks/live_update.py --held-out {args.held_out} --draws {args.draws}`  ",
        f"Machine: {machine_line()}. Population fit ({population.curve}) on {len(train)} runs: "
        f"{fit_seconds:.0f} s (not part of the live query).",
        "",
        f"Median live query (update + P(gain < {args.eps:g} of the range)): "
        f"**{frame['live_ms_median'].median():.0f} ms** (slowest run {frame['live_ms_median'].max():.0f} "
        f"ms; first query {frame['first_ms'].median():.0f} ms median).  ",
        "Agreement with NUTS on the same posterior: |P difference| median "
        f"{frame['abs_p_diff'].median():.3f}, max {frame['abs_p_diff'].max():.3f}; expected-gain difference "
        f"in posterior sd: median {frame['gain_diff_in_sd'].median():.2f}, max "
        f"{frame['gain_diff_in_sd'].max():.2f}.",
        "",
        "Where a query's time goes (5 more queries per row with each step of `LiveForecaster.update` "
        "clocked; `rest`: the query's other work, P(gain < eps) included, and the clocks' own):",
        "",
        markdown_table(stage_table),
        "",
        markdown_table(frame.drop(columns=stage_columns)),
        "",
    ]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
