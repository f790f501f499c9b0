"""The learning-curve ensemble of Domhan, Springenberg and Hutter (2015, IJCAI).

A weighted ensemble of 11 parametric families (vap, pow3, log-log-linear, Hill, log-power, pow4,
MMF, exp4, Janoschek, Weibull, ilog2), sampled with the emcee affine-invariant ensemble sampler as
in the paper; its stopping statistic is :func:`domhan_p_better`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import emcee
import numpy as np

from bayesgrpo.evaluate.baselines.base import (
    FIT_ERRORS,
    BaselineForecast,
    BaselineInputError,
    base_info,
    check_positive_int,
    prepare_prefix,
)
from bayesgrpo.evaluate.baselines.least_squares import batched_lm, reward_box
from bayesgrpo.evaluate.baselines.persistence import persistence_fallback

logger = logging.getLogger(__name__)

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


def _family_prior_ok(
    family: _DomhanFamily, p: np.ndarray, x_ends: np.ndarray, y_lim_range: tuple[float, float]
) -> np.ndarray:
    """Domhan's per-family prior support, for rows ``p`` (W, k): finite, not decreasing from the
    first observed point to the horizon (their soft monotonicity), and a sane value at the horizon.
    """
    ends = family.fn(x_ends, p)
    return (
        np.all(np.isfinite(ends), axis=1)
        & (ends[:, 0] <= ends[:, 1])
        & (ends[:, 1] >= y_lim_range[0])
        & (ends[:, 1] <= y_lim_range[1])
    )


def _fit_family_ml(
    family: _DomhanFamily,
    x: np.ndarray,
    y: np.ndarray,
    x_ends: np.ndarray,
    y_lim_range: tuple[float, float],
    n_starts: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray | None, str]:
    """Maximum-likelihood (least-squares, Levenberg-Marquardt) fit of one family.

    Starts from the published start and ``n_starts - 1`` random log-normal perturbations of it,
    all solved at once by :func:`batched_lm` (the authors' code runs MINPACK's
    Levenberg-Marquardt from the published start, then BFGS); keeps the best optimum inside the
    prior's support, or returns ``None`` and the reason.
    """
    base = np.array(family.start)
    starts = np.vstack([base, base * np.exp(0.5 * rng.standard_normal((n_starts - 1, base.size)))])
    unbounded = np.full(base.size, np.inf)

    def residuals(p: np.ndarray) -> np.ndarray:
        return family.fn(x, p) - y[None, :]

    with np.errstate(all="ignore"):
        params, cost = batched_lm(residuals, starts, -unbounded, unbounded, max_iter=200)
        finite = np.isfinite(cost) & np.all(np.isfinite(params), axis=1)
        if not finite.any():
            return None, "no start gave a finite fit"
        in_prior = finite & _family_prior_ok(
            family, np.where(finite[:, None], params, base), x_ends, y_lim_range
        )
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
        # a loop over families, not draws
        for k, (family, sl) in enumerate(zip(self.families, self.slices, strict=True)):
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
            for family, sl in zip(self.families, self.slices, strict=True):
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
    r"""Domhan et al. (2015)'s Bayesian ensemble of 11 learning-curve families, sampled by MCMC.

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

    The paper's defaults (100 walkers, several thousand steps) take seconds per curve; the
    defaults here are smaller and every option can be shrunk for
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
    prefix = prepare_prefix(steps, rewards, target_steps, n_draws)
    n_draws = int(n_draws)
    n_steps = check_positive_int("n_steps", n_steps, 2)
    burn = n_steps // 2 if burn_in is None else int(burn_in)
    if not 0 <= burn < n_steps:
        raise BaselineInputError(f"burn_in must be in [0, n_steps), got {burn_in} with n_steps={n_steps}")
    if not x_max > 1.0:
        raise BaselineInputError(f"x_max must be > 1, got {x_max}")
    n_ml_starts = check_positive_int("n_ml_starts", n_ml_starts)
    rng = np.random.default_rng(random_seed)
    y_raw = prefix.rewards
    if y_raw.size < 5:
        return persistence_fallback(
            name, prefix, n_draws, rng, f"{y_raw.size} points, the ensemble needs at least 5", start
        )
    lo, span = float(y_raw.min()), float(np.ptp(y_raw))
    if span <= 1e-12 * max(1.0, abs(float(y_raw.mean()))):
        return persistence_fallback(name, prefix, n_draws, rng, "constant rewards", start)
    y = (y_raw - lo) / span
    if reward_bounds is not None:
        low, high = reward_box(y_raw, reward_bounds, 0.0)
        y_lim_range = ((low - lo) / span, (high - lo) / span)
    else:
        y_lim_range = (-1.0, 2.0)
    x = 1.0 + (x_max - 1.0) * prefix.t
    x_target = 1.0 + (x_max - 1.0) * prefix.t_target
    x_ends = np.array([x[0], x_max])  # first observed point and the horizon (t = 1)

    try:
        ensemble, theta_ml, dropped = _ml_ensemble(x, y, x_ends, y_lim_range, n_ml_starts, rng)
        if ensemble is None:
            return persistence_fallback(
                name, prefix, n_draws, rng, "no curve family could be fitted", start, families_dropped=dropped
            )
        chain, acceptance, walkers = _run_emcee(ensemble, theta_ml, n_walkers, n_steps, init_ball, rng)
    except FIT_ERRORS as exc:
        return persistence_fallback(name, prefix, n_draws, rng, f"{type(exc).__name__}: {exc}", start)

    samples = chain[burn:].reshape(-1, ensemble.ndim)
    draws_norm = _predictive_draws(ensemble, samples, x_target, n_draws, rng)
    if draws_norm is None:
        return persistence_fallback(
            name, prefix, n_draws, rng, "no posterior sample gives finite predictions", start
        )
    sigma_all, weights_all = ensemble.split(samples)
    weights_all = weights_all / weights_all.sum(axis=1, keepdims=True)
    info = {
        "status": "ok",
        "fallback": None,
        "families": [f.name for f in ensemble.families],
        "families_dropped": dropped,
        "weights": {
            f.name: float(w) for f, w in zip(ensemble.families, weights_all.mean(axis=0), strict=True)
        },
        "sigma": float(np.median(sigma_all) * span),
        "acceptance": acceptance,
        "n_walkers": walkers,
        "n_steps": n_steps,
        "burn_in": burn,
        "x_max": float(x_max),
        "reward_scale": {"min": lo, "range": span},
        **base_info(prefix),
    }
    info["seconds"] = time.perf_counter() - start
    return BaselineForecast(name, prefix.target_steps, lo + span * draws_norm, info)


