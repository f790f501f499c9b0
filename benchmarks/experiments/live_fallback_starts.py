"""The live update's MCMC fallback from other starts: is its answer the same from each.

Where the importance weights fail (Pareto k above 0.7), :func:`bayesgrpo.model.laplace.condition_run`
answers from emcee's affine-invariant ensemble (:func:`~bayesgrpo.model.laplace.ensemble_draws`),
its 40 walkers started around the posterior mode (``Normal(mode, cov / 4)``) and run 400 steps of
warm-up and 600 kept. ``live_restart.py`` found its answer moving with where the walkers start
(the median end by up to a tenth of a run's range). Here, for every update of the
leave-one-source-out stopping backtest's checks that the fallback answers (every 5% of each of the
60 bundled runs, each run's stated range given, seed 0, 1,000 draws), the fallback is run again
from other starts and seeds:

- ``mode``: as shipped, three seeds;
- ``draws``: the walkers start at 40 of the last importance draws, resampled by their weights
  (spread over what importance sampling found, both modes where it found two), three seeds;
- ``mode, 4x``: as shipped with four times the warm-up and kept steps, one seed: the reference.

For each answer: the forecast of the run's last step (its median, in units of the run's logged
range), the walkers' agreement (rank-normalised split R-hat over the 40 walkers, each walker a
chain, the largest over the parameters; ArviZ) and emcee's ESS. The spread of the median over
seeds says how much an answer depends on its start; the distance to the reference, how far it is
from what a longer run says.

Usage::

    python benchmarks/experiments/live_fallback_starts.py   # -> results/live_fallback_starts.md
    python benchmarks/experiments/live_fallback_starts.py --forecast-cuts
    # -> results/live_fallback_starts_forecast_cuts.md: the far-off run at the forecast backtest's
    #    25% and 50% cuts, the update against a chain four times as long (a minute)

The first pass (every update, to find those the fallback answers) is cached in
``benchmarks/_scratch/live_fallback_starts``; delete it after a change to the live update.
"""

from __future__ import annotations

import logging
import pickle
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
from _markdown import markdown_table  # noqa: E402

RESULTS = HERE / "results"
CACHE = BENCHMARKS / "_scratch" / "live_fallback_starts"
CHECK_EVERY = 0.05
SEEDS = (1, 2, 3)
#: (name, start, length multiple, seeds, moves)
VARIANTS: tuple[tuple[str, str, int, tuple[int, ...], str], ...] = (
    ("mode", "mode", 1, SEEDS, "stretch"),
    ("draws", "draws", 1, SEEDS, "stretch"),
    ("mode, DE moves", "mode", 1, SEEDS, "de"),
    ("draws, DE moves", "draws", 1, SEEDS, "de"),
    ("mode, 4x", "mode", 4, (1,), "stretch"),
    ("mode, DE moves, 4x", "mode", 4, (1,), "de"),
)
#: The variants the others are measured against.
REFERENCES = ("mode, 4x", "mode, DE moves, 4x")
#: R-hat above which the walkers are read as disagreeing.
RHAT_LIMIT = 1.05


def fallback_cases(table: Any, populations: dict[str, Any]) -> list[dict[str, Any]]:
    """Every check whose update the fallback answers: what the fallback was given, and the
    importance draws and weights it was given up on (cached).
    """
    path = CACHE / "cases.pkl"
    if path.exists():
        with open(path, "rb") as handle:
            return pickle.load(handle)
    import bayesgrpo.questions.live as live_module
    from bayesgrpo.evaluate.backtest import planned_horizon, run_points
    from bayesgrpo.evaluate.backtest.stopping import check_indices, update_at_check
    from bayesgrpo.model import laplace

    seen: dict[str, Any] = {}
    adapted, ensemble = laplace._adapted_importance, laplace.ensemble_draws

    def recording_importance(*args: Any, **kwargs: Any) -> Any:
        theta, weights, pareto_k = adapted(*args, **kwargs)
        seen["theta"], seen["weights"] = theta, weights
        return theta, weights, pareto_k

    def recording_ensemble(prior, t, y, noise_scale, mode, cov, n_draws, rng, likelihood_weight=1.0):
        seen["fallback"] = {
            "prior": prior,
            "data": (t, y, noise_scale),
            "mode": mode,
            "cov": cov,
            "weight": likelihood_weight,
            "theta": seen["theta"],
            "weights": seen["weights"],
        }
        return ensemble(prior, t, y, noise_scale, mode, cov, n_draws, rng, likelihood_weight)

    laplace._adapted_importance, laplace.ensemble_draws = recording_importance, recording_ensemble
    cases = []
    try:
        forecasters: dict[int, Any] = {}
        for run_id in table.run_ids:
            population = populations[run_id]
            live = forecasters.setdefault(
                id(population), live_module.LiveForecaster(population, n_draws=1000, random_seed=0)
            )
            run = table.select([run_id])
            points = run_points(table, run_id)
            steps = points["step"].to_numpy(dtype=float)
            rewards = points["reward"].to_numpy(dtype=float)
            for i in check_indices(points, CHECK_EVERY):
                seen.pop("fallback", None)
                update = update_at_check(live, run, points, i, planned_horizon(run))
                if update is None or "fallback" not in seen:
                    continue
                cases.append(
                    seen["fallback"]
                    | {
                        "run_id": run_id,
                        "progress": steps[i] / steps[-1],
                        "model_data": update.data,
                        "curve": update.curve_draws.curve,
                        "horizon_step": update.horizon_step,
                        "shipped_theta": update.posterior.theta,
                        "span": float(rewards.max() - rewards.min()),
                    }
                )
    finally:
        laplace._adapted_importance, laplace.ensemble_draws = adapted, ensemble
    CACHE.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with open(partial, "wb") as handle:
        pickle.dump(cases, handle)
    partial.replace(path)  # a cut run leaves no half-written cache
    return cases


