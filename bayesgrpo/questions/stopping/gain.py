"""The gain still to come: how much, how likely below ``eps``, and when a share of it is made.

For a run at step ``s`` with horizon ``T``: :func:`remaining_gain` (draws of ``R(T) - R(s)``),
:func:`prob_gain_below`, :func:`expected_gain` with an equal-tailed interval, and
:func:`steps_to_fraction` (the step at which 80 / 90 / 95% of the total gain ``A - R0`` is first
reached). The checks of the questions' inputs (:func:`checked_steps`, :func:`check_prob`, ...)
are shared with the rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import time_to_fraction
from bayesgrpo.model.draws import CurveDraws, gain_share, per_run

#: Fractions of the total gain of :func:`steps_to_fraction` ("t80", "t90", "t95").
DEFAULT_FRACTIONS: tuple[float, ...] = (0.8, 0.9, 0.95)

# --------------------------------------------------------------------------------------------
# Checks of the question's inputs
# --------------------------------------------------------------------------------------------


def checked_steps(cd: CurveDraws, step_now: Any, horizon_step: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(s, T)`` per run, each (R,), checked: finite, ``0 <= s <= T``."""
    if horizon_step is None:
        if cd.horizon_step is None:
            raise BayesGRPOError("no horizon: pass horizon_step=... (the step the run is planned to end at).")
        horizon_step = cd.horizon_step
    s = per_run(step_now, cd.n_runs, "step_now")
    T = per_run(horizon_step, cd.n_runs, "horizon_step")
    for name, value in (("step_now", s), ("horizon_step", T)):
        if not np.all(np.isfinite(value) & (value >= 0)):
            raise BayesGRPOError(f"{name} must be finite and >= 0; got {value}.")
    past = np.flatnonzero(s > T)
    if past.size:
        i = past[0]
        assert cd.run_ids is not None  # set by CurveDraws.__post_init__
        raise BayesGRPOError(
            f"step_now={s[i]:g} is past the horizon {T[i]:g} of run {cd.run_ids[i]!r}; "
            "pass a horizon_step at or after the current step."
        )
    return s, T


def check_prob(value: float, name: str) -> float:
    """``value`` as a float, checked to lie strictly between 0 and 1."""
    value = float(value)
    if not 0.0 < value < 1.0:
        raise BayesGRPOError(f"{name} must lie strictly between 0 and 1; got {value:g}.")
    return value


def check_eps(eps: float, name: str = "eps") -> float:
    """``eps`` as a float, checked to be finite and at least 0 (``name``: what the error calls it)."""
    eps = float(eps)
    if not (math.isfinite(eps) and eps >= 0):
        raise BayesGRPOError(
            f"{name} must be a finite number >= 0 (a gain: reward units, or a share of the reward range "
            f"where the rule is relative); got {eps:g}."
        )
    return eps


def check_fractions(fractions: Sequence[float] | np.ndarray) -> np.ndarray:
    """Fractions of the gain as an array, each checked to lie strictly between 0 and 1."""
    q = np.atleast_1d(np.asarray(fractions, dtype=float))
    if q.ndim != 1 or q.size == 0 or not np.all((q > 0) & (q < 1)):
        raise BayesGRPOError(f"fractions of the gain must lie strictly between 0 and 1; got {list(q)}.")
    return q


