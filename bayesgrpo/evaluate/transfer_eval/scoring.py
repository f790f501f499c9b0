"""Transfer predictions of held-out runs, drawn as logged rewards and scored on the runs' own points."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.evaluate import scores
from bayesgrpo.evaluate.backtest.cuts import (
    FINAL_FRACTION,
    MIN_OBSERVED,
    BacktestError,
    cut_points,
    planned_horizon,
    prefix_table,
    run_points,
    run_seed,
)
from bayesgrpo.evaluate.baselines import forecast_exp_least_squares
from bayesgrpo.evaluate.transfer_eval.metadata import (
    known_reward_bounds,
    population_mean_metadata,
    prefix_label,
    zero_shot_metadata,
)
from bayesgrpo.model.laplace import PARETO_K_LIMIT, LiveUpdateWarning
from bayesgrpo.questions.stopping import reward_at
from bayesgrpo.questions.transfer import predict_new_run

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.transfer import TransferPrediction

logger = logging.getLogger(__name__)


DEFAULT_PREFIXES: tuple[float, ...] = (0.05, 0.1)
#: Methods that see none of the run's points (``zero_shot_initial`` sees its first reward only).
ZERO_SHOT_METHODS: tuple[str, ...] = ("zero_shot", "zero_shot_initial", "population_mean")
#: Window of every logged point but the first.
WHOLE_CURVE = "whole_curve"

SCORE_COLUMNS = [
    "split",
    "run_id",
    "size_b",
    "window",
    "method",
    "crps",
    "final_abs_error",
    "cover50",
    "cover90",
    "final_cover90",
    "n_scored",
    "n_final",
    "reward_range",
    "seconds",
    "status",
]

# What a prediction may raise on an odd run (the package's errors; numpy's LinAlgError is a
# ValueError): recorded in the row's status, the evaluation goes on.
PREDICTION_ERRORS = (BayesGRPOError, ValueError, ArithmeticError)


# --------------------------------------------------------------------------------------------
# Forecast draws and scores
# --------------------------------------------------------------------------------------------


def observed_reward_draws(
    prediction: TransferPrediction, target_steps: np.ndarray, seed: int | None
) -> np.ndarray:
    """Draws of a run's *logged* reward at ``target_steps`` from a transfer prediction.

    The curve draws at the steps plus the noise of one logged point, ``sigma * e`` with ``e``
    Student-t with the population's ``nu`` and ``sigma`` the run's noise draw in reward units
    (as :func:`bayesgrpo.evaluate.backtest.forecast.bayes_forecast_draws`).

    Parameters
    ----------
    prediction : TransferPrediction
    target_steps : ndarray, shape (N,)
    seed : int, optional

    Returns
    -------
    ndarray, shape (S, N)
    """
    cd, posterior = prediction.curve_draws, prediction.posterior
    mean = reward_at(cd, np.asarray(target_steps, dtype=float))[:, 0, :]
    sigma = posterior.natural()["sigma"] * float(np.asarray(cd.reward_scale)[0])
    noise = np.random.default_rng(seed).standard_t(posterior.prior.nu, size=mean.shape)
    return mean + sigma[:, None] * noise


def _score(draws: np.ndarray, y: np.ndarray, scale: float, n_final: int) -> dict[str, float]:
    finite = np.all(np.isfinite(draws), axis=1)
    if not finite.any():
        return dict.fromkeys(("crps", "final_abs_error", "cover50", "cover90", "final_cover90"), np.nan)
    draws = draws[finite]
    # the final reward: the mean of the run's last logged points, against the draws of that mean
    final_draws = draws[:, -n_final:].mean(axis=1)
    low, high = np.quantile(final_draws, [0.05, 0.95])
    final = float(np.mean(y[-n_final:]))
    return {
        "crps": float(scores.crps_from_draws(draws, y, scale).mean()),
        "final_abs_error": scores.final_reward_error(draws[:, -n_final:], y[-n_final:], scale),
        "cover50": float(scores.interval_coverage(draws, y, 0.5).mean()),
        "cover90": float(scores.interval_coverage(draws, y, 0.9).mean()),
        "final_cover90": float(low <= final <= high),
    }


def _windows(points: pd.DataFrame, prefixes: Sequence[float]) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    """``window -> (observed prefix, scored points)``; prefixes leaving too few points dropped."""
    out = {WHOLE_CURVE: (points.iloc[:1], points.iloc[1:].reset_index(drop=True))}
    for fraction in prefixes:
        cut = cut_points(points, fraction)
        if len(cut.observed) < MIN_OBSERVED or cut.held_out.empty:
            continue
        out[f"after_{prefix_label(fraction)}"] = (cut.observed, cut.held_out)
    return out


def _row(
    base: Mapping[str, Any],
    window: str,
    scored: pd.DataFrame,
    method: str,
    draws: np.ndarray,
    status: str,
    seconds: float,
    n_final_run: int,
) -> dict[str, Any]:
    """One score row: ``draws`` (S, N) against the ``N`` scored points of the window."""
    y = scored["reward"].to_numpy(dtype=float)
    n_final = min(n_final_run, len(y))
    return {
        **base,
        "window": window,
        "method": method,
        **_score(draws, y, float(base["reward_range"]), n_final),
        "n_scored": len(y),
        "n_final": n_final,
        "seconds": seconds,
        "status": status,
    }


def _predict(
    population: RewardModel,
    metadata: Mapping[str, Any],
    horizon: float,
    target: np.ndarray,
    n_draws: int,
    seed: int,
    first_points: RunsTable | None = None,
) -> tuple[np.ndarray, str]:
    """Draws of the logged reward at ``target`` and a status; NaN draws when the prediction fails."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LiveUpdateWarning)
            prediction = predict_new_run(
                population,
                metadata,
                horizon=horizon,
                steps=target[:1],
                first_points=first_points,
                n_draws=n_draws,
                random_seed=seed,
            )
    except PREDICTION_ERRORS as exc:
        logger.warning("transfer evaluation: prediction of run %s failed: %s", metadata.get("run_id"), exc)
        return np.full((1, len(target)), np.nan), f"prediction failed: {type(exc).__name__}: {exc}"
    k = prediction.posterior.pareto_k
    status = "ok" if k <= PARETO_K_LIMIT else f"unreliable live update (Pareto k {k:.2f})"
    return observed_reward_draws(prediction, target, seed), status


