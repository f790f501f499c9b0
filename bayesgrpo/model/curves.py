"""Curve families of reward against training progress (DESIGN.md section 3.1).

Every family is written

.. math:: R(t) = R_0 + (A - R_0)\\, g(t; \\theta), \\qquad g(0) = 0,\\quad g(t) \\to 1 \\ (t \\to \\infty),

so the start ``r0``, the asymptote ``asymptote`` and the shape parameters ``theta`` mean the same
in every family and can be pooled across runs. ``t >= 0`` is a progress axis the user chooses
(optimizer steps, fraction of an epoch, samples seen, compute); the default priors in
:data:`CURVES` assume it is *normalised* so that a run's logged span is about 1.

Every function here is pure and works on both

* numpy arrays (float64, ordinary broadcasting: ``t`` of shape ``(n,)`` with parameters of shape
  ``(draws, 1)`` gives ``(draws, n)``), and
* PyTensor tensors (any argument a PyTensor variable: the result is a tensor built with
  ``pytensor.tensor`` functions, ready for a PyMC model).

The expressions are arranged so that values are exact at ``t = 0`` and PyTensor gradients are
finite at ``t = 0`` and over the whole parameter range (no ``0 * inf``: every branch of a
``switch`` is finite, logarithms see a clipped ``t``).

All shape parameters are positive; priors are given on their logarithms.

Families
--------
``exp``        ``g = 1 - exp(-t/tau)``
``weibull``    ``g = 1 - exp(-(t/tau)^k)``
``logistic``   ``g = 1 / (1 + (t_mid/t)^B)``
``power``      ``g = 1 - (1 + t/tau)^(-alpha)``
``oscillator`` step response of a damped second-order system, parameters ``(tau, zeta)``

Oscillator parametrisation
--------------------------
The damped-oscillator model (arXiv 2606.30789) is ``g'' + 2 zeta omega g' + omega^2 g = omega^2``,
``g(0) = g'(0) = 0``. We parametrise it by ``(tau, zeta)`` with

.. math:: \\tau = \\int_0^\\infty (1 - g(t))\\,dt = 2\\zeta/\\omega, \\qquad \\omega = 2\\zeta/\\tau.

``tau`` is the area between the curve and its asymptote (the "mean time to gain"). It is
*exactly* the ``tau`` of ``exp`` (whose area is also ``tau``), for every ``zeta``, so

* ``tau`` means the same in ``exp`` and ``oscillator``: one prior, one pooled population mean;
* ``zeta`` is a pure shape parameter (how much the approach rings), roughly independent of ``tau``
  a priori, with ``log zeta = 0`` at critical damping;
* the overdamped limit ``zeta -> inf`` at fixed ``tau`` is ``exp`` with the same ``tau``
  (the inertia term drops out: ``2 zeta/omega g' + g = 1``).

With ``(omega, zeta)`` instead, ``zeta -> inf`` at fixed ``omega`` sends the time constant to
infinity, and with ``tau = 1/(zeta omega)`` (the envelope decay time) the overdamped limit has time
constant ``2 zeta^2 tau``: neither pools with ``exp``. Use :func:`oscillator_omega` and
:func:`oscillator_tau` to convert.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError

__all__ = [
    "CURVES",
    "DEFAULT_CURVE",
    "CurveFamily",
    "ShapePrior",
    "asymptote_from_levels",
    "dg_dt_exp",
    "dg_dt_logistic",
    "dg_dt_oscillator",
    "dg_dt_power",
    "dg_dt_two_timescale",
    "dg_dt_weibull",
    "g_exp",
    "g_logistic",
    "g_oscillator",
    "g_power",
    "g_two_timescale",
    "g_weibull",
    "gain_fraction_at_one",
    "get_curve",
    "inverse_exp",
    "inverse_logistic",
    "inverse_power",
    "inverse_weibull",
    "oscillator_omega",
    "oscillator_tau",
    "reward_curve",
    "reward_curve_by_levels",
    "reward_curve_dt",
    "time_to_fraction",
    "two_timescale_parts",
]

#: Anything a curve function accepts: a float, a numpy array, or a PyTensor variable.
ArrayLike = Any

# Smallest positive t fed to a logarithm (float64 ``tiny``; a float32 graph uses float32's);
# ``t = 0`` itself is handled by a switch, so this only keeps the discarded branch (and its
# gradient) finite.
_T_TINY = float(np.finfo(np.float64).tiny)
# Weibull: cap on log((t/tau)^k). exp(-exp(50)) is exactly 0 in float64, so the cap changes no
# value, but keeps exp(k log(t/tau)) and its gradient finite for large t and k.
_LOG_Z_MAX = 50.0
# Oscillator: half-width of the band |y| <= _Y_EPS around critical damping (y = (zeta^2 - 1) x^2)
# where the series of cos/cosh is used; the truncation error there is below 1e-16.
_Y_EPS = 1e-3


# --------------------------------------------------------------------------------------------
# Backend dispatch: the same formula runs on numpy arrays or on PyTensor tensors.
# --------------------------------------------------------------------------------------------


class _NumpyOps:
    """Elementwise operations on float64 numpy arrays."""

    is_tensor = False

    @staticmethod
    def asarray(x: ArrayLike) -> np.ndarray:
        return np.asarray(x, dtype=np.float64)

    exp = staticmethod(np.exp)
    expm1 = staticmethod(np.expm1)
    log = staticmethod(np.log)
    log1p = staticmethod(np.log1p)
    sqrt = staticmethod(np.sqrt)
    cos = staticmethod(np.cos)
    sin = staticmethod(np.sin)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    clip = staticmethod(np.clip)

    @staticmethod
    def log_clipped(t: np.ndarray) -> np.ndarray:
        """``log(max(t, tiny))``: finite at ``t = 0``."""
        return np.log(np.maximum(t, _T_TINY))

    @staticmethod
    def switch(cond: np.ndarray, a: ArrayLike, b: ArrayLike) -> np.ndarray:
        return np.where(cond, a, b)

    @staticmethod
    def sigmoid(z: np.ndarray) -> np.ndarray:
        return np.exp(-np.logaddexp(0.0, -z))

    @staticmethod
    def log_sigmoid(z: np.ndarray) -> np.ndarray:
        return -np.logaddexp(0.0, -z)


class _TensorOps:
    """The same operations on PyTensor tensors (imported only when a tensor is passed)."""

    is_tensor = True

    def __init__(self) -> None:
        import pytensor.tensor as pt

        self.pt = pt
        for name in ("exp", "expm1", "log", "log1p", "sqrt", "cos", "sin", "maximum", "minimum",
                     "clip", "switch", "sigmoid"):
            setattr(self, name, getattr(pt, name))

    def asarray(self, x: ArrayLike) -> Any:
        return self.pt.as_tensor_variable(x)

    def log_sigmoid(self, z: Any) -> Any:
        return -self.pt.softplus(-z)

    def log_clipped(self, t: Any) -> Any:
        """``log(max(t, tiny))`` with the ``tiny`` of ``t``'s float type (float32 graphs too)."""
        dtype = t.dtype if str(t.dtype).startswith("float") else "float64"
        tiny = np.asarray(np.finfo(dtype).tiny, dtype=dtype)
        return self.pt.log(self.pt.maximum(t, tiny))


