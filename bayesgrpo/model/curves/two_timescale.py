"""The ``two_timescale`` family (the default): a Weibull rise plus a slow exponential tail."""

from __future__ import annotations

import numpy as np

from bayesgrpo.model.curves.backend import ArrayLike, bisect_monotone, curve_inputs
from bayesgrpo.model.curves.families import weibull_log_z

# --------------------------------------------------------------------------------------------
# two_timescale
# --------------------------------------------------------------------------------------------


def two_timescale_parts(odds: ArrayLike, ratio: ArrayLike, tau: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
    """The slow term's share ``s = odds / (1 + odds)`` and time constant ``tau (1 + ratio)``."""
    return odds / (1.0 + odds), tau * (1.0 + ratio)


def g_two_timescale(
    t: ArrayLike, tau: ArrayLike, k: ArrayLike, odds: ArrayLike, ratio: ArrayLike
) -> ArrayLike:
    r"""A fast Weibull rise followed by a slow exponential climb.

    .. math:: g(t) = (1 - s)\left(1 - e^{-(t/\tau)^k}\right) + s \left(1 - e^{-t/\tau_s}\right),
              \quad s = \frac{o}{1 + o}, \quad \tau_s = \tau (1 + \rho)

    Many GRPO runs make most of their gain in a few dozen steps (format and easy problems) and
    then keep climbing slowly for the rest of the epoch; one Weibull term reads the slow climb
    as a plateau. ``tau_s > tau`` by construction, so the two terms never swap roles.

    Parameters
    ----------
    t : array_like or TensorVariable
        Progress, ``t >= 0``.
    tau : array_like or TensorVariable
        Scale of the fast term (> 0).
    k : array_like or TensorVariable
        Shape of the fast term (> 0; > 1 a slow start).
    odds : array_like or TensorVariable
        Odds of the slow term's share of the total gain (> 0).
    ratio : array_like or TensorVariable
        ``tau_s / tau - 1`` (> 0): how much slower the slow term is.

    Returns
    -------
    ndarray or TensorVariable
    """
    ops, t, (tau, k, odds, ratio) = curve_inputs(t, tau=tau, k=k, odds=odds, ratio=ratio)
    share, tau_slow = two_timescale_parts(odds, ratio, tau)
    z = ops.exp(weibull_log_z(ops, t, tau, k))
    fast = ops.switch(t > 0, -ops.expm1(-z), 0.0)
    return (1.0 - share) * fast - share * ops.expm1(-t / tau_slow)


def dg_dt_two_timescale(
    t: ArrayLike, tau: ArrayLike, k: ArrayLike, odds: ArrayLike, ratio: ArrayLike
) -> ArrayLike:
    """Derivative of :func:`g_two_timescale`: the two terms' rates weighted by their shares."""
    ops, t, (tau, k, odds, ratio) = curve_inputs(t, tau=tau, k=k, odds=odds, ratio=ratio)
    share, tau_slow = two_timescale_parts(odds, ratio, tau)
    log_z = weibull_log_z(ops, t, tau, k)
    fast = ops.exp(ops.log(k) - ops.log_clipped(t) + log_z - ops.exp(log_z))
    return (1.0 - share) * fast + share * ops.exp(-t / tau_slow) / tau_slow


def two_timescale_time_to_fraction(
    q: np.ndarray, tau: np.ndarray, k: np.ndarray, odds: np.ndarray, ratio: np.ndarray
) -> np.ndarray:
    """First ``t`` with ``g_two_timescale(t) = q`` (``g`` is increasing: bisection)."""
    return bisect_monotone(g_two_timescale, q, tau, tau, k, odds, ratio)
