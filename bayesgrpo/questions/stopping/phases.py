"""Phases of a reward curve (slow start, rapid improvement, plateau) with their probabilities.

The rule that assigns a phase is stated in :mod:`bayesgrpo.questions.stopping`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import get_curve, time_to_fraction
from bayesgrpo.model.draws import CurveDraws, gain_share, gain_share_rate, per_run

#: The phases, in the order a rising curve goes through them (codes of :func:`phase_draws`).
PHASES: tuple[str, ...] = ("slow_start", "rapid", "plateau")
#: Relative rate ``g'(t) / g'(t_peak)`` below which a run is in its slow start (before the peak)
#: or on its plateau (after it). For ``exp`` the plateau then starts at 80.2% of the gain.
LOW_RATE = 0.2
#: Share of the total gain a run must have made to be on its plateau: a long-tailed curve whose
#: rate has fallen but which has most of its gain ahead (Weibull ``k < 1``, power with a small
#: exponent) is not called a plateau.
PLATEAU_MIN_GAIN = 0.5
#: The peak rate is searched from the progress at which this share of the gain is made, which
#: keeps it finite where ``g'(0)`` is infinite and changes it by at most 1% where the rate is
#: largest at ``t = 0``.
PEAK_FROM_GAIN = 0.01

# Half-width of the band around critical damping where the oscillator's peak-rate time uses its
# series (the truncation error there is below 1e-12).
_CRITICAL_BAND = 1e-6

# --------------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------------


def _argmax_on(fun: Any, upper: np.ndarray, n_grid: int = 65, iterations: int = 40) -> np.ndarray:
    """Elementwise argmax of ``fun`` over ``[0, upper]``: a grid, then golden-section search
    between the grid neighbours of the best grid point (vectorised over all elements).
    """
    upper = np.asarray(upper, dtype=float)
    grid = np.linspace(0.0, 1.0, n_grid).reshape((n_grid,) + (1,) * upper.ndim) * upper
    best = np.argmax(fun(grid), axis=0)
    spacing = upper / (n_grid - 1)
    lo = np.maximum(np.take_along_axis(grid, best[None], axis=0)[0] - spacing, 0.0)
    hi = np.minimum(lo + 2.0 * spacing, upper)
    ratio = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(iterations):
        a = hi - ratio * (hi - lo)
        b = lo + ratio * (hi - lo)
        left = fun(a) >= fun(b)
        hi = np.where(left, b, hi)
        lo = np.where(left, lo, a)
    return 0.5 * (lo + hi)


def _rate_mode(curve: str, shape: Mapping[str, np.ndarray]) -> np.ndarray:
    """Progress at which ``g'`` is largest over ``t >= 0`` (0 where it is largest at ``t = 0``)."""
    if curve in ("exp", "power"):
        return np.zeros_like(next(iter(shape.values())))
    if curve in ("weibull", "two_timescale"):
        tau, k = shape["tau"], shape["k"]
        # mode of the Weibull density: tau ((k - 1)/k)^(1/k) for k > 1
        weibull_mode = np.where(k > 1, tau * (np.maximum(k - 1.0, 0.0) / k) ** (1.0 / k), 0.0)
        if curve == "weibull":
            return weibull_mode
        # adding the slow term's decreasing rate moves the mode earlier, into [0, weibull_mode]
        return _argmax_on(lambda t: get_curve(curve).dg_dt(t, **shape), weibull_mode)
    if curve == "logistic":
        t_mid, B = shape["t_mid"], shape["B"]
        # d/dt log g' = 0  <=>  (t/t_mid)^B = (B - 1)/(B + 1), for B > 1
        return np.where(B > 1, t_mid * (np.maximum(B - 1.0, 0.0) / (B + 1.0)) ** (1.0 / B), 0.0)
    if curve == "oscillator":
        tau, zeta = shape["tau"], shape["zeta"]
        omega = 2.0 * zeta / tau
        # g' ~ exp(-zeta omega t) sin(omega_d t): peak at acos(zeta) / (omega sqrt(1 - zeta^2)),
        # continued as acosh(zeta) / (omega sqrt(zeta^2 - 1)) above critical damping, 1/omega at it.
        d = 1.0 - zeta**2
        under = np.arccos(np.clip(zeta, -1.0, 1.0)) / np.sqrt(np.maximum(d, _CRITICAL_BAND))
        over = np.arccosh(np.maximum(zeta, 1.0)) / np.sqrt(np.maximum(-d, _CRITICAL_BAND))
        near = 1.0 + (1.0 - zeta) / 3.0
        factor = np.where(d > _CRITICAL_BAND, under, np.where(d < -_CRITICAL_BAND, over, near))
        return factor / omega
    raise BayesGRPOError(
        f"phase: no peak rate defined for curve family {curve!r}; add it to stopping._rate_mode."
    )


