"""Least squares of a saturating law per run, with intervals by residual bootstrap.

The machinery the exponential law (:mod:`~bayesgrpo.evaluate.baselines.exp_law`) and the ScaleRL
sigmoid (:mod:`~bayesgrpo.evaluate.baselines.scalerl_sigmoid`) share: a batched Levenberg-Marquardt
fit of a :class:`LeastSquaresLaw` and its residual bootstrap.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from bayesgrpo.evaluate.baselines.base import (
    FIT_ERRORS,
    BaselineForecast,
    BaselineInputError,
    Prefix,
    base_info,
)
from bayesgrpo.evaluate.baselines.persistence import persistence_fallback

# --------------------------------------------------------------------------------------------
# Least-squares laws with residual bootstrap
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeastSquaresLaw:
    """A parametric reward law as the least-squares fitter sees it.

    ``curve(theta, t, r0)`` gives the mean reward, shape ``(B, n)``, for parameter rows ``theta``
    of shape ``(B, P)`` (optimiser scale: logs of positive parameters) at progress ``t`` of shape
    ``(n,)``; ``r0`` of shape ``(B,)`` is the start level when it is fixed from the data rather
    than fitted (``r0_from_data``), else ignored. ``natural`` maps rows to named parameters.
    """

    name: str
    curve: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    natural: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]]
    r0_from_data: bool


def batched_lm(
    residuals: Callable[[np.ndarray], np.ndarray],
    theta0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    max_iter: int = 100,
    rtol: float = 1e-10,
) -> tuple[np.ndarray, np.ndarray]:
    """Levenberg-Marquardt on B independent least-squares problems at once, inside a box.

    ``residuals(theta)`` maps rows of shape ``(B, P)`` to residuals ``(B, n)``: problem ``b``
    depends on row ``b`` only. The Jacobian is a forward difference (one residual evaluation per
    parameter, vectorised over the B problems); steps are clipped to ``[lower, upper]``; each
    problem has its own damping and stops improving on its own. Used for the bootstrap refits,
    which start at the full-data optimum and converge in a few iterations.

    Returns
    -------
    theta : ndarray, shape (B, P)
    cost : ndarray, shape (B,)
        Half the sum of squared residuals; ``inf`` for a problem whose residuals are not finite.
    """
    theta = np.clip(np.array(theta0, dtype=np.float64), lower, upper)
    n_batch, n_par = theta.shape
    with np.errstate(all="ignore"):
        r = residuals(theta)
        cost = 0.5 * np.sum(r**2, axis=1)
        cost = np.where(np.isfinite(cost), cost, np.inf)
        damping = np.full(n_batch, 1e-3)
        active = np.isfinite(cost)
        for _ in range(max_iter):
            if not active.any():
                break
            step_size = 1e-7 * np.maximum(1.0, np.abs(theta))
            step_size = np.where(theta + step_size > upper, -step_size, step_size)
            jac = np.empty((n_batch, r.shape[1], n_par))
            for p in range(n_par):  # loop over the few parameters, vectorised over problems
                shifted = theta.copy()
                shifted[:, p] += step_size[:, p]
                jac[:, :, p] = (residuals(shifted) - r) / step_size[:, p : p + 1]
            jtj = np.einsum("bnp,bnq->bpq", jac, jac)
            grad = np.einsum("bnp,bn->bp", jac, r)
            ok = np.isfinite(jtj).all(axis=(1, 2)) & np.isfinite(grad).all(axis=1) & active
            jtj = np.where(ok[:, None, None], jtj, np.eye(n_par))
            grad = np.where(ok[:, None], grad, 0.0)
            diag = np.einsum("bpp->bp", jtj)
            lhs = jtj + (damping[:, None] * (diag + 1e-12))[:, :, None] * np.eye(n_par)
            delta = np.linalg.solve(lhs, -grad[:, :, None])[:, :, 0]
            candidate = np.clip(theta + delta, lower, upper)
            r_new = residuals(candidate)
            cost_new = 0.5 * np.sum(r_new**2, axis=1)
            better = ok & np.isfinite(cost_new) & (cost_new < cost)
            gain = np.where(better, (cost - cost_new) / np.maximum(cost, 1e-300), 0.0)
            theta = np.where(better[:, None], candidate, theta)
            r = np.where(better[:, None], r_new, r)
            cost = np.where(better, cost_new, cost)
            damping = np.where(better, damping / 3.0, damping * 4.0)
            active = ok & ~(better & (gain < rtol)) & (damping < 1e12)
    return theta, cost


def fit_least_squares(
    law: LeastSquaresLaw,
    t: np.ndarray,
    y: np.ndarray,
    r0: float,
    starts: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> tuple[np.ndarray, float]:
    """Best least-squares fit over several starts (scipy's dogbox trust region, in a box)."""
    r0_row = np.array([r0])

    def residual(theta: np.ndarray) -> np.ndarray:
        return law.curve(theta[None, :], t, r0_row)[0] - y

    best_theta, best_cost = np.full(starts.shape[1], np.nan), np.inf
    with np.errstate(all="ignore"):
        for start in starts:
            start = np.clip(start, lower + 1e-9 * (upper - lower), upper - 1e-9 * (upper - lower))
            if not np.all(np.isfinite(residual(start))):
                continue
            result = least_squares(residual, start, bounds=(lower, upper), method="dogbox", max_nfev=150)
            if np.all(np.isfinite(result.x)) and np.isfinite(result.cost) and result.cost < best_cost:
                best_theta, best_cost = result.x, float(result.cost)
    if not np.isfinite(best_cost):
        raise RuntimeError("no start gave a finite least-squares fit")
    return best_theta, best_cost


def reward_box(
    y: np.ndarray, reward_bounds: tuple[float, float] | None, margin: float
) -> tuple[float, float]:
    """Bounds of the asymptote and start level: the known reward bounds, else the prefix's range
    widened by ``margin`` ranges on each side.
    """
    if reward_bounds is not None:
        low, high = float(reward_bounds[0]), float(reward_bounds[1])
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise BaselineInputError(f"reward_bounds must be finite with low < high, got {reward_bounds}")
        return low, high
    span = float(np.ptp(y))
    return float(y.min()) - margin * span, float(y.max()) + margin * span


def bootstrap_forecast(
    law: LeastSquaresLaw,
    prefix: Prefix,
    *,
    theta_hat: np.ndarray,
    r0_hat: float,
    n_head: int,
    lower: np.ndarray,
    upper: np.ndarray,
    n_boot: int,
    n_draws: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Residual bootstrap around a least-squares fit, then predictive draws with residual noise.

    Replicate ``b`` refits the law to ``mu_hat + e*_b`` (``e*`` resampled from the centred
    residuals, rescaled by ``sqrt(n / (n - P))``; a start level fixed from the data is
    recomputed from the replicate's first ``n_head`` points). A predictive draw is the curve of a
    random replicate at the target steps plus Gaussian noise of that replicate's residual sd.
    """
    t, y = prefix.t, prefix.rewards
    n, n_par = y.size, theta_hat.size
    mu_hat = law.curve(theta_hat[None, :], t, np.array([r0_hat]))[0]
    resid = y - mu_hat
    dof = max(n - n_par, 1)
    sigma_hat = float(np.sqrt(np.sum(resid**2) / dof))
    pool = (resid - resid.mean()) * math.sqrt(n / dof)
    y_star = mu_hat[None, :] + pool[rng.integers(0, n, size=(n_boot, n))]
    r0_star = y_star[:, :n_head].mean(axis=1) if law.r0_from_data else np.full(n_boot, r0_hat)

    def residuals(theta: np.ndarray) -> np.ndarray:
        return law.curve(theta, t, r0_star) - y_star

    theta_star, cost_star = batched_lm(residuals, np.repeat(theta_hat[None, :], n_boot, axis=0), lower, upper)
    good = np.isfinite(cost_star) & np.all(np.isfinite(theta_star), axis=1)
    if not good.any():
        raise RuntimeError("every bootstrap refit failed")
    theta_star, cost_star, r0_star = theta_star[good], cost_star[good], r0_star[good]
    sigma_star = np.sqrt(2.0 * cost_star / dof)

    pick = rng.integers(0, theta_star.shape[0], size=n_draws)
    with np.errstate(all="ignore"):
        mean = law.curve(theta_star[pick], prefix.t_target, r0_star[pick])
    draws = mean + sigma_star[pick, None] * rng.standard_normal(mean.shape)
    if not np.all(np.isfinite(draws)):
        raise RuntimeError("the fitted law gave non-finite predictions at the target steps")

    point = {k: float(v[0]) for k, v in law.natural(theta_hat[None, :], np.array([r0_hat])).items()}
    boot = law.natural(theta_star, r0_star)
    info = {
        "params": point,
        "params_q05": {k: float(np.quantile(v, 0.05)) for k, v in boot.items()},
        "params_q95": {k: float(np.quantile(v, 0.95)) for k, v in boot.items()},
        "sigma": sigma_hat,
        "n_boot": int(n_boot),
        "n_boot_failed": int((~good).sum()),
    }
    return draws, info


def fitted_law_forecast(
    law: LeastSquaresLaw,
    prefix: Prefix,
    *,
    r0_hat: float,
    n_head: int,
    starts: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    n_boot: int,
    n_draws: int,
    rng: np.random.Generator,
    start: float,
    details: Callable[[dict[str, float]], dict[str, Any]],
) -> BaselineForecast:
    """Fit ``law`` to the prefix by least squares and forecast by residual bootstrap.

    A fit that fails falls back to persistence. ``details`` maps the fitted parameters to the
    law's own entries of ``info`` (its time scale in steps, its bounds...).
    """
    try:
        theta_hat, _ = fit_least_squares(law, prefix.t, prefix.rewards, r0_hat, starts, lower, upper)
        draws, info = bootstrap_forecast(
            law,
            prefix,
            theta_hat=theta_hat,
            r0_hat=r0_hat,
            n_head=n_head,
            lower=lower,
            upper=upper,
            n_boot=n_boot,
            n_draws=n_draws,
            rng=rng,
        )
    except FIT_ERRORS as exc:
        return persistence_fallback(law.name, prefix, n_draws, rng, f"{type(exc).__name__}: {exc}", start)
    info = {"status": "ok", "fallback": None, **info, **details(info["params"]), **base_info(prefix)}
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(law.name, prefix.target_steps, draws, info)
