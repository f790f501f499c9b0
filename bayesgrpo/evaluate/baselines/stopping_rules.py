"""Stopping rules in use today: a fixed fraction, Keras-style patience, Optuna's median pruning.

Each returns the step at which the rule stops a run, or ``None`` when it lets the run go to its
end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, overload

import numpy as np

from bayesgrpo.evaluate.baselines.base import BaselineInputError, check_positive_int

# --------------------------------------------------------------------------------------------
# Stopping rules
# --------------------------------------------------------------------------------------------


@overload
def _steps_rewards(steps: np.ndarray, rewards: None = None) -> tuple[np.ndarray, None]: ...


@overload
def _steps_rewards(steps: np.ndarray, rewards: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...


def _steps_rewards(
    steps: np.ndarray, rewards: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """Check one run's points for a stopping rule: 1-D, one length, finite, steps increasing."""
    steps = np.asarray(steps, dtype=np.float64)
    if steps.ndim != 1 or steps.size == 0 or not np.all(np.isfinite(steps)):
        raise BaselineInputError(
            f"steps must be a non-empty 1-D array of finite steps, got shape {steps.shape}"
        )
    if np.any(np.diff(steps) <= 0):
        raise BaselineInputError("steps must be strictly increasing (one logged point per step, in order)")
    if rewards is None:
        return steps, None
    rewards = np.asarray(rewards, dtype=np.float64)
    if rewards.shape != steps.shape:
        raise BaselineInputError(f"rewards must have the shape of steps {steps.shape}, got {rewards.shape}")
    if not np.all(np.isfinite(rewards)):
        raise BaselineInputError("rewards must be finite; drop or fill missing points before a stopping rule")
    return steps, rewards


