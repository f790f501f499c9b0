"""Backtests on real runs: forecasts from a cut prefix, and stopping rules run online.

Forecast backtest (:func:`forecast_backtest`)
    Each run is cut at a fraction of its step span (:func:`cut_points`); every method forecasts
    the held-out points from the observed prefix alone, as draws of the observed reward; the
    draws are scored against the logged rewards (:mod:`bayesgrpo.evaluate.scores`): CRPS and log
    predictive density over the held-out tail, 50% and 90% interval coverage and width, and the
    absolute error of the final reward (mean of the last 5% of the run's points). Scores in
    reward units are divided by the run's full logged reward range.

Stopping backtest (:func:`stopping_backtest`, :func:`frontier`)
    Each rule is run on every run as it would have been run live: a Bayesian rule
    (:class:`bayesgrpo.questions.stopping.PlateauRule` and the other rules with a ``decide`` method) is
    asked at every ``check_every_fraction`` of the run's step span, seeing only the points logged
    so far; the baselines (:class:`FixedFraction`, :class:`Patience`, :class:`MedianPruning`) are
    the functions of :mod:`bayesgrpo.evaluate.baselines`. A stop at step ``s`` of a run whose
    last logged step is ``T`` saves ``(T - s) / T`` of its steps and gives up
    ``max(0, best smoothed reward - smoothed reward at s) / reward range``.

No data leak from the run scored
    The Bayesian forecasts come from a population posterior that never saw the run: a live
    update (:class:`bayesgrpo.questions.live.LiveForecaster`) of the run's prefix on a population fitted
    without it. :func:`kfold_populations` fits those populations by **K-fold cross-validation
    over runs** (default 5 folds: each run is scored with the population fitted on the other
    folds), not strict leave-one-run-out, because one population fit costs minutes;
    ``n_folds = number of runs`` gives true leave-one-out. Folds are stratified by source (the
    repository or notebook a run comes from), so every fold's population has seen runs of every
    source; runs of one source (the same notebook at another commit, say) can therefore sit in
    other folds, as a practitioner's earlier runs of the same recipe would.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.evaluate import scores

if TYPE_CHECKING:
    from bayesgrpo.questions.live import LiveForecaster
    from bayesgrpo.model.reward_model import RewardModel
    from bayesgrpo.logs.table import RunsTable

__all__ = [
    "BAYES_METHOD",
    "DEFAULT_CUTS",
    "DEFAULT_METHODS",
    "FINAL_FRACTION",
    "MIN_OBSERVED",
    "SMOOTHING_FRACTION",
    "BacktestError",
    "Cut",
    "FixedFraction",
    "MedianPruning",
    "Patience",
    "bayes_forecast_draws",
    "calibration_table",
    "cross_validated_window",
    "cut_points",
    "fold_assignment",
    "forecast_backtest",
    "frontier",
    "kfold_populations",
    "planned_horizon",
    "reward_given_up",
    "run_points",
    "smoothed_reward",
    "stop_probability_calibration",
    "stopping_backtest",
]

logger = logging.getLogger(__name__)

#: Name of the Bayesian model among the methods of :func:`forecast_backtest`.
BAYES_METHOD = "bayesgrpo"
DEFAULT_CUTS: tuple[float, ...] = (0.1, 0.25, 0.5)
DEFAULT_METHODS: tuple[str, ...] = (
    BAYES_METHOD,
    "persistence",
    "exp_least_squares",
    "scalerl_sigmoid",
    "domhan_ensemble",
)
#: Share of a run's logged points whose mean is its final reward (at least one point).
FINAL_FRACTION = 0.05
#: Width of the centred rolling mean of the stopping backtest, as a share of a run's points.
SMOOTHING_FRACTION = 0.05
#: Fewest observed points a cut must leave for a forecast to be scored.
MIN_OBSERVED = 3


class BacktestError(BayesGRPOError, ValueError):
    """A backtest was asked something it cannot do (unknown method, run without a population...)."""


# What a live update may raise on an odd prefix (the package's own errors; numpy's LinAlgError is
# a ValueError). The backtests record it for that forecast or check and go on; others propagate.
_UPDATE_ERRORS = (BayesGRPOError, ValueError, ArithmeticError)


# --------------------------------------------------------------------------------------------
# Runs, cuts, horizons
# --------------------------------------------------------------------------------------------


def run_points(table: RunsTable, run_id: str) -> pd.DataFrame:
    """One run's logged points with a finite reward, sorted by step: columns ``step``, ``reward``."""
    points = table.points
    frame = points.loc[points["run_id"] == run_id, ["step", "reward"]]
    frame = frame[np.isfinite(frame["reward"].to_numpy(dtype=float))]
    if frame.empty:
        raise BacktestError(f"run {run_id!r} has no logged point with a finite reward")
    return frame.sort_values("step").reset_index(drop=True)


class Cut(NamedTuple):
    """A run cut in two: the observed prefix and the held-out rest.

    Attributes
    ----------
    step : float
        The cut: points at steps ``<= step`` are observed.
    observed, held_out : DataFrame
        The run's points up to the cut and after it.
    """

    step: float
    observed: pd.DataFrame
    held_out: pd.DataFrame


