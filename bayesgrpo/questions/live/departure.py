"""Whether a run's latest logged points still lie inside the band of its own live update.

The update fits a curve the population finds plausible to the run's points. A run can leave
every such curve (a late jump, a collapse), or its noise can grow past what the update estimated
from all its points. :func:`recent_departure` sets the latest logged points against the update's
90% predictive band at their steps: a calibrated band leaves about 5% of them above and 5% below,
and a binomial tail probability under :data:`DEPARTURE_LEVEL` says it does not. The forecast is
not changed by it; the departure is reported (``LiveUpdate.departure``, a
``ForecastDepartureWarning``) so that a person trusts the band less until the run settles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bayesgrpo.model.numerics import binomial_tail

__all__ = [
    "DEPARTURE_LEVEL",
    "Departure",
    "logged_points",
    "recent_departure",
    "recent_points",
]

#: The latest share of a run's logged points :func:`recent_departure` reads.
RECENT_SHARE = 0.2
#: Fewest (and most) recent logged points :func:`recent_departure` reads.
MIN_RECENT_POINTS = 10
MAX_RECENT_POINTS = 200
#: A side's binomial tail probability below which the recent points have departed from the forecast.
DEPARTURE_LEVEL = 1e-3


@dataclass(frozen=True)
class Departure:
    """Whether a run's latest logged points still lie where its live forecast says they do.

    Attributes
    ----------
    n_points : int
        Recent logged points read (0: too few to say).
    above, below : int
        How many of them lie above / below the 90% predictive band.
    p_above, p_below, p_outside : float
        Binomial tail probabilities of at least that many above (5% each), below, and outside
        (10%) a calibrated band (1 when not assessed).
    """

    n_points: int = 0
    above: int = 0
    below: int = 0
    p_above: float = 1.0
    p_below: float = 1.0
    p_outside: float = 1.0

    @property
    def kind(self) -> str:
        """``"above"`` or ``"below"`` (the run has left its curve on that side), ``"noise"`` (its
        latest points scatter on both sides more than the band allows), ``""`` (neither).
        """
        if not self.n_points:
            return ""
        if self.p_above < DEPARTURE_LEVEL and self.above >= 2 * self.below:
            return "above"
        if self.p_below < DEPARTURE_LEVEL and self.below >= 2 * self.above:
            return "below"
        return "noise" if self.p_outside < DEPARTURE_LEVEL else ""

    @property
    def departed(self) -> bool:
        """The latest points lie outside the band far more often than the band allows."""
        return bool(self.kind)

    def note(self) -> str:
        """One line for a person: what was seen, and what it means for the forecast."""
        if not self.n_points:
            return "too few recent points to check the forecast against"
        counts = (
            f"of the last {self.n_points} logged points {self.above} lie above the forecast's 90% band and "
            f"{self.below} below (a calibrated band leaves about {0.05 * self.n_points:.0f} each side)"
        )
        if self.kind in ("above", "below"):
            return (
                f"{counts}: the run has left every curve the population finds plausible ({self.kind} "
                "it), and the forecast stays with the curve; trust it less than its band says until the "
                "run settles"
            )
        if self.kind == "noise":
            return (
                f"{counts}: the run's latest points scatter more than the noise the update estimated "
                "from all of them; the band is too narrow for them"
            )
        return f"{counts}: the forecast follows the run"


def logged_points(points: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """A run's ``step`` and ``reward`` as arrays in step order, rows without a finite value left out."""
    steps = points["step"].to_numpy(dtype=float)
    rewards = points["reward"].to_numpy(dtype=float)
    finite = np.isfinite(steps) & np.isfinite(rewards)
    order = np.argsort(steps[finite], kind="stable")
    return steps[finite][order], rewards[finite][order]


def recent_points(steps: np.ndarray, rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The latest :data:`RECENT_SHARE` of step-ordered points (at least :data:`MIN_RECENT_POINTS`,
    at most :data:`MAX_RECENT_POINTS`): those the departure check reads.
    """
    n = min(max(int(np.ceil(RECENT_SHARE * len(steps))), MIN_RECENT_POINTS), MAX_RECENT_POINTS)
    return steps[-n:], rewards[-n:]


def recent_departure(reward_draws: Callable[[np.ndarray], np.ndarray], points: pd.DataFrame) -> Departure:
    """Set a run's latest logged points against the 90% predictive band of its own update.

    Parameters
    ----------
    reward_draws : callable
        Draws of a logged reward at given steps, shape (S, N): the update's
        ``LiveUpdate.reward_draws``.
    points : DataFrame
        The run's points (``step``, ``reward``); rows without a finite reward are not read.

    Returns
    -------
    Departure
        The latest :data:`RECENT_SHARE` of the points (at least :data:`MIN_RECENT_POINTS`, at
        most :data:`MAX_RECENT_POINTS`; not assessed below twice the minimum).
    """
    steps, rewards = logged_points(points)
    if len(steps) < 2 * MIN_RECENT_POINTS:
        return Departure()
    steps, rewards = recent_points(steps, rewards)
    n = len(steps)
    low, high = np.quantile(reward_draws(steps), [0.05, 0.95], axis=0)
    above, below = int((rewards > high).sum()), int((rewards < low).sum())

    def tail(count: int, share: float) -> float:
        """P(X >= count) for X ~ Binomial(n, share)."""
        return binomial_tail(count, n, share)

    return Departure(n, above, below, tail(above, 0.05), tail(below, 0.05), tail(above + below, 0.10))
