"""Findings on the reward itself: collapse, stall (including never learned) and a reward at its ceiling."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.questions.diagnostics.finding import ACTIONS, Finding
from bayesgrpo.questions.diagnostics.trend import (
    EDGE_MIN_POINTS,
    MIN_POINTS,
    Trend,
    clean_series,
    edge_count,
    end_level,
    last_half,
    noise_level,
    smoothed,
    start_level,
    trend,
    trend_evidence,
)

# --- collapse ---------------------------------------------------------------------------------
#: Collapse: the smoothed reward ends at or below ``floor + COLLAPSE_LEVEL * (peak - floor)``,
#: i.e. it has lost at least 80% of what it had gained above its floor.
COLLAPSE_LEVEL = 0.2
#: ... and stays there for at least this share of the run's points (and EDGE_MIN_POINTS) ...
COLLAPSE_MIN_TAIL = 0.1
#: ... after a peak that stood at least this many noise scales above the floor (a run that never
#: rose did not collapse: see :func:`detect_stall`).
COLLAPSE_MIN_RISE = 3.0

# --- stall ------------------------------------------------------------------------------------
#: Stall: the end level is at least this share of the reward range below the reference level
#: (the best level of comparable runs) ...
STALL_GAP = 0.25
#: ... "high" from this share on.
STALL_HIGH_GAP = 0.5
#: With a fitted model: "no gain" when ``P(R(2s) - R(s) < STALL_EPS * range) >= STALL_PROB``.
STALL_EPS = 0.02
STALL_PROB = 0.9
#: Never learned (no comparable runs), from data alone: "no significant rise" is only absence of
#: evidence, so the run must also be *shown* flat: the upper end of the 90% interval of its
#: Theil-Sen change, over the whole run and over its last half, and its end level minus its start
#: level are all below this share of the spread of its rewards (5%-95% quantile range). A short or
#: noisy run that may hide a gain raises nothing.
STALL_FLAT_FRACTION = 0.5
#: ... and a run shown flat is a "warning" only when it spans at least this many steps; a shorter
#: one is an "info" (not learned *yet*). Measured on the bundled TRL runs: of the 19 whose reward
#: rose significantly, 6 were shown flat (by the rule above) over their first 50 steps and 2 over
#: their first 100; the longest flat start before learning lasted 241 steps (the 2048 game).
STALL_NEVER_MIN_STEPS = 250

# --------------------------------------------------------------------------------------------
# Detectors: pure functions of (steps, values)
# --------------------------------------------------------------------------------------------


def detect_collapse(
    steps: Any, reward: Any, *, floor: float | None = None, run_id: str = ""
) -> list[Finding]:
    """The reward rose, then fell back to (near) its floor and stayed there.

    The reward is smoothed by a rolling median. Its *floor* is ``floor`` (the reward's known lower
    bound) or, when not given, the lower of the run's start level and its smoothed minimum (so a
    run that falls far below where it started collapsed too). The run collapsed when its smoothed peak
    stood at least :data:`COLLAPSE_MIN_RISE` noise scales above the floor and the smoothed reward
    stays at or below ``floor + COLLAPSE_LEVEL * (peak - floor)`` from some step after the peak to
    the end, over at least :data:`COLLAPSE_MIN_TAIL` of the points.

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    floor : float, optional
        Lower bound of the reward (0 for a 0/1 correctness reward).
    run_id : str

    Returns
    -------
    list of Finding
        Empty, or one ``"collapse"`` finding of severity ``"high"`` covering the collapsed tail.
    """
    x, y = clean_series(steps, reward)
    n = len(x)
    if n < MIN_POINTS:
        return []
    smooth = smoothed(y)
    base = min(start_level(y), float(smooth.min())) if floor is None else float(floor)
    i_peak = int(np.argmax(smooth))
    peak = float(smooth[i_peak])
    noise = noise_level(y)
    rise = peak - base
    if rise <= 0 or rise < COLLAPSE_MIN_RISE * noise:
        return []
    threshold = base + COLLAPSE_LEVEL * rise
    above = np.flatnonzero(smooth > threshold)
    start = int(above[-1]) + 1  # first index from which the smoothed reward stays low
    tail = n - start
    if start <= i_peak or tail < max(EDGE_MIN_POINTS, math.ceil(COLLAPSE_MIN_TAIL * n)):
        return []
    tail_level = float(np.median(y[start:]))
    evidence = {
        "signal": "reward",
        "floor": base,
        "floor_from": "bound" if floor is not None else "run (start level or smoothed minimum)",
        "peak": peak,
        "peak_step": float(x[i_peak]),
        "threshold": threshold,
        "tail_level": tail_level,
        "lost_fraction": float((peak - tail_level) / rise),
        "tail_points": int(tail),
        "noise": noise,
    }
    return [
        Finding(
            run_id,
            "collapse",
            "high",
            int(x[start]),
            int(x[-1]),
            evidence,
            ACTIONS["collapse"].format(peak_step=x[i_peak]),
        )
    ]


def detect_stall(
    steps: Any,
    reward: Any,
    *,
    reference: float | None = None,
    lower: float | None = None,
    upper: float | None = None,
    prob_no_gain: float | None = None,
    run_id: str = "",
) -> list[Finding]:
    """No gain over the last half of the run while far below a reference level, or no gain ever.

    "No gain" is, from data alone, no significant rise of the reward over the last half of its
    points (Mann-Kendall at :data:`TREND_ALPHA`); with a fitted model, the posterior probability
    ``prob_no_gain`` of a gain below :data:`STALL_EPS` of the range is at least :data:`STALL_PROB`.
    "Far below" is a gap ``(reference - end level) / (upper - lower)`` of at least
    :data:`STALL_GAP` (``"warning"``) or :data:`STALL_HIGH_GAP` (``"high"``).

    With no reference (no comparable runs), the run may never have learned: no significant rise
    over the whole run nor over its last half. From data alone that is only absence of evidence,
    so the run must also be shown flat (:func:`flat_bounds` and the gain from its start level to
    its end level below :data:`STALL_FLAT_FRACTION` of its spread),
    and it is a ``"warning"`` only when it spans :data:`STALL_NEVER_MIN_STEPS` steps or more, an
    ``"info"`` (no gain *yet*) when shorter. With a model, no gain ahead with probability
    :data:`STALL_PROB` makes it a ``"warning"`` at any length.

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    reference : float or None
        The level the run could reach: the best level of comparable runs; None for the
        never-learned test.
    lower, upper : float, optional
        The reward range the gap is measured in (known bounds, or the range the comparable runs
        span); needed with a reference.
    prob_no_gain : float, optional
        ``P(R(2s) - R(s) < eps)`` from a fitted model; replaces the trend test when given.
    run_id : str

    Returns
    -------
    list of Finding
    """
    x, y = clean_series(steps, reward)
    if len(x) < MIN_POINTS:
        return []
    hx, hy = last_half(x, y)
    tr = trend(hx, hy)
    end = end_level(y)
    no_gain = not tr.rising() if prob_no_gain is None else prob_no_gain >= STALL_PROB
    if not no_gain:
        return []
    if reference is None:
        return _never_learned(x, y, tr, prob_no_gain, run_id)
    if lower is None or upper is None or not upper > lower:
        raise BayesGRPOError(
            f"detect_stall needs a reward range lower < upper with a reference; got {lower}, {upper}."
        )
    gap = (float(reference) - end) / (upper - lower)
    if gap < STALL_GAP:
        return []
    evidence: dict[str, Any] = {
        "signal": "reward",
        "end_level": end,
        "reference": float(reference),
        "gap_fraction": gap,
        "range": float(upper - lower),
        "test": "mann-kendall over the last half" if prob_no_gain is None else "posterior",
        **trend_evidence("last_half", tr),
    }
    if prob_no_gain is not None:
        evidence["prob_no_gain"] = float(prob_no_gain)
    severity = "high" if gap >= STALL_HIGH_GAP else "warning"
    return [Finding(run_id, "stall", severity, int(hx[0]), int(hx[-1]), evidence, ACTIONS["stall"])]


def flat_bounds(steps: Any, values: Any) -> tuple[float, float, float]:
    """How large a gain a series could hide: upper 90% bounds of its change, over its spread.

    Parameters
    ----------
    steps, values : array_like, shape (n,)

    Returns
    -------
    run_bound, last_half_bound : float
        The upper end of the 90% interval of the Theil-Sen change (slope times the steps
        spanned) over the whole series and over its last half, each divided by ``spread``; 0 for
        a series whose spread is 0 (it sits on one value but for at most 5% of its points).
    spread : float
        The 5%-95% quantile range of the values.
    """
    x, y = clean_series(steps, values)
    if len(x) < 3:
        return math.inf, math.inf, 0.0
    low, high = np.quantile(y, [0.05, 0.95])
    spread = float(high - low)
    if spread <= 0:
        return 0.0, 0.0, 0.0
    hx, hy = last_half(x, y)
    bounds = [trend(sx, sy).slope_high * (sx[-1] - sx[0]) / spread for sx, sy in ((x, y), (hx, hy))]
    return float(bounds[0]), float(bounds[1]), spread


def _never_learned(
    x: np.ndarray, y: np.ndarray, last_half: Trend, prob_no_gain: float | None, run_id: str
) -> list[Finding]:
    """The stall test without comparable runs (see :func:`detect_stall`)."""
    whole = trend(x, y)
    if whole.rising():
        return []
    run_bound, half_bound, spread = flat_bounds(x, y)
    start, end = start_level(y), end_level(y)
    level_gain = (end - start) / spread if spread > 0 else 0.0
    span = float(x[-1] - x[0])
    evidence: dict[str, Any] = {
        "signal": "reward",
        "start_level": start,
        "end_level": end,
        "direction": "falling" if whole.falling() else "flat",
        "spread": spread,
        "level_gain": level_gain,
        "gain_bound_run": run_bound,
        "gain_bound_last_half": half_bound,
        "steps_spanned": span,
        **trend_evidence("run", whole),
        **trend_evidence("last_half", last_half),
    }
    if prob_no_gain is not None:
        evidence["prob_no_gain"] = float(prob_no_gain)
        evidence["reason"] = "no significant gain so far and none expected (posterior); no comparable runs"
        return [Finding(run_id, "stall", "warning", int(x[0]), int(x[-1]), evidence, ACTIONS["stall_never"])]
    if max(run_bound, half_bound, level_gain) >= STALL_FLAT_FRACTION:
        # too short or noisy to rule a gain out, or it ends well above its start (a fast rise,
        # then a plateau or ringing that hides it from the trend test): no evidence of no gain
        return []
    if span >= STALL_NEVER_MIN_STEPS:
        evidence["reason"] = "no gain over the whole run (shown flat); no comparable runs to measure a gap"
        return [Finding(run_id, "stall", "warning", int(x[0]), int(x[-1]), evidence, ACTIONS["stall_never"])]
    evidence["reason"] = (
        f"no gain yet (shown flat) over {span:.0f} steps, fewer than the "
        f"{STALL_NEVER_MIN_STEPS} a slow start can last; no comparable runs to measure a gap"
    )
    return [Finding(run_id, "stall", "info", int(x[0]), int(x[-1]), evidence, ACTIONS["stall_early"])]


#: The reward counts as at its ceiling when its end level is within this share of the run's
#: reward range of the ceiling (the stated ``reward_max``, else the best logged reward) and, with
#: no stated maximum, varies by less than this share at the end.
CEILING_TOLERANCE = 0.01


def reward_at_ceiling(steps: Any, reward: Any, reward_max: float | None = None) -> bool:
    """Whether a run's reward ends at its ceiling: the task is solved, not the signal lost.

    With a stated ``reward_max``, the end level (mean of the last :data:`EDGE_FRACTION`) is within
    5 x :data:`CEILING_TOLERANCE` of the range below it. Without one, the end level equals the best
    logged reward and stays there (both within :data:`CEILING_TOLERANCE` of the run's range): a
    reward pinned at its best value, as a solved game's.
    """
    _, y = clean_series(steps, reward)
    if len(y) < MIN_POINTS:
        return False
    k = edge_count(len(y))
    tail = y[-k:]
    span = float(np.max(y) - np.min(y))
    if span <= 0:
        return False
    if reward_max is not None and np.isfinite(reward_max):
        return bool(float(np.mean(tail)) >= reward_max - 5 * CEILING_TOLERANCE * span)
    return bool(
        float(np.max(y) - np.mean(tail)) <= CEILING_TOLERANCE * span
        and float(np.ptp(tail)) <= CEILING_TOLERANCE * span
    )