_NUMPY_OPS = _NumpyOps()


def _is_tensor(x: Any) -> bool:
    if "pytensor" not in sys.modules:  # no tensor can exist before pytensor is imported
        return False
    from pytensor.graph.basic import Variable

    return isinstance(x, Variable)


def _ops(*args: ArrayLike) -> Any:
    """The operations namespace for these arguments: PyTensor if any is a tensor, else numpy."""
    if any(_is_tensor(a) for a in args):
        return _TensorOps()
    return _NUMPY_OPS


def _inputs(t: ArrayLike, **params: ArrayLike) -> tuple[Any, Any, list[Any]]:
    """Dispatch, convert, and (numpy only) check ``t >= 0`` and positive finite parameters."""
    ops = _ops(t, *params.values())
    t = ops.asarray(t)
    values = [ops.asarray(v) for v in params.values()]
    if not ops.is_tensor:
        if np.any(np.isnan(t)) or np.any(t < 0):
            raise BayesGRPOError("curve progress t must be >= 0 and not NaN; got a negative or NaN value.")
        for name, v in zip(params, values):
            if not np.all(np.isfinite(v) & (v > 0)):
                raise BayesGRPOError(f"curve shape parameter {name!r} must be finite and > 0; got {v!r}.")
    return ops, t, values


def _inverse_inputs(q: ArrayLike, **params: ArrayLike) -> tuple[Any, Any, list[Any]]:
    """As :func:`_inputs` for a fraction ``q``, which must lie strictly between 0 and 1 (numpy)."""
    ops, q, values = _inputs(q, **params)
    if not ops.is_tensor and not np.all((q > 0) & (q < 1)):
        raise BayesGRPOError(f"fraction q must lie strictly between 0 and 1; got {q!r}.")
    return ops, q, values


# --------------------------------------------------------------------------------------------
# exp
# --------------------------------------------------------------------------------------------


def g_exp(t: ArrayLike, tau: ArrayLike) -> ArrayLike:
    """Exponential saturation.

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
    ops, t, (tau,) = _inputs(t, tau=tau)
    return -ops.expm1(-t / tau)


def dg_dt_exp(t: ArrayLike, tau: ArrayLike) -> ArrayLike:
    """Derivative of :func:`g_exp`: :math:`g'(t) = e^{-t/\\tau} / \\tau`."""
    ops, t, (tau,) = _inputs(t, tau=tau)
    return ops.exp(-t / tau) / tau


def inverse_exp(q: ArrayLike, tau: ArrayLike) -> ArrayLike:
    """Progress at which :func:`g_exp` reaches ``q``: :math:`t_q = -\\tau \\log(1 - q)`."""
    ops, q, (tau,) = _inverse_inputs(q, tau=tau)
    return -tau * ops.log1p(-q)


# --------------------------------------------------------------------------------------------
# weibull
# --------------------------------------------------------------------------------------------


def _weibull_log_z(ops: Any, t: Any, tau: Any, k: Any) -> Any:
    """``log((t/tau)^k)`` with ``t`` clipped away from 0 and capped above (see ``_LOG_Z_MAX``)."""
    return ops.minimum(k * (ops.log_clipped(t) - ops.log(tau)), _LOG_Z_MAX)


def g_weibull(t: ArrayLike, tau: ArrayLike, k: ArrayLike) -> ArrayLike:
    """Weibull saturation.

    .. math:: g(t) = 1 - \\exp\\left(-(t/\\tau)^k\\right)

    ``k = 1`` is ``exp``; ``k > 1`` gives the three phases of many RL reward curves (slow start,
    rapid rise, plateau); ``k < 1`` a fast start and a long tail. Used as a learning-curve family
    by Domhan et al. (2015, IJCAI) and the forecasting peers of DESIGN.md section 5.

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
    ops, t, (tau, k) = _inputs(t, tau=tau, k=k)
    z = ops.exp(_weibull_log_z(ops, t, tau, k))
    return ops.switch(t > 0, -ops.expm1(-z), 0.0)


