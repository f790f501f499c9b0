r"""Curve families of reward against training progress.

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

from bayesgrpo.model.curves.families import (
    dg_dt_exp,
    dg_dt_logistic,
    dg_dt_power,
    dg_dt_weibull,
    g_exp,
    g_logistic,
    g_power,
    g_weibull,
    inverse_exp,
    inverse_logistic,
    inverse_power,
    inverse_weibull,
)
from bayesgrpo.model.curves.oscillator import dg_dt_oscillator, g_oscillator, oscillator_omega, oscillator_tau
from bayesgrpo.model.curves.registry import (
    CURVES,
    DEFAULT_CURVE,
    CurveFamily,
    ShapePrior,
    asymptote_from_levels,
    gain_fraction_at_one,
    get_curve,
    reward_curve,
    reward_curve_by_levels,
    reward_curve_dt,
    time_to_fraction,
)
from bayesgrpo.model.curves.two_timescale import dg_dt_two_timescale, g_two_timescale, two_timescale_parts

__all__ = [
    "CURVES",
    "CurveFamily",
    "DEFAULT_CURVE",
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
