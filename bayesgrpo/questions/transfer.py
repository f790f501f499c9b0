"""Cross-model transfer: the curve of a run not trained yet, from the population posterior.

A run described by its metadata (family, size, task, samples per step, and its initial reward
if measured) is placed in a fitted population as the model places a fitted run
(``model.predict.new_run_draws``): a known family by its fitted effect, a new family by a fresh
draw from the between-family spread (for levels the fit has no family effect on, the spread the
population's families show, ``model.predict.family_level_spreads``), an unknown one at the
average family. A size beyond the fitted ones widens with the distance
(``model.predict.size_effect_draws``). A run on a stated
reward range placed in a population with fewer than two such runs (or a run normalised by its own
range in one with fewer than two of those) gets its start and end levels from the model's priors:
the population never learnt where such a run's levels lie (``model.predict.levels_learnt``). Its first logged
points, when given, sharpen the prediction by the live update (``bayesgrpo.questions.live``).

Examples
--------
>>> population = RewardModel.load("model.nc")  # doctest: +SKIP
>>> predict_new_run(population, {"family": "Qwen", "size_b": 14, "reward_min": 0, "reward_max": 1},
...                 horizon=500).table  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.data import UPDATES_BEFORE_STEP
from bayesgrpo.model.laplace import condition_run, condition_start
from bayesgrpo.model.predict import quantile_columns
from bayesgrpo.questions.live import LiveForecaster, metadata_number, stated_reward_range
from bayesgrpo.questions.stopping import CurveDraws, reward_at

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable
    from bayesgrpo.model.laplace import RunPosterior
    from bayesgrpo.model.reward_model import RewardModel


@dataclass(frozen=True)
class TransferPrediction:
    """A new run's predicted reward curve.

    Attributes
    ----------
    table : pandas.DataFrame
        ``step, mean, q..`` of the expected reward (the curve, without logging noise).
    curve_draws : CurveDraws
        Draws of the run's curve, for the stopping queries (t80, phase, expected gain).
    posterior : RunPosterior
        The run's parameter draws; ``n_points`` is 0 for a zero-shot prediction.
    """

    table: pd.DataFrame
    curve_draws: CurveDraws
    posterior: RunPosterior


#: Measurement error of a stated ``initial_reward`` when ``initial_reward_sd`` is not given, as a
#: share of the reward range: an evaluation of the untrained model on a few hundred prompts, or
#: the first training batch's mean reward, is known to about this (a 0/1 reward's mean over 600
#: samples has a standard error of at most 0.02).
INITIAL_REWARD_SD = 0.02


def predict_new_run(
    population: RewardModel,
    metadata: Mapping[str, Any],
    *,
    horizon: float,
    steps: Sequence[float] | np.ndarray | None = None,
    first_points: RunsTable | None = None,
    quantiles: Sequence[float] = (0.05, 0.5, 0.95),
    n_draws: int = 2000,
    random_seed: int | None = None,
) -> TransferPrediction:
    """Predict the reward curve of a run from its metadata, and its first points if any.

    Parameters
    ----------
    population : RewardModel
        Fitted with ``pooling="partial"`` and ``progress="step"``.
    metadata : mapping
        ``family``, ``size_b``, ``task``, ``samples_per_step`` (or ``batch_size`` and
        ``group_size``): anything missing is treated as unknown. ``reward_min`` and
        ``reward_max`` (the reward's range) are needed without ``first_points``. ``initial_reward``
        (the reward of the model before training, e.g. a validation score at step 0), when
        given, pins the curve's start (to within ``initial_reward_sd``, in reward units, default
        :data:`INITIAL_REWARD_SD` of the range) and moves the rest of the curve by the
        population's correlation with the start.
    horizon : float
        The step the run is planned to end at.
    steps : sequence of float, optional
        Steps to predict (default: about 50 whole steps from 1 to the horizon, the horizon
        included: a run's steps are integers).
    first_points : RunsTable, optional
        The run's first logged points (one run): the prediction is then updated by them.
    quantiles : sequence of float
    n_draws : int
    random_seed : int, optional

    Returns
    -------
    TransferPrediction
        Its table lies inside ``reward_min .. reward_max`` when the metadata state them: a score
        on 0..1 is never predicted above 1.

    Raises
    ------
    BayesGRPOError
        Without ``first_points`` and a reward range; for ``initial_reward`` or
        ``initial_reward_sd`` that are given but not numbers, or a non-positive error.
    """
    if population.progress != "step":
        raise BayesGRPOError(
            f"transfer predicts on progress='step' populations; this one uses {population.progress!r}"
        )
    if horizon <= UPDATES_BEFORE_STEP:
        raise BayesGRPOError(f"horizon must be more than {UPDATES_BEFORE_STEP} step; got {horizon}")
    live = LiveForecaster(population, n_draws=n_draws, random_seed=random_seed)
    if first_points is not None:
        update = live.update(first_points, horizon=horizon)
        curve_draws, posterior = update.curve_draws, update.posterior
    else:
        bounds = stated_reward_range(metadata)
        if bounds is None:
            raise BayesGRPOError(
                "a prediction before the run's first step needs its reward range: give reward_min and "
                "reward_max in the metadata (e.g. 0 and 1 for an accuracy reward), or pass first_points"
            )
        low, high = bounds
        prior = live.prior_for(metadata)
        initial, error = (
            metadata_number(metadata.get("initial_reward")),
            metadata_number(metadata.get("initial_reward_sd")),
        )
        for key, value in (("initial_reward", initial), ("initial_reward_sd", error)):
            given = metadata.get(key)
            if (
                not np.isfinite(value)
                and given is not None
                and str(given).strip().lower() not in ("", "nan", "<na>", "none")
            ):
                raise BayesGRPOError(
                    f"{key} must be a number; got {given!r} (leave it out when not measured)"
                )
        if np.isfinite(error) and error <= 0:
            raise BayesGRPOError(f"initial_reward_sd must be positive; got {error}")
        if np.isfinite(initial):
            error = INITIAL_REWARD_SD if not np.isfinite(error) else error / (high - low)
            posterior = condition_start(
                prior,
                (initial - low) / (high - low),
                max(error, 1e-4),
                n_draws=n_draws,
                random_seed=random_seed,
            )
        else:
            posterior = condition_run(
                prior, np.empty(0), np.empty(0), n_draws=n_draws, random_seed=random_seed
            )
        natural = posterior.natural()
        family_shapes = [name for name in prior.names[2:-1]]
        params = {
            "r0": low + natural["r0"][:, None] * (high - low),
            "asymptote": low + natural["asymptote"][:, None] * (high - low),
            **{name: natural[name][:, None] for name in family_shapes},
        }
        curve_draws = CurveDraws(
            curve=population.curve,
            params=params,
            step_scale=np.array([max(horizon - UPDATES_BEFORE_STEP, 1.0)]),
            reward_scale=np.array([high - low]),
            horizon_step=np.array([float(horizon)]),
            run_ids=(str(metadata.get("run_id", "new run")),),
            step_offset=float(UPDATES_BEFORE_STEP),
        )
    grid = (
        np.unique(np.round(np.linspace(1.0, float(horizon), 50)))
        if steps is None
        else np.asarray(steps, dtype=float)
    )
    values = reward_at(curve_draws, grid)[:, 0, :]
    stated = stated_reward_range(metadata)
    if stated is not None:  # a step past the horizon may carry a curve beyond a range it cannot leave
        values = np.clip(values, *stated)
    table = pd.DataFrame({"step": grid, "mean": values.mean(axis=0)})
    for name, q in zip(quantile_columns(quantiles), np.quantile(values, quantiles, axis=0), strict=True):
        table[name] = q
    return TransferPrediction(table=table, curve_draws=curve_draws, posterior=posterior)
