"""The forecast backtest: every method forecasts the held-out rest of each cut run, and is scored."""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.evaluate import scores
from bayesgrpo.evaluate.backtest.cuts import (
    BAYES_METHOD,
    DEFAULT_CUTS,
    DEFAULT_METHODS,
    FINAL_FRACTION,
    MIN_OBSERVED,
    UPDATE_ERRORS,
    BacktestError,
    Cut,
    cut_points,
    planned_horizon,
    prefix_table,
    run_points,
    run_seed,
)
from bayesgrpo.evaluate.backtest.engine import backtest_engine, population_specs
from bayesgrpo.evaluate.baselines import BASELINE_FORECASTERS
from bayesgrpo.interfaces.fleet import Population
from bayesgrpo.model.laplace import (
    ENSEMBLE,
    ENSEMBLE_MIN_ESS,
    IMPORTANCE,
    PARETO_K_LIMIT,
    LiveUpdateWarning,
)
from bayesgrpo.questions.live import LiveForecaster

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.reward_model import RewardModel

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Bayesian forecasts of a held-out run
# --------------------------------------------------------------------------------------------


def forecaster_for(
    population: RewardModel | LiveForecaster, n_draws: int, seed: int | None
) -> LiveForecaster:
    """The live forecaster of a population (a fitted RewardModel is wrapped, a forecaster kept)."""
    if isinstance(population, LiveForecaster):
        return population
    return LiveForecaster(population, n_draws=int(n_draws), random_seed=seed)


