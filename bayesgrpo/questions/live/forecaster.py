"""Live single-run update: a run's points conditioned on the population posterior, no refit.

A fitted population (``RewardModel`` with partial pooling) says what a new run's curve
parameters look like before it starts (``model.predict.new_run_draws``: its family, task and
size placed in the population). :class:`LiveForecaster` summarises that prior as a Gaussian on
the run's unconstrained parameters and conditions it on the run's own points with
:func:`bayesgrpo.model.laplace.condition_run` (Laplace fit, then importance sampling with
Pareto-smoothed weights; MCMC where the weights are unreliable), and returns a
:class:`~bayesgrpo.questions.live.answer.LiveUpdate`.

Nothing is compiled, so the first query is as fast as the next (a few milliseconds for hundreds
of points; ``benchmarks/live_update.py``).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError, ForecastDepartureWarning, NotFittedError
from bayesgrpo.model.data import UNKNOWN, prepare
from bayesgrpo.model.datasets import bundled_population
from bayesgrpo.model.laplace import (
    PARETO_K_LIMIT,
    GaussianRunPrior,
    RunPosterior,
    check_likelihood_weight,
    condition_run,
)
from bayesgrpo.model.predict import (
    fitted_size_ranges,
    levels_learnt,
    new_run_draws,
    prior_level_draws,
    prior_spec,
    unseen_group_sds,
)
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.structure import OTHER_LEVEL, curve_params, effect_levels
from bayesgrpo.questions.live.answer import LiveUpdate
from bayesgrpo.questions.live.departure import recent_departure
from bayesgrpo.questions.live.range import metadata_number, reach_bounds, stated_reward_range
from bayesgrpo.questions.stopping import CurveDraws
from bayesgrpo.questions.stopping.momentum import with_recent_rise

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.data import ModelData

__all__ = [
    "DEFAULT_LIKELIHOOD_WEIGHT",
    "LiveForecaster",
    "live_forecaster",
    "resolve_population",
    "run_curve_draws",
]

#: The live update's weight of a run's points against the population's prior (1: the untempered
#: posterior). Tempering by 0.5 forecast no better on the corpus's held-out sources: its gain in
#: median CRPS over persistence's was -0.007 [-0.028, 0.001] (``benchmarks/results/defaults.md``).
#: The Optuna pruner keeps its own weight (``integrations.optuna.PRUNER_LIKELIHOOD_WEIGHT``).
DEFAULT_LIKELIHOOD_WEIGHT = 1.0


@dataclass
class LiveForecaster:
    """Forecasts for runs in progress from a fitted population, answered without refitting.

    A run that states its reward range (``reward_min``/``reward_max``) is normalised by it; one
    that states none by its logged range so far, widened by the population's margin. Every other
    option the live path once had (a range estimated from where the prefix sits, a band stretched
    by learnt factors, a forecast that follows a departed run, the noise resampled from recent
    residuals, a run inside 0 .. 1 read as a score, an unknown size integrated over) forecast no
    better on the corpus's held-out sources and was removed (``benchmarks/results/defaults.md``).

    Parameters
    ----------
    population : RewardModel
        Fitted with ``pooling="partial"``.
    n_draws : int
    random_seed : int, optional
    pareto_k_limit : float
        Above this Pareto k of the importance weights the update answers from its MCMC
        fallback (``condition_run``; :attr:`LiveUpdate.method` says which path answered): the
        limit past which Pareto-smoothed importance sampling is unreliable (Vehtari et al.).
    likelihood_weight : float
        The weight of the run's points against the population's prior, in (0, 1]: the log
        likelihood times this (a tempered, or power, likelihood; ``condition_run``). Default
        :data:`DEFAULT_LIKELIHOOD_WEIGHT` (1, the untempered posterior). The Optuna pruner
        passes 0.5: with 1 it pruned a late-rising best trial of a study replayed from the
        bundled runs (``integrations.optuna.PRUNER_LIKELIHOOD_WEIGHT``).

    Examples
    --------
    >>> live = LiveForecaster(model)  # doctest: +SKIP
    >>> update = live.update(table_of_one_run, horizon=1000)  # doctest: +SKIP
    >>> PlateauRule(eps=0.01).decide(update.curve_draws, step_now=update.step)  # doctest: +SKIP
    """

    population: RewardModel
    n_draws: int = 2000
    random_seed: int | None = None
    pareto_k_limit: float = PARETO_K_LIMIT
    likelihood_weight: float = DEFAULT_LIKELIHOOD_WEIGHT
    _priors: dict[tuple[Any, ...], GaussianRunPrior] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.population.is_fitted:
            raise NotFittedError(
                "LiveForecaster needs a fitted population model (RewardModel.fit or RewardModel.load)"
            )
        self.likelihood_weight = check_likelihood_weight(self.likelihood_weight)
        if self.population.pooling != "partial":
            raise BayesGRPOError(
                "a live update needs a population fitted with pooling='partial' (got "
                f"{self.population.pooling!r}): only partial pooling says how a new run relates to the others"
            )

    def prior_for(self, metadata: Mapping[str, Any]) -> GaussianRunPrior:
        """The population's Gaussian prior for a run with this metadata (cached).

        ``metadata`` may hold ``family``, ``task``, ``size_b`` and ``samples_per_step`` (or
        ``batch_size`` and ``group_size``); anything missing is treated as unknown. Without
        ``reward_min``/``reward_max`` the run's reward is normalised by its own range
        (:meth:`update`), and it gets the population's levels of such runs
        (``model.structure.bounds_from_data``).
        """
        data = self.population.data
        population_draws = self.population.population_draws  # not the posterior: see model.live_summary
        assert data is not None and population_draws is not None
        family = _text(metadata.get("family"))
        task = _text(metadata.get("task"))
        size = metadata_number(metadata.get("size_b"))
        samples = metadata_number(metadata.get("samples_per_step"))
        if not np.isfinite(samples):
            samples = metadata_number(metadata.get("batch_size")) * metadata_number(
                metadata.get("group_size")
            )
        from_data = stated_reward_range(metadata) is None
        key = (
            family,
            task,
            size if np.isfinite(size) else None,
            samples if np.isfinite(samples) else None,
            from_data,
        )
        if key not in self._priors:
            _, family_levels = effect_levels(data.family_index, data.families)
            _, task_levels = effect_levels(data.task_index, data.tasks)
            n_samples = population_draws.n_samples
            prior_levels = (
                None
                if levels_learnt(data, from_data)
                else prior_level_draws(self.population.prior_config, n_samples, self.random_seed)
            )
            draws = new_run_draws(
                population_draws,
                self.population.curve,
                family_level=_level(family, data.families, data.family_index, family_levels),
                task_level=_level(task, data.tasks, data.task_index, task_levels),
                log_size=float(data.size_standardizer(np.log(size))) if size > 0 else np.nan,
                log_samples=float(data.samples_standardizer(np.log(samples))) if samples > 0 else np.nan,
                bounds_from_data=from_data,
                size_ranges=fitted_size_ranges(data, self.population.curve),
                unseen_group_sd=unseen_group_sds(
                    data,
                    self.population.curve,
                    {"family": family, "task": task},
                    {name: _prior_scale(prior) for name, prior in self.population.prior_config.items()},
                    run_bounds_from_data=from_data,
                ),
                extrapolation_sd=_size_slope_prior_sd(self.population),
                prior_levels=prior_levels,
                random_seed=self.random_seed,
            )
            self._priors[key] = GaussianRunPrior.from_draws(
                draws, self.population.curve, self.population.noise_floor
            )
        return self._priors[key]

    def update(
        self,
        run: RunsTable,
        *,
        horizon: float | None = None,
        reach: tuple[float, float] | None = None,
        mcmc_fallback: bool = True,
    ) -> LiveUpdate:
        """Condition the population on one run's points so far.

        A run without a stated reward range is normalised by its logged range so far, widened by
        the population's margin (and to ``reach``), the bounds the returned ``data`` holds.

        Parameters
        ----------
        run : RunsTable
            One run (its metadata row says family, size, bounds, ``total_steps``).
        horizon : float, optional
            The step the run is planned to end at (default: its ``total_steps``, else its last
            logged step).
        reach : (float, float), optional
            Rewards the run is known to be able to reach without a stated range, for example the
            span of the finished trials of the same study (one reward function): the range the
            run is normalised by is widened to cover them. Without it a run flat so far is
            normalised by little more than its noise, so a late rise is out of its reach.
            Ignored for a stated range.
        mcmc_fallback : bool
            Where the importance weights are unreliable (Pareto k above ``pareto_k_limit``),
            answer from the MCMC fallback (default; a second or two) or, with False, return the
            importance draws as they are, for the caller to judge by ``update.posterior.pareto_k``
            (the Optuna pruner's choice: it acts on no such answer).

        Returns
        -------
        LiveUpdate
        """
        if len(run.runs) != 1:
            raise BayesGRPOError(f"update takes one run; got {len(run.runs)} (select one with table.select)")
        population = self.population
        assert population.data is not None  # a fitted population (checked when the forecaster was made)
        metadata = run.runs.iloc[0].to_dict()
        reward = run.points["reward"].to_numpy(dtype=float)
        reached = (
            None if stated_reward_range(metadata) else reach_bounds(reward, reach, population.bounds_margin)
        )
        prepared = run
        if reached is not None:
            runs = run.runs.assign(reward_min=reached[0], reward_max=reached[1])
            prepared = type(run)(points=run.points, runs=runs, report=run.report)
        data = prepare(
            prepared,
            progress=population.progress,
            horizon=horizon,
            max_points=population.max_points,
            bounds_margin=population.bounds_margin,
            size_standardizer=population.data.size_standardizer,
            samples_standardizer=population.data.samples_standardizer,
        )
        if reached is not None:
            data = dataclasses.replace(data, bounds_source=("data",))  # still the run's own range
        prior = self.prior_for(metadata)
        mask = data.mask[0]
        posterior = condition_run(
            prior,
            data.t[0, mask],
            data.y[0, mask],
            data.noise_scale[0, mask],
            n_draws=self.n_draws,
            random_seed=self.random_seed,
            pareto_k_limit=self.pareto_k_limit,
            likelihood_weight=self.likelihood_weight,
            mcmc_fallback=mcmc_fallback,
        )
        # the run's own latest rise rides along: a rule may hold a plateau claim it contradicts
        curve_draws = with_recent_rise(run_curve_draws(posterior, data, population.curve), run.points)
        logged = reward[np.isfinite(reward)]
        update = LiveUpdate(
            run_id=data.run_ids[0],
            step=float(run.points["step"].max()),
            horizon_step=float(data.horizon_step[0]),
            posterior=posterior,
            curve_draws=curve_draws,
            data=data,
            noise_seed=int(np.random.default_rng(self.random_seed).integers(2**31)),
            logged_span=(float(logged.min()), float(logged.max())) if logged.size else None,
        )
        departure = recent_departure(update.reward_draws, run.points)
        if departure.departed:
            warnings.warn(
                f"live update of {update.run_id}: {departure.note()}", ForecastDepartureWarning, stacklevel=2
            )
        return dataclasses.replace(update, departure=departure)


def run_curve_draws(posterior: RunPosterior, data: ModelData, curve: str) -> CurveDraws:
    """Draws of one run's curve (and its noise) from its parameter draws.

    Parameters
    ----------
    posterior : RunPosterior
        The run's draws, e.g. :func:`bayesgrpo.model.laplace.condition_run`'s.
    data : ModelData
        The run as the draws were conditioned on it: its bounds and horizon scale the curve.
    curve : str
        The population's curve family.

    Returns
    -------
    CurveDraws
        What :meth:`LiveForecaster.update` returns as ``curve_draws``.
    """
    natural = posterior.natural()
    params = {name: natural[name][:, None] for name in (*curve_params(curve), "asymptote", "sigma")}
    params["nu"] = np.asarray(posterior.prior.nu, dtype=float)
    return CurveDraws.from_model_data(params, data, curve)


def _size_slope_prior_sd(population: RewardModel) -> float:
    """The prior scale of the population's size slopes (their largest), the spread per unit of
    standardised log size that a size beyond the fitted ones adds (``model.predict.size_effect_draws``).
    """
    scales = [
        _prior_scale(prior) for name, prior in population.prior_config.items() if name.endswith("_size_slope")
    ]
    return max(scales, default=0.5)


def _prior_scale(prior: Mapping[str, Any]) -> float:
    """A prior's ``sigma`` (its scale) from its JSON form (``RewardModel.prior_config``), 0.5 when it
    names none.
    """
    return float(prior_spec(prior)[1].get("sigma", 0.5))


def _text(value: Any) -> str | None:
    """A metadata value as text, None when missing (None, NaN, pd.NA, empty)."""
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
        return None
    text = str(value)
    return None if text in ("", "<NA>", "nan", "None") else text


def _level(
    value: str | None, fitted_levels: tuple[str, ...], fitted_index: np.ndarray, effect_names: tuple[str, ...]
) -> str | None:
    """The effect level of a run's family/task: its own, ``(other)`` for a fitted rare level,
    the value itself (a new level) when never fitted, None when unknown.
    """
    if value is None or value == UNKNOWN:
        return None
    if value in effect_names:
        return value
    if value in fitted_levels:
        return OTHER_LEVEL if OTHER_LEVEL in effect_names else None
    return value


def resolve_population(population: RewardModel | str | Path | None) -> RewardModel:
    """A population from what a user gives: the one shipped with bayesgrpo (None), a file written
    by ``RewardModel.save``, or a fitted model.
    """
    if population is None:
        return bundled_population()
    if isinstance(population, (str, Path)):
        return RewardModel.load(population)
    if isinstance(population, RewardModel):
        return population
    raise BayesGRPOError(
        "population must be None (the shipped one), a path to a saved RewardModel or a RewardModel; got "
        f"{type(population).__name__}"
    )


def live_forecaster(population: Any = None, random_seed: int | None = 1) -> LiveForecaster:
    """What answers live updates, from what a user gives.

    Parameters
    ----------
    population : RewardModel, path of a saved model, None, or a forecaster
        None: the population shipped with bayesgrpo (``bundled_population()``). Anything with an
        ``update(run, horizon=...)`` method returning a ``LiveUpdate`` (a ``LiveForecaster``) is
        used as it is.
    random_seed : int, optional
    """
    known = population is None or isinstance(population, (str, Path, RewardModel))
    if not known and callable(getattr(population, "update", None)):
        return cast(LiveForecaster, population)  # duck-typed: anything with update() serves
    return LiveForecaster(resolve_population(population), random_seed=random_seed)
