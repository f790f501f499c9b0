"""Backtests of forecasts and stopping rules on real runs, and the baselines they are measured against.

``bayesgrpo.evaluate.baselines`` holds the peers bayesgrpo is measured against: per-run forecasts
(persistence, least squares of the exponential saturation law, the ScaleRL sigmoid, a Domhan et
al. 2015-style MCMC ensemble) and the stopping rules in use today (fixed fraction, patience,
Optuna-style median pruning). ``bayesgrpo.evaluate.scores`` scores forecasts given as draws
(CRPS, log predictive density, interval coverage and width, final-reward error);
``bayesgrpo.evaluate.backtest`` cuts runs, forecasts their rest with every method and runs
stopping rules online (:func:`forecast_backtest`, :func:`stopping_backtest`, :func:`frontier`).
Importing this package imports nothing heavy: the names below load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "FixedFraction": "backtest",
    "MedianPruning": "backtest",
    "Patience": "backtest",
    "bayes_forecast_draws": "backtest",
    "cut_points": "backtest",
    "forecast_backtest": "backtest",
    "frontier": "backtest",
    "kfold_populations": "backtest",
    "stopping_backtest": "backtest",
    "crps_from_draws": "scores",
    "final_reward_error": "scores",
    "interval_coverage": "scores",
    "interval_width": "scores",
    "log_predictive_density": "scores",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"bayesgrpo.evaluate.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'bayesgrpo.evaluate' has no attribute {name!r}")
