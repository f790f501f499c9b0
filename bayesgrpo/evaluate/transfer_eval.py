"""Transfer evaluation: how well a population predicts runs it never saw, before and early in them.

Each held-out run is predicted from a population fitted without it (:func:`bayesgrpo.questions.transfer.
predict_new_run`) in three ways, and scored on its logged rewards:

``zero_shot``
    From its metadata alone (family, size, task, samples per step; the reward range), none of
    its points.
``zero_shot_initial``
    The same plus ``initial_reward``: the run's first logged reward, what a practitioner
    measures before training starts.
``after_5pct``, ``after_10pct`` (one per prefix)
    Updated live by its points in the first 5% / 10% of its step span (:func:`cut_points`).

against two references:

``population_mean``
    The population's average run: the same reward range and horizon, every covariate
    (family, size, task, batch and group size) removed.
``run_alone_5pct``, ``run_alone_10pct``
    The run's prefix fitted alone, without the population: least squares of the exponential
    saturation law with a residual bootstrap (:func:`baselines.forecast_exp_least_squares`),
    given the reward range when the metadata states it.

Every forecast is a set of draws of the *logged* reward (the curve plus the noise of one logged
point, as :func:`bayesgrpo.evaluate.backtest.forecast.bayes_forecast_draws` draws it), scored by CRPS and
the absolute error of the final reward (mean of the last :data:`backtest.FINAL_FRACTION` of the
run's points), both in units of the run's logged reward range. Each score is taken on a
*window* of the run's points, the same for every method compared in it:

``whole_curve``
    Every logged point but the first (the first is ``zero_shot_initial``'s input): zero-shot
    methods only.
``after_5pct``, ``after_10pct``
    The points after the prefix: the prefix methods and the zero-shot methods.

A zero-shot prediction needs the reward's range (``reward_min`` and ``reward_max`` in the
metadata): runs without it get prefix rows only.

Splits (which population predicts which run)
    * K-fold by run (:func:`backtest.kfold_populations`), an approximation of leave-one-run-out
      at a fraction of its cost.
    * Leave one size out (:func:`size_out_populations`): every run of one model size is held out
      together and predicted from a population fitted on the runs of all other sizes (runs of
      unknown size included), so the size effect must extrapolate or interpolate.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Mapping, Sequence
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
    run_points,
    run_seed,
)
from bayesgrpo.evaluate.backtest.populations import held_out_populations

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.questions.transfer import TransferPrediction

__all__ = [
    "COVARIATES",
    "DEFAULT_PREFIXES",
    "WHOLE_CURVE",
    "ZERO_SHOT_METHODS",
    "improvement_over",
    "known_reward_bounds",
    "observed_reward_draws",
    "population_mean_metadata",
    "prefix_label",
    "run_out_populations",
    "size_groups",
    "size_out_populations",
    "transfer_scores",
    "transfer_summary",
    "zero_shot_metadata",
]

logger = logging.getLogger(__name__)

#: Metadata a zero-shot prediction uses besides the reward range (the population mean drops all).
COVARIATES: tuple[str, ...] = ("family", "size_b", "task", "samples_per_step", "batch_size", "group_size")
#: Shares of a run's step span observed by the prefix methods.
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
    "n_scored",
    "n_final",
    "reward_range",
    "seconds",
    "status",
]

# What a prediction may raise on an odd run (the package's errors; numpy's LinAlgError is a
# ValueError): recorded in the row's status, the evaluation goes on.
_PREDICTION_ERRORS = (BayesGRPOError, ValueError, ArithmeticError)


# --------------------------------------------------------------------------------------------
# Metadata
# --------------------------------------------------------------------------------------------


def known_reward_bounds(metadata: Mapping[str, Any]) -> tuple[float, float] | None:
    """The reward range stated in a run's metadata, or None when missing or not a range.

    Parameters
    ----------
    metadata : mapping
        ``reward_min`` and ``reward_max``.

    Returns
    -------
    (float, float) or None
    """
    from bayesgrpo.questions.live import stated_reward_range

    return stated_reward_range(metadata)


def _present(value: Any) -> bool:
    return value is not None and (isinstance(value, str) or not bool(pd.isna(value)))


def zero_shot_metadata(metadata: Mapping[str, Any], initial_reward: float | None = None) -> dict[str, Any]:
    """What a zero-shot prediction may know of a run: its covariates, reward range and id.

    Parameters
    ----------
    metadata : mapping
        A run's metadata row (``RunsTable.runs``).
    initial_reward : float, optional
        The run's reward before training, added as ``initial_reward``.

    Returns
    -------
    dict
        :data:`COVARIATES` that are present, ``reward_min``, ``reward_max``, ``run_id``; nothing
        about the run's logged points (``total_steps`` is not passed: the horizon is given to
        the prediction separately).
    """
    out = {
        key: metadata[key] for key in (*COVARIATES, "reward_min", "reward_max", "run_id") if key in metadata
    }
    out = {key: value for key, value in out.items() if _present(value)}
    if initial_reward is not None:
        out["initial_reward"] = float(initial_reward)
    return out


def population_mean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The population's average run with this run's reward range: every covariate removed."""
    return {key: value for key, value in zero_shot_metadata(metadata).items() if key not in COVARIATES}