def cut_points(run_points: pd.DataFrame, fraction: float) -> Cut:
    """Cut a run at the first ``fraction`` of its step span.

    The cut step is ``first + fraction * (last - first)`` with ``first`` and ``last`` the run's
    first and last logged steps; points at steps up to it (inclusive) are observed, the rest held
    out.

    Parameters
    ----------
    run_points : DataFrame
        One run's points with a ``step`` column (sorted or not).
    fraction : float
        In (0, 1).

    Returns
    -------
    Cut
    """
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise BacktestError(f"a cut must be a fraction strictly between 0 and 1 of the run; got {fraction}")
    if len(run_points) == 0:
        raise BacktestError("cannot cut a run without points")
    frame = run_points.sort_values("step").reset_index(drop=True)
    steps = frame["step"].to_numpy(dtype=float)
    step = float(steps[0] + fraction * (steps[-1] - steps[0]))
    observed = steps <= step
    return Cut(step, frame[observed].reset_index(drop=True), frame[~observed].reset_index(drop=True))


def planned_horizon(run: RunsTable) -> float:
    """The step one run is planned to end at, as a population fit reads it: metadata
    ``total_steps`` when stated and not before the last logged step, else the last logged step.

    The live update of a cut prefix needs it: the prefix's own last step is not the run's end.
    """
    if len(run.runs) != 1:
        raise BacktestError(f"planned_horizon takes one run; got {len(run.runs)}")
    run_id = str(run.runs["run_id"].iloc[0])
    last = float(run_points(run, run_id)["step"].iloc[-1])
    planned = pd.to_numeric(pd.Series([run.runs.iloc[0].get("total_steps")]), errors="coerce").iloc[0]
    return float(planned) if pd.notna(planned) and float(planned) >= last else last


def _prefix_table(run: RunsTable, observed: pd.DataFrame) -> RunsTable:
    """The run's table holding only its observed points (metadata unchanged)."""
    from bayesgrpo.logs.table import RunsTable

    run_id = str(run.runs["run_id"].iloc[0])
    points = run.points[(run.points["run_id"] == run_id) & run.points["step"].isin(observed["step"])]
    return RunsTable(points=points.reset_index(drop=True), runs=run.runs, report=run.report)


def _seed(random_seed: int, *parts: Any) -> int:
    """A seed per (run, cut, method...) that does not depend on the order runs are visited."""
    words = [int(random_seed) & 0xFFFFFFFF] + [zlib.crc32(str(p).encode()) for p in parts]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


# --------------------------------------------------------------------------------------------
# Populations that never saw the run scored
# --------------------------------------------------------------------------------------------


def fold_assignment(
    table: RunsTable, n_folds: int, random_seed: int = 0, strata: str = "source"
) -> dict[str, int]:
    """Assign runs to ``n_folds`` folds, each fold mixing the values of ``strata``.

    Runs are shuffled (seeded), stably sorted by their ``strata`` metadata (missing values
    together), and dealt to folds in turn: fold sizes differ by at most one and the runs of one
    source are spread over the folds.

    Parameters
    ----------
    table : RunsTable
    n_folds : int
        From 2 to the number of runs (leave-one-run-out).
    random_seed : int
    strata : str
        Metadata column to stratify by.

    Returns
    -------
    dict
        ``run_id -> fold`` (0 to ``n_folds - 1``).
    """
    run_ids = table.run_ids
    n_folds = int(n_folds)
    if not 2 <= n_folds <= len(run_ids):
        raise BacktestError(
            f"n_folds must be between 2 and the number of runs ({len(run_ids)}); got {n_folds}"
        )
    if strata not in table.runs.columns:
        raise BacktestError(
            f"no metadata column {strata!r} to stratify folds by; columns: {list(table.runs.columns)}"
        )
    labels = table.runs[strata].astype("string").fillna("").to_numpy(dtype=object)
    order = np.random.default_rng(random_seed).permutation(len(run_ids))
    order = order[np.argsort(labels[order], kind="stable")]
    return {run_ids[i]: position % n_folds for position, i in enumerate(order)}


def kfold_populations(
    table: RunsTable,
    n_folds: int = 5,
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    strata: str = "source",
) -> dict[str, RewardModel]:
    """Fit one population per fold on every run but the fold's; map each run to the fit that
    never saw it.

    This is K-fold cross-validation over runs, not strict leave-one-run-out (a population fit
    costs minutes, K fits instead of one per run); ``n_folds = len(table)`` is leave-one-out.

    Parameters
    ----------
    table : RunsTable
    n_folds : int
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit` (``draws``, ``tune``, ``chains``, ``sampler``...);
        ``progressbar`` defaults to False and ``random_seed`` to ``random_seed + fold``.
    random_seed : int
        Seeds the fold assignment and the fits.
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel` (``curve``, ``max_points``...); pooling must stay partial.
    strata : str
        Metadata column the folds are stratified by (:func:`fold_assignment`).

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` (runs of one fold share one object).
    """
    folds = fold_assignment(table, n_folds, random_seed, strata)
    groups = {fold: [r for r in table.run_ids if folds[r] == fold] for fold in range(int(n_folds))}
    return held_out_populations(
        table, groups, fit_kwargs, random_seed, model_kwargs=model_kwargs, label="fold %s"
    )