def rate_peak_time(curve: str, **shape: np.ndarray) -> np.ndarray:
    """Progress ``t_peak`` of a curve's fastest gain, as used by the phases.

    The mode of ``g'`` (closed form for every family), but no earlier than the progress at which
    :data:`PEAK_FROM_GAIN` of the gain is made. ``g'`` is unimodal in every family (the
    oscillator's later peaks are lower than its first), so ``g'(t_peak)`` is the largest rate
    over ``t >= t_{PEAK_FROM_GAIN}``.

    Parameters
    ----------
    curve : str
    **shape : ndarray
        The family's shape parameters (broadcast together).

    Returns
    -------
    ndarray
    """
    family = get_curve(curve)
    values = dict(
        zip(
            family.shape_params,
            np.broadcast_arrays(*(np.asarray(shape[name], dtype=float) for name in family.shape_params)),
            strict=True,
        )
    )
    peak = np.array(_rate_mode(curve, values), dtype=float)
    # g rises up to the mode of g', so the mode is early exactly where g(mode) < PEAK_FROM_GAIN;
    # solving g(t) = PEAK_FROM_GAIN only there saves the oscillator's bisection elsewhere
    early = family.g(peak, **values) < PEAK_FROM_GAIN
    if np.any(early):
        subset = {name: value[early] for name, value in values.items()}
        peak[early] = time_to_fraction(curve, PEAK_FROM_GAIN, **subset)
    return peak


def _phase_parts(cd: CurveDraws, step_now: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per draw and run: phase codes (indices of :data:`PHASES`), ``g(s)`` and ``rho(s)``."""
    s = per_run(step_now, cd.n_runs, "step_now")
    if not np.all(np.isfinite(s) & (s >= 0)):
        raise BayesGRPOError(f"step_now must be finite and >= 0; got {s}.")
    t = np.broadcast_to(cd.to_t(s)[None, :], (cd.n_draws, cd.n_runs))
    t_peak = rate_peak_time(cd.curve, **cd.shape)
    with np.errstate(divide="ignore", invalid="ignore"):  # a degenerate draw (0/0) counts as rapid
        rho = gain_share_rate(cd, t) / gain_share_rate(cd, t_peak)
    share = gain_share(cd, cd.to_t(s))
    low = rho < LOW_RATE
    before = t < t_peak
    codes = np.full(t.shape, PHASES.index("rapid"), dtype=np.int8)
    codes[low & before] = PHASES.index("slow_start")
    codes[low & ~before & (share >= PLATEAU_MIN_GAIN)] = PHASES.index("plateau")
    return codes, share, rho


def phase_draws(cd: CurveDraws, step_now: Any) -> np.ndarray:
    """Phase of each draw of each run at ``step_now``: codes into :data:`PHASES`, shape (S, R).

    See the module docstring for the definition and :data:`LOW_RATE`, :data:`PLATEAU_MIN_GAIN`,
    :data:`PEAK_FROM_GAIN` for its thresholds.
    """
    return _phase_parts(cd, step_now)[0]


def phase(cd: CurveDraws, step_now: Any) -> pd.DataFrame:
    """Current phase of each run (slow start, rapid improvement, plateau) with its probability.

    Parameters
    ----------
    cd : CurveDraws
    step_now : float or array of shape (R,)

    Returns
    -------
    DataFrame
        One row per run: ``run_id, step``, the probability of each phase (columns named as
        :data:`PHASES`), ``phase`` (the most probable), ``probability`` (its probability) and
        ``gain_share`` (posterior mean of the share of the total gain made, ``g(s)``).
    """
    codes, share, _ = _phase_parts(cd, step_now)
    probs = np.stack([(codes == i).mean(axis=0) for i in range(len(PHASES))], axis=1)  # (R, 3)
    best = probs.argmax(axis=1)
    assert cd.run_ids is not None  # set by CurveDraws.__post_init__
    frame = pd.DataFrame({"run_id": list(cd.run_ids), "step": per_run(step_now, cd.n_runs, "step_now")})
    for i, name in enumerate(PHASES):
        frame[name] = probs[:, i]
    frame["phase"] = [PHASES[i] for i in best]
    frame["probability"] = probs[np.arange(cd.n_runs), best]
    frame["gain_share"] = share.mean(axis=0)
    return frame
