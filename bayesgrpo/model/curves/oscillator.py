"""The damped-oscillator family of arXiv 2606.30789, parametrised by ``(tau, zeta)``.

The parametrisation and why it pools with ``exp`` are stated in :mod:`bayesgrpo.model.curves`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves.backend import ArrayLike, bisect_crossing, curve_inputs

# Oscillator: half-width of the band |y| <= _Y_EPS around critical damping (y = (zeta^2 - 1) x^2)
# where the series of cos/cosh is used; the truncation error there is below 1e-16.
_Y_EPS = 1e-3

# --------------------------------------------------------------------------------------------
# oscillator
# --------------------------------------------------------------------------------------------


def oscillator_omega(tau: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    r"""Natural frequency of the oscillator from its ``(tau, zeta)``: :math:`\\omega = 2\\zeta/\\tau`."""
    return 2.0 * zeta / tau


def oscillator_tau(omega: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    r"""``tau`` of the oscillator from natural frequency and damping: :math:`\\tau = 2\\zeta/\\omega`."""
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
    r"""Step response of a damped second-order system.

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
    ops, t, (tau, zeta) = curve_inputs(t, tau=tau, zeta=zeta)
    _, x, c_term, s_term = _oscillator_terms(ops, t, tau, zeta)
    return 1.0 - (c_term + zeta * x * s_term)


def dg_dt_oscillator(t: ArrayLike, tau: ArrayLike, zeta: ArrayLike) -> ArrayLike:
    r"""Derivative of :func:`g_oscillator` (the impulse response).

    .. math:: g'(t) = \\frac{\\omega}{\\sqrt{1-\\zeta^2}}\\, e^{-\\zeta\\omega t} \\sin(\\omega_d t)

    (and its continuation for ``zeta >= 1``); ``g'(0) = 0`` for every ``zeta``.
    """
    ops, t, (tau, zeta) = curve_inputs(t, tau=tau, zeta=zeta)
    omega, x, _, s_term = _oscillator_terms(ops, t, tau, zeta)
    return omega * x * s_term


def oscillator_time_to_fraction(
    q: np.ndarray, tau: np.ndarray, zeta: np.ndarray, iterations: int = 64
) -> np.ndarray:
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
    return bisect_crossing(g_oscillator, q, hi, (tau, zeta), iterations)
