"""Forecasting and stopping baselines that bayesgrpo is measured against (DESIGN.md section 5).

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
downloaded in this environment (DESIGN.md section 5).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal, NamedTuple

import numpy as np

from bayesgrpo.model.curves import g_exp, g_logistic
from bayesgrpo.errors import BayesGRPOError

__all__ = [
    "BASELINE_FORECASTERS",
    "DOMHAN_FAMILIES",
    "BaselineForecast",
    "BaselineInputError",
    "domhan_p_better",
    "forecast_domhan_ensemble",
    "forecast_exp_least_squares",
    "forecast_persistence",
    "forecast_scalerl_sigmoid",
    "stop_fixed_fraction",
    "stop_median_pruning",
    "stop_patience",
]

logger = logging.getLogger(__name__)

# Errors a numerical fit may raise on odd data (numpy's LinAlgError is a ValueError; emcee and
# scipy raise ValueError / RuntimeError; ArithmeticError covers overflow and division). A fit
# that raises one of these falls back to persistence; anything else is a bug and propagates.
_FIT_ERRORS = (ValueError, ArithmeticError, RuntimeError)


class BaselineInputError(BayesGRPOError, ValueError):
    """The observed prefix or the target steps given to a baseline cannot be used."""


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


class _Prefix(NamedTuple):
    """A run's observed prefix, cleaned and on the normalised progress axis."""

    steps: np.ndarray  # (n,) sorted, finite
    rewards: np.ndarray  # (n,) finite
    t: np.ndarray  # steps / horizon
    target_steps: np.ndarray  # (T,) as given
    t_target: np.ndarray  # target_steps / horizon
    horizon: float
    n_dropped: int


def _prepare(steps: np.ndarray, rewards: np.ndarray, target_steps: np.ndarray, n_draws: int) -> _Prefix:
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
        raise BaselineInputError("no finite (step, reward) point in the prefix; a forecast needs at least one")
    if np.any(steps < 0) or np.any(target < 0):
        raise BaselineInputError("steps must be >= 0 (optimizer steps); shift the progress axis to start at 0")
    order = np.argsort(steps, kind="stable")
    steps, rewards = steps[order], rewards[order]
    horizon = float(max(target.max(), steps.max()))
    if horizon <= 0.0:
        horizon = 1.0
    return _Prefix(steps, rewards, steps / horizon, target, target / horizon, horizon, n_dropped)


def _base_info(prefix: _Prefix) -> dict[str, Any]:
    return {"horizon": prefix.horizon, "n_points": int(prefix.steps.size), "n_dropped": prefix.n_dropped}


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