def prefix_label(fraction: float) -> str:
    """``0.05 -> "5pct"``: the suffix of the prefix methods and windows."""
    return f"{100 * float(fraction):g}pct"


# --------------------------------------------------------------------------------------------
# Leave one size out
# --------------------------------------------------------------------------------------------


def size_groups(table: RunsTable, min_runs: int = 2) -> dict[float, list[str]]:
    """Runs grouped by model size, for sizes with at least ``min_runs`` runs.

    Parameters
    ----------
    table : RunsTable
    min_runs : int
        Fewest runs a size needs to be held out as a group.

    Returns
    -------
    dict
        ``size_b -> run ids`` (table order), sizes ascending; runs of unknown size are in none.
    """
    if "size_b" not in table.runs.columns:
        raise BacktestError(
            f"no metadata column 'size_b' to group runs by; columns: {list(table.runs.columns)}"
        )
    sizes = pd.to_numeric(table.runs["size_b"], errors="coerce").astype(float)
    run_ids = table.runs["run_id"].astype(str)
    groups: dict[float, list[str]] = {}
    for size, run_id in zip(sizes, run_ids):
        if np.isfinite(size):
            groups.setdefault(float(size), []).append(run_id)
    return {size: groups[size] for size in sorted(groups) if len(groups[size]) >= int(min_runs)}


def size_out_populations(
    table: RunsTable,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    min_runs: int = 2,
    sizes: Sequence[float] | None = None,
) -> dict[str, RewardModel]:
    """Fit one population per model size on the runs of every other size.

    Parameters
    ----------
    table : RunsTable
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit`; ``progressbar`` defaults to False and
        ``random_seed`` to ``random_seed + i`` for the i-th size.
    random_seed : int
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel` (pooling must stay partial).
    min_runs : int
        Sizes with fewer runs are not held out (:func:`size_groups`).
    sizes : sequence of float, optional
        Hold out only these sizes (each must have ``min_runs`` runs); default all.

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` for the runs of the held-out sizes (runs of one size
        share one object). Runs of unknown size and of smaller groups are never held out but
        are in every population.
    """
    groups = size_groups(table, min_runs)
    if sizes is not None:
        unknown = [s for s in sizes if float(s) not in groups]
        if unknown:
            raise BacktestError(
                f"sizes {unknown} have fewer than {min_runs} runs; sizes to hold out: {list(groups)}"
            )
        groups = {float(s): groups[float(s)] for s in sizes}
    if not groups:
        raise BacktestError(f"no model size has {min_runs} or more runs to hold out")
    return held_out_populations(
        table, groups, fit_kwargs, random_seed, model_kwargs=model_kwargs, label="size %g held out"
    )


def run_out_populations(
    table: RunsTable,
    run_ids: Sequence[str] | None = None,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
) -> dict[str, RewardModel]:
    """Leave-one-run-out: one population per held-out run, fitted on every other run.

    Parameters
    ----------
    table : RunsTable
    run_ids : sequence of str, optional
        The runs to hold out, one at a time (default: the runs with a stated reward range, the
        only ones a zero-shot prediction can be made for: :func:`known_reward_bounds`).
    fit_kwargs, random_seed, model_kwargs
        As :func:`size_out_populations`.

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` that never saw that run.
    """
    if run_ids is None:
        run_ids = [
            row["run_id"] for row in table.runs.to_dict("records") if known_reward_bounds(row) is not None
        ]
    missing = sorted(set(run_ids) - set(table.run_ids))
    if missing:
        raise BacktestError(f"runs {missing[:5]} are not in the table")
    if not run_ids:
        raise BacktestError("no run to hold out (none states reward_min and reward_max)")
    return held_out_populations(
        table, {r: [r] for r in run_ids}, fit_kwargs, random_seed, model_kwargs=model_kwargs, label="run %s held out"
    )


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
    from bayesgrpo.questions.stopping import reward_at

    cd, posterior = prediction.curve_draws, prediction.posterior
    mean = reward_at(cd, np.asarray(target_steps, dtype=float))[:, 0, :]
    sigma = posterior.natural()["sigma"] * float(cd.reward_scale[0])
    noise = np.random.default_rng(seed).standard_t(posterior.prior.nu, size=mean.shape)
    return mean + sigma[:, None] * noise


