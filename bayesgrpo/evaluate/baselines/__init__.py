"""Forecasting and stopping baselines that bayesgrpo is measured against, one module per baseline.

Every forecaster here is a pure function of **one** run's observed prefix, implemented from the
published description of the method, so that a backtest can run each of them on exactly the same
cut curves as the Bayesian model:

``forecast_persistence``
    The last observed level carried forward (the naive peer every forecast must beat).
``forecast_exp_least_squares``
    Least squares of the exponential saturation law ``R(t) = A - (A - R0) exp(-t/tau)`` of
    arXiv 2507.18014, fitted per run, intervals by residual bootstrap.
``forecast_scalerl_sigmoid``
    Least squares of the ScaleRL sigmoid ``R = R0 + (A - R0) / (1 + (C_mid/C)^B)`` of
    arXiv 2510.13786 (step as the compute proxy), intervals by residual bootstrap.
``forecast_domhan_ensemble``
    The weighted ensemble of 11 parametric learning-curve families of Domhan, Springenberg and
    Hutter (2015, IJCAI), sampled with the emcee affine-invariant ensemble sampler as in the
    paper; its stopping statistic is :func:`domhan_p_better`.

Each returns a :class:`BaselineForecast` whose ``draws`` are draws of the **observed** reward at
the target steps (curve uncertainty plus observation noise), so that CRPS and interval coverage
on held-out points compare fairly with the Bayesian model's posterior predictive. A fit that
cannot be made (too few points, a constant prefix, an optimiser or sampler failure) falls back to
persistence; ``info["fallback"]`` then says why, and ``info["status"] == "fallback"``.

Progress is normalised before fitting: ``t = step / horizon`` with ``horizon`` the largest of the
target steps and the observed steps, so every law sees ``t`` in ``[0, 1]``.

The stopping baselines return the step at which the rule stops a run, or ``None`` when it lets
the run go to its end: :func:`stop_fixed_fraction`, :func:`stop_patience` (Keras-style patience
on a smoothed reward) and :func:`stop_median_pruning` (Optuna's ``MedianPruner``, maximising).

LC-PFN (Adriaensen et al. 2023) is not here: it needs pretrained weights that cannot be
downloaded in this environment (docs/ARCHITECTURE.md: evaluate).
"""

from __future__ import annotations

from collections.abc import Callable

from bayesgrpo.evaluate.baselines.base import BaselineForecast, BaselineInputError
from bayesgrpo.evaluate.baselines.domhan import DOMHAN_FAMILIES, domhan_p_better, forecast_domhan_ensemble
from bayesgrpo.evaluate.baselines.exp_law import forecast_exp_least_squares
from bayesgrpo.evaluate.baselines.persistence import forecast_persistence
from bayesgrpo.evaluate.baselines.scalerl_sigmoid import forecast_scalerl_sigmoid
from bayesgrpo.evaluate.baselines.stopping_rules import (
    stop_fixed_fraction,
    stop_median_pruning,
    stop_patience,
)

#: The forecasting baselines by name, all with the signature
#: ``(steps, rewards, target_steps, *, n_draws, random_seed, **options) -> BaselineForecast``.
BASELINE_FORECASTERS: dict[str, Callable[..., BaselineForecast]] = {
    "persistence": forecast_persistence,
    "exp_least_squares": forecast_exp_least_squares,
    "scalerl_sigmoid": forecast_scalerl_sigmoid,
    "domhan_ensemble": forecast_domhan_ensemble,
}

__all__ = [
    "BASELINE_FORECASTERS",
    "BaselineForecast",
    "BaselineInputError",
    "DOMHAN_FAMILIES",
    "domhan_p_better",
    "forecast_domhan_ensemble",
    "forecast_exp_least_squares",
    "forecast_persistence",
    "forecast_scalerl_sigmoid",
    "stop_fixed_fraction",
    "stop_median_pruning",
    "stop_patience",
]
