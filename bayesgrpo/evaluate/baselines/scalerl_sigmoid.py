"""Least squares of the ScaleRL sigmoid of arXiv 2510.13786, ``R = R0 + (A - R0) / (1 + (C_mid/C)^B)``.

The step stands in for compute; intervals by residual bootstrap.
"""

from __future__ import annotations

import math
import time

import numpy as np

from bayesgrpo.evaluate.baselines.base import (
    BaselineForecast,
    check_positive_int,
    edge_points,
    prepare_prefix,
)
from bayesgrpo.evaluate.baselines.least_squares import (
    LeastSquaresLaw,
    fitted_law_forecast,
    reward_box,
)
from bayesgrpo.evaluate.baselines.persistence import persistence_fallback
from bayesgrpo.model.curves import g_logistic


def _sigmoid_curve_fixed_r0(theta: np.ndarray, t: np.ndarray, r0: np.ndarray) -> np.ndarray:
    """``R0 + (A - R0) / (1 + (C_mid/t)^B)`` with ``theta = (A, log C_mid, log B)``, ``R0`` given."""
    a, c_mid, b = theta[:, 0:1], np.exp(theta[:, 1:2]), np.exp(theta[:, 2:3])
    r0 = r0[:, None]
    return r0 + (a - r0) * g_logistic(t[None, :], c_mid, b)


def _sigmoid_natural_fixed_r0(theta: np.ndarray, r0: np.ndarray) -> dict[str, np.ndarray]:
    return {"A": theta[:, 0], "R0": r0, "C_mid": np.exp(theta[:, 1]), "B": np.exp(theta[:, 2])}


def _sigmoid_curve_free_r0(theta: np.ndarray, t: np.ndarray, r0: np.ndarray) -> np.ndarray:
    """As :func:`_sigmoid_curve_fixed_r0` with ``theta = (A, R0, log C_mid, log B)``."""
    return _sigmoid_curve_fixed_r0(theta[:, [0, 2, 3]], t, theta[:, 1])


def _sigmoid_natural_free_r0(theta: np.ndarray, r0: np.ndarray) -> dict[str, np.ndarray]:
    return _sigmoid_natural_fixed_r0(theta[:, [0, 2, 3]], theta[:, 1])


_SIGMOID_FIXED_R0 = LeastSquaresLaw(
    "scalerl_sigmoid", _sigmoid_curve_fixed_r0, _sigmoid_natural_fixed_r0, r0_from_data=True
)
_SIGMOID_FREE_R0 = LeastSquaresLaw(
    "scalerl_sigmoid", _sigmoid_curve_free_r0, _sigmoid_natural_free_r0, r0_from_data=False
)


def forecast_scalerl_sigmoid(
    steps: np.ndarray,
    rewards: np.ndarray,
    target_steps: np.ndarray,
    *,
    n_draws: int = 200,
    random_seed: int | None = None,
    n_boot: int = 100,
    fit_r0: bool = False,
    r0_fraction: float = 0.05,
    reward_bounds: tuple[float, float] | None = None,
    asymptote_margin: float = 3.0,
    c_mid_range: tuple[float, float] = (1e-3, 1e2),
    b_range: tuple[float, float] = (0.1, 10.0),
) -> BaselineForecast:
    r"""Least squares of the ScaleRL sigmoid in compute, intervals by residual bootstrap.

    .. math:: R(C) = R_0 + \\frac{A - R_0}{1 + (C_{mid} / C)^B}, \\qquad C = \\text{step} / \\text{horizon}

    the compute-performance curve of ScaleRL (arXiv 2510.13786) with the optimizer step as the
    compute proxy; ``R(0) = R0`` exactly. As in the paper, ``R0`` is the measured starting
    reward: by default the mean of the first ``max(3, ceil(r0_fraction * n))`` points (re-taken
    in every bootstrap replicate), and ``A``, ``C_mid`` and ``B`` are fitted; ``fit_r0=True``
    fits ``R0`` as well. ``C_mid`` (horizon units) and ``B`` are fitted on log scale within
    ``c_mid_range`` and ``b_range``; ``A`` as in :func:`forecast_exp_least_squares`. Intervals
    and noise as there; falls back to persistence with fewer than ``P + 2`` points, a constant
    prefix or a failed fit.

    Parameters
    ----------
    steps, rewards, target_steps, n_draws, random_seed, n_boot, reward_bounds, asymptote_margin
        As in :func:`forecast_exp_least_squares`.
    fit_r0 : bool
        Fit ``R0`` instead of measuring it from the first points.
    r0_fraction : float
        Fraction of the prefix's first points whose mean is ``R0`` (at least 3 points).
    c_mid_range, b_range : (float, float)
        Bounds of ``C_mid`` (horizon units) and of ``B``.

    Returns
    -------
    BaselineForecast
        ``info``: ``params`` (``A``, ``R0``, ``C_mid``, ``B``), ``c_mid_steps``,
        ``params_q05`` / ``params_q95``, ``sigma``, ``n_boot_failed``.
    """
    start = time.perf_counter()
    name = "scalerl_sigmoid"
    prefix = prepare_prefix(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    n_boot = check_positive_int("n_boot", n_boot)
    rng = np.random.default_rng(random_seed)
    y, t = prefix.rewards, prefix.t
    law = _SIGMOID_FREE_R0 if fit_r0 else _SIGMOID_FIXED_R0
    n_par = 4 if fit_r0 else 3
    if y.size < n_par + 2:
        return persistence_fallback(
            name, prefix, n_draws, rng, f"{y.size} points, the law needs at least {n_par + 2}", start
        )
    if np.ptp(y) <= 1e-12 * max(1.0, abs(float(y.mean()))):
        return persistence_fallback(name, prefix, n_draws, rng, "constant rewards", start)
    low, high = reward_box(y, reward_bounds, asymptote_margin)
    n_head = edge_points(y.size, r0_fraction)
    head = float(y[:n_head].mean())
    n_tail = edge_points(y.size, 0.1)
    tail, span = float(y[-n_tail:].mean()), float(np.ptp(y))
    t_end = max(float(t.max()), 1e-3)
    log_c = (math.log(c_mid_range[0]), math.log(c_mid_range[1]))
    log_b = (math.log(b_range[0]), math.log(b_range[1]))
    grid = [
        (a, math.log(c), math.log(b))
        for a in (tail, tail + 0.5 * span * np.sign(tail - head))
        for c in (0.3 * t_end, t_end, 3.0 * t_end)
        for b in (1.0, 2.0)
    ]
    if fit_r0:
        starts = np.array([(a, head, c, b) for a, c, b in grid])
        lower = np.array([low, low, log_c[0], log_b[0]])
        upper = np.array([high, high, log_c[1], log_b[1]])
    else:
        starts = np.array(grid)
        lower = np.array([low, log_c[0], log_b[0]])
        upper = np.array([high, log_c[1], log_b[1]])
    r0_hat = math.nan if fit_r0 else head
    return fitted_law_forecast(
        law,
        prefix,
        r0_hat=r0_hat,
        n_head=n_head,
        starts=starts,
        lower=lower,
        upper=upper,
        n_boot=n_boot,
        n_draws=n_draws,
        rng=rng,
        start=start,
        details=lambda params: {
            "c_mid_steps": params["C_mid"] * prefix.horizon,
            "r0_fitted": bool(fit_r0),
            "n_head": n_head,
            "bounds": {"A": (low, high), "C_mid": tuple(c_mid_range), "B": tuple(b_range)},
        },
    )