def transfer_scores(
    table: RunsTable,
    populations: Mapping[str, RewardModel],
    *,
    split: str,
    prefixes: Sequence[float] = DEFAULT_PREFIXES,
    n_draws: int = 1000,
    random_seed: int = 0,
) -> pd.DataFrame:
    """Predict every held-out run with every method and score it on its windows.

    Parameters
    ----------
    table : RunsTable
    populations : mapping run_id -> RewardModel
        A population fitted without each run (:func:`backtest.kfold_populations`,
        :func:`size_out_populations`); runs of ``table`` not in it are skipped.
    split : str
        Label of the split, copied to the ``split`` column.
    prefixes : sequence of float
        Shares of each run's step span observed by the prefix methods.
    n_draws : int
        Predictive draws per forecast.
    random_seed : int

    Returns
    -------
    DataFrame
        One row per (run, window, method), columns :data:`SCORE_COLUMNS`. Zero-shot methods
        (:data:`ZERO_SHOT_METHODS`) are scored on every window of runs with a known reward
        range; ``after_<p>`` and ``run_alone_<p>`` on the window ``after_<p>`` only. CRPS and
        the final-reward error are in units of the run's logged reward range. Runs with a
        constant reward are skipped, and prefix windows leaving fewer than
        :data:`backtest.MIN_OBSERVED` observed points.
    """
    prefixes = [float(p) for p in prefixes]
    for p in prefixes:
        if not 0.0 < p < 1.0:
            raise BacktestError(f"a prefix must be a share strictly between 0 and 1 of the run; got {p}")
    rows: list[dict[str, Any]] = []
    for run_id in table.run_ids:
        if run_id not in populations:
            continue
        points = run_points(table, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        reward_range = float(rewards.max() - rewards.min())
        if reward_range <= 0 or len(points) < 2:
            logger.info("transfer evaluation: run %s skipped (constant reward or one point)", run_id)
            continue
        run = table.select([run_id])
        metadata = run.runs.iloc[0].to_dict()
        held_out = _HeldOutRun(
            split=split,
            run_id=run_id,
            population=populations[run_id],
            run=run,
            metadata=metadata,
            bounds=known_reward_bounds(metadata),
            first_reward=float(rewards[0]),
            horizon=planned_horizon(run),
            n_final=max(1, math.ceil(FINAL_FRACTION * len(points))),
            windows=_windows(points, prefixes),
            base={
                "split": split,
                "run_id": run_id,
                "size_b": pd.to_numeric(metadata.get("size_b"), errors="coerce"),
                "reward_range": reward_range,
            },
        )
        rows.extend(_zero_shot_rows(held_out, n_draws, random_seed))
        rows.extend(_prefix_rows(held_out, prefixes, n_draws, random_seed))
        logger.info("transfer evaluation (%s): run %s done", split, run_id)
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


@dataclass(frozen=True)
class _HeldOutRun:
    """One held-out run of a split, as every method of :func:`transfer_scores` sees it."""

    split: str
    run_id: str
    population: RewardModel
    run: RunsTable
    metadata: dict[str, Any]
    bounds: tuple[float, float] | None
    first_reward: float
    horizon: float
    n_final: int
    windows: dict[str, tuple[pd.DataFrame, pd.DataFrame]]
    base: dict[str, Any]

    def seed(self, random_seed: int, method: str) -> int:
        """The seed of one method on this run, independent of the order runs are visited."""
        return run_seed(random_seed, self.split, self.run_id, method)


def _zero_shot_rows(held: _HeldOutRun, n_draws: int, random_seed: int) -> list[dict[str, Any]]:
    """The zero-shot methods: one forecast of every point after the first, scored on every window."""
    if held.bounds is None:
        logger.info(
            "transfer evaluation: run %s has no reward_min/reward_max: no zero-shot rows", held.run_id
        )
        return []
    all_steps = held.windows[WHOLE_CURVE][1]["step"].to_numpy(dtype=float)
    metadatas = {
        "zero_shot": zero_shot_metadata(held.metadata),
        "zero_shot_initial": zero_shot_metadata(held.metadata, initial_reward=held.first_reward),
        "population_mean": population_mean_metadata(held.metadata),
    }
    rows = []
    for method, meta in metadatas.items():
        start = time.perf_counter()
        draws, status = _predict(
            held.population, meta, held.horizon, all_steps, n_draws, held.seed(random_seed, method)
        )
        seconds = time.perf_counter() - start
        for window, (_, scored) in held.windows.items():
            keep = np.isin(all_steps, scored["step"].to_numpy(dtype=float))
            rows.append(
                _row(held.base, window, scored, method, draws[:, keep], status, seconds, held.n_final)
            )
    return rows


def _prefix_rows(
    held: _HeldOutRun, prefixes: Sequence[float], n_draws: int, random_seed: int
) -> list[dict[str, Any]]:
    """The prefix methods: the population updated by the prefix, and the prefix fitted alone."""
    rows = []
    for fraction in prefixes:
        window = f"after_{prefix_label(fraction)}"
        if window not in held.windows:
            logger.info(
                "transfer evaluation: run %s has too few points for a %g prefix", held.run_id, fraction
            )
            continue
        observed, scored = held.windows[window]
        target = scored["step"].to_numpy(dtype=float)
        method = f"after_{prefix_label(fraction)}"
        start = time.perf_counter()
        draws, status = _predict(
            held.population,
            held.metadata,
            held.horizon,
            target,
            n_draws,
            held.seed(random_seed, method),
            first_points=prefix_table(held.run, observed),
        )
        seconds = time.perf_counter() - start
        rows.append(_row(held.base, window, scored, method, draws, status, seconds, held.n_final))

        method = f"run_alone_{prefix_label(fraction)}"
        start = time.perf_counter()
        forecast = forecast_exp_least_squares(
            observed["step"].to_numpy(dtype=float),
            observed["reward"].to_numpy(dtype=float),
            target,
            n_draws=n_draws,
            random_seed=held.seed(random_seed, method),
            reward_bounds=held.bounds,
        )
        status = (
            "ok" if not forecast.fell_back else f"fell back to persistence: {forecast.info.get('fallback')}"
        )
        seconds = time.perf_counter() - start
        rows.append(_row(held.base, window, scored, method, forecast.draws, status, seconds, held.n_final))
    return rows