def walkers_start(case: dict[str, Any], how: str, rng: np.random.Generator) -> np.ndarray:
    """The walkers' starting points: around the mode as shipped, or at resampled importance draws."""
    from bayesgrpo.model.laplace import ENSEMBLE_WALKERS

    if how == "mode":
        return rng.multivariate_normal(case["mode"], 0.25 * case["cov"], size=ENSEMBLE_WALKERS, method="eigh")
    weights = case["weights"] / case["weights"].sum()
    index = rng.choice(len(weights), size=ENSEMBLE_WALKERS, replace=True, p=weights)
    start = case["theta"][index]
    # repeated draws would put walkers on top of each other: jitter each by a hundredth of an sd
    jitter = rng.multivariate_normal(np.zeros(len(case["mode"])), 1e-4 * case["cov"], size=len(start))
    return start + jitter


def run_ensemble(
    case: dict[str, Any], start: np.ndarray, length: int, seed: int, moves: str
) -> dict[str, float]:
    """The fallback from ``start`` (``length`` times its steps; emcee's stretch move as shipped, or
    ``"de"``: differential-evolution moves, 80% ``DEMove`` and 20% ``DESnookerMove``, emcee's
    suggestion for correlated or multimodal targets): its draws' end forecast, the walkers' R-hat
    and emcee's ESS.
    """
    import arviz as az
    import emcee

    from bayesgrpo.model import laplace

    prior, (t, y, noise_scale), weight = case["prior"], case["data"], case["weight"]

    def log_probability(theta: np.ndarray) -> np.ndarray:
        return laplace.log_posterior(theta, prior, t, y, noise_scale, weight)

    burn, kept = laplace.ENSEMBLE_BURN * length, laplace.ENSEMBLE_STEPS * length
    chosen = (
        [(emcee.moves.DEMove(), 0.8), (emcee.moves.DESnookerMove(), 0.2)]
        if moves == "de"
        else emcee.moves.StretchMove()
    )
    sampler = emcee.EnsembleSampler(len(start), prior.dim, log_probability, moves=chosen, vectorize=True)
    sampler.random_state = np.random.RandomState(seed).get_state()
    begin = time.perf_counter()
    sampler.run_mcmc(start, burn + kept, progress=False)
    seconds = time.perf_counter() - begin
    chain = sampler.get_chain(discard=burn)  # (kept, walkers, P)
    # each walker a chain: ArviZ wants (chain, draw, ...)
    rhat = az.rhat(az.convert_to_dataset({"theta": np.swapaxes(chain, 0, 1)}))["theta"].to_numpy()
    logging.getLogger("emcee.autocorr").setLevel(logging.ERROR)
    tau = float(np.nanmax(sampler.get_autocorr_time(discard=burn, quiet=True)))
    flat = chain.reshape(-1, prior.dim)
    draws = flat[np.linspace(0, len(flat) - 1, 1000).round().astype(int)]
    end = end_draws(case, draws)
    return {
        "end_q50": float(np.median(end)) / case["span"],
        "end_q05": float(np.quantile(end, 0.05)) / case["span"],
        "end_q95": float(np.quantile(end, 0.95)) / case["span"],
        "rhat": float(np.nanmax(rhat)),
        "ess": float(len(flat) / max(tau, 1.0)) if np.isfinite(tau) else 0.0,
        "seconds": seconds,
    }


