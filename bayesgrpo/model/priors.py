"""Default priors of the reward-curve model, and merging the user's over them.

A run's curve is written by its levels (``curves.reward_curve_by_levels``): ``r0``, the reward
at ``t = 0``, and ``r1``, the reward at ``t = 1`` (the run's horizon for ``progress="step"``),
plus the family's shape parameters; the asymptote is derived. Every run parameter lives on an
unconstrained scale: ``r0`` and ``r1`` on the logit of the normalised reward (``y`` in [0, 1], see
``model.data``), ``tau`` and the shape parameters on
the log of normalised progress (``t`` = 1 at the run's horizon for ``progress="step"``), the
noise on the log of its scale in normalised reward units. For each curve parameter ``p``:

================== ===========================================================
``p_mu``            population mean of ``p``
``p_sd``            spread of runs around their family/task/covariate mean
``p_family_sd``     spread of family means around ``p_mu``
``p_task_sd``       spread of task means around ``p_mu``
``p_size_slope``    change of ``p`` per standard deviation of log model size
``p_r0_slope``      change of ``p`` per unit of the run's logit start (not for ``r0``)
``p_data_offset``   (``r0``, ``r1`` only) level of the runs normalised by their own observed
                    range instead of a stated ``reward_min``/``reward_max`` (``model.build``)
================== ===========================================================

and for the noise: ``sigma_mu``, ``sigma_sd``, ``sigma_data_offset`` (runs normalised by their own
range), ``sigma_samples_slope`` (per standard deviation
of log samples per step: -0.5 * its scale is "noise falls as 1/sqrt(samples)"), ``nu`` (Student-t
degrees of freedom, minus one).

Priors are ``pymc_extras.prior.Prior`` objects: typed, serialisable to JSON (``to_dict``), and
never mutated. A name that matches nothing raises, listing the valid names.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from pymc_extras.prior import Prior

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import get_curve
from bayesgrpo.model.structure import curve_params


def _spread(mean: float) -> Prior:
    """Prior of a between-run spread: Gamma(2, 2/mean), which has mean ``mean`` and density 0
    at 0. Runs genuinely differ, and a spread free to collapse to 0 opens a funnel that NUTS
    cannot enter (measured on the bundled verl runs: hundreds of divergences with HalfNormal).
    """
    return Prior("Gamma", alpha=2.0, beta=2.0 / mean)


def default_priors(curve: str) -> dict[str, Prior]:
    """The default priors of a curve family's model, by name.

    Parameters
    ----------
    curve : str
        A key of ``bayesgrpo.model.curves.CURVES``.

    Returns
    -------
    dict of str to Prior
    """
    family = get_curve(curve)
    priors: dict[str, Prior] = {
        # logit of the normalised start: most runs start in the lower half of their range
        "r0_mu": Prior("Normal", mu=-0.5, sigma=1.5),
        "r0_sd": _spread(1.0),
        # logit of the normalised level at the horizon: runs mostly end above where they start
        "r1_mu": Prior("Normal", mu=0.5, sigma=1.5),
        "r1_sd": _spread(1.0),
        # levels of runs normalised by their own observed range (widened by bounds_margin): by
        # construction they start near one quarter of it and end near three quarters
        "r0_data_offset": Prior("Normal", mu=0.0, sigma=1.5),
        "r1_data_offset": Prior("Normal", mu=0.0, sigma=1.5),
    }
    for name, shape_prior in family.priors.items():
        priors[f"{name}_mu"] = Prior("Normal", mu=shape_prior.log_centre, sigma=shape_prior.log_scale)
        priors[f"{name}_sd"] = _spread(shape_prior.log_scale)
    for name in curve_params(curve):
        priors[f"{name}_family_sd"] = Prior("HalfNormal", sigma=0.5)
        priors[f"{name}_task_sd"] = Prior("HalfNormal", sigma=0.5)
        priors[f"{name}_size_slope"] = Prior("Normal", mu=0.0, sigma=0.5)
        if name != "r0":
            # the end level follows the start closely (logit r1 - logit r0 pools); shapes barely
            centre = 1.0 if name == "r1" else 0.0
            priors[f"{name}_r0_slope"] = Prior("Normal", mu=centre, sigma=0.5)
    priors.update(
        {
            # log noise scale in normalised units: about 0.05 of the range, wide
            "sigma_mu": Prior("Normal", mu=-3.0, sigma=1.0),
            "sigma_sd": _spread(0.7),
            "sigma_samples_slope": Prior("Normal", mu=-0.3, sigma=0.3),
            # noise of runs normalised by their own range: their range is partly their noise
            "sigma_data_offset": Prior("Normal", mu=0.0, sigma=1.0),
            # Student-t degrees of freedom minus one (Juarez & Steel 2010)
            "nu": Prior("Gamma", alpha=2.0, beta=0.1),
        }
    )
    return priors


def merge_priors(curve: str, given: Mapping[str, Any] | None) -> dict[str, Prior]:
    """Defaults with the user's priors over them; a name that matches nothing is an error.

    Parameters
    ----------
    curve : str
    given : mapping of str to Prior (or its ``to_dict()`` form), optional

    Raises
    ------
    BayesGRPOError
        When a name is not a prior of this model, or a value is not a Prior.
    """
    priors = default_priors(curve)
    if not given:
        return priors
    unknown = sorted(set(given) - set(priors))
    if unknown:
        hints = {name: difflib.get_close_matches(name, list(priors), n=1) for name in unknown}
        hint_text = "; ".join(f"{name!r} -> did you mean {h[0]!r}?" for name, h in hints.items() if h)
        raise BayesGRPOError(
            f"unknown prior name(s) {unknown} for curve {curve!r}. {hint_text} Valid names: {sorted(priors)}"
        )
    for name, value in given.items():
        if isinstance(value, Mapping):
            value = Prior.from_dict(dict(value))
        if not isinstance(value, Prior):
            raise BayesGRPOError(
                f"prior {name!r} must be a pymc_extras.prior.Prior, got {type(value).__name__}"
            )
        priors[name] = value
    return priors


def priors_to_dict(priors: Mapping[str, Prior]) -> dict[str, Any]:
    """Canonical JSON-ready form (sorted keys)."""
    return {name: priors[name].to_dict() for name in sorted(priors)}


def priors_from_dict(data: Mapping[str, Any]) -> dict[str, Prior]:
    """Inverse of :func:`priors_to_dict`."""
    return {name: Prior.from_dict(dict(value)) for name, value in data.items()}
