"""Pareto-smoothed importance sampling (PSIS) of one vector of log weights, in numpy.

A port of ArviZ 0.23's ``psislw`` for a single vector (``arviz/stats/stats.py``: ``_psislw``,
``_gpdfit``, ``_gpinv``; Apache-2.0, the ArviZ developers), after Vehtari, Simpson, Gelman, Yao
and Gabry (2024), "Pareto smoothed importance sampling", JMLR 25(72). It lives here so that the
live update, which smooths its weights on every call, does not import ArviZ (about 1 s in a fresh
process: ``benchmarks/live_first_answer.py``); ``tests/model/test_psis.py`` checks it against
ArviZ's own on the same weights.
"""

from __future__ import annotations

import numpy as np

#: Prior of the generalised Pareto fit (Zhang and Stephens 2009), as ArviZ sets them.
_PRIOR_BS = 3
_PRIOR_K = 10


def psis_log_weights(log_weights: np.ndarray, reff: float = 1.0) -> tuple[np.ndarray, float]:
    """Pareto-smoothed, normalised log weights and the Pareto shape ``k`` of their tail.

    Parameters
    ----------
    log_weights : ndarray, shape (S,)
        Log importance weights (any offset).
    reff : float
        Relative efficiency of the draws (1 for independent draws).

    Returns
    -------
    smoothed : ndarray, shape (S,)
        Log weights that sum (in exp) to one.
    k : float
        The tail's shape: above 0.7 the weights are unreliable; ``inf`` when the tail has 4 draws
        or fewer.
    """
    x = np.array(log_weights, dtype=float)
    n = x.shape[-1]
    cutoff_index = -int(np.ceil(min(n / 5.0, 3 * (n / reff) ** 0.5))) - 1
    cutoff_min = np.log(np.finfo(float).tiny)
    x -= np.max(x)
    order = np.argsort(x)
    cutoff = max(x[order[cutoff_index]], cutoff_min)
    exp_cutoff = np.exp(cutoff)
    (tail_index,) = np.where(x > cutoff)
    tail = x[tail_index]
    k = np.inf
    if len(tail) > 4:
        tail_order = np.argsort(tail)
        excess = np.exp(tail) - exp_cutoff
        k, sigma = _generalised_pareto_fit(excess[tail_order])
        if np.isfinite(k):
            quantiles = np.arange(0.5, len(tail)) / len(tail)
            x[tail_index[tail_order]] = np.log(_generalised_pareto_quantile(quantiles, k, sigma) + exp_cutoff)
            x[x > 0] = 0
    x -= np.logaddexp.reduce(x)
    return x, float(k)


def _generalised_pareto_fit(sorted_values: np.ndarray) -> tuple[float, float]:
    """Empirical Bayes estimate of a generalised Pareto's shape and scale (Zhang and Stephens 2009)."""
    n = len(sorted_values)
    m = 30 + int(n**0.5)
    b = 1 - np.sqrt(m / (np.arange(1, m + 1, dtype=float) - 0.5))
    b /= _PRIOR_BS * sorted_values[int(n / 4 + 0.5) - 1]
    b += 1 / sorted_values[-1]
    k = np.log1p(-b[:, None] * sorted_values).mean(axis=1)
    length_scale = n * (np.log(-(b / k)) - k - 1)
    weights = 1 / np.exp(length_scale - length_scale[:, None]).sum(axis=1)
    real = weights >= 10 * np.finfo(float).eps
    weights, b = weights[real], b[real]
    weights /= weights.sum()
    b_post = np.sum(b * weights)
    k_post = np.log1p(-b_post * sorted_values).mean()
    sigma = -k_post / b_post
    k_post = (n * k_post + _PRIOR_K * 0.5) / (n + _PRIOR_K)
    return float(k_post), float(sigma)


def _generalised_pareto_quantile(probs: np.ndarray, k: float, sigma: float) -> np.ndarray:
    """The generalised Pareto's quantiles at ``probs`` (all strictly between 0 and 1)."""
    if sigma <= 0:
        return np.full_like(probs, np.nan)
    if abs(k) < np.finfo(float).eps:
        return -np.log1p(-probs) * sigma
    return np.expm1(-k * np.log1p(-probs)) / k * sigma
