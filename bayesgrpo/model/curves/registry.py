"""The registered curve families, their default priors, and functions of a family by name.

:data:`CURVES` maps a name to its :class:`CurveFamily` (functions, shape parameters and their
:class:`ShapePrior`), :func:`get_curve` looks one up, and :func:`reward_curve`,
:func:`reward_curve_by_levels`, :func:`asymptote_from_levels`, :func:`time_to_fraction` work on any
family.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves.backend import ArrayLike, array_ops, inverse_inputs
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
from bayesgrpo.model.curves.oscillator import dg_dt_oscillator, g_oscillator, oscillator_time_to_fraction
from bayesgrpo.model.curves.two_timescale import (
    dg_dt_two_timescale,
    g_two_timescale,
    two_timescale_time_to_fraction,
)

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

CURVES: Mapping[str, CurveFamily] = MappingProxyType(
    {
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
            priors=_priors(
                tau=ShapePrior(
                    _TIME_PRIOR.log_centre, 1.0, "time constant = area above the curve, span units"
                )
            ),
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
                tau=ShapePrior(
                    _TIME_PRIOR.log_centre,
                    1.0,
                    "mean time to gain = area above the curve (as exp's tau), span units",
                ),
                zeta=ShapePrior(
                    math.log(0.7), 0.75, "damping ratio: < 1 rings, 1 critical (95% in 0.16-3.0)"
                ),
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
                odds=ShapePrior(
                    math.log(0.25), 1.0, "odds of the slow term's share of the gain (share 95% in 0.03-0.64)"
                ),
                ratio=ShapePrior(
                    math.log(4.0), 1.0, "tau_s / tau - 1: how much slower the slow term is (95% in 0.6-28)"
                ),
            ),
        ),
    }
)


#: The family ``RewardModel`` and the command line use unless told otherwise: a fast Weibull rise
#: with a slow second term. Against ``weibull`` on the bundled runs (``benchmarks/results/``):
#: 43 vs 35 of 60 demo runs inside their 90% interval, 90% coverage 85/85/84% vs 80/82/86% at the
#: 10/25/50% cuts, and a plateau rule that gives up no more than running to the end.
DEFAULT_CURVE = "two_timescale"


#: Numeric solvers of ``g(t) = q`` (first crossing) for the families without a closed form;
#: each takes ``(q, *shape_params)`` as numpy arrays in ``shape_params`` order.
_NUMERIC_INVERSE: Mapping[str, Callable[..., np.ndarray]] = MappingProxyType(
    {
        "oscillator": oscillator_time_to_fraction,
        "two_timescale": two_timescale_time_to_fraction,
    }
)


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
            + " and ".join(parts)
            + "."
        )
    return {name: shape[name] for name in family.shape_params}


def reward_curve(
    family: str, t: ArrayLike, r0: ArrayLike, asymptote: ArrayLike, **shape: ArrayLike
) -> ArrayLike:
    r"""Reward curve :math:`R(t) = R_0 + (A - R_0)\\, g(t; \\theta)`.

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
    return array_ops(g1).maximum(g1, _G1_FLOOR)


def reward_curve_by_levels(
    family: str, t: ArrayLike, r0: ArrayLike, r1: ArrayLike, **shape: ArrayLike
) -> ArrayLike:
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


def reward_curve_dt(
    family: str, t: ArrayLike, r0: ArrayLike, asymptote: ArrayLike, **shape: ArrayLike
) -> ArrayLike:
    r"""Slope of the reward curve: :math:`R'(t) = (A - R_0)\\, g'(t; \\theta)`.

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
    ops, q_arr, values = inverse_inputs(q, **params)
    if ops.is_tensor:
        raise BayesGRPOError(
            f"time_to_fraction for {family!r} is solved numerically and takes numpy arrays only; "
            "evaluate it on posterior draws."
        )
    return _NUMERIC_INVERSE[curve.name](q_arr, *values)
