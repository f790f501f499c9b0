"""A run's shape and length class, as the corpus's data card counts them.

The shape is read off the run's own points, smoothed by a running median over a tenth of the run
(at least 3 points) so that single noisy steps do not decide it; a change counts only where it
exceeds both a quarter of the smoothed range and five standard errors of the smoothed curve:

- ``"peak then fall"``: the smoothed curve peaks before 85% of the run and ends at least a quarter
  of its smoothed range below the peak, still above where it started;
- ``"collapse"``: it peaks, then ends at or below where it started (the gain is lost);
- ``"rising"``: it ends at least a quarter of its smoothed range above where it started;
- ``"flat"``: none of these.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Length classes by the last logged step.
LENGTH_BINS: tuple[tuple[int, str], ...] = (
    (100, "< 100 steps"),
    (300, "100-299 steps"),
    (1000, "300-999 steps"),
)
LONG = "1,000+ steps"


def length_class(last_step: float) -> str:
    """The length class of a run that logged up to ``last_step``."""
    for bound, label in LENGTH_BINS:
        if last_step < bound:
            return label
    return LONG


def smoothed(rewards: np.ndarray) -> np.ndarray:
    """The running median the shape is judged on (window a tenth of the run, at least 3)."""
    window = max(3, len(rewards) // 10)
    return pd.Series(rewards).rolling(window, center=True, min_periods=1).median().to_numpy()


def curve_shape(rewards: np.ndarray | pd.Series, peak_before: float = 0.85, drop: float = 0.25) -> str:
    """``"rising"``, ``"flat"``, ``"peak then fall"`` or ``"collapse"`` (module docstring).

    Parameters
    ----------
    rewards : array of float
        The run's rewards in step order.
    peak_before : float
        The peak must come before this share of the run to count as a peak.
    drop : float
        The share of the smoothed range a change must reach to count.

    Returns
    -------
    str
    """
    values = np.asarray(rewards, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) < 3:
        return "flat"
    curve = smoothed(values)
    span = float(curve.max() - curve.min())
    # a change must also stand out of the smoothed curve's own noise: five standard errors of a
    # running median (1.25 sd / sqrt(window)) of the points' scatter about it
    window = max(3, len(values) // 10)
    scatter = 1.4826 * float(np.median(np.abs(values - curve)))
    floor = 5.0 * 1.25 * scatter / np.sqrt(window)
    if span <= floor:
        return "flat"
    start, end = curve[: max(1, len(curve) // 20)].mean(), curve[-max(1, len(curve) // 20) :].mean()
    peak_at = int(np.argmax(curve))
    peak = curve[peak_at]
    if peak_at < peak_before * (len(curve) - 1) and peak - end >= max(drop * span, floor):
        return "collapse" if end <= start else "peak then fall"
    if end - start >= max(drop * span, floor):
        return "rising"
    return "flat"
