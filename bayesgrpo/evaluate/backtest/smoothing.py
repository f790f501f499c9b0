"""The smoothed reward a stop is judged by, and the reward a stop gives up against it.

:func:`smoothed_reward` is a centred rolling mean (its window a share of the run's points or,
with ``"cv"``, :func:`cross_validated_window`); :func:`reward_given_up` measures a stop against
the run's best smoothed reward or its end; :func:`dip_at_stop` says whether a stop landed in a
dip of the logged reward.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bayesgrpo.evaluate.backtest.cuts import SMOOTHING_FRACTION, BacktestError


def smoothing_window(rewards: np.ndarray, fraction: float | str) -> int:
    """The odd window :func:`smoothed_reward` uses for these rewards."""
    if isinstance(fraction, str):
        if fraction != "cv":
            raise BacktestError(f"smoothing fraction {fraction!r}: give a share of the run's points or 'cv'")
        window = cross_validated_window(rewards)
    else:
        window = max(1, round(fraction * rewards.size))
    return window + 1 if window % 2 == 0 else window


def cross_validated_window(rewards: np.ndarray) -> int:
    """The centred rolling mean's window that best predicts each point from its neighbours.

    Every odd window from 3 to the run's length is tried; each point is predicted by the mean of
    the other points of its window (leave-one-out), and the window with the smallest mean
    squared error wins (the smallest of equals). A noisy flat run gets a wide window, a clean
    rise a narrow one: the smoothing adapts to the run's noise instead of a fixed share.

    Parameters
    ----------
    rewards : ndarray, shape (n,)

    Returns
    -------
    int
        Odd window length (1 for runs of fewer than 3 points).
    """
    rewards = np.asarray(rewards, dtype=float)
    n = rewards.size
    best_window, best_error = 1, np.inf
    for window in range(3, n + 1, 2):
        sums, counts = _window_sums(rewards, window)
        left_out = (sums - rewards) / (counts - 1)
        error = float(np.mean((rewards - left_out) ** 2))
        if error < best_error * (1.0 - 1e-12):
            best_window, best_error = window, error
    return best_window


def _window_sums(rewards: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Sums and counts of the centred window of odd length ``window`` at every point, cut at the
    ends to the points that exist.
    """
    n = rewards.size
    half = window // 2
    csum = np.concatenate([[0.0], np.cumsum(rewards)])
    idx = np.arange(n)
    lo = np.maximum(idx - half, 0)
    hi = np.minimum(idx + half + 1, n)
    return csum[hi] - csum[lo], (hi - lo).astype(float)


def smoothed_reward(rewards: np.ndarray, fraction: float | str = SMOOTHING_FRACTION) -> np.ndarray:
    """Centred rolling mean of a run's rewards, the reference of the stopping backtest.

    The window holds ``w = max(1, round(fraction * n))`` points, made odd (``w + 1`` when even)
    so that it is centred; near the ends it is cut to the points that exist (a point's mean is
    over at most ``w // 2`` points either side). With 5% of a run's points it smooths out the
    noise of single logged rewards without flattening a rise. ``fraction="cv"`` takes the
    window :func:`cross_validated_window` chooses for the run.

    Parameters
    ----------
    rewards : ndarray, shape (n,)
    fraction : float or "cv"

    Returns
    -------
    ndarray, shape (n,)
    """
    rewards = np.asarray(rewards, dtype=float)
    return rolling_mean(rewards, smoothing_window(rewards, fraction))


def rolling_mean(rewards: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling mean over an odd ``window``, cut at the ends to the points that exist."""
    sums, counts = _window_sums(rewards, window)
    return sums / counts


def reward_given_up(
    smooth: np.ndarray, spread: float, steps: np.ndarray, stop_step: float
) -> tuple[float, float]:
    """What stopping at ``stop_step`` gives up, against the run's best and against its end.

    Parameters
    ----------
    smooth : ndarray, shape (n,)
        The run's smoothed reward (:func:`smoothed_reward`).
    spread : float
        The run's logged reward range (max - min of the raw rewards), the unit.
    steps : ndarray, shape (n,)
        The steps of ``smooth``, increasing.
    stop_step : float

    Returns
    -------
    given_up : float
        ``max(0, best smoothed - smoothed at the stop) / spread``.
    vs_end : float
        ``(smoothed at the end - smoothed at the stop) / spread`` (negative: the stop kept more).
    """
    at = int(np.searchsorted(steps, stop_step))
    return max(0.0, float(smooth.max() - smooth[at])) / spread, float(smooth[-1] - smooth[at]) / spread


#: Share of a run's points either side of a stop that :func:`dip_at_stop` compares it with (the
#: 10% of the run around it, with the 5% window of the smoothed reward at the stop).
DIP_FRACTION = 0.05


def dip_at_stop(steps: np.ndarray, rewards: np.ndarray, stop_step: float) -> float:
    """The dip at a stop: the smoothed logged reward at the stop minus the mean logged reward over
    the 10% of the run around it, as a share of the run's logged range.

    A rule that stops noisy flat runs in their low points has a negative mean dip; a fixed budget,
    blind to the noise, has none on average. The stop's point is the last logged point at or
    before ``stop_step``; the smoothed reward is a centred rolling mean over ``w = max(1,
    int(0.05 n))`` points (cut at the run's ends), and the mean around it is over the points
    ``w`` either side of it (the stopping benchmarks' measure since they first reported it).

    Parameters
    ----------
    steps : ndarray, shape (n,)
        The run's logged steps, increasing.
    rewards : ndarray, shape (n,)
        Its logged rewards.
    stop_step : float

    Returns
    -------
    float
        Negative: the stop sat below the level around it. 0 for a run of constant reward.
    """
    steps = np.asarray(steps, dtype=float)
    rewards = np.asarray(rewards, dtype=float)
    if steps.shape != rewards.shape or steps.ndim != 1 or steps.size == 0:
        raise BacktestError(
            "dip_at_stop needs one run's steps and rewards of one length; got "
            f"{steps.shape} and {rewards.shape}"
        )
    n = rewards.size
    i = min(max(int(np.searchsorted(steps, stop_step, side="right") - 1), 0), n - 1)
    window = max(1, int(DIP_FRACTION * n))
    smooth = pd.Series(rewards).rolling(window, center=True, min_periods=1).mean().to_numpy()
    around = rewards[max(0, i - window) : i + window + 1].mean()
    span = float(rewards.max() - rewards.min()) or 1.0
    return float((smooth[i] - around) / span)