def _ml_ensemble(
    x: np.ndarray,
    y: np.ndarray,
    x_ends: np.ndarray,
    y_lim_range: tuple[float, float],
    n_ml_starts: int,
    rng: np.random.Generator,
) -> tuple[_Ensemble | None, np.ndarray, dict[str, str]]:
    """Every family fitted by maximum likelihood, the ensemble of those that fit, its starting
    point (the families' estimates, a noise scale from the residuals, equal weights) and why the
    others were dropped; no ensemble when none fits.
    """
    fitted, dropped, ml_params = [], {}, []
    for family in DOMHAN_FAMILIES:
        params, reason = _fit_family_ml(family, x, y, x_ends, y_lim_range, n_ml_starts, rng)
        if params is None:
            dropped[family.name] = reason
        else:
            fitted.append(family)
            ml_params.append(params)
    if not fitted:
        return None, np.empty(0), dropped
    sizes = np.cumsum([0] + [len(f.params) for f in fitted])
    ensemble = _Ensemble(
        tuple(fitted), tuple(slice(a, b) for a, b in pairwise(sizes)), x, y, x_ends, y_lim_range
    )
    theta_ml = np.concatenate(ml_params + [np.zeros(1), np.ones(len(fitted))])
    with np.errstate(all="ignore"):
        residual = y - ensemble.mean(theta_ml[None, :], x)[0]
    theta_ml[ensemble.n_params] = float(np.clip(residual.std(), 1e-4, 1.0))
    return ensemble, theta_ml, dropped


def _predictive_draws(
    ensemble: _Ensemble, samples: np.ndarray, x_target: np.ndarray, n_draws: int, rng: np.random.Generator
) -> np.ndarray | None:
    """``n_draws`` draws of the normalised reward at ``x_target`` (curve plus noise) from posterior
    samples whose predictions are finite; None when none is.
    """
    with np.errstate(all="ignore"):
        pick = rng.integers(0, samples.shape[0], size=max(4 * n_draws, 64))
        mean = ensemble.mean(samples[pick], x_target)
        finite = np.all(np.isfinite(mean), axis=1)
    if not finite.any():
        return None
    rows = np.flatnonzero(finite)[rng.integers(0, int(finite.sum()), size=n_draws)]
    sigma, _ = ensemble.split(samples[pick[rows]])
    return np.asarray(mean[rows] + sigma[:, None] * rng.standard_normal((n_draws, x_target.size)))


def _run_emcee(
    ensemble: _Ensemble,
    theta_ml: np.ndarray,
    n_walkers: int,
    n_steps: int,
    init_ball: float,
    rng: np.random.Generator,
) -> tuple[np.ndarray, float, int]:
    """Run emcee's ensemble sampler from a ball around ``theta_ml``; returns the chain
    (n_steps, walkers, ndim), the mean acceptance fraction and the number of walkers.
    """
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