def _score(draws: np.ndarray, y: np.ndarray, scale: float, n_final: int) -> dict[str, float]:
    finite = np.all(np.isfinite(draws), axis=1)
    if not finite.any():
        return dict.fromkeys(("crps", "final_abs_error", "cover50", "cover90"), np.nan)
    draws = draws[finite]
    return {
        "crps": float(scores.crps_from_draws(draws, y, scale).mean()),
        "final_abs_error": scores.final_reward_error(draws[:, -n_final:], y[-n_final:], scale),
        "cover50": float(scores.interval_coverage(draws, y, 0.5).mean()),
        "cover90": float(scores.interval_coverage(draws, y, 0.9).mean()),
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


def _prefix_table(run: RunsTable, observed: pd.DataFrame) -> RunsTable:
    from bayesgrpo.logs.table import RunsTable

    points = run.points[run.points["step"].isin(observed["step"])]
    return RunsTable(points=points.reset_index(drop=True), runs=run.runs, report=run.report)


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
    from bayesgrpo.model.laplace import PARETO_K_LIMIT, LiveUpdateWarning
    from bayesgrpo.questions.transfer import predict_new_run

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
    except _PREDICTION_ERRORS as exc:
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
    from bayesgrpo.evaluate.baselines import forecast_exp_least_squares

    prefixes = [float(p) for p in prefixes]
    for p in prefixes:
        if not 0.0 < p < 1.0:
            raise BacktestError(f"a prefix must be a share strictly between 0 and 1 of the run; got {p}")
    rows: list[dict[str, Any]] = []
    for run_id in table.run_ids:
        if run_id not in populations:
            continue
        population = populations[run_id]
        points = run_points(table, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        reward_range = float(rewards.max() - rewards.min())
        if reward_range <= 0 or len(points) < 2:
            logger.info("transfer evaluation: run %s skipped (constant reward or one point)", run_id)
            continue
        run = table.select([run_id])
        metadata = run.runs.iloc[0].to_dict()
        bounds = known_reward_bounds(metadata)
        horizon = planned_horizon(run)
        n_final_run = max(1, math.ceil(FINAL_FRACTION * len(points)))
        windows = _windows(points, prefixes)
        base = {
            "split": split,
            "run_id": run_id,
            "size_b": pd.to_numeric(metadata.get("size_b"), errors="coerce"),
            "reward_range": reward_range,
        }

        # zero-shot methods: one forecast of every point after the first, scored on every window
        if bounds is None:
            logger.info("transfer evaluation: run %s has no reward_min/reward_max: no zero-shot rows", run_id)
        else:
            all_steps = windows[WHOLE_CURVE][1]["step"].to_numpy(dtype=float)
            metadatas = {
                "zero_shot": zero_shot_metadata(metadata),
                "zero_shot_initial": zero_shot_metadata(metadata, initial_reward=float(rewards[0])),
                "population_mean": population_mean_metadata(metadata),
            }
            for method, meta in metadatas.items():
                start = time.perf_counter()
                draws, status = _predict(
                    population, meta, horizon, all_steps, n_draws, run_seed(random_seed, split, run_id, method)
                )
                seconds = time.perf_counter() - start
                for window, (_, scored) in windows.items():
                    keep = np.isin(all_steps, scored["step"].to_numpy(dtype=float))
                    rows.append(
                        _row(base, window, scored, method, draws[:, keep], status, seconds, n_final_run)
                    )

        # prefix methods: the population updated by the prefix, and the prefix fitted alone
        for fraction in prefixes:
            window = f"after_{prefix_label(fraction)}"
            if window not in windows:
                logger.info(
                    "transfer evaluation: run %s has too few points for a %g prefix", run_id, fraction
                )
                continue
            observed, scored = windows[window]
            target = scored["step"].to_numpy(dtype=float)
            method = f"after_{prefix_label(fraction)}"
            start = time.perf_counter()
            draws, status = _predict(
                population,
                metadata,
                horizon,
                target,
                n_draws,
                run_seed(random_seed, split, run_id, method),
                first_points=_prefix_table(run, observed),
            )
            rows.append(
                _row(base, window, scored, method, draws, status, time.perf_counter() - start, n_final_run)
            )

            method = f"run_alone_{prefix_label(fraction)}"
            start = time.perf_counter()
            forecast = forecast_exp_least_squares(
                observed["step"].to_numpy(dtype=float),
                observed["reward"].to_numpy(dtype=float),
                target,
                n_draws=n_draws,
                random_seed=run_seed(random_seed, split, run_id, method),
                reward_bounds=bounds,
            )
            status = (
                "ok"
                if not forecast.fell_back
                else f"fell back to persistence: {forecast.info.get('fallback')}"
            )
            rows.append(
                _row(
                    base,
                    window,
                    scored,
                    method,
                    forecast.draws,
                    status,
                    time.perf_counter() - start,
                    n_final_run,
                )
            )
        logger.info("transfer evaluation (%s): run %s done", split, run_id)
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def transfer_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Median and mean scores per split, window and method.

    Parameters
    ----------
    frame : DataFrame
        Rows of :func:`transfer_scores` (one or several splits).

    Returns
    -------
    DataFrame
        ``split, window, method, runs, crps_median, crps_mean, final_err_median,
        final_err_mean, cover50_mean, cover90_mean, not_ok`` in the order rows first appear.
    """
    if frame.empty:
        raise BacktestError("no transfer scores to summarise")
    grouped = frame.groupby(["split", "window", "method"], sort=False)
    return grouped.agg(
        runs=("run_id", "nunique"),
        crps_median=("crps", "median"),
        crps_mean=("crps", "mean"),
        final_err_median=("final_abs_error", "median"),
        final_err_mean=("final_abs_error", "mean"),
        cover50_mean=("cover50", "mean"),
        cover90_mean=("cover90", "mean"),
        not_ok=("status", lambda s: int((s != "ok").sum())),
    ).reset_index()


def improvement_over(frame: pd.DataFrame, baseline: str = "population_mean") -> pd.DataFrame:
    """How much each method improves on a baseline, on the same runs and window.

    Parameters
    ----------
    frame : DataFrame
        Rows of :func:`transfer_scores`.
    baseline : str
        The method compared against.

    Returns
    -------
    DataFrame
        One row per (split, window, method other than the baseline) where the baseline was
        scored: ``runs`` (scored by both), ``crps_mean_gain`` = ``1 - mean CRPS / baseline's``,
        ``crps_median_gain`` (the same on medians), ``final_err_mean_gain``, ``crps_wins``
        (runs with a lower CRPS, ``"k/n"``). Gains are shares: 0.3 is 30% better.
    """
    rows = []
    for (split, window), part in frame.groupby(["split", "window"], sort=False):
        wide = part.pivot_table(
            index="run_id", columns="method", values=["crps", "final_abs_error"], aggfunc="first"
        )
        if baseline not in wide["crps"].columns:
            continue
        for method in part["method"].unique():
            if method == baseline:
                continue
            both = wide["crps"][[method, baseline]].dropna().index
            if len(both) == 0:
                continue
            crps_m, crps_b = wide["crps"].loc[both, method], wide["crps"].loc[both, baseline]
            final_m, final_b = (
                wide["final_abs_error"].loc[both, method],
                wide["final_abs_error"].loc[both, baseline],
            )
            rows.append(
                {
                    "split": split,
                    "window": window,
                    "method": method,
                    "runs": len(both),
                    "crps_mean_gain": 1.0 - crps_m.mean() / crps_b.mean(),
                    "crps_median_gain": 1.0 - crps_m.median() / crps_b.median(),
                    "final_err_mean_gain": 1.0 - final_m.mean() / final_b.mean(),
                    "crps_wins": f"{int((crps_m < crps_b).sum())}/{len(both)}",
                }
            )
    columns = [
        "split",
        "window",
        "method",
        "runs",
        "crps_mean_gain",
        "crps_median_gain",
        "final_err_mean_gain",
        "crps_wins",
    ]
    return pd.DataFrame(rows, columns=columns)
