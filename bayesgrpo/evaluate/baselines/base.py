"""What every baseline forecaster shares: its input checks, the forecast it returns, its fit errors.

:func:`prepare_prefix` checks one run's observed prefix and the target steps and normalises
progress (``t = step / horizon``); :class:`BaselineForecast` holds draws of the observed reward at
the target steps with a record of how they were made.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from bayesgrpo.errors import BaselineInputError

logger = logging.getLogger(__name__)

# Errors a numerical fit may raise on odd data (numpy's LinAlgError is a ValueError; emcee and
# scipy raise ValueError / RuntimeError; ArithmeticError covers overflow and division). A fit
# that raises one of these falls back to persistence; anything else is a bug and propagates.
FIT_ERRORS = (ValueError, ArithmeticError, RuntimeError)


@dataclass(frozen=True, eq=False)
class BaselineForecast:
    """Predictive draws of one baseline for one run.

    Attributes
    ----------
    name : str
        The baseline (``"persistence"``, ``"exp_least_squares"``, ``"scalerl_sigmoid"``,
        ``"domhan_ensemble"``), also when it fell back to persistence.
    target_steps : ndarray, shape (T,)
        The steps forecast, as given.
    draws : ndarray, shape (n_draws, T)
        Draws of the observed reward at ``target_steps`` (observation noise included).
    info : dict
        ``status`` (``"ok"`` or ``"fallback"``), ``fallback`` (``None`` or the reason),
        fitted parameters, intervals and fit diagnostics of the method, ``horizon``,
        ``n_points`` used, ``n_dropped`` non-finite points, ``seconds`` spent.
    """

    name: str
    target_steps: np.ndarray
    draws: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def fell_back(self) -> bool:
        """Whether the method's own fit failed and persistence was used instead."""
        return self.info.get("status") == "fallback"

    def quantile(self, q: float | Sequence[float]) -> np.ndarray:
        """Quantiles of the draws per target step, shape ``(len(q), T)`` or ``(T,)``."""
        return np.quantile(self.draws, q, axis=0)


# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------


class Prefix(NamedTuple):
    """A run's observed prefix, cleaned and on the normalised progress axis."""

    steps: np.ndarray  # (n,) sorted, finite
    rewards: np.ndarray  # (n,) finite
    t: np.ndarray  # steps / horizon
    target_steps: np.ndarray  # (T,) as given
    t_target: np.ndarray  # target_steps / horizon
    horizon: float
    n_dropped: int


def prepare_prefix(steps: np.ndarray, rewards: np.ndarray, target_steps: np.ndarray, n_draws: int) -> Prefix:
    """Check and clean the inputs of a forecaster; put progress on ``t = step / horizon``."""
    steps = np.asarray(steps, dtype=np.float64)
    rewards = np.asarray(rewards, dtype=np.float64)
    target = np.asarray(target_steps, dtype=np.float64)
    if steps.ndim != 1 or rewards.ndim != 1 or steps.shape != rewards.shape:
        raise BaselineInputError(
            f"steps and rewards must be 1-D arrays of one length, got shapes {steps.shape} and "
            f"{rewards.shape}; pass one run's logged points"
        )
    if target.ndim != 1 or target.size == 0 or not np.all(np.isfinite(target)):
        raise BaselineInputError(
            f"target_steps must be a non-empty 1-D array of finite steps, got shape {target.shape}"
        )
    if int(n_draws) < 1:
        raise BaselineInputError(f"n_draws must be at least 1, got {n_draws}")
    keep = np.isfinite(steps) & np.isfinite(rewards)
    n_dropped = int((~keep).sum())
    if n_dropped:
        logger.warning("baseline input: dropped %d point(s) with a non-finite step or reward", n_dropped)
    steps, rewards = steps[keep], rewards[keep]
    if steps.size == 0:
        raise BaselineInputError(
            "no finite (step, reward) point in the prefix; a forecast needs at least one"
        )
    if np.any(steps < 0) or np.any(target < 0):
        raise BaselineInputError(
            "steps must be >= 0 (optimizer steps); shift the progress axis to start at 0"
        )
    order = np.argsort(steps, kind="stable")
    steps, rewards = steps[order], rewards[order]
    horizon = float(max(target.max(), steps.max()))
    if horizon <= 0.0:
        horizon = 1.0
    return Prefix(steps, rewards, steps / horizon, target, target / horizon, horizon, n_dropped)


def base_info(prefix: Prefix) -> dict[str, Any]:
    """The record every forecast's ``info`` starts from: horizon, points used and points dropped."""
    return {"horizon": prefix.horizon, "n_points": int(prefix.steps.size), "n_dropped": prefix.n_dropped}


def check_positive_int(name: str, value: int, minimum: int = 1) -> int:
    """``value`` as an int, checked to be at least ``minimum``."""
    if int(value) < minimum:
        raise BaselineInputError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def edge_points(n: int, fraction: float) -> int:
    """Number of first points whose mean is the start level."""
    return int(min(n, max(3, math.ceil(fraction * n))))
