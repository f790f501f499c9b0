"""Persistence: the last observed level carried forward, the naive peer every forecast must beat.

Also the fallback of every other baseline whose fit cannot be made (:func:`persistence_fallback`).
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import numpy as np

from bayesgrpo.evaluate.baselines.base import BaselineForecast, Prefix, base_info, prepare_prefix

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Persistence
# --------------------------------------------------------------------------------------------


def _rolling_residual_sd(y: np.ndarray, window: int) -> float:
    """Sd of ``y`` around its centred rolling mean (odd ``window``), corrected for the point's own weight.

    A point is in its own window's mean, so ``Var(y_i - mean_i) = sigma^2 (1 - 1/w)`` for white
    noise: the mean square of the residuals is divided by that factor. With fewer points than
    the window, the residuals are taken around the overall mean (``w = n``).
    """
    n = y.size
    if n < 2:
        return 0.0
    w = min(window if window % 2 == 1 else window + 1, n if n % 2 == 1 else n - 1)
    if w < 3:
        centred = y - y.mean()
        return float(np.sqrt(np.sum(centred**2) / (n - 1)))
    means = np.convolve(y, np.ones(w) / w, mode="valid")
    half = w // 2
    residuals = y[half : n - half] - means
    return float(np.sqrt(np.mean(residuals**2) / (1.0 - 1.0 / w)))


def _persistence(
    prefix: Prefix, n_draws: int, rng: np.random.Generator, tail_fraction: float, min_tail: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """Draws and info of the persistence forecast (see :func:`forecast_persistence`)."""
    y = prefix.rewards
    n = y.size
    n_tail = int(min(n, max(min_tail, math.ceil(tail_fraction * n))))
    level = float(y[-n_tail:].mean())
    noise_sd = _rolling_residual_sd(y, max(n_tail, 3))
    total_sd = noise_sd * math.sqrt(1.0 + 1.0 / n_tail)
    draws = level + total_sd * rng.standard_normal((n_draws, prefix.target_steps.size))
    info = {"level": level, "noise_sd": noise_sd, "predictive_sd": total_sd, "n_tail": n_tail}
    return draws, info


def forecast_persistence(
    steps: np.ndarray,
    rewards: np.ndarray,
    target_steps: np.ndarray,
    *,
    n_draws: int = 200,
    random_seed: int | None = None,
    tail_fraction: float = 0.1,
    min_tail: int = 3,
) -> BaselineForecast:
    """Carry the last observed level forward, with the prefix's own noise.

    The level is the mean of the last ``max(min_tail, ceil(tail_fraction * n))`` points (all of
    them if fewer). The noise sd is the residual sd of the prefix around its centred rolling mean
    over a window of that many points (odd, corrected for the point's own weight in its mean).
    Draws are ``level + N(0, sd^2 (1 + 1/n_tail))``: observation noise plus the uncertainty of
    the level, the same at every target step.

    Parameters
    ----------
    steps, rewards : ndarray, shape (n,)
        The observed prefix of one run (non-finite points are dropped and counted).
    target_steps : ndarray, shape (T,)
        Steps to forecast.
    n_draws : int
        Number of predictive draws.
    random_seed : int, optional
        Seed of the draws.
    tail_fraction, min_tail : float, int
        Size of the tail whose mean is the level.

    Returns
    -------
    BaselineForecast
        ``info``: ``level``, ``noise_sd``, ``predictive_sd``, ``n_tail``.

    Raises
    ------
    BaselineInputError
        Mismatched or empty inputs, negative steps.
    """
    start = time.perf_counter()
    prefix = prepare_prefix(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    rng = np.random.default_rng(random_seed)
    draws, info = _persistence(prefix, n_draws, rng, tail_fraction, min_tail)
    info = {"status": "ok", "fallback": None, **info, **base_info(prefix)}
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast("persistence", prefix.target_steps, draws, info)


def persistence_fallback(
    name: str, prefix: Prefix, n_draws: int, rng: np.random.Generator, reason: str, start: float, **extra: Any
) -> BaselineForecast:
    """Persistence in place of a method whose fit failed; the reason goes to ``info``."""
    logger.info("%s: fit failed (%s); falling back to persistence", name, reason)
    draws, pinfo = _persistence(prefix, n_draws, rng, 0.1, 3)
    info = {
        "status": "fallback",
        "fallback": f"persistence: {reason}",
        "persistence": pinfo,
        **extra,
        **base_info(prefix),
    }
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(name, prefix.target_steps, draws, info)