def remaining_gain(cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> np.ndarray:
    """Draws of the gain still to come, ``R(T) - R(s)``.

    Parameters
    ----------
    cd : CurveDraws
    step_now : float or array of shape (R,)
        The current step ``s`` of each run.
    horizon_step : float or array of shape (R,), optional
        The horizon ``T``; default ``cd.horizon_step``.

    Returns
    -------
    ndarray, shape (S, R)
        In reward units; negative where the curve falls between ``s`` and ``T`` (a falling run,
        or an oscillator coming back from an overshoot).

    Raises
    ------
    BayesGRPOError
        Negative or non-finite steps, ``step_now`` past the horizon, or no horizon.
    """
    s, T = checked_steps(cd, step_now, horizon_step)
    return cd.total_gain * (gain_share(cd, cd.to_t(T)) - gain_share(cd, cd.to_t(s)))


def eps_per_run(cd: CurveDraws, eps: float, relative: bool) -> np.ndarray:
    """``eps`` per run in reward units: relative to each run's reward range when ``relative``."""
    eps = check_eps(eps)
    return eps * np.asarray(cd.reward_scale) if relative else np.full(cd.n_runs, eps)


def prob_gain_below(
    cd: CurveDraws,
    step_now: Any,
    horizon_step: Any = None,
    *,
    eps: float,
    relative: bool = False,
) -> np.ndarray:
    """``P(R(T) - R(s) < eps)`` per run: the posterior probability that the run is done improving.

    Parameters
    ----------
    cd, step_now, horizon_step
        As :func:`remaining_gain`.
    eps : float
        Gain that counts as nothing, ``>= 0``, in reward units (or a fraction of each run's
        ``reward_scale`` when ``relative``).
    relative : bool

    Returns
    -------
    ndarray, shape (R,)
    """
    gain = remaining_gain(cd, step_now, horizon_step)
    return (gain < eps_per_run(cd, eps, relative)[None, :]).mean(axis=0)


def interval_bounds(draws: np.ndarray, interval: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and equal-tailed ``interval`` over the first axis."""
    interval = check_prob(interval, "interval")
    tail = (1.0 - interval) / 2.0
    lower, upper = np.quantile(draws, [tail, 1.0 - tail], axis=0)
    return draws.mean(axis=0), lower, upper


def expected_gain(
    cd: CurveDraws, step_now: Any, horizon_step: Any = None, *, interval: float = 0.9
) -> pd.DataFrame:
    """Expected remaining gain ``E[R(T) - R(s)]`` per run, with an equal-tailed interval.

    Returns
    -------
    DataFrame
        One row per run: ``run_id, step, horizon_step, mean, lower, upper`` (``lower``/``upper``
        the ``(1 - interval)/2`` and ``(1 + interval)/2`` quantiles), gains in reward units.
    """
    s, T = checked_steps(cd, step_now, horizon_step)
    mean, lower, upper = interval_bounds(remaining_gain(cd, s, T), interval)
    assert cd.run_ids is not None  # set by CurveDraws.__post_init__
    return pd.DataFrame(
        {
            "run_id": list(cd.run_ids),
            "step": s,
            "horizon_step": T,
            "mean": mean,
            "lower": lower,
            "upper": upper,
        }
    )


# --------------------------------------------------------------------------------------------
# Steps to a fraction of the total gain
# --------------------------------------------------------------------------------------------


def fraction_step_draws(
    cd: CurveDraws, fractions: Sequence[float] | np.ndarray = DEFAULT_FRACTIONS
) -> np.ndarray:
    """Draws of the first step at which each fraction of the total gain ``A - R0`` is reached.

    ``g(t_q) = q`` (:func:`bayesgrpo.model.curves.time_to_fraction`): the first crossing, which for an
    oscillator that overshoots is on its first rise. The same for a falling curve (the fraction
    of its loss).

    Returns
    -------
    ndarray, shape (S, R, F)
        Steps, ``F = len(fractions)``; ``inf`` for a draw whose step overflows float64 (a
        curve that all but never gets there).
    """
    q = check_fractions(fractions)
    shape = {name: value[:, :, None] for name, value in cd.shape.items()}
    with np.errstate(over="ignore"):  # a draw that never gets there within float range: inf
        t_q = time_to_fraction(cd.curve, q[None, None, :], **shape)
        return np.asarray(t_q) * np.asarray(cd.step_scale)[None, :, None] + cd.step_offset


def steps_to_fraction(
    cd: CurveDraws,
    fractions: Sequence[float] = DEFAULT_FRACTIONS,
    *,
    interval: float = 0.9,
    horizon_step: Any = None,
) -> pd.DataFrame:
    """Step at which 80 / 90 / 95% (``fractions``) of each run's total gain is first reached.

    Parameters
    ----------
    cd : CurveDraws
    fractions : sequence of float
        Fractions of the total gain ``A - R0``, each strictly between 0 and 1.
    interval : float
        Probability mass of the equal-tailed interval.
    horizon_step : float or array of shape (R,), optional
        Horizon to compare with; default ``cd.horizon_step`` (none: NaN in the last column).

    Returns
    -------
    DataFrame
        One row per run and fraction: ``run_id, fraction, median, lower, upper, horizon_step,
        prob_beyond_horizon`` (the posterior probability that the step lies after the horizon).
    """
    q = check_fractions(fractions)
    steps = fraction_step_draws(cd, q)
    interval = check_prob(interval, "interval")
    tail = (1.0 - interval) / 2.0
    lower, median, upper = np.quantile(steps, [tail, 0.5, 1.0 - tail], axis=0)
    if horizon_step is None:
        horizon_step = cd.horizon_step
    if horizon_step is None:
        horizon = np.full(cd.n_runs, np.nan)
        beyond = np.full((cd.n_runs, q.size), np.nan)
    else:
        horizon = per_run(horizon_step, cd.n_runs, "horizon_step")
        beyond = (steps > horizon[None, :, None]).mean(axis=0)
    n_q = q.size
    return pd.DataFrame(
        {
            "run_id": np.repeat(np.array(cd.run_ids, dtype=object), n_q),
            "fraction": np.tile(q, cd.n_runs),
            "median": median.ravel(),
            "lower": lower.ravel(),
            "upper": upper.ravel(),
            "horizon_step": np.repeat(horizon, n_q),
            "prob_beyond_horizon": beyond.ravel(),
        }
    )