def held_out_populations(
    table: RunsTable,
    groups: Mapping[Any, Sequence[str]],
    fit_kwargs: Mapping[str, Any] | None = None,
    random_seed: int = 0,
    *,
    model_kwargs: Mapping[str, Any] | None = None,
    label: str = "group %s",
) -> dict[str, RewardModel]:
    """One population per group of runs, fitted on every run outside the group.

    Parameters
    ----------
    table : RunsTable
    groups : mapping label -> run ids
        The runs each population must not see (a fold, a model size).
    fit_kwargs : mapping, optional
        Passed to :meth:`RewardModel.fit`; ``progressbar`` defaults to False and
        ``random_seed`` to ``random_seed + i`` for the i-th group.
    random_seed : int
    model_kwargs : mapping, optional
        Passed to :class:`RewardModel`.
    label : str
        How a group is named in the log (``%s`` is its label).

    Returns
    -------
    dict
        ``run_id -> fitted RewardModel`` for the runs of every group (a group shares one object).
    """
    from bayesgrpo.model.reward_model import RewardModel

    populations: dict[str, RewardModel] = {}
    for i, (name, held) in enumerate(groups.items()):
        held_set = set(held)
        train = table.select([r for r in table.run_ids if r not in held_set])
        kwargs = {"progressbar": False, "random_seed": int(random_seed) + i, **dict(fit_kwargs or {})}
        start = time.perf_counter()
        model = RewardModel(**dict(model_kwargs or {})).fit(train, **kwargs)
        logger.info(
            label + ": population of %d runs fitted in %.0f s (held out %d)",
            name,
            len(train),
            time.perf_counter() - start,
            len(held),
        )
        populations.update({run_id: model for run_id in held})
    return populations


# --------------------------------------------------------------------------------------------
# Bayesian forecasts of a held-out run
# --------------------------------------------------------------------------------------------


def _forecaster(population: RewardModel | LiveForecaster, n_draws: int, seed: int | None) -> LiveForecaster:
    from bayesgrpo.questions.live import LiveForecaster

    if isinstance(population, LiveForecaster):
        return population
    return LiveForecaster(population, n_draws=int(n_draws), random_seed=seed)


