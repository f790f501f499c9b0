"""The closed-form families: ``exp``, ``weibull``, ``logistic`` and ``power``.

Each has ``g`` (the share of the gain made at progress ``t``), its derivative ``dg_dt`` and its
inverse (the progress at which a share ``q`` is made).
"""

from __future__ import annotations

from typing import Any

from bayesgrpo.model.curves.backend import ArrayLike, curve_inputs, inverse_inputs

# Weibull: cap on log((t/tau)^k). exp(-exp(50)) is exactly 0 in float64, so the cap changes no
# value, but keeps exp(k log(t/tau)) and its gradient finite for large t and k.
_LOG_Z_MAX = 50.0

# --------------------------------------------------------------------------------------------
# exp
# --------------------------------------------------------------------------------------------


def g_exp(t: ArrayLike, tau: ArrayLike) -> ArrayLike:
    r"""Exponential saturation.

    .. math:: g(t) = 1 - e^{-t/\\tau}

    Source: exponential saturation of GRPO reward in normalised progress (arXiv 2507.18014);
    the overdamped limit of the oscillator model (arXiv 2606.30789).

    Parameters
    ----------
    t : array_like or TensorVariable
        Progress, ``t >= 0``.
    tau : array_like or TensorVariable
        Time constant (> 0): ``g(tau) = 1 - 1/e``; also the area ``int_0^inf (1 - g) dt``.

    Returns
    -------
    ndarray or TensorVariable
        ``g`` broadcast over the inputs.
    """
    ops, t, (tau,) = curve_inputs(t, tau=tau)
    return -ops.expm1(-t / tau)


def dg_dt_exp(t: ArrayLike, tau: ArrayLike) -> ArrayLike:
    r"""Derivative of :func:`g_exp`: :math:`g'(t) = e^{-t/\\tau} / \\tau`."""
    ops, t, (tau,) = curve_inputs(t, tau=tau)
    return ops.exp(-t / tau) / tau


def inverse_exp(q: ArrayLike, tau: ArrayLike) -> ArrayLike:
    r"""Progress at which :func:`g_exp` reaches ``q``: :math:`t_q = -\\tau \\log(1 - q)`."""
    ops, q, (tau,) = inverse_inputs(q, tau=tau)
    return -tau * ops.log1p(-q)


# --------------------------------------------------------------------------------------------
# weibull
# --------------------------------------------------------------------------------------------


def weibull_log_z(ops: Any, t: Any, tau: Any, k: Any) -> Any:
    """``log((t/tau)^k)`` with ``t`` clipped away from 0 and capped above (see ``_LOG_Z_MAX``)."""
    return ops.minimum(k * (ops.log_clipped(t) - ops.log(tau)), _LOG_Z_MAX)


def g_weibull(t: ArrayLike, tau: ArrayLike, k: ArrayLike) -> ArrayLike:
    r"""Weibull saturation.

    .. math:: g(t) = 1 - \\exp\\left(-(t/\\tau)^k\\right)

    ``k = 1`` is ``exp``; ``k > 1`` gives the three phases of many RL reward curves (slow start,
    rapid rise, plateau); ``k < 1`` a fast start and a long tail. Used as a learning-curve family
    by Domhan et al. (2015, IJCAI) and the forecasting baselines (:mod:`bayesgrpo.evaluate.baselines`).

    Parameters
    ----------
    t : array_like or TensorVariable
        Progress, ``t >= 0``.
    tau : array_like or TensorVariable
        Scale (> 0): ``g(tau) = 1 - 1/e`` for every ``k``.
    k : array_like or TensorVariable
        Shape (> 0).

    Returns
    -------
    ndarray or TensorVariable
    """
    ops, t, (tau, k) = curve_inputs(t, tau=tau, k=k)
    z = ops.exp(weibull_log_z(ops, t, tau, k))
    return ops.switch(t > 0, -ops.expm1(-z), 0.0)


def dg_dt_weibull(t: ArrayLike, tau: ArrayLike, k: ArrayLike) -> ArrayLike:
    r"""Derivative of :func:`g_weibull`.

    .. math:: g'(t) = \\frac{k}{t} (t/\\tau)^k \\exp\\left(-(t/\\tau)^k\\right)

    At ``t = 0`` this is ``0`` for ``k > 1``, ``1/tau`` for ``k = 1`` and infinite for ``k < 1``
    (returned as the value at the smallest positive float, which may overflow to ``inf``).
    """
    ops, t, (tau, k) = curve_inputs(t, tau=tau, k=k)
    log_z = weibull_log_z(ops, t, tau, k)
    return ops.exp(ops.log(k) - ops.log_clipped(t) + log_z - ops.exp(log_z))


def inverse_weibull(q: ArrayLike, tau: ArrayLike, k: ArrayLike) -> ArrayLike:
    r"""Progress at which :func:`g_weibull` reaches ``q``: :math:`t_q = \\tau (-\\log(1-q))^{1/k}`."""
    ops, q, (tau, k) = inverse_inputs(q, tau=tau, k=k)
    return tau * ops.exp(ops.log(-ops.log1p(-q)) / k)


