"""Least squares of the exponential saturation law of arXiv 2507.18014.

The law is ``R(t) = A - (A - R0) exp(-t/tau)``; intervals by residual bootstrap.
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
from bayesgrpo.model.curves import g_exp


def _exp_curve(theta: np.ndarray, t: np.ndarray, r0: np.ndarray) -> np.ndarray:
    """``A - (A - R0) exp(-t/tau)`` with ``theta = (A, R0, log tau)``."""
    a, r0_fit, tau = theta[:, 0:1], theta[:, 1:2], np.exp(theta[:, 2:3])
    return r0_fit + (a - r0_fit) * g_exp(t[None, :], tau)


def _exp_natural(theta: np.ndarray, r0: np.ndarray) -> dict[str, np.ndarray]:
    return {"A": theta[:, 0], "R0": theta[:, 1], "tau": np.exp(theta[:, 2])}


_EXP_LAW = LeastSquaresLaw("exp_least_squares", _exp_curve, _exp_natural, r0_from_data=False)


def forecast_exp_least_squares(
    steps: np.ndarray,
    rewards: np.ndarray,
    target_steps: np.ndarray,
    *,
    n_draws: int = 200,
    random_seed: int | None = None,
    n_boot: int = 100,
    reward_bounds: tuple[float, float] | None = None,
    asymptote_margin: float = 3.0,
    tau_range: tuple[float, float] = (1e-3, 1e2),
) -> BaselineForecast:
    r"""Least squares of the exponential saturation law, intervals by residual bootstrap.

    .. math:: R(t) = A - (A - R_0)\\, e^{-t/\\tau}, \\qquad t = \\text{step} / \\text{horizon}

    the per-run law of arXiv 2507.18014, fitted by bounded least squares (scipy's dogbox) from a
    few starts, with ``A`` and ``R0`` in ``reward_bounds`` (else the prefix's range widened by
    ``asymptote_margin`` ranges each side) and ``tau`` in ``tau_range`` (fractions of the
    horizon; fitted on ``log tau``). Intervals: ``n_boot`` residual-bootstrap refits (all
    replicates solved at once by a vectorised Levenberg-Marquardt started at the fit), and each
    predictive draw adds Gaussian noise of its replicate's residual sd.

    Falls back to persistence (``info["fallback"]``) with fewer than 5 points, a constant
    prefix, or a failed fit.

    Parameters
    ----------
    steps, rewards : ndarray, shape (n,)
        The observed prefix of one run.
    target_steps : ndarray, shape (T,)
        Steps to forecast.
    n_draws : int
        Number of predictive draws.
    random_seed : int, optional
        Seed of the bootstrap and the draws.
    n_boot : int
        Bootstrap replicates.
    reward_bounds : (float, float), optional
        Known bounds of the reward (bound ``A`` and ``R0``).
    asymptote_margin : float
        Without ``reward_bounds``: how many prefix ranges ``A`` and ``R0`` may lie beyond it.
    tau_range : (float, float)
        Bounds of ``tau`` in units of the horizon.

    Returns
    -------
    BaselineForecast
        ``info``: ``params`` (``A``, ``R0``, ``tau`` in horizon units), ``tau_steps``,
        ``params_q05`` / ``params_q95`` (bootstrap), ``sigma``, ``n_boot_failed``.
    """
    start = time.perf_counter()
    name = _EXP_LAW.name
    prefix = prepare_prefix(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    n_boot = check_positive_int("n_boot", n_boot)
    rng = np.random.default_rng(random_seed)
    y, t = prefix.rewards, prefix.t
    n_par = 3
    if y.size < n_par + 2:
        return persistence_fallback(
            name, prefix, n_draws, rng, f"{y.size} points, the law needs at least {n_par + 2}", start
        )
    if np.ptp(y) <= 1e-12 * max(1.0, abs(float(y.mean()))):
        return persistence_fallback(name, prefix, n_draws, rng, "constant rewards", start)
    low, high = reward_box(y, reward_bounds, asymptote_margin)
    lower = np.array([low, low, math.log(tau_range[0])])
    upper = np.array([high, high, math.log(tau_range[1])])
    n_edge = edge_points(y.size, 0.1)
    head, tail, span = float(y[:n_edge].mean()), float(y[-n_edge:].mean()), float(np.ptp(y))
    t_end = max(float(t.max()), 1e-3)
    starts = np.array(
        [
            [a, head, math.log(tau)]
            for a in (tail, tail + 0.5 * span * np.sign(tail - head))
            for tau in (0.2 * t_end, t_end, 5.0 * t_end)
        ]
    )
    return fitted_law_forecast(
        _EXP_LAW,
        prefix,
        r0_hat=math.nan,
        n_head=n_edge,
        starts=starts,
        lower=lower,
        upper=upper,
        n_boot=n_boot,
        n_draws=n_draws,
        rng=rng,
        start=start,
        details=lambda params: {
            "tau_steps": params["tau"] * prefix.horizon,
            "bounds": {"A": (low, high), "R0": (low, high), "tau": tuple(tau_range)},
        },
    )