def dg_dt_weibull(t: ArrayLike, tau: ArrayLike, k: ArrayLike) -> ArrayLike:
    """Derivative of :func:`g_weibull`.

    .. math:: g'(t) = \\frac{k}{t} (t/\\tau)^k \\exp\\left(-(t/\\tau)^k\\right)

    At ``t = 0`` this is ``0`` for ``k > 1``, ``1/tau`` for ``k = 1`` and infinite for ``k < 1``
    (returned as the value at the smallest positive float, which may overflow to ``inf``).
    """
    ops, t, (tau, k) = _inputs(t, tau=tau, k=k)
    log_z = _weibull_log_z(ops, t, tau, k)
    return ops.exp(ops.log(k) - ops.log_clipped(t) + log_z - ops.exp(log_z))


def inverse_weibull(q: ArrayLike, tau: ArrayLike, k: ArrayLike) -> ArrayLike:
    """Progress at which :func:`g_weibull` reaches ``q``: :math:`t_q = \\tau (-\\log(1-q))^{1/k}`."""
    ops, q, (tau, k) = _inverse_inputs(q, tau=tau, k=k)
    return tau * ops.exp(ops.log(-ops.log1p(-q)) / k)


# --------------------------------------------------------------------------------------------
# logistic
# --------------------------------------------------------------------------------------------


def _logistic_z(ops: Any, t: Any, t_mid: Any, B: Any) -> Any:
    """``B (log t - log t_mid)`` with ``t`` clipped away from 0."""
    return B * (ops.log_clipped(t) - ops.log(t_mid))


def g_logistic(t: ArrayLike, t_mid: ArrayLike, B: ArrayLike) -> ArrayLike:
    """Sigmoid in log progress (the ScaleRL curve).

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
    ops, t, (t_mid, B) = _inputs(t, t_mid=t_mid, B=B)
    return ops.switch(t > 0, ops.sigmoid(_logistic_z(ops, t, t_mid, B)), 0.0)


def dg_dt_logistic(t: ArrayLike, t_mid: ArrayLike, B: ArrayLike) -> ArrayLike:
    """Derivative of :func:`g_logistic`.

    .. math:: g'(t) = \\frac{B}{t}\\, g(t)\\,(1 - g(t))

    At ``t = 0``: ``0`` for ``B > 1``, ``1/t_mid`` for ``B = 1``, infinite for ``B < 1`` (returned
    as the value at the smallest positive float, a very large number or ``inf``).
    """
    ops, t, (t_mid, B) = _inputs(t, t_mid=t_mid, B=B)
    z = _logistic_z(ops, t, t_mid, B)
    return ops.exp(ops.log(B) - ops.log_clipped(t) + ops.log_sigmoid(z) + ops.log_sigmoid(-z))


def inverse_logistic(q: ArrayLike, t_mid: ArrayLike, B: ArrayLike) -> ArrayLike:
    """Progress at which :func:`g_logistic` reaches ``q``: :math:`t_q = t_{mid} (q/(1-q))^{1/B}`."""
    ops, q, (t_mid, B) = _inverse_inputs(q, t_mid=t_mid, B=B)
    return t_mid * ops.exp((ops.log(q) - ops.log1p(-q)) / B)


# --------------------------------------------------------------------------------------------
# power
# --------------------------------------------------------------------------------------------


def g_power(t: ArrayLike, tau: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    """Power-law approach to the asymptote.

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
    ops, t, (tau, alpha) = _inputs(t, tau=tau, alpha=alpha)
    return -ops.expm1(-alpha * ops.log1p(t / tau))


