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
    * Leave one family out (:func:`family_out_populations`): every run of one model family is
      predicted by a population that has never seen the family.
"""

from __future__ import annotations

from bayesgrpo.evaluate.transfer_eval.metadata import (
    COVARIATES,
    known_reward_bounds,
    population_mean_metadata,
    prefix_label,
    zero_shot_metadata,
)
from bayesgrpo.evaluate.transfer_eval.populations import (
    family_out_populations,
    run_out_populations,
    size_groups,
    size_out_populations,
)
from bayesgrpo.evaluate.transfer_eval.scoring import (
    DEFAULT_PREFIXES,
    WHOLE_CURVE,
    ZERO_SHOT_METHODS,
    observed_reward_draws,
    transfer_scores,
)
from bayesgrpo.evaluate.transfer_eval.summary import improvement_over, transfer_summary

__all__ = [
    "COVARIATES",
    "DEFAULT_PREFIXES",
    "WHOLE_CURVE",
    "ZERO_SHOT_METHODS",
    "family_out_populations",
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