def _bayes_forecast(
    live: LiveForecaster, run: RunsTable, cut: float, target_steps: np.ndarray, seed: int | None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Draws (S, N) of the observed reward at ``target_steps`` and the update's diagnostics."""
    run_id = str(run.runs["run_id"].iloc[0])
    points = run_points(run, run_id)
    observed = points[points["step"] <= cut]
    if observed.empty:
        raise BacktestError(f"run {run_id!r} has no point at or before the cut step {cut:g}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LiveUpdateWarning)
        update = live.update(prefix_table(run, observed), horizon=planned_horizon(run))
    posterior = update.posterior
    info = {
        "pareto_k": posterior.pareto_k,
        "ess": posterior.ess,
        "n_observed": posterior.n_points,
        "path": posterior.method,
        "departure": update.departure.kind if update.departure is not None else "",
    }
    return logged_reward_draws(update, target_steps, seed), info


def logged_reward_draws(update: Any, steps: np.ndarray, seed: int | None) -> np.ndarray:
    """Draws (S, N) of the logged reward at ``steps`` after a live update: its predictive band
    (:meth:`LiveUpdate.reward_draws`: the curve plus one logged point's noise, sigma with the
    noise floor x Student-t(nu)), the noise seeded by ``seed``.
    """
    return np.asarray(
        update.reward_draws(np.asarray(steps, dtype=float), band="predictive", random_seed=seed)
    )


def bayes_forecast_draws(
    population: RewardModel | LiveForecaster,
    run_table: RunsTable,
    cut: float,
    target_steps: np.ndarray,
    n_draws: int = 1000,
    seed: int | None = None,
) -> np.ndarray:
    """Draws of a run's logged reward at later steps from its prefix and a population.

    The run's points at steps ``<= cut`` are conditioned on the population posterior by the
    live update (:meth:`LiveForecaster.update`, normalised progress on the run's
    :func:`planned_horizon`), and each draw of the curve at ``target_steps`` gets the noise of
    one logged point: ``sigma * e`` with ``e`` Student-t with the population's ``nu`` and
    ``sigma`` the run's noise scale draw (the model's noise of a logged point is ``sigma *
    noise_scale``, and one unbinned point has ``noise_scale = 1``).

    Parameters
    ----------
    population : RewardModel or LiveForecaster
        A partial-pooling fit that did not see this run (or a live forecaster around one).
    run_table : RunsTable
        The run, one metadata row; points after ``cut`` are ignored.
    cut : float
        Last step observed.
    target_steps : ndarray, shape (N,)
    n_draws : int
        Draws (when ``population`` is a model; a forecaster keeps its own).
    seed : int, optional
        Seeds the live update and the noise.

    Returns
    -------
    ndarray, shape (n_draws, N)
        In reward units.
    """
    if len(run_table.runs) != 1:
        raise BacktestError(
            f"bayes_forecast_draws takes one run; got {len(run_table.runs)} (use table.select)"
        )
    draws, _ = _bayes_forecast(
        forecaster_for(population, n_draws, seed), run_table, float(cut), target_steps, seed
    )
    return draws


# --------------------------------------------------------------------------------------------
# Forecast backtest
# --------------------------------------------------------------------------------------------


def score_forecast(draws: np.ndarray, y: np.ndarray, scale: float, n_final: int) -> dict[str, float]:
    """Mean scores of one forecast over its held-out points, and the shares of them in each bin of
    the PIT histogram (``pit0`` ... ``pit9``).
    """
    pit = scores.pit_histogram(draws, y)
    return {
        "crps": float(scores.crps_from_draws(draws, y, scale).mean()),
        "lpd": float(scores.log_predictive_density(draws, y, scale).mean()),
        "cover50": float(scores.interval_coverage(draws, y, 0.5).mean()),
        "cover90": float(scores.interval_coverage(draws, y, 0.9).mean()),
        "width50": float(scores.interval_width(draws, 0.5, scale).mean()),
        "width90": float(scores.interval_width(draws, 0.9, scale).mean()),
        "final_abs_error": scores.final_reward_error(draws[:, -n_final:], y[-n_final:], scale),
        **{f"pit{i}": float(share) for i, share in enumerate(pit)},
    }


def live_forecasters(
    populations: Mapping[str, RewardModel],
    run_ids: Sequence[str],
    n_draws: int,
    random_seed: int,
) -> dict[str, LiveForecaster]:
    """One live forecaster per distinct population object (its new-run prior is cached), seeded
    as :func:`population_specs` seeds it.
    """
    specs, index = population_specs(populations, run_ids, n_draws, random_seed)
    built = [spec.forecaster() if isinstance(spec, Population) else spec for spec in specs]
    return {run_id: built[index[run_id]] for run_id in run_ids}


def forecast_backtest(
    table: RunsTable,
    populations: Mapping[str, RewardModel] | None,
    cuts: Sequence[float] = DEFAULT_CUTS,
    methods: Sequence[str] = DEFAULT_METHODS,
    baseline_options: Mapping[str, Mapping[str, Any]] | None = None,
    n_draws: int = 1000,
    random_seed: int = 0,
    *,
    workers: int | None = None,
    address: str | None = None,
) -> pd.DataFrame:
    """Cut every run, forecast its held-out points with every method, score the forecasts.

    Parameters
    ----------
    table : RunsTable
    populations : mapping run_id -> RewardModel, or None
        For ``"bayesgrpo"``: a population fitted without the run (:func:`kfold_populations`).
        Only needed when ``"bayesgrpo"`` is among ``methods``.
    cuts : sequence of float
        Fractions of each run's step span observed (:func:`cut_points`).
    methods : sequence of str
        ``"bayesgrpo"`` and names of :data:`bayesgrpo.evaluate.baselines.BASELINE_FORECASTERS`.
    baseline_options : mapping method -> mapping, optional
        Keyword options of each baseline (``{"domhan_ensemble": {"n_steps": 300}}``).
    n_draws : int
        Predictive draws per forecast.
    random_seed : int
    workers, address : optional
        Run each run's forecasts on Ray (``bayesgrpo[ray]``): this many local worker processes,
        or the cluster at ``address``; the rows equal the serial ones (each draw is seeded by
        its run, cut and method).

    Returns
    -------
    DataFrame
        One row per (run, cut, method): ``run_id, cut, method, crps, lpd, cover50, cover90,
        width50, width90, final_abs_error, seconds``, then ``cut_step, n_observed, n_held_out,
        n_final, reward_range, status`` (``"ok"``, or why the method fell back or is unreliable),
        ``path`` (bayesgrpo: the live update's ``importance`` or ``ensemble_mcmc``; a baseline:
        ``fit`` or ``fallback``), ``departure`` (bayesgrpo: ``above``, ``below`` or ``noise``
        where the prefix's latest points had left the update's band,
        :func:`bayesgrpo.questions.live.recent_departure`; else empty), and ``pit0`` ... ``pit9``:
        the share of the held-out points
        whose PIT value falls in each tenth of [0, 1] (:func:`bayesgrpo.evaluate.scores.pit_histogram`).
        CRPS, widths and the final error are in units of the run's logged reward range; the
        final reward is the mean of the run's last :data:`FINAL_FRACTION` of points. A cut that
        leaves fewer than :data:`MIN_OBSERVED` observed points, no held-out point, or a run
        with a constant reward is skipped (logged).
    """
    methods, options = _checked_methods(methods, baseline_options)
    if BAYES_METHOD in methods and populations is None:
        raise BacktestError(
            "method 'bayesgrpo' needs populations (run_id -> fitted RewardModel): kfold_populations"
        )
    needed = populations if BAYES_METHOD in methods else None
    work = ForecastWork(table, tuple(cuts), tuple(methods), options, n_draws, random_seed)
    engine, index = backtest_engine(
        needed,
        table.run_ids,
        n_draws,
        random_seed,
        workers=workers,
        address=address,
    )
    with engine:
        rows = engine.map(forecast_run, [(r, index.get(r)) for r in table.run_ids], work)
    return pd.DataFrame([row for per_run in rows for row in per_run], columns=FORECAST_COLUMNS)


@dataclass(frozen=True)
class ForecastWork:
    """What every run of a forecast backtest is asked (sent to each worker with its batch)."""

    table: RunsTable
    cuts: tuple[float, ...]
    methods: tuple[str, ...]
    options: Mapping[str, Mapping[str, Any]]
    n_draws: int
    random_seed: int


def forecast_run(
    item: tuple[str, int | None], forecaster_of: Callable[[int], LiveForecaster], work: ForecastWork
) -> list[dict[str, Any]]:
    """One run's rows of the forecast backtest: every cut, every method (an engine's work
    function; ``item`` is the run id and its population's index, None without ``"bayesgrpo"``).
    """
    run_id, population = item
    points = run_points(work.table, run_id)
    rewards = points["reward"].to_numpy(dtype=float)
    reward_range = float(rewards.max() - rewards.min())
    if reward_range <= 0:
        logger.info("forecast backtest: run %s skipped (constant reward)", run_id)
        return []
    n_final_run = max(1, math.ceil(FINAL_FRACTION * len(points)))
    run = work.table.select([run_id])
    rows = []
    for fraction in work.cuts:
        cut = cut_points(points, fraction)
        if len(cut.observed) < MIN_OBSERVED or cut.held_out.empty:
            logger.info(
                "forecast backtest: run %s cut %g skipped (%d observed, %d held out)",
                run_id,
                fraction,
                len(cut.observed),
                len(cut.held_out),
            )
            continue
        target = cut.held_out["step"].to_numpy(dtype=float)
        for method in work.methods:
            seed = run_seed(work.random_seed, run_id, fraction, method)
            start = time.perf_counter()
            if method == BAYES_METHOD:
                assert population is not None  # every run has one when "bayesgrpo" is asked
                live = forecaster_of(population)
                draws, status, path, departure = _bayes_draws(live, run, cut, target, seed, fraction)
            else:
                draws, status = _baseline_draws(method, cut, target, work.n_draws, seed, work.options)
                path, departure = ("fit" if status == "ok" else "fallback"), ""
            seconds = time.perf_counter() - start
            row = {
                "run_id": run_id,
                "cut": float(fraction),
                "method": method,
                "path": path,
                "departure": departure,
            }
            rows.append(row | _scores(draws, cut, reward_range, n_final_run, status, seconds))
    logger.info("forecast backtest: run %s done", run_id)
    return rows


#: The PIT histogram of a forecast's held-out points: the share of them in each tenth of [0, 1].
PIT_COLUMNS = tuple(f"pit{i}" for i in range(scores.PIT_BINS))
#: Columns of :func:`forecast_backtest`'s table.
FORECAST_COLUMNS = [
    "run_id",
    "cut",
    "method",
    "crps",
    "lpd",
    "cover50",
    "cover90",
    "width50",
    "width90",
    "final_abs_error",
    "seconds",
    "cut_step",
    "n_observed",
    "n_held_out",
    "n_final",
    "reward_range",
    "status",
    "path",
    "departure",
    *PIT_COLUMNS,
]
_SCORE_COLUMNS = ("crps", "lpd", "cover50", "cover90", "width50", "width90", "final_abs_error", *PIT_COLUMNS)


def _checked_methods(
    methods: Sequence[str], baseline_options: Mapping[str, Mapping[str, Any]] | None
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The methods and each baseline's options, checked against the known methods."""
    methods = list(methods)
    unknown = [m for m in methods if m != BAYES_METHOD and m not in BASELINE_FORECASTERS]
    if unknown:
        raise BacktestError(f"unknown methods {unknown}; choose from {[BAYES_METHOD, *BASELINE_FORECASTERS]}")
    options = {name: dict(value) for name, value in (baseline_options or {}).items()}
    bad_options = sorted(set(options) - set(BASELINE_FORECASTERS))
    if bad_options:
        raise BacktestError(
            f"baseline_options for unknown baselines {bad_options}; baselines are "
            f"{list(BASELINE_FORECASTERS)}"
        )
    return methods, options


def _bayes_draws(
    live: LiveForecaster, run: RunsTable, cut: Cut, target: np.ndarray, seed: int, fraction: float
) -> tuple[np.ndarray, str, str, str]:
    """The live update's draws of the held-out points, its status (a failed update is NaN), the
    path that answered (importance sampling, or the MCMC fallback where its weights failed) and
    whether the prefix's latest points had left the forecast (``Departure.kind``, "" if not).
    """
    try:
        draws, info = _bayes_forecast(live, run, cut.step, target, seed)
    except UPDATE_ERRORS as exc:  # one failed update must not end an hour-long backtest
        logger.warning(
            "forecast backtest: live update of run %s at cut %g failed: %s",
            run.run_ids[0],
            fraction,
            exc,
        )
        failed = f"live update failed: {type(exc).__name__}: {exc}"
        return np.full((1, len(target)), np.nan), failed, "failed", ""
    k, path, departure = info["pareto_k"], info["path"], info["departure"]
    if path == IMPORTANCE and k > PARETO_K_LIMIT:  # (only with a forecaster told not to fall back)
        return draws, f"unreliable live update (Pareto k {k:.2f})", path, departure
    if path == ENSEMBLE and info["ess"] < ENSEMBLE_MIN_ESS:
        return draws, f"MCMC fallback mixed poorly (ESS {info['ess']:.0f})", path, departure
    return draws, "ok", path, departure


def _baseline_draws(
    method: str,
    cut: Cut,
    target: np.ndarray,
    n_draws: int,
    seed: int,
    options: Mapping[str, Mapping[str, Any]],
) -> tuple[np.ndarray, str]:
    """A baseline's draws of the held-out points, and its status (why it fell back, if it did)."""
    forecast = BASELINE_FORECASTERS[method](
        cut.observed["step"].to_numpy(dtype=float),
        cut.observed["reward"].to_numpy(dtype=float),
        target,
        n_draws=n_draws,
        random_seed=seed,
        **options.get(method, {}),
    )
    return forecast.draws, "ok" if not forecast.fell_back else str(forecast.info.get("fallback"))


def _scores(
    draws: np.ndarray, cut: Cut, reward_range: float, n_final_run: int, status: str, seconds: float
) -> dict[str, Any]:
    """One forecast's scores on the held-out points (non-finite draws dropped, and said so)."""
    y = cut.held_out["reward"].to_numpy(dtype=float)
    n_final = min(n_final_run, len(y))
    finite = np.all(np.isfinite(draws), axis=1)
    if finite.any():
        scored = score_forecast(draws[finite], y, reward_range, n_final)
        if not finite.all():
            status += f"; {int((~finite).sum())} non-finite draws dropped"
    else:
        scored = dict.fromkeys(_SCORE_COLUMNS, np.nan)
        status = status if status.startswith("live update failed") else "no finite draw"
    return scored | {
        "seconds": seconds,
        "cut_step": cut.step,
        "n_observed": len(cut.observed),
        "n_held_out": len(y),
        "n_final": n_final,
        "reward_range": reward_range,
        "status": status,
    }