def dg_dt_power(t: ArrayLike, tau: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    """Derivative of :func:`g_power`: :math:`g'(t) = (\\alpha/\\tau)(1 + t/\\tau)^{-\\alpha-1}`."""
    ops, t, (tau, alpha) = _inputs(t, tau=tau, alpha=alpha)
    return alpha / tau * ops.exp(-(alpha + 1.0) * ops.log1p(t / tau))


def inverse_power(q: ArrayLike, tau: ArrayLike, alpha: ArrayLike) -> ArrayLike:
    """Progress at which :func:`g_power` reaches ``q``: :math:`t_q = \\tau((1-q)^{-1/\\alpha} - 1)`."""
    ops, q, (tau, alpha) = _inverse_inputs(q, tau=tau, alpha=alpha)
    return tau * ops.expm1(-ops.log1p(-q) / alpha)


# --------------------------------------------------------------------------------------------
# oscillator
# --------------------------------------------------------------------------------------------


def oscillator_omega(tau: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    """Natural frequency of the oscillator from its ``(tau, zeta)``: :math:`\\omega = 2\\zeta/\\tau`."""
    return 2.0 * zeta / tau


def oscillator_tau(omega: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    """``tau`` of the oscillator from natural frequency and damping: :math:`\\tau = 2\\zeta/\\omega`."""
    return 2.0 * zeta / omega


def _oscillator_terms(ops: Any, t: Any, tau: Any, zeta: Any) -> tuple[Any, Any, Any, Any]:
    """``omega``, ``x = omega t`` and the two terms ``e^{-zeta x} C(y)``, ``e^{-zeta x} S(y)``.

    With ``y = (zeta^2 - 1) x^2``, ``C(y) = cosh(sqrt y)`` and ``S(y) = sinh(sqrt y)/sqrt y``
    (``cos``/``sin`` of ``sqrt(-y)`` for ``y < 0``); both are entire functions of ``y``. Then

        1 - g = e^{-zeta x} (C + zeta x S),      g' = omega x e^{-zeta x} S.

    Three branches, each finite for every input (so a switch between them has finite gradients):
    ``y > eps``: overdamped, written with exponentials of negative arguments only (no overflow at
    large ``zeta``); ``y < -eps``: underdamped, cos/sin; ``|y| <= eps``: series (near critical
    damping, and at ``t = 0``).
    """
    omega = 2.0 * zeta / tau
    x = omega * t
    zx = zeta * x
    y = (zeta * zeta - 1.0) * x * x

    # Overdamped: with s = sqrt(y) = x sqrt(zeta^2 - 1), slow = zeta x - s = x^2 / (zeta x + s)
    # (written without cancellation), e^{-zeta x} cosh s = e^{-slow} (1 + e^{-2s}) / 2 and
    # e^{-zeta x} sinh(s)/s = e^{-slow} (1 - e^{-2s}) / (2s).
    s = ops.sqrt(ops.maximum(y, _Y_EPS))
    slow = x * x / (zx + s)
    decay = ops.exp(-slow)
    c_over = 0.5 * decay * (1.0 + ops.exp(-2.0 * s))
    s_over = decay * (-ops.expm1(-2.0 * s)) / (2.0 * s)

    # Underdamped: with p = sqrt(-y) = x sqrt(1 - zeta^2), e^{-zeta x} (cos p, sin(p)/p).
    p = ops.sqrt(ops.maximum(-y, _Y_EPS))
    envelope = ops.exp(-zx)
    c_under = envelope * ops.cos(p)
    s_under = envelope * ops.sin(p) / p

    # Near critical: Taylor series in y (error < y^4/8! < 3e-17 for |y| <= 1e-3).
    yc = ops.clip(y, -_Y_EPS, _Y_EPS)
    c_crit = envelope * (1.0 + yc * (1.0 / 2.0 + yc * (1.0 / 24.0 + yc / 720.0)))
    s_crit = envelope * (1.0 + yc * (1.0 / 6.0 + yc * (1.0 / 120.0 + yc / 5040.0)))

    over = y > _Y_EPS
    under = y < -_Y_EPS
    c_term = ops.switch(over, c_over, ops.switch(under, c_under, c_crit))
    s_term = ops.switch(over, s_over, ops.switch(under, s_under, s_crit))
    return omega, x, c_term, s_term


def g_oscillator(t: ArrayLike, tau: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    """Step response of a damped second-order system.

    Solves :math:`g'' + 2\\zeta\\omega g' + \\omega^2 g = \\omega^2`, :math:`g(0) = g'(0) = 0`, with
    :math:`\\omega = 2\\zeta/\\tau`:

    .. math::

        1 - g(t) = e^{-\\zeta\\omega t}\\left[\\cos(\\omega_d t)
                   + \\frac{\\zeta}{\\sqrt{1-\\zeta^2}} \\sin(\\omega_d t)\\right],
        \\qquad \\omega_d = \\omega\\sqrt{1 - \\zeta^2}

    for ``zeta < 1`` (overshoot above 1 and ringing with period ``2 pi / omega_d``),
    :math:`1 - g = e^{-\\omega t}(1 + \\omega t)` at ``zeta = 1``, and the analytic continuation
    (cosh/sinh; two real decay rates) for ``zeta > 1``. One smooth expression for every ``zeta``
    (series near critical damping), finite with finite gradients everywhere.

    Source: damped-oscillator reduced-order model of GRPO training dynamics (arXiv 2606.30789).

    Parameters
    ----------
    t : array_like or TensorVariable
        Progress, ``t >= 0``.
    tau : array_like or TensorVariable
        Mean time to gain, ``int_0^inf (1 - g) dt = 2 zeta / omega`` (> 0): the ``tau`` of
        ``exp``, which this family tends to as ``zeta -> inf``.
    zeta : array_like or TensorVariable
        Damping ratio (> 0): ``< 1`` underdamped, ``1`` critical, ``> 1`` overdamped.

    Returns
    -------
    ndarray or TensorVariable
    """
    ops, t, (tau, zeta) = _inputs(t, tau=tau, zeta=zeta)
    _, x, c_term, s_term = _oscillator_terms(ops, t, tau, zeta)
    return 1.0 - (c_term + zeta * x * s_term)


def dg_dt_oscillator(t: ArrayLike, tau: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    """Derivative of :func:`g_oscillator` (the impulse response).

    .. math:: g'(t) = \\frac{\\omega}{\\sqrt{1-\\zeta^2}}\\, e^{-\\zeta\\omega t} \\sin(\\omega_d t)

    (and its continuation for ``zeta >= 1``); ``g'(0) = 0`` for every ``zeta``.
    """
    ops, t, (tau, zeta) = _inputs(t, tau=tau, zeta=zeta)
    omega, x, _, s_term = _oscillator_terms(ops, t, tau, zeta)
    return omega * x * s_term


def _oscillator_time_to_fraction(q: np.ndarray, tau: np.ndarray, zeta: np.ndarray,
                                 iterations: int = 64) -> np.ndarray:
    """First ``t`` with ``g_oscillator(t) = q``, by bisection vectorised over all elements.

    The bracket ``[0, hi]`` holds exactly one crossing: ``g`` rises monotonically up to its first
    peak at ``pi / omega_d`` (where ``g > 1 > q``) when ``zeta < 1``, and everywhere when
    ``zeta >= 1`` (``hi`` then found by doubling).
    """
    q, tau, zeta = np.broadcast_arrays(q, tau, zeta)
    omega = oscillator_omega(tau, zeta)
    under = zeta < 1.0
    damped_frequency = omega * np.sqrt(np.where(under, 1.0 - zeta**2, 1.0))
    hi = np.where(under, np.pi / damped_frequency, tau * (1.0 - np.log1p(-q)))
    for _ in range(2000):
        short = ~under & (g_oscillator(hi, tau, zeta) < q)
        if not np.any(short):
            break
        hi = np.where(short, 2.0 * hi, hi)
    else:  # pragma: no cover - g -> 1 > q, so doubling always ends
        raise BayesGRPOError("oscillator time_to_fraction: could not bracket the crossing.")
    return _bisect(g_oscillator, q, hi, (tau, zeta), iterations)


# --------------------------------------------------------------------------------------------
# two_timescale
# --------------------------------------------------------------------------------------------


def two_timescale_parts(odds: ArrayLike, ratio: ArrayLike, tau: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
    """The slow term's share ``s = odds / (1 + odds)`` and time constant ``tau (1 + ratio)``."""
    return odds / (1.0 + odds), tau * (1.0 + ratio)


def g_two_timescale(t: ArrayLike, tau: ArrayLike, k: ArrayLike, odds: ArrayLike, ratio: ArrayLike) -> ArrayLike:
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
    ops, t, (tau, k, odds, ratio) = _inputs(t, tau=tau, k=k, odds=odds, ratio=ratio)
    share, tau_slow = two_timescale_parts(odds, ratio, tau)
    z = ops.exp(_weibull_log_z(ops, t, tau, k))
    fast = ops.switch(t > 0, -ops.expm1(-z), 0.0)
    return (1.0 - share) * fast - share * ops.expm1(-t / tau_slow)


def dg_dt_two_timescale(t: ArrayLike, tau: ArrayLike, k: ArrayLike, odds: ArrayLike, ratio: ArrayLike) -> ArrayLike:
    """Derivative of :func:`g_two_timescale`: the two terms' rates weighted by their shares."""
    ops, t, (tau, k, odds, ratio) = _inputs(t, tau=tau, k=k, odds=odds, ratio=ratio)
    share, tau_slow = two_timescale_parts(odds, ratio, tau)
    log_z = _weibull_log_z(ops, t, tau, k)
    fast = ops.exp(ops.log(k) - ops.log_clipped(t) + log_z - ops.exp(log_z))
    return (1.0 - share) * fast + share * ops.exp(-t / tau_slow) / tau_slow


def _bisect(g: Callable[..., np.ndarray], q: np.ndarray, hi: np.ndarray, params: Sequence[np.ndarray],
            iterations: int) -> np.ndarray:
    """The ``t`` in ``[0, hi]`` where ``g(t, *params)`` crosses ``q``, by halving the bracket
    ``iterations`` times (vectorised; ``g`` below ``q`` at 0 and not below it at ``hi``)."""
    lo = np.zeros_like(hi)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        below = g(mid, *params) < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def _bisect_monotone(g: Callable[..., np.ndarray], q: np.ndarray, scale: np.ndarray, *params: np.ndarray,
                     iterations: int = 64) -> np.ndarray:
    """First ``t`` with ``g(t, *params) = q`` for a non-decreasing ``g`` with ``g(inf) = 1``.

    Vectorised over all elements: the bracket ``[0, hi]`` starts at ``scale`` and doubles where
    ``g(hi) < q``, then 64 halvings (float64 accuracy).
    """
    q, scale, *params = np.broadcast_arrays(q, scale, *params)
    hi = np.array(scale, dtype=float)
    for _ in range(2000):
        short = g(hi, *params) < q
        if not np.any(short):
            break
        hi = np.where(short, 2.0 * hi, hi)
    else:  # pragma: no cover - g -> 1 > q, so doubling always ends
        raise BayesGRPOError("time_to_fraction: could not bracket the crossing.")
    return _bisect(g, q, hi, params, iterations)


def _two_timescale_time_to_fraction(q: np.ndarray, tau: np.ndarray, k: np.ndarray, odds: np.ndarray,
                                    ratio: np.ndarray) -> np.ndarray:
    """First ``t`` with ``g_two_timescale(t) = q`` (``g`` is increasing: bisection)."""
    return _bisect_monotone(g_two_timescale, q, tau, tau, k, odds, ratio)


# --------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShapePrior:
    """Default prior of one shape parameter: ``log(param) ~ Normal(log_centre, log_scale)``.

    Set for a normalised progress axis on which the run's logged span is about 1.

    Attributes
    ----------
    log_centre : float
        Prior centre of ``log(param)`` (the prior median of ``param`` is ``exp(log_centre)``).
    log_scale : float
        Prior standard deviation of ``log(param)``.
    meaning : str
        What the parameter is, in one line.
    """

    log_centre: float
    log_scale: float
    meaning: str


@dataclass(frozen=True)
class CurveFamily:
    """One curve family: ``R(t) = R0 + (A - R0) g(t; shape)``.

    Attributes
    ----------
    name : str
        Registry key.
    shape_params : tuple of str
        Names of the shape parameters, the keyword arguments of ``g``, ``dg_dt`` and ``inverse``.
    g : callable
        ``g(t, **shape)``, numpy or PyTensor.
    dg_dt : callable
        ``dg/dt(t, **shape)``, numpy or PyTensor.
    inverse : callable or None
        ``inverse(q, **shape)``: the ``t`` at which ``g`` reaches ``q`` in (0, 1), in closed form;
        ``None`` when there is none (use :func:`time_to_fraction`, which solves numerically).
    monotone : bool
        Whether ``g`` is non-decreasing for every parameter value.
    formula : str
        ``g`` in plain text.
    citation : str
        Where the family comes from.
    doc : str
        One paragraph on what the family describes.
    priors : Mapping of str to ShapePrior
        Default prior of each shape parameter (log scale; normalised progress, span about 1).
    """

    name: str
    shape_params: tuple[str, ...]
    g: Callable[..., Any]
    dg_dt: Callable[..., Any]
    inverse: Callable[..., Any] | None
    monotone: bool
    formula: str
    citation: str
    doc: str
    priors: Mapping[str, ShapePrior]


def _priors(**priors: ShapePrior) -> Mapping[str, ShapePrior]:
    return MappingProxyType(dict(priors))


# Default priors, on a progress axis normalised so a run's logged span is about 1. Time-like
# parameters (tau, t_mid) are centred on 0.3 of the span with a log-scale sd of 1 (95% between
# about 0.04 and 2.1 spans: from "plateaued early" to "still rising at the end").
_TIME_PRIOR = ShapePrior(math.log(0.3), 1.0, "time scale, in units of the run's span")

CURVES: Mapping[str, CurveFamily] = MappingProxyType({
    "exp": CurveFamily(
        name="exp",
        shape_params=("tau",),
        g=g_exp,
        dg_dt=dg_dt_exp,
        inverse=inverse_exp,
        monotone=True,
        formula="g = 1 - exp(-t/tau)",
        citation="Exponential saturation of GRPO reward (arXiv 2507.18014); overdamped limit of "
                 "arXiv 2606.30789.",
        doc="Fastest gain at the start, geometric approach to the asymptote.",
        priors=_priors(tau=ShapePrior(_TIME_PRIOR.log_centre, 1.0,
                                      "time constant = area above the curve, span units")),
    ),
    "weibull": CurveFamily(
        name="weibull",
        shape_params=("tau", "k"),
        g=g_weibull,
        dg_dt=dg_dt_weibull,
        inverse=inverse_weibull,
        monotone=True,
        formula="g = 1 - exp(-(t/tau)^k)",
        citation="Weibull learning curve (Domhan et al. 2015); k > 1 gives slow start, rapid rise, "
                 "plateau.",
        doc="exp with a shape: k > 1 slow start then rapid rise, k < 1 fast start and long tail.",
        priors=_priors(
            tau=ShapePrior(_TIME_PRIOR.log_centre, 1.0, "scale: g(tau) = 1 - 1/e, span units"),
            k=ShapePrior(math.log(1.5), 0.5, "shape: 1 is exp, > 1 sigmoidal (95% in 0.56-4.0)"),
        ),
    ),
    "logistic": CurveFamily(
        name="logistic",
        shape_params=("t_mid", "B"),
        g=g_logistic,
        dg_dt=dg_dt_logistic,
        inverse=inverse_logistic,
        monotone=True,
        formula="g = 1 / (1 + (t_mid/t)^B)",
        citation="ScaleRL sigmoidal compute-performance curve (arXiv 2510.13786).",
        doc="Sigmoid in log progress; B = scaling efficiency, t_mid = half-gain point.",
        priors=_priors(
            t_mid=ShapePrior(_TIME_PRIOR.log_centre, 1.0, "half-gain point, span units"),
            B=ShapePrior(math.log(1.5), 0.5, "efficiency: steepness in log t (95% in 0.56-4.0)"),
        ),
    ),
    "power": CurveFamily(
        name="power",
        shape_params=("tau", "alpha"),
        g=g_power,
        dg_dt=dg_dt_power,
        inverse=inverse_power,
        monotone=True,
        formula="g = 1 - (1 + t/tau)^(-alpha)",
        citation="Power-law approach: log error linear in log compute (arXiv 2509.25300).",
        doc="Gap to the asymptote falls as a power of progress; initial time constant tau/alpha.",
        priors=_priors(
            tau=ShapePrior(_TIME_PRIOR.log_centre, 1.0, "offset where the power tail begins, span units"),
            alpha=ShapePrior(0.0, 0.7, "tail exponent (95% in 0.25-4.0)"),
        ),
    ),
    "oscillator": CurveFamily(
        name="oscillator",
        shape_params=("tau", "zeta"),
        g=g_oscillator,
        dg_dt=dg_dt_oscillator,
        inverse=None,
        monotone=False,
        formula="g'' + 2 zeta omega g' + omega^2 g = omega^2, g(0) = g'(0) = 0, omega = 2 zeta/tau",
        citation="Damped-oscillator reduced-order model of GRPO (arXiv 2606.30789).",
        doc="Second-order step response: overshoot and ringing for zeta < 1, exp(tau) as zeta -> inf.",
        priors=_priors(
            tau=ShapePrior(_TIME_PRIOR.log_centre, 1.0,
                           "mean time to gain = area above the curve (as exp's tau), span units"),
            zeta=ShapePrior(math.log(0.7), 0.75,
                            "damping ratio: < 1 rings, 1 critical (95% in 0.16-3.0)"),
        ),
    ),
    "two_timescale": CurveFamily(
        name="two_timescale",
        shape_params=("tau", "k", "odds", "ratio"),
        g=g_two_timescale,
        dg_dt=dg_dt_two_timescale,
        inverse=None,
        monotone=True,
        formula="g = (1 - s)(1 - exp(-(t/tau)^k)) + s (1 - exp(-t/tau_s)), s = odds/(1 + odds), "
                "tau_s = tau (1 + ratio)",
        citation="Weibull rise (Domhan et al. 2015) plus a slow saturating term; the fast-then-slow "
                 "gain of GRPO runs (arXiv 2507.18014's rapid phase followed by a long tail).",
        doc="A fast rise (Weibull) and a slow exponential climb with a share of the gain of its own.",
        priors=_priors(
            tau=ShapePrior(_TIME_PRIOR.log_centre, 1.0, "scale of the fast term, span units"),
            k=ShapePrior(math.log(1.5), 0.5, "shape of the fast term: 1 is exp, > 1 sigmoidal"),
            odds=ShapePrior(math.log(0.25), 1.0,
                            "odds of the slow term's share of the gain (share 95% in 0.03-0.64)"),
            ratio=ShapePrior(math.log(4.0), 1.0,
                             "tau_s / tau - 1: how much slower the slow term is (95% in 0.6-28)"),
        ),
    ),
})


#: The family ``RewardModel`` and the command line use unless told otherwise: a fast Weibull rise
#: with a slow second term. Against ``weibull`` on the bundled runs (``benchmarks/results/``):
#: 43 vs 35 of 60 demo runs inside their 90% interval, 90% coverage 85/85/84% vs 80/82/86% at the
#: 10/25/50% cuts, and a plateau rule that gives up no more than running to the end.
DEFAULT_CURVE = "two_timescale"


#: Numeric solvers of ``g(t) = q`` (first crossing) for the families without a closed form;
#: each takes ``(q, *shape_params)`` as numpy arrays in ``shape_params`` order.
_NUMERIC_INVERSE: Mapping[str, Callable[..., np.ndarray]] = MappingProxyType({
    "oscillator": _oscillator_time_to_fraction,
    "two_timescale": _two_timescale_time_to_fraction,
})


def get_curve(name: str) -> CurveFamily:
    """The curve family registered under ``name``.

    Raises
    ------
    BayesGRPOError
        For an unknown name; the message lists the valid ones.
    """
    try:
        return CURVES[name]
    except (KeyError, TypeError):
        valid = ", ".join(repr(n) for n in CURVES)
        raise BayesGRPOError(f"unknown curve family {name!r}; valid names: {valid}.") from None


def _shape_args(family: CurveFamily, shape: Mapping[str, ArrayLike]) -> dict[str, ArrayLike]:
    """Check that ``shape`` names exactly the family's shape parameters."""
    expected = set(family.shape_params)
    given = set(shape)
    if given != expected:
        missing = sorted(expected - given)
        unknown = sorted(given - expected)
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if unknown:
            parts.append(f"unknown {unknown}")
        raise BayesGRPOError(
            f"curve family {family.name!r} takes shape parameters {list(family.shape_params)}; "
            + " and ".join(parts) + "."
        )
    return {name: shape[name] for name in family.shape_params}


def reward_curve(family: str, t: ArrayLike, r0: ArrayLike, asymptote: ArrayLike,
                 **shape: ArrayLike) -> ArrayLike:
    """Reward curve :math:`R(t) = R_0 + (A - R_0)\\, g(t; \\theta)`.

    Parameters
    ----------
    family : str
        A name in :data:`CURVES`.
    t : array_like or TensorVariable
        Progress, ``t >= 0``.
    r0 : array_like or TensorVariable
        Reward at ``t = 0``.
    asymptote : array_like or TensorVariable
        Reward as ``t -> inf`` (may be below ``r0``: a falling curve).
    **shape
        The family's shape parameters (``CURVES[family].shape_params``), all > 0.

    Returns
    -------
    ndarray or TensorVariable
        Broadcast over all inputs: ``t`` of shape ``(n,)`` with parameters of shape
        ``(draws, 1)`` gives ``(draws, n)``.

    Raises
    ------
    BayesGRPOError
        Unknown family, missing or unknown shape parameter, or (numpy) invalid values.
    """
    curve = get_curve(family)
    g = curve.g(t, **_shape_args(curve, shape))
    return r0 + (asymptote - r0) * g


def gain_fraction_at_one(family: str, **shape: ArrayLike) -> ArrayLike:
    """``g(1)``: the fraction of the total gain reached at progress 1 (the run's horizon)."""
    curve = get_curve(family)
    args = _shape_args(curve, shape)
    first = next(iter(args.values()))
    one = first * 0 + 1.0  # a 1 of the parameters' kind and broadcast shape (numpy or tensor)
    return curve.g(one, **args)


#: Floor of g(1) when dividing by it: a curve whose knee lies astronomically far beyond its
#: horizon (g(1) underflows to 0) stays flat at its start instead of turning into 0/0.
_G1_FLOOR = 1e-12


def _floored_g1(family: str, args: dict[str, ArrayLike]) -> ArrayLike:
    g1 = gain_fraction_at_one(family, **args)
    return _ops(g1).maximum(g1, _G1_FLOOR)


def reward_curve_by_levels(family: str, t: ArrayLike, r0: ArrayLike, r1: ArrayLike,
                           **shape: ArrayLike) -> ArrayLike:
    r"""Reward curve written by its levels at ``t = 0`` and ``t = 1``:
    :math:`R(t) = R_0 + (R_1 - R_0)\, g(t) / g(1)`.

    The same curve as :func:`reward_curve` with asymptote
    ``A = R_0 + (R_1 - R_0) / g(1)`` (:func:`asymptote_from_levels`), parametrised so that its
    parameters are the ones data pin down: the start and the level at the horizon. A run that
    has not saturated by its horizon leaves ``A`` and ``tau`` on a curved ridge; ``R_1`` and
    ``tau`` are far less entangled, which is what lets NUTS sample it.
    """
    curve = get_curve(family)
    args = _shape_args(curve, shape)
    return r0 + (r1 - r0) * (curve.g(t, **args) / _floored_g1(family, args))


def asymptote_from_levels(family: str, r0: ArrayLike, r1: ArrayLike, **shape: ArrayLike) -> ArrayLike:
    """The asymptote ``A = R_0 + (R_1 - R_0) / g(1)`` of a curve given by its levels."""
    return r0 + (r1 - r0) / _floored_g1(family, _shape_args(get_curve(family), shape))


def reward_curve_dt(family: str, t: ArrayLike, r0: ArrayLike, asymptote: ArrayLike,
                    **shape: ArrayLike) -> ArrayLike:
    """Slope of the reward curve: :math:`R'(t) = (A - R_0)\\, g'(t; \\theta)`.

    Same arguments and broadcasting as :func:`reward_curve`.
    """
    curve = get_curve(family)
    return (asymptote - r0) * curve.dg_dt(t, **_shape_args(curve, shape))


def time_to_fraction(family: str, q: ArrayLike, **shape: ArrayLike) -> ArrayLike:
    """Progress at which a fraction ``q`` of the total gain is first reached: ``g(t_q) = q``.

    Closed form for ``exp``, ``weibull``, ``logistic`` and ``power`` (numpy or PyTensor). For
    ``oscillator`` the first crossing is found by bisection vectorised over all elements (numpy
    only; 64 halvings of a bracket on which ``g`` is monotone, so accurate to float64).

    Parameters
    ----------
    family : str
        A name in :data:`CURVES`.
    q : array_like
        Fraction of the gain, strictly between 0 and 1 (e.g. 0.8 for "t80").
    **shape
        The family's shape parameters; broadcast with ``q``.

    Returns
    -------
    ndarray or TensorVariable

    Raises
    ------
    BayesGRPOError
        Unknown family or shape parameter, ``q`` outside (0, 1), or PyTensor input for
        ``oscillator``.
    """
    curve = get_curve(family)
    params = _shape_args(curve, shape)
    if curve.inverse is not None:
        return curve.inverse(q, **params)
    ops, q_arr, values = _inverse_inputs(q, **params)
    if ops.is_tensor:
        raise BayesGRPOError(
            f"time_to_fraction for {family!r} is solved numerically and takes numpy arrays only; "
            "evaluate it on posterior draws."
        )
    return _NUMERIC_INVERSE[curve.name](q_arr, *values)
