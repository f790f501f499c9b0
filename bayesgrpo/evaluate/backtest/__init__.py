"""Backtests on real runs: forecasts from a cut prefix, and stopping rules run online.

Forecast backtest (:func:`forecast_backtest`)
    Each run is cut at a fraction of its step span (:func:`cut_points`); every method forecasts
    the held-out points from the observed prefix alone, as draws of the observed reward; the
    draws are scored against the logged rewards (:mod:`bayesgrpo.evaluate.scores`): CRPS and log
    predictive density over the held-out tail, 50% and 90% interval coverage and width, and the
    absolute error of the final reward (mean of the last 5% of the run's points). Scores in
    reward units are divided by the run's full logged reward range.

Stopping backtest (:func:`stopping_backtest`, :func:`frontier`, :func:`paired_rule_differences`)
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

from bayesgrpo.evaluate.backtest.calibration import calibration_table, stop_probability_calibration
from bayesgrpo.evaluate.backtest.cuts import (
    BAYES_METHOD,
    DEFAULT_CUTS,
    DEFAULT_METHODS,
    FINAL_FRACTION,
    MIN_OBSERVED,
    SMOOTHING_FRACTION,
    BacktestError,
    Cut,
    cut_points,
    planned_horizon,
    run_points,
)
from bayesgrpo.evaluate.backtest.forecast import bayes_forecast_draws, forecast_backtest, live_forecasters
from bayesgrpo.evaluate.backtest.paired import paired_rule_differences
from bayesgrpo.evaluate.backtest.populations import (
    fold_assignment,
    held_out_populations,
    kfold_populations,
    leave_one_source_out_populations,
    source_group,
    source_groups,
)
from bayesgrpo.evaluate.backtest.smoothing import (
    cross_validated_window,
    dip_at_stop,
    reward_given_up,
    smoothed_reward,
)
from bayesgrpo.evaluate.backtest.stopping import (
    FixedFraction,
    MedianPruning,
    OracleBound,
    Patience,
    frontier,
    oracle_stop_bound,
    stop_candidates,
    stopping_backtest,
)

__all__ = [
    "BAYES_METHOD",
    "BacktestError",
    "Cut",
    "live_forecasters",
    "DEFAULT_CUTS",
    "DEFAULT_METHODS",
    "FINAL_FRACTION",
    "FixedFraction",
    "MIN_OBSERVED",
    "MedianPruning",
    "OracleBound",
    "Patience",
    "SMOOTHING_FRACTION",
    "bayes_forecast_draws",
    "calibration_table",
    "cross_validated_window",
    "dip_at_stop",
    "cut_points",
    "fold_assignment",
    "held_out_populations",
    "forecast_backtest",
    "frontier",
    "kfold_populations",
    "leave_one_source_out_populations",
    "oracle_stop_bound",
    "paired_rule_differences",
    "source_group",
    "source_groups",
    "planned_horizon",
    "reward_given_up",
    "run_points",
    "smoothed_reward",
    "stop_candidates",
    "stop_probability_calibration",
    "stopping_backtest",
]