# --------------------------------------------------------------------------------------------
# logistic
# --------------------------------------------------------------------------------------------


def _logistic_z(ops: Any, t: Any, t_mid: Any, B: Any) -> Any:
    """``B (log t - log t_mid)`` with ``t`` clipped away from 0."""
    return B * (ops.log_clipped(t) - ops.log(t_mid))


def g_logistic(t: ArrayLike, t_mid: ArrayLike, B: ArrayLike) -> ArrayLike:
    r"""Sigmoid in log progress (the ScaleRL curve).

    .. math:: g(t) = \\frac{1}{1 + (t_{mid}/t)^B} = \\sigma\\left(B (\\log t - \\log t_{mid})\\right)

    Source: ScaleRL sigmoidal compute-performance curve (arXiv 2510.13786), where ``B`` is the
    scaling efficiency and ``t_mid`` the compute at half of the gain. ``B = 1`` is the hyperbolic
    (Michaelis-Menten) curve ``t / (t + t_mid)``; ``B > 1`` has a slow start.

    Parameters
    ----------
    t : array_like or TensorVariable
        Progress, ``t >= 0``; ``g(0) = 0`` exactly.
    t_mid : array_like or TensorVariable
        Half-gain point (> 0): ``g(t_mid) = 0.5``.
    B : array_like or TensorVariable
        Efficiency / steepness in log progress (> 0).

    Returns
    -------
    ndarray or TensorVariable
    """
    ops, t, (t_mid, B) = curve_inputs(t, t_mid=t_mid, B=B)
    return ops.switch(t > 0, ops.sigmoid(_logistic_z(ops, t, t_mid, B)), 0.0)


def dg_dt_logistic(t: ArrayLike, t_mid: ArrayLike, B: ArrayLike) -> ArrayLike:
    r"""Derivative of :func:`g_logistic`.

    .. math:: g'(t) = \\frac{B}{t}\\, g(t)\\,(1 - g(t))

    At ``t = 0``: ``0`` for ``B > 1``, ``1/t_mid`` for ``B = 1``, infinite for ``B < 1`` (returned
    as the value at the smallest positive float, a very large number or ``inf``).
    """
    ops, t, (t_mid, B) = curve_inputs(t, t_mid=t_mid, B=B)
    z = _logistic_z(ops, t, t_mid, B)
    return ops.exp(ops.log(B) - ops.log_clipped(t) + ops.log_sigmoid(z) + ops.log_sigmoid(-z))


def inverse_logistic(q: ArrayLike, t_mid: ArrayLike, B: ArrayLike) -> ArrayLike:
    """Progress at which :func:`g_logistic` reaches ``q``: :math:`t_q = t_{mid} (q/(1-q))^{1/B}`."""
    ops, q, (t_mid, B) = inverse_inputs(q, t_mid=t_mid, B=B)
    return t_mid * ops.exp((ops.log(q) - ops.log1p(-q)) / B)


# --------------------------------------------------------------------------------------------
# power
# --------------------------------------------------------------------------------------------


def g_power(t: ArrayLike, tau: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    r"""Power-law approach to the asymptote.

    .. math:: g(t) = 1 - (1 + t/\\tau)^{-\\alpha}

    The gap to the asymptote falls as a power of progress: log error linear in log compute
    (arXiv 2509.25300). The initial time constant is ``tau/alpha`` (``g'(0) = alpha/tau``); as
    ``alpha, tau -> inf`` with ``tau/alpha`` fixed, ``g -> 1 - exp(-t alpha/tau)``.

    Parameters
    ----------
    t : array_like or TensorVariable
        Progress, ``t >= 0``.
    tau : array_like or TensorVariable
        Offset (> 0): where the power-law regime begins.
    alpha : array_like or TensorVariable
        Exponent of the power-law tail (> 0).

    Returns
    -------
    ndarray or TensorVariable
    """
    ops, t, (tau, alpha) = curve_inputs(t, tau=tau, alpha=alpha)
    return -ops.expm1(-alpha * ops.log1p(t / tau))


def dg_dt_power(t: ArrayLike, tau: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    r"""Derivative of :func:`g_power`: :math:`g'(t) = (\\alpha/\\tau)(1 + t/\\tau)^{-\\alpha-1}`."""
    ops, t, (tau, alpha) = curve_inputs(t, tau=tau, alpha=alpha)
    return alpha / tau * ops.exp(-(alpha + 1.0) * ops.log1p(t / tau))


def inverse_power(q: ArrayLike, tau: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    r"""Progress at which :func:`g_power` reaches ``q``: :math:`t_q = \\tau((1-q)^{-1/\\alpha} - 1)`."""
    ops, q, (tau, alpha) = inverse_inputs(q, tau=tau, alpha=alpha)
    return tau * ops.expm1(-ops.log1p(-q) / alpha)