def _as_step(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def stop_fixed_fraction(steps: np.ndarray, total_steps: float, fraction: float = 0.8) -> int | float | None:
    """Stop at a fixed fraction of the planned steps (the seed paper's ~80% of an epoch).

    Parameters
    ----------
    steps : ndarray
        The run's logged steps (increasing).
    total_steps : float
        Planned length of the run, in steps.
    fraction : float
        Fraction of ``total_steps`` after which the run is stopped.

    Returns
    -------
    int or None
        The first logged step ``>= fraction * total_steps``; ``None`` when ``fraction >= 1`` or
        no logged step reaches it (the run goes to its end).
    """
    steps, _ = _steps_rewards(steps)
    if not (np.isfinite(total_steps) and total_steps > 0):
        raise BaselineInputError(f"total_steps must be a positive number, got {total_steps}")
    if not fraction > 0:
        raise BaselineInputError(f"fraction must be > 0, got {fraction}")
    if fraction >= 1.0:
        return None
    reached = np.flatnonzero(steps >= fraction * float(total_steps))
    return _as_step(steps[reached[0]]) if reached.size else None


def _smooth(rewards: np.ndarray, window: int, method: Literal["rolling", "ema"]) -> np.ndarray:
    """Causal smoothing: trailing rolling mean over ``window`` points (fewer at the start), or an
    exponential moving average with ``alpha = 2 / (window + 1)`` started at the first point.
    """
    if method == "rolling":
        csum = np.concatenate([[0.0], np.cumsum(rewards)])
        idx = np.arange(1, rewards.size + 1)
        lo = np.maximum(idx - window, 0)
        return (csum[idx] - csum[lo]) / (idx - lo)
    if method == "ema":
        alpha = 2.0 / (window + 1.0)
        out = np.empty_like(rewards)
        acc = rewards[0]
        for i, value in enumerate(rewards):  # a recursion over logged points (not draws)
            acc = acc + alpha * (value - acc) if i else value
            out[i] = acc
        return out
    raise BaselineInputError(f"smoothing must be 'rolling' or 'ema', got {method!r}")


def stop_patience(
    steps: np.ndarray,
    rewards: np.ndarray,
    patience: int,
    min_delta: float = 0.0,
    smoothing_window: int = 1,
    smoothing: Literal["rolling", "ema"] = "rolling",
) -> int | float | None:
    """Patience on a smoothed reward (Keras ``EarlyStopping``, maximising).

    The reward is smoothed causally (:func:`_smooth`). Walking through the logged points, a
    point *improves* when its smoothed reward exceeds the best so far by more than
    ``min_delta`` (the first point always does); the rule stops at the point where ``patience``
    points in a row have not improved.

    Parameters
    ----------
    steps, rewards : ndarray
        One run's logged points (steps increasing).
    patience : int
        Logged points without improvement before stopping (>= 1).
    min_delta : float
        Smallest rise of the smoothed reward that counts as an improvement.
    smoothing_window : int
        Points in the trailing rolling mean, or the span of the EMA (1: no smoothing).
    smoothing : {"rolling", "ema"}
        Smoother.

    Returns
    -------
    int or None
        The step at which the rule stops the run, or ``None`` if it never does.
    """
    steps, rewards = _steps_rewards(steps, rewards)
    assert rewards is not None
    patience = check_positive_int("patience", patience)
    window = check_positive_int("smoothing_window", smoothing_window)
    smoothed = _smooth(rewards, window, smoothing)
    best, wait = -np.inf, 0
    # sequential by nature: the state depends on the past
    for step, value in zip(steps, smoothed, strict=True):
        if value - min_delta > best:
            best, wait = value, 0
        else:
            wait += 1
            if wait >= patience:
                return _as_step(step)
    return None


def stop_median_pruning(
    steps: np.ndarray,
    rewards: np.ndarray,
    other_runs: Sequence[tuple[np.ndarray, np.ndarray]],
    warmup_fraction: float = 0.0,
    check_every: float = 0.0,
    *,
    total_steps: float | None = None,
    n_startup_trials: int = 5,
    n_min_trials: int = 1,
) -> int | float | None:
    """Optuna's ``MedianPruner`` (maximising) with progress normalised by each run's length.

    Optuna prunes a trial at a reported step when its best intermediate value so far is below
    the median of the completed trials' intermediate values *at that step*. Here runs of
    different lengths are compared at the same **progress** ``step / total``: this run's total
    is ``total_steps`` (its last logged step by default), each other run's is its own last step
    (other runs are completed trials), and another run's value at progress ``p`` is its reward
    interpolated linearly at ``p`` (runs that do not cover ``p`` do not count, as trials that
    never reported that step). Optuna's gates carry over:

    * no pruning while fewer than ``n_startup_trials`` other runs are given (Optuna's default 5);
    * none before progress ``warmup_fraction`` (``n_warmup_steps``, default 0);
    * checks at the first logged point of every ``check_every`` interval of progress after the
      warmup (``interval_steps``; 0, the default, checks every logged point, Optuna's 1);
    * no pruning where fewer than ``n_min_trials`` other runs have a value.

    Parameters
    ----------
    steps, rewards : ndarray
        This run's logged points (steps increasing).
    other_runs : sequence of (steps, rewards)
        Completed runs to compare against.
    warmup_fraction, check_every : float
        Warmup and check interval, as fractions of the run.
    total_steps : float, optional
        This run's planned length; its last logged step by default.
    n_startup_trials, n_min_trials : int
        Optuna's gates (see above).

    Returns
    -------
    int or None
        The step at which the run is pruned, or ``None`` if it never is.
    """
    steps, rewards = _steps_rewards(steps, rewards)
    assert rewards is not None
    if not 0.0 <= warmup_fraction <= 1.0 or check_every < 0.0:
        raise BaselineInputError(
            f"warmup_fraction must be in [0, 1] and check_every >= 0, got {warmup_fraction}, {check_every}"
        )
    total = float(steps[-1]) if total_steps is None else float(total_steps)
    if not total > 0:
        raise BaselineInputError(f"total_steps must be > 0, got {total_steps}")
    if len(other_runs) == 0 or len(other_runs) < n_startup_trials:
        return None
    others = []
    for other_steps, other_rewards in other_runs:
        o_steps, o_rewards = _steps_rewards(other_steps, other_rewards)
        assert o_rewards is not None
        if o_steps[-1] <= 0:
            raise BaselineInputError("every other run needs a last step > 0 to normalise its progress")
        others.append((o_steps / o_steps[-1], o_rewards))

    progress = steps / total
    best = np.maximum.accumulate(rewards)
    last_checked_interval = -1
    for i, p in enumerate(progress):
        if p < warmup_fraction:
            continue
        if check_every > 0:
            interval = math.floor((p - warmup_fraction) / check_every + 1e-12)
            if interval <= last_checked_interval:
                continue
            last_checked_interval = interval
        values = [np.interp(p, o_p, o_r) for o_p, o_r in others if o_p[0] <= p <= o_p[-1]]
        if len(values) < max(n_min_trials, 1):
            continue
        if best[i] < float(np.median(values)):
            return _as_step(steps[i])
    return None
