"""The reward range a live update normalises a run by, and says a relative eps is a share of.

A run whose metadata states ``reward_min``/``reward_max`` is normalised by that range. A run that
states none is normalised by its prefix's own range widened by the population's margin
(``model.data.prepare``), the way the population's own runs without a stated range were; ``reach``
widens it to rewards the run is known to be able to reach (:func:`reach_bounds`). On the corpus's
held-out sources this plain reading forecast better than estimating a whole run's range from the
prefix (``benchmarks/results/defaults.md``, ``place_own_range``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "RANGE_SOURCE_PHRASES",
    "metadata_number",
    "reach_bounds",
    "stated_reward_range",
]

#: How a live update's reward range was found (:attr:`LiveUpdate.reward_range`'s ``how``), in
#: words: what the CLI, ``watch`` and the callback print beside a relative eps.
RANGE_SOURCE_PHRASES: dict[str, str] = {
    "stated": "stated for the run",
    "estimated": "estimated from the run",
}


def metadata_number(value: Any) -> float:
    """A metadata value as a finite float, or NaN when it is missing, not a number or not finite."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return float("nan")
    return number if np.isfinite(number) else float("nan")


def stated_reward_range(metadata: Mapping[str, Any]) -> tuple[float, float] | None:
    """The reward range a run's metadata states (``reward_min``, ``reward_max``), or None when
    either is missing, not a number, or they do not make a range (``model.data.prepare`` then
    normalises the run by its own observed range).
    """
    low, high = metadata_number(metadata.get("reward_min")), metadata_number(metadata.get("reward_max"))
    return (low, high) if np.isfinite(low) and np.isfinite(high) and high > low else None


def reach_bounds(
    rewards: np.ndarray, reach: tuple[float, float] | None, margin: float
) -> tuple[float, float] | None:
    """Bounds of a run without a stated range widened to cover ``reach``, or None without one.

    The prefix's range and ``reach`` together, widened by ``margin`` of that span each side (as
    ``model.data.prepare`` widens a prefix's own range).

    Parameters
    ----------
    rewards : ndarray
        The run's logged rewards so far (non-finite ones are not read).
    reach : (float, float), optional
        Rewards the run is known to be able to reach (``LiveForecaster.update``).
    margin : float
        The population's ``bounds_margin``.

    Returns
    -------
    (lower, upper) or None
        None where ``reach`` is not given or not finite, or the run logged no finite reward.
    """
    finite = rewards[np.isfinite(rewards)]
    if reach is None or not all(np.isfinite(reach)) or finite.size == 0:
        return None
    floor = min(float(finite.min()), float(min(reach)))
    top = max(float(finite.max()), float(max(reach)))
    whole = top - floor
    if whole <= 0:
        return None
    return floor - margin * whole, top + margin * whole