def _persistence(prefix: _Prefix, n_draws: int, rng: np.random.Generator, tail_fraction: float,
                 min_tail: int) -> tuple[np.ndarray, dict[str, Any]]:
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
    prefix = _prepare(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    rng = np.random.default_rng(random_seed)
    draws, info = _persistence(prefix, n_draws, rng, tail_fraction, min_tail)
    info = {"status": "ok", "fallback": None, **info, **_base_info(prefix)}
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast("persistence", prefix.target_steps, draws, info)


def _fallback(name: str, prefix: _Prefix, n_draws: int, rng: np.random.Generator, reason: str,
              start: float, **extra: Any) -> BaselineForecast:
    """Persistence in place of a method whose fit failed; the reason goes to ``info``."""
    logger.info("%s: fit failed (%s); falling back to persistence", name, reason)
    draws, pinfo = _persistence(prefix, n_draws, rng, 0.1, 3)
    info = {"status": "fallback", "fallback": f"persistence: {reason}", "persistence": pinfo,
            **extra, **_base_info(prefix)}
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(name, prefix.target_steps, draws, info)


# --------------------------------------------------------------------------------------------
# Least-squares laws with residual bootstrap
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Law:
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


def _exp_curve(theta: np.ndarray, t: np.ndarray, r0: np.ndarray) -> np.ndarray:
    """``A - (A - R0) exp(-t/tau)`` with ``theta = (A, R0, log tau)``."""
    a, r0_fit, tau = theta[:, 0:1], theta[:, 1:2], np.exp(theta[:, 2:3])
    return r0_fit + (a - r0_fit) * g_exp(t[None, :], tau)


def _exp_natural(theta: np.ndarray, r0: np.ndarray) -> dict[str, np.ndarray]:
    return {"A": theta[:, 0], "R0": theta[:, 1], "tau": np.exp(theta[:, 2])}


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


_EXP_LAW = _Law("exp_least_squares", _exp_curve, _exp_natural, r0_from_data=False)
_SIGMOID_FIXED_R0 = _Law("scalerl_sigmoid", _sigmoid_curve_fixed_r0, _sigmoid_natural_fixed_r0, r0_from_data=True)
_SIGMOID_FREE_R0 = _Law("scalerl_sigmoid", _sigmoid_curve_free_r0, _sigmoid_natural_free_r0, r0_from_data=False)


def _batched_lm(
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


def _fit_least_squares(law: _Law, t: np.ndarray, y: np.ndarray, r0: float, starts: np.ndarray,
                       lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, float]:
    """Best least-squares fit over several starts (scipy's dogbox trust region, in a box)."""
    from scipy.optimize import least_squares

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


def _reward_box(y: np.ndarray, reward_bounds: tuple[float, float] | None, margin: float) -> tuple[float, float]:
    """Bounds of the asymptote and start level: the known reward bounds, else the prefix's range
    widened by ``margin`` ranges on each side."""
    if reward_bounds is not None:
        low, high = float(reward_bounds[0]), float(reward_bounds[1])
        if not (np.isfinite(low) and np.isfinite(high) and low < high):
            raise BaselineInputError(f"reward_bounds must be finite with low < high, got {reward_bounds}")
        return low, high
    span = float(np.ptp(y))
    return float(y.min()) - margin * span, float(y.max()) + margin * span


def _bootstrap_forecast(
    law: _Law,
    prefix: _Prefix,
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

    theta_star, cost_star = _batched_lm(residuals, np.repeat(theta_hat[None, :], n_boot, axis=0), lower, upper)
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


def _check_positive_int(name: str, value: int, minimum: int = 1) -> int:
    if int(value) < minimum:
        raise BaselineInputError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _n_head(n: int, fraction: float) -> int:
    """Number of first points whose mean is the start level."""
    return int(min(n, max(3, math.ceil(fraction * n))))


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
    """Least squares of the exponential saturation law, intervals by residual bootstrap.

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
    prefix = _prepare(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    n_boot = _check_positive_int("n_boot", n_boot)
    rng = np.random.default_rng(random_seed)
    y, t = prefix.rewards, prefix.t
    n_par = 3
    if y.size < n_par + 2:
        return _fallback(name, prefix, n_draws, rng, f"{y.size} points, the law needs at least {n_par + 2}", start)
    if np.ptp(y) <= 1e-12 * max(1.0, abs(float(y.mean()))):
        return _fallback(name, prefix, n_draws, rng, "constant rewards", start)
    low, high = _reward_box(y, reward_bounds, asymptote_margin)
    lower = np.array([low, low, math.log(tau_range[0])])
    upper = np.array([high, high, math.log(tau_range[1])])
    n_edge = _n_head(y.size, 0.1)
    head, tail, span = float(y[:n_edge].mean()), float(y[-n_edge:].mean()), float(np.ptp(y))
    t_end = max(float(t.max()), 1e-3)
    starts = np.array([[a, head, math.log(tau)] for a in (tail, tail + 0.5 * span * np.sign(tail - head))
                       for tau in (0.2 * t_end, t_end, 5.0 * t_end)])
    try:
        theta_hat, _ = _fit_least_squares(_EXP_LAW, t, y, math.nan, starts, lower, upper)
        draws, info = _bootstrap_forecast(_EXP_LAW, prefix, theta_hat=theta_hat, r0_hat=math.nan, n_head=n_edge,
                                          lower=lower, upper=upper, n_boot=n_boot, n_draws=n_draws, rng=rng)
    except _FIT_ERRORS as exc:
        return _fallback(name, prefix, n_draws, rng, f"{type(exc).__name__}: {exc}", start)
    info = {"status": "ok", "fallback": None, **info, "tau_steps": info["params"]["tau"] * prefix.horizon,
            "bounds": {"A": (low, high), "R0": (low, high), "tau": tuple(tau_range)}, **_base_info(prefix)}
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(name, prefix.target_steps, draws, info)


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
    """Least squares of the ScaleRL sigmoid in compute, intervals by residual bootstrap.

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
    prefix = _prepare(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    n_boot = _check_positive_int("n_boot", n_boot)
    rng = np.random.default_rng(random_seed)
    y, t = prefix.rewards, prefix.t
    law = _SIGMOID_FREE_R0 if fit_r0 else _SIGMOID_FIXED_R0
    n_par = 4 if fit_r0 else 3
    if y.size < n_par + 2:
        return _fallback(name, prefix, n_draws, rng, f"{y.size} points, the law needs at least {n_par + 2}", start)
    if np.ptp(y) <= 1e-12 * max(1.0, abs(float(y.mean()))):
        return _fallback(name, prefix, n_draws, rng, "constant rewards", start)
    low, high = _reward_box(y, reward_bounds, asymptote_margin)
    n_head = _n_head(y.size, r0_fraction)
    head = float(y[:n_head].mean())
    n_tail = _n_head(y.size, 0.1)
    tail, span = float(y[-n_tail:].mean()), float(np.ptp(y))
    t_end = max(float(t.max()), 1e-3)
    log_c = (math.log(c_mid_range[0]), math.log(c_mid_range[1]))
    log_b = (math.log(b_range[0]), math.log(b_range[1]))
    grid = [(a, math.log(c), math.log(b)) for a in (tail, tail + 0.5 * span * np.sign(tail - head))
            for c in (0.3 * t_end, t_end, 3.0 * t_end) for b in (1.0, 2.0)]
    if fit_r0:
        starts = np.array([(a, head, c, b) for a, c, b in grid])
        lower = np.array([low, low, log_c[0], log_b[0]])
        upper = np.array([high, high, log_c[1], log_b[1]])
    else:
        starts = np.array(grid)
        lower = np.array([low, log_c[0], log_b[0]])
        upper = np.array([high, log_c[1], log_b[1]])
    r0_hat = math.nan if fit_r0 else head
    try:
        theta_hat, _ = _fit_least_squares(law, t, y, r0_hat, starts, lower, upper)
        draws, info = _bootstrap_forecast(law, prefix, theta_hat=theta_hat, r0_hat=r0_hat, n_head=n_head,
                                          lower=lower, upper=upper, n_boot=n_boot, n_draws=n_draws, rng=rng)
    except _FIT_ERRORS as exc:
        return _fallback(name, prefix, n_draws, rng, f"{type(exc).__name__}: {exc}", start)
    info = {"status": "ok", "fallback": None, **info, "c_mid_steps": info["params"]["C_mid"] * prefix.horizon,
            "r0_fitted": bool(fit_r0), "n_head": n_head,
            "bounds": {"A": (low, high), "C_mid": tuple(c_mid_range), "B": tuple(b_range)}, **_base_info(prefix)}
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(name, prefix.target_steps, draws, info)


# --------------------------------------------------------------------------------------------
# Domhan, Springenberg & Hutter (2015): MCMC ensemble of 11 learning-curve families
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _DomhanFamily:
    """One parametric family: ``fn(x, p)`` with ``x`` of shape (n,), ``p`` of shape (W, k) -> (W, n)."""

    name: str
    params: tuple[str, ...]
    start: tuple[float, ...]
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray]


def _cols(p: np.ndarray) -> list[np.ndarray]:
    return [p[:, i : i + 1] for i in range(p.shape[1])]


def _vap(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    a, b, c = _cols(p)
    return np.exp(a + b / x + c * np.log(x))


def _pow3(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    c, a, alpha = _cols(p)
    return c - a * x ** (-alpha)


def _loglog_linear(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    a, b = _cols(p)
    return np.log(a * np.log(x) + b)


def _hill3(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    theta, eta, kappa = _cols(p)
    return theta * x**eta / (kappa**eta + x**eta)


def _log_power(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    a, b, c = _cols(p)
    return a / (1.0 + (x / np.exp(b)) ** c)


def _pow4(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    c, a, b, alpha = _cols(p)
    return c - (a * x + b) ** (-alpha)


def _mmf(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    alpha, beta, kappa, delta = _cols(p)
    return alpha - (alpha - beta) / (1.0 + (kappa * x) ** delta)


def _exp4(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    c, a, b, alpha = _cols(p)
    return c - np.exp(-a * x**alpha + b)


def _janoschek(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    a, beta, k, delta = _cols(p)
    return a - (a - beta) * np.exp(-k * x**delta)


def _weibull(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    alpha, beta, kappa, delta = _cols(p)
    return alpha - (alpha - beta) * np.exp(-((kappa * x) ** delta))


def _ilog2(x: np.ndarray, p: np.ndarray) -> np.ndarray:
    c, a = _cols(p)
    return c - a / np.log(x + 1.0)


#: The 11 families of Domhan et al. (2015, Table 1), with the formulas and starting values of
#: the authors' code (``pylrpredictor``); ``x`` is the epoch-like axis (``x >= 1``), ``y`` a
#: performance in about [0, 1]. ``log-log linear`` has no published start (1.0 each).
DOMHAN_FAMILIES: tuple[_DomhanFamily, ...] = (
    _DomhanFamily("vap", ("a", "b", "c"), (-0.622028, -0.470050, 0.042322), _vap),
    _DomhanFamily("pow3", ("c", "a", "alpha"), (0.84, 0.52, 0.01), _pow3),
    _DomhanFamily("loglog_linear", ("a", "b"), (1.0, 1.0), _loglog_linear),
    _DomhanFamily("hill3", ("theta", "eta", "kappa"), (0.772320, 0.586449, 2.460843), _hill3),
    _DomhanFamily("log_power", ("a", "b", "c"), (0.77, 2.98, -0.51), _log_power),
    _DomhanFamily("pow4", ("c", "a", "b", "alpha"), (0.8, 200.0, 0.0, 0.1), _pow4),
    _DomhanFamily("mmf", ("alpha", "beta", "kappa", "delta"), (0.7, 0.1, 0.01, 5.0), _mmf),
    _DomhanFamily("exp4", ("c", "a", "b", "alpha"), (0.7, 0.8, -0.8, 0.3), _exp4),
    _DomhanFamily("janoschek", ("a", "beta", "k", "delta"), (0.73, 0.07, 0.355, 0.46), _janoschek),
    _DomhanFamily("weibull", ("alpha", "beta", "kappa", "delta"), (0.7, 0.1, 0.01, 1.0), _weibull),
    _DomhanFamily("ilog2", ("c", "a"), (0.78, 0.43), _ilog2),
)


def _family_prior_ok(family: _DomhanFamily, p: np.ndarray, x_ends: np.ndarray,
                     y_lim_range: tuple[float, float]) -> np.ndarray:
    """Domhan's per-family prior support, for rows ``p`` (W, k): finite, not decreasing from the
    first observed point to the horizon (their soft monotonicity), and a sane value at the horizon."""
    ends = family.fn(x_ends, p)
    return (np.all(np.isfinite(ends), axis=1) & (ends[:, 0] <= ends[:, 1])
            & (ends[:, 1] >= y_lim_range[0]) & (ends[:, 1] <= y_lim_range[1]))


def _fit_family_ml(family: _DomhanFamily, x: np.ndarray, y: np.ndarray, x_ends: np.ndarray,
                   y_lim_range: tuple[float, float], n_starts: int,
                   rng: np.random.Generator) -> tuple[np.ndarray | None, str]:
    """Maximum-likelihood (least-squares, Levenberg-Marquardt) fit of one family.

    Starts from the published start and ``n_starts - 1`` random log-normal perturbations of it,
    all solved at once by :func:`_batched_lm` (the authors' code runs MINPACK's
    Levenberg-Marquardt from the published start, then BFGS); keeps the best optimum inside the
    prior's support, or returns ``None`` and the reason.
    """
    base = np.array(family.start)
    starts = np.vstack([base, base * np.exp(0.5 * rng.standard_normal((n_starts - 1, base.size)))])
    unbounded = np.full(base.size, np.inf)

    def residuals(p: np.ndarray) -> np.ndarray:
        return family.fn(x, p) - y[None, :]

    with np.errstate(all="ignore"):
        params, cost = _batched_lm(residuals, starts, -unbounded, unbounded, max_iter=200)
        finite = np.isfinite(cost) & np.all(np.isfinite(params), axis=1)
        if not finite.any():
            return None, "no start gave a finite fit"
        in_prior = finite & _family_prior_ok(family, np.where(finite[:, None], params, base), x_ends, y_lim_range)
    if not in_prior.any():
        return None, "optimum outside the prior (decreasing, or implausible at the horizon)"
    best = int(np.argmin(np.where(in_prior, cost, np.inf)))
    return params[best], "ok"


@dataclass(frozen=True)
class _Ensemble:
    """The combination model: parameters laid out as (family params..., sigma, weights...)."""

    families: tuple[_DomhanFamily, ...]
    slices: tuple[slice, ...]
    x: np.ndarray
    y: np.ndarray
    x_ends: np.ndarray
    y_lim_range: tuple[float, float]

    @property
    def n_params(self) -> int:
        return self.slices[-1].stop

    @property
    def ndim(self) -> int:
        return self.n_params + 1 + len(self.families)

    def split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``sigma`` (W,) and the raw, unnormalised weights (W, K) of rows ``theta`` (W, D)."""
        sigma = theta[:, self.n_params]
        weights = theta[:, self.n_params + 1 :]
        return sigma, weights

    def mean(self, theta: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``f_comb(x) = sum_k w_k f_k(x) / sum_k w_k`` for rows ``theta``, shape (W, n)."""
        _, weights = self.split(theta)
        total = weights.sum(axis=1, keepdims=True)
        out = np.zeros((theta.shape[0], x.size))
        for k, (family, sl) in enumerate(zip(self.families, self.slices)):  # over families, not draws
            out += weights[:, k : k + 1] * family.fn(x, theta[:, sl])
        return out / total

    def log_prob(self, theta: np.ndarray) -> np.ndarray:
        """Log posterior (up to a constant) of walker rows ``theta`` (W, D), emcee-vectorised.

        Flat priors inside the support: each family's parameters in its prior support
        (:func:`_family_prior_ok`), ``0 < sigma <= 1`` (normalised reward units), weights
        ``>= 0`` and not all 0; Gaussian likelihood of the prefix.
        """
        theta = np.atleast_2d(theta)
        sigma, weights = self.split(theta)
        with np.errstate(all="ignore"):
            ok = (sigma > 0) & (sigma <= 1.0) & np.all(weights >= 0, axis=1) & (weights.sum(axis=1) > 0)
            for family, sl in zip(self.families, self.slices):
                ok &= _family_prior_ok(family, theta[:, sl], self.x_ends, self.y_lim_range)
            mu = self.mean(theta, self.x)
            z = (self.y[None, :] - mu) / sigma[:, None]
            log_lik = -0.5 * np.sum(z**2, axis=1) - self.y.size * np.log(sigma)
        return np.where(ok & np.isfinite(log_lik), log_lik, -np.inf)


def forecast_domhan_ensemble(
    steps: np.ndarray,
    rewards: np.ndarray,
    target_steps: np.ndarray,
    *,
    n_draws: int = 200,
    random_seed: int | None = None,
    n_walkers: int = 100,
    n_steps: int = 1000,
    burn_in: int | None = None,
    x_max: float = 100.0,
    n_ml_starts: int = 3,
    init_ball: float = 1e-4,
    reward_bounds: tuple[float, float] | None = None,
) -> BaselineForecast:
    """Domhan et al. (2015)'s Bayesian ensemble of 11 learning-curve families, sampled by MCMC.

    The model of "Speeding up automatic hyperparameter optimization of deep neural networks by
    extrapolation of learning curves" (IJCAI 2015), as in the authors' ``pylrpredictor``
    (``curve_combination``):

    .. math:: y(x) = \\sum_k \\frac{w_k}{\\sum_j w_j} f_k(x; \\theta_k) + \\varepsilon, \\quad
              \\varepsilon \\sim N(0, \\sigma^2)

    over the families of :data:`DOMHAN_FAMILIES` (vap, pow3, log-log linear, Hill3, log power,
    pow4, MMF, exp4, Janoschek, Weibull, ilog2). Priors are flat within their support: weights
    ``w_k >= 0``; each family must not decrease from the first observed point to the horizon
    (their soft monotonicity constraint) and must give a sane value at the horizon;
    ``0 < sigma <= 1``. Each family is first fitted by maximum likelihood from its published
    start; families whose fit fails or breaks the prior are left out (``info["families_dropped"]``),
    as in their code. The walkers of emcee's ensemble sampler start in a small ball around the
    joint ML point with equal weights.

    Axes: the families are written for epochs ``x = 1, 2, ...`` and performances in [0, 1], so
    steps map to ``x = 1 + (x_max - 1) * step / horizon`` and rewards to
    ``(reward - min) / range`` of the prefix; draws are mapped back. The horizon value must lie
    within the prefix's range widened by one range each side (or within ``reward_bounds``), the
    counterpart of their sanity check that a predicted accuracy is in [0, 100].

    The paper's defaults (100 walkers, several thousand steps) took 8-10 s per curve
    (DESIGN.md section 7); the defaults here are smaller and every option can be shrunk for
    tests. Falls back to persistence with fewer than 5 points, a constant prefix, no family
    fitted, or a sampler failure.

    Parameters
    ----------
    steps, rewards, target_steps, n_draws, random_seed
        As in :func:`forecast_persistence`.
    n_walkers : int
        Ensemble walkers; raised to ``2 * ndim + 2`` when smaller (as the authors' code does).
    n_steps : int
        Steps of every walker.
    burn_in : int, optional
        Steps discarded; half of ``n_steps`` by default.
    x_max : float
        The horizon on the epoch-like axis of the families.
    n_ml_starts : int
        Starts of each family's ML fit (the published start, then log-normal perturbations).
    init_ball : float
        Relative size of the ball the walkers start in.
    reward_bounds : (float, float), optional
        Known bounds of the reward, for the sanity check at the horizon.

    Returns
    -------
    BaselineForecast
        ``info``: ``families`` used, ``families_dropped`` (name -> reason), ``weights`` (posterior
        mean of the normalised weights per family), ``sigma`` (posterior median, reward units),
        ``acceptance`` (mean acceptance fraction), ``n_walkers``, ``n_steps``, ``burn_in``.
    """
    start = time.perf_counter()
    name = "domhan_ensemble"
    prefix = _prepare(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    n_steps = _check_positive_int("n_steps", n_steps, 2)
    burn = n_steps // 2 if burn_in is None else int(burn_in)
    if not 0 <= burn < n_steps:
        raise BaselineInputError(f"burn_in must be in [0, n_steps), got {burn_in} with n_steps={n_steps}")
    if not x_max > 1.0:
        raise BaselineInputError(f"x_max must be > 1, got {x_max}")
    n_ml_starts = _check_positive_int("n_ml_starts", n_ml_starts)
    rng = np.random.default_rng(random_seed)
    y_raw = prefix.rewards
    if y_raw.size < 5:
        return _fallback(name, prefix, n_draws, rng, f"{y_raw.size} points, the ensemble needs at least 5", start)
    lo, span = float(y_raw.min()), float(np.ptp(y_raw))
    if span <= 1e-12 * max(1.0, abs(float(y_raw.mean()))):
        return _fallback(name, prefix, n_draws, rng, "constant rewards", start)
    y = (y_raw - lo) / span
    if reward_bounds is not None:
        low, high = _reward_box(y_raw, reward_bounds, 0.0)
        y_lim_range = ((low - lo) / span, (high - lo) / span)
    else:
        y_lim_range = (-1.0, 2.0)
    x = 1.0 + (x_max - 1.0) * prefix.t
    x_target = 1.0 + (x_max - 1.0) * prefix.t_target
    x_ends = np.array([x[0], x_max])  # first observed point and the horizon (t = 1)

    try:
        fitted, dropped, ml_params = [], {}, []
        for family in DOMHAN_FAMILIES:
            params, reason = _fit_family_ml(family, x, y, x_ends, y_lim_range, n_ml_starts, rng)
            if params is None:
                dropped[family.name] = reason
            else:
                fitted.append(family)
                ml_params.append(params)
        if not fitted:
            return _fallback(name, prefix, n_draws, rng, "no curve family could be fitted", start,
                             families_dropped=dropped)
        sizes = np.cumsum([0] + [len(f.params) for f in fitted])
        ensemble = _Ensemble(tuple(fitted), tuple(slice(a, b) for a, b in pairwise(sizes)),
                             x, y, x_ends, y_lim_range)
        theta_ml = np.concatenate(ml_params + [np.zeros(1), np.ones(len(fitted))])
        with np.errstate(all="ignore"):
            residual = y - ensemble.mean(theta_ml[None, :], x)[0]
        theta_ml[ensemble.n_params] = float(np.clip(residual.std(), 1e-4, 1.0))
        chain, acceptance, walkers = _run_emcee(ensemble, theta_ml, n_walkers, n_steps, init_ball, rng)
    except _FIT_ERRORS as exc:
        return _fallback(name, prefix, n_draws, rng, f"{type(exc).__name__}: {exc}", start)

    samples = chain[burn:].reshape(-1, ensemble.ndim)
    with np.errstate(all="ignore"):
        pick = rng.integers(0, samples.shape[0], size=max(4 * n_draws, 64))
        mean = ensemble.mean(samples[pick], x_target)
        finite = np.all(np.isfinite(mean), axis=1)
    if not finite.any():
        return _fallback(name, prefix, n_draws, rng, "no posterior sample gives finite predictions", start)
    rows = np.flatnonzero(finite)[rng.integers(0, int(finite.sum()), size=n_draws)]
    sigma, _ = ensemble.split(samples[pick[rows]])
    draws_norm = mean[rows] + sigma[:, None] * rng.standard_normal((n_draws, x_target.size))
    draws = lo + span * draws_norm
    sigma_all, weights_all = ensemble.split(samples)
    weights_all = weights_all / weights_all.sum(axis=1, keepdims=True)
    info = {
        "status": "ok",
        "fallback": None,
        "families": [f.name for f in fitted],
        "families_dropped": dropped,
        "weights": {f.name: float(w) for f, w in zip(fitted, weights_all.mean(axis=0))},
        "sigma": float(np.median(sigma_all) * span),
        "acceptance": acceptance,
        "n_walkers": walkers,
        "n_steps": n_steps,
        "burn_in": burn,
        "x_max": float(x_max),
        "reward_scale": {"min": lo, "range": span},
        **_base_info(prefix),
    }
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(name, prefix.target_steps, draws, info)


def _run_emcee(ensemble: _Ensemble, theta_ml: np.ndarray, n_walkers: int, n_steps: int, init_ball: float,
               rng: np.random.Generator) -> tuple[np.ndarray, float, int]:
    """Run emcee's ensemble sampler from a ball around ``theta_ml``; returns the chain
    (n_steps, walkers, ndim), the mean acceptance fraction and the number of walkers."""
    import emcee

    ndim = ensemble.ndim
    walkers = max(int(n_walkers), 2 * ndim + 2)
    if walkers > n_walkers:
        logger.info("domhan_ensemble: %d walkers for %d dimensions (asked %d)", walkers, ndim, n_walkers)
    if not np.isfinite(ensemble.log_prob(theta_ml[None, :])[0]):
        raise RuntimeError("the joint ML point is outside the prior")
    scale = init_ball * np.maximum(np.abs(theta_ml), 1e-3)
    p0 = theta_ml[None, :] + scale[None, :] * rng.standard_normal((walkers, ndim))
    for shrink in (0.1, 0.01, 0.0):  # pull walkers that left the support back towards the ML point
        bad = ~np.isfinite(ensemble.log_prob(p0))
        if not bad.any():
            break
        p0[bad] = theta_ml[None, :] + shrink * scale[None, :] * rng.standard_normal((int(bad.sum()), ndim))
    sampler = emcee.EnsembleSampler(walkers, ndim, ensemble.log_prob, vectorize=True)
    sampler.random_state = np.random.RandomState(int(rng.integers(0, 2**32 - 1))).get_state()
    sampler.run_mcmc(p0, n_steps, progress=False, skip_initial_state_check=True)
    return sampler.get_chain(), float(np.mean(sampler.acceptance_fraction)), walkers


def domhan_p_better(draws_final: np.ndarray, y_best: float) -> float:
    """Domhan et al.'s stopping statistic: ``P(y_final > y_best)`` from predictive draws.

    Their rule stops a run when this probability falls below a threshold (5% in the paper).

    Parameters
    ----------
    draws_final : ndarray
        Predictive draws of the observed reward at the run's final step (any shape; flattened).
    y_best : float
        The best final reward seen so far (of other runs).

    Returns
    -------
    float
        Fraction of finite draws above ``y_best``.

    Raises
    ------
    BaselineInputError
        When there is no finite draw.
    """
    draws = np.asarray(draws_final, dtype=np.float64).ravel()
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        raise BaselineInputError("domhan_p_better needs at least one finite draw of the final reward")
    return float(np.mean(draws > float(y_best)))


#: The forecasting baselines by name, all with the signature
#: ``(steps, rewards, target_steps, *, n_draws, random_seed, **options) -> BaselineForecast``.
BASELINE_FORECASTERS: dict[str, Callable[..., BaselineForecast]] = {
    "persistence": forecast_persistence,
    "exp_least_squares": forecast_exp_least_squares,
    "scalerl_sigmoid": forecast_scalerl_sigmoid,
    "domhan_ensemble": forecast_domhan_ensemble,
}


# --------------------------------------------------------------------------------------------
# Stopping rules
# --------------------------------------------------------------------------------------------


def _steps_rewards(steps: np.ndarray, rewards: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Check one run's points for a stopping rule: 1-D, one length, finite, steps increasing."""
    steps = np.asarray(steps, dtype=np.float64)
    if steps.ndim != 1 or steps.size == 0 or not np.all(np.isfinite(steps)):
        raise BaselineInputError(f"steps must be a non-empty 1-D array of finite steps, got shape {steps.shape}")
    if np.any(np.diff(steps) <= 0):
        raise BaselineInputError("steps must be strictly increasing (one logged point per step, in order)")
    if rewards is None:
        return steps, None
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.shape != steps.shape:
        raise BaselineInputError(f"rewards must have the shape of steps {steps.shape}, got {rewards.shape}")
    if not np.all(np.isfinite(rewards)):
        raise BaselineInputError("rewards must be finite; drop or fill missing points before a stopping rule")
    return steps, rewards


def _as_step(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def stop_fixed_fraction(steps: np.ndarray, total_steps: float, fraction: float = 0.8) -> int | float | None:
    """Stop at a fixed fraction of the planned steps (the seed paper's ~80% of an epoch).

    Parameters
    ----------
    steps : ndarray
        The run's logged steps (increasing).
    total_steps : float
        Planned length of the run, in steps.
    fraction : float
        Fraction of ``total_steps`` after which the run is stopped.

    Returns
    -------
    int or None
        The first logged step ``>= fraction * total_steps``; ``None`` when ``fraction >= 1`` or
        no logged step reaches it (the run goes to its end).
    """
    steps, _ = _steps_rewards(steps)
    if not (np.isfinite(total_steps) and total_steps > 0):
        raise BaselineInputError(f"total_steps must be a positive number, got {total_steps}")
    if not fraction > 0:
        raise BaselineInputError(f"fraction must be > 0, got {fraction}")
    if fraction >= 1.0:
        return None
    reached = np.flatnonzero(steps >= fraction * float(total_steps))
    return _as_step(steps[reached[0]]) if reached.size else None


def _smooth(rewards: np.ndarray, window: int, method: Literal["rolling", "ema"]) -> np.ndarray:
    """Causal smoothing: trailing rolling mean over ``window`` points (fewer at the start), or an
    exponential moving average with ``alpha = 2 / (window + 1)`` started at the first point."""
    if method == "rolling":
        csum = np.concatenate([[0.0], np.cumsum(rewards)])
        idx = np.arange(1, rewards.size + 1)
        lo = np.maximum(idx - window, 0)
        return (csum[idx] - csum[lo]) / (idx - lo)
    if method == "ema":
        alpha = 2.0 / (window + 1.0)
        out = np.empty_like(rewards)
        acc = rewards[0]
        for i, value in enumerate(rewards):  # a recursion over logged points (not draws)
            acc = acc + alpha * (value - acc) if i else value
            out[i] = acc
        return out
    raise BaselineInputError(f"smoothing must be 'rolling' or 'ema', got {method!r}")


def stop_patience(
    steps: np.ndarray,
    rewards: np.ndarray,
    patience: int,
    min_delta: float = 0.0,
    smoothing_window: int = 1,
    smoothing: Literal["rolling", "ema"] = "rolling",
) -> int | float | None:
    """Patience on a smoothed reward (Keras ``EarlyStopping``, maximising).

    The reward is smoothed causally (:func:`_smooth`). Walking through the logged points, a
    point *improves* when its smoothed reward exceeds the best so far by more than
    ``min_delta`` (the first point always does); the rule stops at the point where ``patience``
    points in a row have not improved.

    Parameters
    ----------
    steps, rewards : ndarray
        One run's logged points (steps increasing).
    patience : int
        Logged points without improvement before stopping (>= 1).
    min_delta : float
        Smallest rise of the smoothed reward that counts as an improvement.
    smoothing_window : int
        Points in the trailing rolling mean, or the span of the EMA (1: no smoothing).
    smoothing : {"rolling", "ema"}
        Smoother.

    Returns
    -------
    int or None
        The step at which the rule stops the run, or ``None`` if it never does.
    """
    steps, rewards = _steps_rewards(steps, rewards)
    assert rewards is not None
    patience = _check_positive_int("patience", patience)
    window = _check_positive_int("smoothing_window", smoothing_window)
    smoothed = _smooth(rewards, window, smoothing)
    best, wait = -np.inf, 0
    for step, value in zip(steps, smoothed):  # sequential by nature: the state depends on the past
        if value - min_delta > best:
            best, wait = value, 0
        else:
            wait += 1
            if wait >= patience:
                return _as_step(step)
    return None


def stop_median_pruning(
    steps: np.ndarray,
    rewards: np.ndarray,
    other_runs: Sequence[tuple[np.ndarray, np.ndarray]],
    warmup_fraction: float = 0.0,
    check_every: float = 0.0,
    *,
    total_steps: float | None = None,
    n_startup_trials: int = 5,
    n_min_trials: int = 1,
) -> int | float | None:
    """Optuna's ``MedianPruner`` (maximising) with progress normalised by each run's length.

    Optuna prunes a trial at a reported step when its best intermediate value so far is below
    the median of the completed trials' intermediate values *at that step*. Here runs of
    different lengths are compared at the same **progress** ``step / total``: this run's total
    is ``total_steps`` (its last logged step by default), each other run's is its own last step
    (other runs are completed trials), and another run's value at progress ``p`` is its reward
    interpolated linearly at ``p`` (runs that do not cover ``p`` do not count, as trials that
    never reported that step). Optuna's gates carry over:

    * no pruning while fewer than ``n_startup_trials`` other runs are given (Optuna's default 5);
    * none before progress ``warmup_fraction`` (``n_warmup_steps``, default 0);
    * checks at the first logged point of every ``check_every`` interval of progress after the
      warmup (``interval_steps``; 0, the default, checks every logged point, Optuna's 1);
    * no pruning where fewer than ``n_min_trials`` other runs have a value.

    Parameters
    ----------
    steps, rewards : ndarray
        This run's logged points (steps increasing).
    other_runs : sequence of (steps, rewards)
        Completed runs to compare against.
    warmup_fraction, check_every : float
        Warmup and check interval, as fractions of the run.
    total_steps : float, optional
        This run's planned length; its last logged step by default.
    n_startup_trials, n_min_trials : int
        Optuna's gates (see above).

    Returns
    -------
    int or None
        The step at which the run is pruned, or ``None`` if it never is.
    """
    steps, rewards = _steps_rewards(steps, rewards)
    assert rewards is not None
    if not 0.0 <= warmup_fraction <= 1.0 or check_every < 0.0:
        raise BaselineInputError(
            f"warmup_fraction must be in [0, 1] and check_every >= 0, got {warmup_fraction}, {check_every}"
        )
    total = float(steps[-1]) if total_steps is None else float(total_steps)
    if not total > 0:
        raise BaselineInputError(f"total_steps must be > 0, got {total_steps}")
    if len(other_runs) == 0 or len(other_runs) < n_startup_trials:
        return None
    others = []
    for other_steps, other_rewards in other_runs:
        o_steps, o_rewards = _steps_rewards(other_steps, other_rewards)
        assert o_rewards is not None
        if o_steps[-1] <= 0:
            raise BaselineInputError("every other run needs a last step > 0 to normalise its progress")
        others.append((o_steps / o_steps[-1], o_rewards))

    progress = steps / total
    best = np.maximum.accumulate(rewards)
    last_checked_interval = -1
    for i, p in enumerate(progress):
        if p < warmup_fraction:
            continue
        if check_every > 0:
            interval = math.floor((p - warmup_fraction) / check_every + 1e-12)
            if interval <= last_checked_interval:
                continue
            last_checked_interval = interval
        values = [np.interp(p, o_p, o_r) for o_p, o_r in others if o_p[0] <= p <= o_p[-1]]
        if len(values) < max(n_min_trials, 1):
            continue
        if best[i] < float(np.median(values)):
            return _as_step(steps[i])
    return None