def end_draws(case: dict[str, Any], theta: np.ndarray) -> np.ndarray:
    """Draws of the run's expected reward at its horizon from parameter draws ``theta``, as
    ``LiveForecaster.update`` makes them (:func:`bayesgrpo.questions.live.run_curve_draws`).
    """
    from bayesgrpo.model.draws import reward_at
    from bayesgrpo.model.laplace import ENSEMBLE, RunPosterior
    from bayesgrpo.questions.live import run_curve_draws

    posterior = RunPosterior(case["prior"], theta, case["mode"], 0.0, 0.0, 0, 0.0, ENSEMBLE)
    curve_draws = run_curve_draws(posterior, case["model_data"], case["curve"])
    return reward_at(curve_draws, np.array([case["horizon_step"]]))[:, 0, 0]


def main() -> None:
    """Find the fallback's updates, run each variant, summarise, write the table."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("bayesgrpo").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    from bayesgrpo.model.datasets import load_bundled

    begin = time.perf_counter()
    table = load_bundled(warn=False)
    cases = fallback_cases(table, loso_populations(table))
    logging.info("%d updates answered by the fallback", len(cases))
    rows = []
    for number, case in enumerate(cases):
        shipped = np.quantile(end_draws(case, case["shipped_theta"]), 0.5) / case["span"]
        for name, how, length, seeds, moves in VARIANTS:
            for seed in seeds:
                rng = np.random.default_rng([seed, number])
                answer = run_ensemble(case, walkers_start(case, how, rng), length, seed, moves)
                rows.append(
                    {
                        "run_id": case["run_id"],
                        "progress": round(case["progress"], 3),
                        "case": number,
                        "variant": name,
                        "seed": seed,
                        "backtest_end_q50": shipped,
                    }
                    | answer
                )
        logging.info("case %d of %d done", number + 1, len(cases))
    frame = pd.DataFrame(rows)
    RESULTS.mkdir(exist_ok=True)
    frame.to_csv(RESULTS / "live_fallback_starts_runs.csv", index=False)
    write_summary(frame, len(cases), time.perf_counter() - begin)


def write_summary(frame: pd.DataFrame, n_cases: int, seconds: float) -> None:
    """The per-variant summary: spread over seeds, distance to the reference, R-hat, ESS, time."""
    reference = {name: frame[frame["variant"] == name].set_index("case")["end_q50"] for name in REFERENCES}
    per_case = []
    for (variant, case), part in frame.groupby(["variant", "case"], sort=False):
        per_case.append(
            {
                "variant": variant,
                "case": case,
                "seed_spread": float(part["end_q50"].max() - part["end_q50"].min()),
                "from_reference": float(np.abs(part["end_q50"] - reference[REFERENCES[0]][case]).max()),
                "from_de_reference": float(np.abs(part["end_q50"] - reference[REFERENCES[1]][case]).max()),
                "rhat_max": float(part["rhat"].max()),
                "rhat_flagged": float((part["rhat"] > RHAT_LIMIT).mean()),
                "ess_min": float(part["ess"].min()),
                "seconds": float(part["seconds"].median()),
            }
        )
    cases = pd.DataFrame(per_case)
    summary = cases.groupby("variant", sort=False).agg(
        cases=("case", "size"),
        seed_spread_median=("seed_spread", "median"),
        seed_spread_max=("seed_spread", "max"),
        from_reference_median=("from_reference", "median"),
        from_reference_p90=("from_reference", lambda v: float(np.quantile(v, 0.9))),
        from_reference_max=("from_reference", "max"),
        from_de_reference_median=("from_de_reference", "median"),
        from_de_reference_p90=("from_de_reference", lambda v: float(np.quantile(v, 0.9))),
        from_de_reference_max=("from_de_reference", "max"),
        rhat_max_median=("rhat_max", "median"),
        share_of_answers_rhat_over_limit=("rhat_flagged", "mean"),
        ess_min_median=("ess_min", "median"),
        seconds_median=("seconds", "median"),
    )
    worst = cases[cases["variant"] == "mode"].nlargest(8, "from_reference")
    worst = worst.merge(
        frame[frame["variant"] == "mode, 4x"][["case", "run_id", "progress", "rhat"]].rename(
            columns={"rhat": "reference_rhat"}
        ),
        on="case",
    )
    lines = [
        "# The live update's MCMC fallback from other starts",
        "",
        f"Command: `python benchmarks/experiments/live_fallback_starts.py` ({seconds:.0f} s, 2 cores)",
        "",
        f"{n_cases} updates of the leave-one-source-out stopping backtest's checks are answered by the "
        "MCMC fallback (every 5% of each of the 60 bundled runs, stated ranges given, seed 0, 1,000 "
        "draws). Each is answered again from the walkers' start as shipped (`mode`: "
        "`Normal(mode, cov / 4)`) and from resampled importance draws (`draws`), with emcee's stretch "
        "move as shipped and with differential-evolution moves (`DE moves`: 80% `DEMove`, 20% "
        "`DESnookerMove`), three seeds each, and once with four times the steps with each move "
        "(`4x`, the references). Numbers are in units of the run's logged range: `seed_spread` is the "
        "largest minus the smallest median end forecast over the seeds of a variant, `from_reference` "
        "(`from_de_reference`) the largest distance of a seed's median end from that of `mode, 4x` "
        "(`mode, DE moves, 4x`); `rhat`: rank-normalised split R-hat over the 40 walkers (the largest "
        f"over the parameters), flagged above {RHAT_LIMIT}; ESS: emcee's.",
        "",
        markdown_table(summary.reset_index().round(4)),
        "",
        "## The updates where the shipped start is furthest from the reference",
        "",
        markdown_table(worst.round(4)),
        "",
    ]
    (RESULTS / "live_fallback_starts.md").write_text("\n".join(lines))
    print("\n".join(lines))


#: The run whose fallback answer only the long chains reach, and the forecast backtest's cuts.
FAR_OFF_RUN = "nb_unslothai_notebooks_Advanced_Llama3_2_3B_GRPO_LoRA_fced3c2_n500"
FORECAST_CUTS = (0.25, 0.5)


def forecast_cuts() -> None:
    """The update of :data:`FAR_OFF_RUN` at the forecast backtest's cuts against a long chain.

    There the update is answered by importance sampling; a DE chain four times the fallback's
    length says whether its forecast is the sampler's or the model's.
    """
    import bayesgrpo.questions.live as live_module
    from bayesgrpo.evaluate.backtest import planned_horizon
    from bayesgrpo.evaluate.backtest.cuts import cut_points, run_points
    from bayesgrpo.evaluate.backtest.stopping import prefix_table
    from bayesgrpo.model.datasets import load_bundled

    warnings.simplefilter("ignore")
    table = load_bundled(warn=False)
    population = loso_populations(table)[FAR_OFF_RUN]
    run, points = table.select([FAR_OFF_RUN]), run_points(table, FAR_OFF_RUN)
    span = float(points["reward"].max() - points["reward"].min())
    seen: dict[str, Any] = {}
    condition_run = live_module.condition_run

    def recording(prior, t, y, noise_scale, **kwargs):
        seen.update(prior=prior, data=(t, y, noise_scale), weight=kwargs["likelihood_weight"])
        seen["posterior"] = condition_run(prior, t, y, noise_scale, **kwargs)
        return seen["posterior"]

    live_module.condition_run = recording
    rows = []
    try:
        live = live_module.LiveForecaster(population, n_draws=1000, random_seed=0)
        for fraction in FORECAST_CUTS:
            cut = cut_points(points, fraction)
            update = live.update(prefix_table(run, cut.observed), horizon=planned_horizon(run))
            posterior = seen["posterior"]
            case = {
                "prior": seen["prior"],
                "data": seen["data"],
                "weight": seen["weight"],
                "mode": posterior.mode,
                "cov": np.cov(posterior.theta.T),
                "model_data": update.data,
                "curve": update.curve_draws.curve,
                "horizon_step": update.horizon_step,
                "span": span,
            }
            start = walkers_start(case, "mode", np.random.default_rng(1))
            long = run_ensemble(case, start, 4, 1, "de")
            later = cut.held_out["reward"].to_numpy(dtype=float)
            rows.append(
                {
                    "cut": fraction,
                    "path": posterior.method,
                    "pareto_k": round(float(posterior.pareto_k), 3),
                    "end_q50, the update": float(np.median(end_draws(case, posterior.theta))) / span,
                    "end_q50, DE moves 4x": long["end_q50"],
                    "DE walkers' R-hat": long["rhat"],
                    "last 10 points before the cut": float(cut.observed["reward"].tail(10).mean()) / span,
                    "run's last 10% of points": float(later[-max(1, len(later) // 10) :].mean()) / span,
                }
            )
    finally:
        live_module.condition_run = condition_run
    lines = [
        "# The far-off run at the forecast backtest's cuts: the update against a long chain",
        "",
        "Command: `python benchmarks/experiments/live_fallback_starts.py --forecast-cuts`",
        "",
        f"`{FAR_OFF_RUN}` cut at 25% and 50% of its steps as the forecast backtest cuts it (its "
        "population fitted without its source; the run states no reward range; seed 0, 1,000 draws): the "
        "update's answer against a chain four times the fallback's length with DE moves from the "
        "update's mode. Rewards in units of the run's logged range (reward / range, not shifted).",
        "",
        markdown_table(pd.DataFrame(rows).round(3)),
        "",
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "live_fallback_starts_forecast_cuts.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    if "--forecast-cuts" in sys.argv[1:]:
        forecast_cuts()
    else:
        main()
