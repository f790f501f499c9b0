"""Whether a run's own latest logged points still rise: what a plateau claim must not contradict.

A saturating curve fitted through a steep rise can read the rise's last points as its shoulder
and be sure of a plateau the run then climbs past (traced on held-out verl runs: P(gain < 1% of
the range) = 0.93 at 10% of a PPO run that had just risen from 0 to 0.5 and went on to gain 0.2;
``benchmarks/experiments/README.md: stop_momentum``). The run's points say otherwise, and cheaply: the
least-squares slope of the logged reward over the run's latest :data:`RISE_WINDOW` of its steps,
with its standard error. :class:`~bayesgrpo.questions.stopping.budget.GuardedBudgetRule` holds a
stop while the rise over that window, at its one-sided lower bound, exceeds its ``rising_eps``.

The counterpart, asked only when a user opts in (``GuardedBudgetRule(flat_eps=...)``): over a longer
window (:data:`FLAT_WINDOW`), the rise at its one-sided *upper* bound below ``flat_eps`` says the run
no longer climbs, which a curve that expects a rise (a population whose runs on a stated range
all climbed) does not see (``benchmarks/experiments/README.md: stop_flat_evidence``).

Pure functions of logged points; the live update attaches the result to its
:class:`~bayesgrpo.model.draws.CurveDraws` (``recent_rise``, ``recent_rise_se``, ``long_rise``,
``long_rise_se``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from bayesgrpo.model.draws import CurveDraws

#: The latest share of a run (of its horizon in steps) whose rise is read.
RISE_WINDOW = 0.1
#: One-sided normal quantile of the lower bound a rise is held to (95%).
RISE_Z = 1.645
#: The latest share of a run whose rise a flat stop reads: longer than :data:`RISE_WINDOW`, so that
#: a dip is not read as a flat run.
FLAT_WINDOW = 0.2
#: Fewest logged points in the window for its slope to be read.
MIN_RISE_POINTS = 5


@dataclass(frozen=True)
class RecentRise:
    """The rise of a run's logged reward over its latest window of steps.

    Attributes
    ----------
    rise : float
        Least-squares slope of the logged reward over the window times the window's length in
        steps: the rise a straight line through the window's points makes across it, in reward
        units (NaN: fewer than :data:`MIN_RISE_POINTS` points, or all at one step).
    se : float
        Its standard error (from the residuals about the line; NaN with ``rise``).
    n_points : int
        Logged points in the window.
    window_steps : float
        The window's length in steps.
    """

    rise: float
    se: float
    n_points: int
    window_steps: float

    def lower(self, z: float = RISE_Z) -> float:
        """The rise's one-sided lower bound, ``rise - z se`` (NaN when unknown)."""
        return self.rise - z * self.se


def recent_rise(
    steps: np.ndarray, reward: np.ndarray, horizon_step: float, window: float = RISE_WINDOW
) -> RecentRise:
    """The rise of the logged reward over the latest ``window`` of a run's horizon.

    Parameters
    ----------
    steps, reward : ndarray
        The run's logged points so far (non-finite rewards are left out).
    horizon_step : float
        The run's horizon in steps (its planned end): the window is ``window x horizon_step``
        steps, ending at the latest logged step.
    window : float
        Share of the horizon, in (0, 1].

    Returns
    -------
    RecentRise
    """
    steps = np.asarray(steps, dtype=float)
    reward = np.asarray(reward, dtype=float)
    keep = np.isfinite(steps) & np.isfinite(reward)
    steps, reward = steps[keep], reward[keep]
    width = float(window) * float(horizon_step)
    if steps.size == 0 or not width > 0:
        return RecentRise(np.nan, np.nan, 0, max(width, 0.0))
    inside = steps > steps.max() - width
    x, y = steps[inside], reward[inside]
    if x.size < MIN_RISE_POINTS or np.ptp(x) <= 0:
        return RecentRise(np.nan, np.nan, int(x.size), width)
    centred = x - x.mean()
    sxx = float(centred @ centred)
    slope = float(centred @ (y - y.mean())) / sxx
    residual = y - y.mean() - slope * centred
    se = float(np.sqrt(float(residual @ residual) / (x.size - 2) / sxx))
    return RecentRise(slope * width, se * width, int(x.size), width)


def with_recent_rise(cd: CurveDraws, points: pd.DataFrame) -> CurveDraws:
    """``cd`` with each run's :func:`recent_rise` attached: over :data:`RISE_WINDOW`
    (``recent_rise``, ``recent_rise_se``) and over :data:`FLAT_WINDOW` (``long_rise``,
    ``long_rise_se``).

    Parameters
    ----------
    cd : CurveDraws
        Draws with ``horizon_step`` (the window is a share of it); without one nothing is attached.
    points : DataFrame
        Logged points (``run_id``, ``step``, ``reward``), e.g. a :class:`RunsTable`'s ``points``.
        A run without points gets NaN (no evidence either way).

    Returns
    -------
    CurveDraws
    """
    if cd.horizon_step is None:
        return cd
    run_ids = points["run_id"].astype(str).to_numpy()
    steps = points["step"].to_numpy(dtype=float)
    reward = points["reward"].to_numpy(dtype=float)
    horizons = np.asarray(cd.horizon_step, dtype=float)
    found = np.full((4, cd.n_runs), np.nan)  # rise, se, long rise, long se
    for i, run_id in enumerate(cd.run_ids or ()):  # a loop over runs, not over draws
        mine = run_ids == str(run_id)
        if mine.any():
            short = recent_rise(steps[mine], reward[mine], horizons[i], RISE_WINDOW)
            long = recent_rise(steps[mine], reward[mine], horizons[i], FLAT_WINDOW)
            found[:, i] = short.rise, short.se, long.rise, long.se
    return replace(
        cd, recent_rise=found[0], recent_rise_se=found[1], long_rise=found[2], long_rise_se=found[3]
    )


def rising_runs(
    cd: CurveDraws, rising_eps: float = 0.01, z: float = RISE_Z, *, relative: bool = True
) -> np.ndarray:
    """Per run, whether its logged reward still rises (``False`` where its rise is not attached).

    The rise over the run's latest window (``cd.recent_rise``, attached by
    :func:`with_recent_rise`) minus ``z`` standard errors exceeds ``rising_eps`` (a share of the
    run's reward range when ``relative``, else reward units). What
    :class:`~bayesgrpo.questions.stopping.budget.GuardedBudgetRule` will not call a plateau.
    """
    if cd.recent_rise is None or cd.recent_rise_se is None:
        return np.zeros(cd.n_runs, dtype=bool)
    lower = np.asarray(cd.recent_rise, dtype=float) - z * np.asarray(cd.recent_rise_se, dtype=float)
    margin = rising_eps * (np.asarray(cd.reward_scale, dtype=float) if relative else 1.0)
    return np.asarray(np.nan_to_num(lower - margin, nan=-np.inf) > 0)


def flat_upper_bounds(cd: CurveDraws, z: float = RISE_Z) -> np.ndarray:
    """Per run, the one-sided upper bound ``long_rise + z long_rise_se`` of its rise over the
    latest :data:`FLAT_WINDOW` (attached by :func:`with_recent_rise`): below a flat stop's
    threshold, even the rise's upper bound says the run no longer climbs. NaN where unknown (too
    few points in the window, or no long rise attached): no evidence.
    """
    if cd.long_rise is None or cd.long_rise_se is None:
        return np.full(cd.n_runs, np.nan)
    return np.asarray(cd.long_rise, dtype=float) + z * np.asarray(cd.long_rise_se, dtype=float)