def _bayes_forecast(
    live: LiveForecaster, run: RunsTable, cut: float, target_steps: np.ndarray, seed: int | None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Draws (S, N) of the observed reward at ``target_steps`` and the update's diagnostics."""
    from bayesgrpo.model.laplace import LiveUpdateWarning

    run_id = str(run.runs["run_id"].iloc[0])
    points = run_points(run, run_id)
    observed = points[points["step"] <= cut]
    if observed.empty:
        raise BacktestError(f"run {run_id!r} has no point at or before the cut step {cut:g}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LiveUpdateWarning)
        update = live.update(_prefix_table(run, observed), horizon=planned_horizon(run))
    posterior = update.posterior
    info = {"pareto_k": posterior.pareto_k, "ess": posterior.ess, "n_observed": posterior.n_points}
    return _logged_reward_draws(update, target_steps, seed), info


def _logged_reward_draws(update: Any, steps: np.ndarray, seed: int | None) -> np.ndarray:
    """Draws (S, N) of the logged reward at ``steps`` after a live update: the curve plus one
    logged point's noise, sigma (normalised units, noise floor included) x Student-t(nu)."""
    from bayesgrpo.questions.stopping import reward_at

    cd, posterior = update.curve_draws, update.posterior
    mean = reward_at(cd, np.asarray(steps, dtype=float))[:, 0, :]
    sigma = posterior.natural()["sigma"] * float(cd.reward_scale[0])
    noise = np.random.default_rng(seed).standard_t(posterior.prior.nu, size=mean.shape)
    return mean + sigma[:, None] * noise


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
        _forecaster(population, n_draws, seed), run_table, float(cut), target_steps, seed
    )
    return draws


# --------------------------------------------------------------------------------------------
# Forecast backtest
# --------------------------------------------------------------------------------------------


def _score(draws: np.ndarray, y: np.ndarray, scale: float, n_final: int) -> dict[str, float]:
    """Mean scores of one forecast over its held-out points."""
    return {
        "crps": float(scores.crps_from_draws(draws, y, scale).mean()),
        "lpd": float(scores.log_predictive_density(draws, y, scale).mean()),
        "cover50": float(scores.interval_coverage(draws, y, 0.5).mean()),
        "cover90": float(scores.interval_coverage(draws, y, 0.9).mean()),
        "width50": float(scores.interval_width(draws, 0.5, scale).mean()),
        "width90": float(scores.interval_width(draws, 0.9, scale).mean()),
        "final_abs_error": scores.final_reward_error(draws[:, -n_final:], y[-n_final:], scale),
    }


def _live_forecasters(
    populations: Mapping[str, RewardModel], run_ids: Sequence[str], n_draws: int, random_seed: int
) -> dict[str, LiveForecaster]:
    """One live forecaster per distinct population object (its new-run prior is cached)."""
    missing = [r for r in run_ids if r not in populations]
    if missing:
        raise BacktestError(
            f"no population for runs {missing[:5]} ({len(missing)} in all); fit them with kfold_populations"
        )
    by_object: dict[int, LiveForecaster] = {}
    out = {}
    for run_id in run_ids:
        population = populations[run_id]
        if id(population) not in by_object:
            by_object[id(population)] = _forecaster(
                population, n_draws, _seed(random_seed, "live", len(by_object))
            )
        out[run_id] = by_object[id(population)]
    return out


def forecast_backtest(
    table: RunsTable,
    populations: Mapping[str, RewardModel] | None,
    cuts: Sequence[float] = DEFAULT_CUTS,
    methods: Sequence[str] = DEFAULT_METHODS,
    baseline_options: Mapping[str, Mapping[str, Any]] | None = None,
    n_draws: int = 1000,
    random_seed: int = 0,
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

    Returns
    -------
    DataFrame
        One row per (run, cut, method): ``run_id, cut, method, crps, lpd, cover50, cover90,
        width50, width90, final_abs_error, seconds``, then ``cut_step, n_observed, n_held_out,
        n_final, reward_range, status`` (``"ok"``, or why the method fell back or is unreliable).
        CRPS, widths and the final error are in units of the run's logged reward range; the
        final reward is the mean of the run's last :data:`FINAL_FRACTION` of points. A cut that
        leaves fewer than :data:`MIN_OBSERVED` observed points, no held-out point, or a run
        with a constant reward is skipped (logged).
    """
    from bayesgrpo.evaluate.baselines import BASELINE_FORECASTERS

    methods = list(methods)
    unknown = [m for m in methods if m != BAYES_METHOD and m not in BASELINE_FORECASTERS]
    if unknown:
        raise BacktestError(f"unknown methods {unknown}; choose from {[BAYES_METHOD, *BASELINE_FORECASTERS]}")
    options = {name: dict(value) for name, value in (baseline_options or {}).items()}
    bad_options = sorted(set(options) - set(BASELINE_FORECASTERS))
    if bad_options:
        raise BacktestError(
            f"baseline_options for unknown baselines {bad_options}; baselines are {list(BASELINE_FORECASTERS)}"
        )
    live: dict[str, LiveForecaster] = {}
    if BAYES_METHOD in methods:
        if populations is None:
            raise BacktestError(
                "method 'bayesgrpo' needs populations (run_id -> fitted RewardModel): kfold_populations"
            )
        live = _live_forecasters(populations, table.run_ids, n_draws, random_seed)

    rows = []
    for run_id in table.run_ids:
        points = run_points(table, run_id)
        rewards = points["reward"].to_numpy(dtype=float)
        reward_range = float(rewards.max() - rewards.min())
        if reward_range <= 0:
            logger.info("forecast backtest: run %s skipped (constant reward)", run_id)
            continue
        n_final_run = max(1, math.ceil(FINAL_FRACTION * len(points)))
        run = table.select([run_id])
        for fraction in cuts:
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
            y = cut.held_out["reward"].to_numpy(dtype=float)
            n_final = min(n_final_run, len(y))
            for method in methods:
                seed = _seed(random_seed, run_id, fraction, method)
                start = time.perf_counter()
                if method == BAYES_METHOD:
                    try:
                        draws, info = _bayes_forecast(live[run_id], run, cut.step, target, seed)
                    except _UPDATE_ERRORS as exc:  # one failed update must not end an hour-long backtest
                        logger.warning(
                            "forecast backtest: live update of run %s at cut %g failed: %s",
                            run_id,
                            fraction,
                            exc,
                        )
                        draws, info = np.full((1, len(target)), np.nan), {"pareto_k": np.nan}
                        status = f"live update failed: {type(exc).__name__}: {exc}"
                    else:
                        k = info["pareto_k"]
                        status = "ok" if k <= 0.7 else f"unreliable live update (Pareto k {k:.2f})"
                else:
                    forecast = BASELINE_FORECASTERS[method](
                        cut.observed["step"].to_numpy(dtype=float),
                        cut.observed["reward"].to_numpy(dtype=float),
                        target,
                        n_draws=n_draws,
                        random_seed=seed,
                        **options.get(method, {}),
                    )
                    draws = forecast.draws
                    status = "ok" if not forecast.fell_back else str(forecast.info.get("fallback"))
                seconds = time.perf_counter() - start
                finite = np.all(np.isfinite(draws), axis=1)
                row: dict[str, Any] = {"run_id": run_id, "cut": float(fraction), "method": method}
                if finite.any():
                    row.update(_score(draws[finite], y, reward_range, n_final))
                    if not finite.all():
                        status += f"; {int((~finite).sum())} non-finite draws dropped"
                else:
                    row.update(
                        dict.fromkeys(
                            ("crps", "lpd", "cover50", "cover90", "width50", "width90", "final_abs_error"),
                            np.nan,
                        )
                    )
                    status = status if status.startswith("live update failed") else "no finite draw"
                row.update(
                    {
                        "seconds": seconds,
                        "cut_step": cut.step,
                        "n_observed": len(cut.observed),
                        "n_held_out": len(y),
                        "n_final": n_final,
                        "reward_range": reward_range,
                        "status": status,
                    }
                )
                rows.append(row)
        logger.info("forecast backtest: run %s done", run_id)
    columns = [
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
    ]
    return pd.DataFrame(rows, columns=columns)


# --------------------------------------------------------------------------------------------
# Stopping backtest
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixedFraction:
    """Stop at a fixed fraction of the run's planned steps (its last logged step here)."""

    fraction: float

    def __str__(self) -> str:
        return f"fixed_fraction({self.fraction:g})"


@dataclass(frozen=True)
class Patience:
    """Patience on a causally smoothed reward (:func:`baselines.stop_patience`).

    Parameters
    ----------
    patience : float
        Logged points without improvement before stopping, as a share of the run's points.
    window : float
        Trailing rolling-mean window, as a share of the run's points.
    """

    patience: float = 0.1
    window: float = 0.05

    def __str__(self) -> str:
        return f"patience({self.patience:g}, window {self.window:g})"


@dataclass(frozen=True)
class MedianPruning:
    """Optuna-style median pruning against the other runs (:func:`baselines.stop_median_pruning`).

    Reward scales differ between tasks, so a run is compared with the other runs that share
    its ``peers`` metadata (by default its source: the same notebook or repository, the same
    reward functions), the runs of one study in Optuna's terms; a run with fewer than
    ``n_startup_trials`` peers is never pruned.
    """

    warmup_fraction: float = 0.1
    check_every: float = 0.05
    n_startup_trials: int = 5
    peers: str = "source"

    def __str__(self) -> str:
        return f"median_pruning(warmup {self.warmup_fraction:g}, {self.n_startup_trials} startup)"


def _rule_kind(rule: Any) -> str:
    if isinstance(rule, FixedFraction):
        return "fixed_fraction"
    if isinstance(rule, Patience):
        return "patience"
    if isinstance(rule, MedianPruning):
        return "median_pruning"
    if callable(getattr(rule, "decide", None)):
        return "bayes"
    raise BacktestError(
        f"unknown stopping rule {rule!r}: give FixedFraction, Patience, MedianPruning or a rule with "
        "decide(curve_draws, step_now, horizon_step) (PlateauRule, BudgetRule, TargetRule)"
    )


def cross_validated_window(rewards: np.ndarray) -> int:
    """The centred rolling mean's window that best predicts each point from its neighbours.

    Every odd window from 3 to the run's length is tried; each point is predicted by the mean of
    the other points of its window (leave-one-out), and the window with the smallest mean
    squared error wins (the smallest of equals). A noisy flat run gets a wide window, a clean
    rise a narrow one: the smoothing adapts to the run's noise instead of a fixed share.

    Parameters
    ----------
    rewards : ndarray, shape (n,)

    Returns
    -------
    int
        Odd window length (1 for runs of fewer than 3 points).
    """
    rewards = np.asarray(rewards, dtype=float)
    n = rewards.size
    best_window, best_error = 1, np.inf
    for window in range(3, n + 1, 2):
        sums, counts = _window_sums(rewards, window)
        left_out = (sums - rewards) / (counts - 1)
        error = float(np.mean((rewards - left_out) ** 2))
        if error < best_error * (1.0 - 1e-12):
            best_window, best_error = window, error
    return best_window


def _window_sums(rewards: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums and counts of the centred window of odd length ``window`` at every point, cut at the
    ends to the points that exist."""
    n = rewards.size
    half = window // 2
    csum = np.concatenate([[0.0], np.cumsum(rewards)])
    idx = np.arange(n)
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx + half + 1, n)
    return csum[hi] - csum[lo], (hi - lo).astype(float)


def smoothed_reward(rewards: np.ndarray, fraction: float | str = SMOOTHING_FRACTION) -> np.ndarray:
    """Centred rolling mean of a run's rewards, the reference of the stopping backtest.

    The window holds ``w = max(1, round(fraction * n))`` points, made odd (``w + 1`` when even)
    so that it is centred; near the ends it is cut to the points that exist (a point's mean is
    over at most ``w // 2`` points either side). With 5% of a run's points it smooths out the
    noise of single logged rewards without flattening a rise. ``fraction="cv"`` takes the
    window :func:`cross_validated_window` chooses for the run.

    Parameters
    ----------
    rewards : ndarray, shape (n,)
    fraction : float or "cv"

    Returns
    -------
    ndarray, shape (n,)
    """
    rewards = np.asarray(rewards, dtype=float)
    return _rolling_mean(rewards, _smoothing_window(rewards, fraction))


def _rolling_mean(rewards: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling mean over an odd ``window``, cut at the ends to the points that exist."""
    sums, counts = _window_sums(rewards, window)
    return sums / counts


def reward_given_up(smooth: np.ndarray, spread: float, steps: np.ndarray, stop_step: float) -> tuple[float, float]:
    """What stopping at ``stop_step`` gives up, against the run's best and against its end.

    Parameters
    ----------
    smooth : ndarray, shape (n,)
        The run's smoothed reward (:func:`smoothed_reward`).
    spread : float
        The run's logged reward range (max - min of the raw rewards), the unit.
    steps : ndarray, shape (n,)
        The steps of ``smooth``, increasing.
    stop_step : float

    Returns
    -------
    given_up : float
        ``max(0, best smoothed - smoothed at the stop) / spread``.
    vs_end : float
        ``(smoothed at the end - smoothed at the stop) / spread`` (negative: the stop kept more).
    """
    at = int(np.searchsorted(steps, stop_step))
    return max(0.0, float(smooth.max() - smooth[at])) / spread, float(smooth[-1] - smooth[at]) / spread


def _check_steps(points: pd.DataFrame, fraction: float) -> list[int]:
    """Indices (into the run's points) of the online checks: the last point at or before each
    ``k * fraction`` of the step span, k = 1, 2... before the end, without repeats."""
    steps = points["step"].to_numpy(dtype=float)
    first, last = steps[0], steps[-1]
    indices: list[int] = []
    for k in range(1, math.ceil(1.0 / fraction)):
        i = int(np.searchsorted(steps, first + k * fraction * (last - first), side="right")) - 1
        if i >= 0 and i < len(steps) - 1 and (not indices or i > indices[-1]):
            indices.append(i)
    return indices


def _peer_runs(table: RunsTable, run_id: str, peers: str) -> list[tuple[np.ndarray, np.ndarray]]:
    runs = table.runs
    if peers not in runs.columns:
        raise BacktestError(f"no metadata column {peers!r} to choose median-pruning peers by")
    values = runs.set_index("run_id")[peers]
    own = values.get(run_id)
    if own is None or pd.isna(own):
        return []
    others = [str(r) for r, v in values.items() if str(r) != run_id and pd.notna(v) and v == own]
    out = []
    for other in others:
        points = run_points(table, other)
        out.append((points["step"].to_numpy(dtype=float), points["reward"].to_numpy(dtype=float)))
    return out


def _baseline_stop(
    rule: Any, table: RunsTable, run_id: str, steps: np.ndarray, rewards: np.ndarray
) -> float | None:
    from bayesgrpo.evaluate import baselines

    n = len(steps)
    if isinstance(rule, FixedFraction):
        stop = baselines.stop_fixed_fraction(steps, float(steps[-1]), rule.fraction)
    elif isinstance(rule, Patience):
        stop = baselines.stop_patience(
            steps,
            rewards,
            patience=max(1, round(rule.patience * n)),
            smoothing_window=max(1, round(rule.window * n)),
        )
    else:
        stop = baselines.stop_median_pruning(
            steps,
            rewards,
            _peer_runs(table, run_id, rule.peers),
            rule.warmup_fraction,
            rule.check_every,
            total_steps=float(steps[-1]),
            n_startup_trials=rule.n_startup_trials,
        )
    return None if stop is None else float(stop)


def _update_at_check(live: LiveForecaster, run: RunsTable, points: pd.DataFrame, i: int, horizon: float) -> Any:
    """The live update of a run's points up to index ``i`` (an online check), or None when there
    is no answer: a single point (it says nothing about a slope) or an update that failed
    (logged)."""
    from bayesgrpo.model.laplace import LiveUpdateWarning

    if i + 1 < 2:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LiveUpdateWarning)
            return live.update(_prefix_table(run, points.iloc[: i + 1]), horizon=horizon)
    except _UPDATE_ERRORS as exc:
        logger.warning("live update of %s at step %g failed (%s); going on", run.run_ids[0],
                       float(points["step"].iloc[i]), exc)
        return None


def _bayes_stops(
    rules: Mapping[str, Any],
    live: LiveForecaster,
    run: RunsTable,
    points: pd.DataFrame,
    check_every_fraction: float,
) -> dict[str, tuple[float | None, float]]:
    """Online: at each check the run's prefix is updated live and every rule not yet stopped is
    asked; returns ``name -> (stop step or None, probability behind the stop)``."""

    steps = points["step"].to_numpy(dtype=float)
    last = float(steps[-1])
    horizon = planned_horizon(run)
    stops: dict[str, tuple[float | None, float]] = {name: (None, np.nan) for name in rules}
    pending = dict(rules)
    for i in _check_steps(points, check_every_fraction):
        if not pending:
            break
        update = _update_at_check(live, run, points, i, horizon)
        if update is None:  # no answer at this check: the rules keep going
            continue
        for name, rule in list(pending.items()):
            decision = rule.decide(update.curve_draws, steps[i], horizon_step=last)[0]
            if decision.decision == "stop":
                stops[name] = (float(steps[i]), float(decision.probability))
                del pending[name]
    return stops


def stopping_backtest(
    table: RunsTable,
    populations: Mapping[str, RewardModel] | None,
    rules: Mapping[str, Any],
    check_every_fraction: float = 0.05,
    *,
    smoothing_fraction: float | str = SMOOTHING_FRACTION,
    n_draws: int = 1000,
    random_seed: int = 0,
) -> pd.DataFrame:
    """Run every stopping rule on every run; what each stop saves and what it gives up.

    Parameters
    ----------
    table : RunsTable
    populations : mapping run_id -> RewardModel, or None
        For the Bayesian rules: a population fitted without the run (:func:`kfold_populations`).
    rules : mapping name -> rule
        :class:`FixedFraction`, :class:`Patience`, :class:`MedianPruning`, or a Bayesian rule
        with ``decide(curve_draws, step_now, horizon_step)`` (``PlateauRule(eps, prob,
        relative=True)``...). A Bayesian rule is asked online: at the last logged point before
        each ``check_every_fraction`` of the run's step span (not at its end), from a live update
        of the points logged so far (normalised progress on the run's :func:`planned_horizon`),
        with the run's last logged step as the horizon of the question; the run stops at the
        first ``"stop"``.
    check_every_fraction : float
        Spacing of the Bayesian rules' checks, as a share of the run's step span.
    smoothing_fraction : float or "cv"
        Window of the centred rolling mean the reward given up is measured on
        (:func:`smoothed_reward`).
    n_draws : int
        Draws of each live update.
    random_seed : int

    Returns
    -------
    DataFrame
        One row per (run, rule): ``run_id, rule, kind, stop_step, last_step, steps_saved,
        reward_given_up, reward_vs_end, stopped, probability``. ``stop_step`` is the last step
        when the rule never stops (``stopped`` False). ``steps_saved = (last_step - stop_step) /
        last_step``; ``reward_given_up = max(0, max(smoothed) - smoothed at stop_step) /
        range`` with ``range`` the max minus the min of the run's logged rewards (1 when
        constant); ``reward_vs_end = (smoothed at the last step - smoothed at stop_step) /
        range`` (signed: negative when the stop is better than running to the end).
        ``probability`` is the Bayesian rule's posterior probability behind its stop.
    """
    if not 0.0 < check_every_fraction < 1.0:
        raise BacktestError(f"check_every_fraction must lie in (0, 1); got {check_every_fraction}")
    if not rules:
        raise BacktestError("no stopping rules given")
    kinds = {name: _rule_kind(rule) for name, rule in rules.items()}
    bayes_rules = {name: rule for name, rule in rules.items() if kinds[name] == "bayes"}
    live: dict[str, LiveForecaster] = {}
    if bayes_rules:
        if populations is None:
            raise BacktestError("Bayesian stopping rules need populations (run_id -> fitted RewardModel)")
        live = _live_forecasters(populations, table.run_ids, n_draws, random_seed)

    rows = []
    for run_id in table.run_ids:
        points = run_points(table, run_id)
        steps = points["step"].to_numpy(dtype=float)
        rewards = points["reward"].to_numpy(dtype=float)
        last = float(steps[-1])
        if last <= 0:
            logger.info("stopping backtest: run %s skipped (last step %g)", run_id, last)
            continue
        smooth = smoothed_reward(rewards, smoothing_fraction)
        spread = float(rewards.max() - rewards.min())
        spread = spread if spread > 0 else 1.0
        stops: dict[str, tuple[float | None, float]] = {}
        for name, rule in rules.items():
            if kinds[name] != "bayes":
                stops[name] = (_baseline_stop(rule, table, run_id, steps, rewards), np.nan)
        if bayes_rules:
            stops.update(
                _bayes_stops(bayes_rules, live[run_id], table.select([run_id]), points, check_every_fraction)
            )
        for name in rules:
            stop, probability = stops[name]
            stop_step = last if stop is None else stop
            given_up, vs_end = reward_given_up(smooth, spread, steps, stop_step)
            rows.append(
                {
                    "run_id": run_id,
                    "rule": name,
                    "kind": kinds[name],
                    "stop_step": stop_step,
                    "last_step": last,
                    "steps_saved": (last - stop_step) / last,
                    "reward_given_up": given_up,
                    "reward_vs_end": vs_end,
                    "stopped": stop is not None and stop_step < last,
                    "probability": probability,
                }
            )
        logger.info("stopping backtest: run %s done", run_id)
    columns = [
        "run_id",
        "rule",
        "kind",
        "stop_step",
        "last_step",
        "steps_saved",
        "reward_given_up",
        "reward_vs_end",
        "stopped",
        "probability",
    ]
    return pd.DataFrame(rows, columns=columns)


def stop_probability_calibration(
    table: RunsTable,
    populations: Mapping[str, RewardModel],
    eps_values: Sequence[float] = (0.01, 0.02),
    check_every_fraction: float = 0.05,
    *,
    smoothing_fraction: float | str = "cv",
    n_draws: int = 1000,
    random_seed: int = 0,
) -> pd.DataFrame:
    """Is ``P(gain < eps)`` right as often as it says? Every check of every run, scored.

    At the same online checks as :func:`stopping_backtest` (the last logged point before each
    ``check_every_fraction`` of a run's step span), a live update on the run's prefix (from a
    population that never saw the run) gives ``P(R(last) - R(s) < eps)`` for each eps, in the
    rule's unit (a share of the reward bounds the update used). The run's later points say what
    happened: the gain of its smoothed reward (:func:`smoothed_reward`) from the check to its
    last step, in the same unit.

    Parameters
    ----------
    table : RunsTable
    populations : mapping run_id -> RewardModel
    eps_values : sequence of float
    check_every_fraction : float
    smoothing_fraction : float or "cv"
        The reference the realised gain is read on (default: the run's cross-validated window;
        a narrow window leaves noise that reads as gain or loss).
    n_draws : int
    random_seed : int

    Returns
    -------
    DataFrame
        One row per (run, check, eps): ``run_id, step, progress, eps, probability,
        predictive_probability, realised_gain, below`` (``below``: the realised gain was under
        eps). ``probability`` is the rule's, of the curve's gain; ``predictive_probability`` is
        the model's probability of the outcome itself, the smoothed *logged* gain: later points
        drawn with their noise and smoothed like the reference, so that noise the reference keeps
        is not counted against the model. ``progress`` is the check's share of the run's step span.
    """
    from bayesgrpo.questions.stopping import prob_gain_below

    if not 0.0 < check_every_fraction < 1.0:
        raise BacktestError(f"check_every_fraction must lie in (0, 1); got {check_every_fraction}")
    live = _live_forecasters(populations, table.run_ids, n_draws, random_seed)
    rows = []
    for run_id in table.run_ids:
        points = run_points(table, run_id)
        steps = points["step"].to_numpy(dtype=float)
        rewards = points["reward"].to_numpy(dtype=float)
        window = _smoothing_window(rewards, smoothing_fraction)
        smooth = _rolling_mean(rewards, window)
        run = table.select([run_id])
        horizon = planned_horizon(run)
        for i in _check_steps(points, check_every_fraction):
            update = _update_at_check(live[run_id], run, points, i, horizon)
            if update is None:
                continue
            unit = float(np.ravel(update.curve_draws.reward_scale)[0])
            realised = float(smooth[-1] - smooth[i]) / unit
            predicted = _smoothed_gain_draws(
                update, rewards, steps, i, window, _seed(random_seed, "calibration", run_id, i)
            ) / unit
            for eps in eps_values:
                probability = float(
                    prob_gain_below(update.curve_draws, steps[i], steps[-1], eps=eps, relative=True)[0]
                )
                rows.append(
                    {
                        "run_id": run_id,
                        "step": float(steps[i]),
                        "progress": float((steps[i] - steps[0]) / (steps[-1] - steps[0])),
                        "eps": float(eps),
                        "probability": probability,
                        "predictive_probability": float((predicted < eps).mean()),
                        "realised_gain": realised,
                        "below": realised < eps,
                    }
                )
        logger.info("calibration: run %s done", run_id)
    return pd.DataFrame(
        rows,
        columns=[
            "run_id", "step", "progress", "eps", "probability", "predictive_probability", "realised_gain", "below"
        ],
    )


def _smoothing_window(rewards: np.ndarray, fraction: float | str) -> int:
    """The odd window :func:`smoothed_reward` uses for these rewards."""
    if isinstance(fraction, str):
        if fraction != "cv":
            raise BacktestError(f"smoothing fraction {fraction!r}: give a share of the run's points or 'cv'")
        window = cross_validated_window(rewards)
    else:
        window = max(1, round(fraction * rewards.size))
    return window + 1 if window % 2 == 0 else window


def _smoothed_gain_draws(
    update: Any, rewards: np.ndarray, steps: np.ndarray, i: int, window: int, seed: int
) -> np.ndarray:
    """Predictive draws (S,) of the smoothed reward's gain from point ``i`` to the last point,
    in reward units: the points up to ``i`` as logged, the later ones drawn (curve plus a logged
    point's noise), each draw smoothed over ``window`` like the reference."""
    n = rewards.size
    future = _logged_reward_draws(update, steps[i + 1 :], seed)  # (S, n - i - 1)
    full = np.concatenate([np.broadcast_to(rewards[: i + 1], (future.shape[0], i + 1)), future], axis=1)
    half = window // 2

    def window_mean(j: int) -> np.ndarray:
        return full[:, max(0, j - half) : min(n, j + half + 1)].mean(axis=1)

    return window_mean(n - 1) - window_mean(i)


#: Probability bins of :func:`calibration_table`.
CALIBRATION_BINS: tuple[float, ...] = (0.0, 0.2, 0.5, 0.8, 0.9, 0.95, 1.0)


def calibration_table(
    calibration: pd.DataFrame, bins: Sequence[float] = CALIBRATION_BINS, column: str = "probability"
) -> pd.DataFrame:
    """Stated probability against how often it came true, per eps and probability bin.

    Parameters
    ----------
    calibration : DataFrame
        Output of :func:`stop_probability_calibration`.
    bins : sequence of float
        Bin edges of the stated probability (the last bin includes 1).
    column : str
        The probability judged: ``"probability"`` (the rule's, of the curve's gain) or
        ``"predictive_probability"`` (of the smoothed logged gain the outcome is read on).

    Returns
    -------
    DataFrame
        ``eps, bin, checks, runs, stated_mean, observed_share, brier`` with ``brier`` the mean
        squared difference of stated probability and outcome over the bin's checks.
    """
    if calibration.empty:
        raise BacktestError("the calibration table is empty: nothing to summarise")
    if column not in calibration.columns:
        raise BacktestError(f"no column {column!r} in the calibration table")
    frame = calibration.assign(
        probability=calibration[column],
        bin=pd.cut(calibration[column], bins=list(bins), include_lowest=True, right=False),
        outcome=calibration["below"].astype(float),
    )
    top = frame["probability"] >= bins[-1]
    if top.any():  # P = 1 belongs to the last bin
        frame.loc[top, "bin"] = frame["bin"].cat.categories[-1]
    frame["squared"] = (frame["probability"] - frame["outcome"]) ** 2
    grouped = frame.groupby(["eps", "bin"], observed=True, sort=True)
    out = grouped.agg(
        checks=("outcome", "size"),
        runs=("run_id", "nunique"),
        stated_mean=("probability", "mean"),
        observed_share=("outcome", "mean"),
        brier=("squared", "mean"),
    ).reset_index()
    out["bin"] = out["bin"].astype(str)
    return out


def frontier(stopping: pd.DataFrame) -> pd.DataFrame:
    """Compute saved against reward given up, per rule.

    Parameters
    ----------
    stopping : DataFrame
        Output of :func:`stopping_backtest`.

    Returns
    -------
    DataFrame
        One row per rule, sorted by mean steps saved (most first): ``rule, kind, n_runs,
        steps_saved_mean, steps_saved_median, given_up_mean, given_up_p90, given_up_max,
        vs_end_mean, share_stopped, on_frontier``. ``on_frontier`` is True when no other rule
        saves at least as many steps on average at no more mean reward given up (one of the two
        strictly better).
    """
    if stopping.empty:
        raise BacktestError("the stopping table is empty: nothing to summarise")
    grouped = stopping.groupby("rule", sort=False)
    table = pd.DataFrame(
        {
            "kind": grouped["kind"].first(),
            "n_runs": grouped["run_id"].nunique(),
            "steps_saved_mean": grouped["steps_saved"].mean(),
            "steps_saved_median": grouped["steps_saved"].median(),
            "given_up_mean": grouped["reward_given_up"].mean(),
            "given_up_p90": grouped["reward_given_up"].quantile(0.9),
            "given_up_max": grouped["reward_given_up"].max(),
            "vs_end_mean": grouped["reward_vs_end"].mean(),
            "share_stopped": grouped["stopped"].mean(),
        }
    ).reset_index()
    saved = table["steps_saved_mean"].to_numpy()
    lost = table["given_up_mean"].to_numpy()
    better_or_equal = (saved[None, :] >= saved[:, None]) & (lost[None, :] <= lost[:, None])
    strictly = (saved[None, :] > saved[:, None]) | (lost[None, :] < lost[:, None])
    table["on_frontier"] = ~(better_or_equal & strictly).any(axis=1)
    return table.sort_values("steps_saved_mean", ascending=False, kind="stable").reset_index(drop=True)
