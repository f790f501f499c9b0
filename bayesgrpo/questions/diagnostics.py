"""Diagnostics: signals beyond the reward curve that say a run is in trouble (DESIGN.md section 4).

:func:`diagnose` reads a :class:`~bayesgrpo.logs.table.RunsTable` and returns one row per
:class:`Finding`: a named problem of one run, its severity, the step range it covers, the evidence
that raised it (which signals, what values) and a suggested action. Each detector is a pure
function of ``(steps, values)`` arrays, so it can be run on any series and tested on simulated
ones:

* :func:`detect_collapse`: the reward rose, then fell back to (near) its floor and stayed there;
* :func:`detect_stall`: no significant gain over the last half of the run while the reward is far
  below the best level of comparable runs (same family and task); with a fitted model, "no gain"
  is the posterior probability :func:`bayesgrpo.questions.stopping.prob_gain_below` instead of a trend test;
  without comparable runs, a run shown flat over the whole run (no gain ever);
* :func:`detect_advantage_degeneracy`: the fraction of groups whose completions all got the same
  reward (TRL's ``frac_reward_zero_std``) rises toward 1, so GRPO's advantages vanish;
* :func:`detect_policy_concentration`: the policy's entropy collapses;
* :func:`detect_reward_hacking`: the training reward rises while a validation reward falls, or
  while the completion length runs away;
* :func:`detect_oscillation` (opt-in: ``diagnose(..., oscillation=True)``): the reward rings
  around its level; the ``oscillator`` curve family predicts the run clearly better than the
  overdamped ``exp`` and ``weibull`` by LOO (:func:`arviz.loo`), with the damping ratio, the
  period and the overshoot as evidence. Each family is a single-run model sampled by numpyro's
  NUTS, compiled once per process and reused for every run (a few seconds a run).

Trends are judged with robust, rank-based statistics that suit the noisy, sparse rewards TRL logs:
the Mann-Kendall test (Kendall's tau of value against step, :func:`scipy.stats.kendalltau`) for
"is it rising / falling", and the Theil-Sen slope (:func:`scipy.stats.theilslopes`) for "by how
much". Levels are medians of the first or last :data:`EDGE_FRACTION` of a series.

PyMC, PyTensor, JAX and numpyro are imported only by the oscillation fits.
"""

from __future__ import annotations

import functools
import logging
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from bayesgrpo.model.curves import CURVES, asymptote_from_levels, oscillator_omega, reward_curve_by_levels
from bayesgrpo.errors import BayesGRPOError

if TYPE_CHECKING:
    from bayesgrpo.logs.table import RunsTable

__all__ = [
    "CEILING_TOLERANCE",
    "COLLAPSE_LEVEL",
    "DEGENERACY_HIGH",
    "DEGENERACY_WARNING",
    "ENTROPY_HIGH_RATIO",
    "ENTROPY_WARNING_RATIO",
    "HACK_MIN_VAL_DROP",
    "LENGTH_RUNAWAY_RATIO",
    "OSC_MIN_ELPD_DIFF",
    "OSC_PROB_UNDERDAMPED",
    "OSC_SE_MULT",
    "PARETO_K_BAD",
    "SEVERITIES",
    "STALL_FLAT_FRACTION",
    "STALL_GAP",
    "STALL_HIGH_GAP",
    "STALL_NEVER_MIN_STEPS",
    "TREND_ALPHA",
    "Finding",
    "OscillationFit",
    "Trend",
    "detect_advantage_degeneracy",
    "reward_at_ceiling",
    "detect_collapse",
    "detect_oscillation",
    "detect_policy_concentration",
    "detect_reward_hacking",
    "detect_stall",
    "diagnose",
    "findings_by_run",
    "fit_oscillation",
    "flat_bounds",
    "loo_difference",
    "oscillation_is_clear",
    "oscillator_summary",
    "trend",
]

logger = logging.getLogger(__name__)

#: Severities, mildest first.
SEVERITIES: tuple[str, ...] = ("info", "warning", "high")
#: Columns of :func:`diagnose`'s table.
FINDING_COLUMNS: tuple[str, ...] = (
    "run_id", "name", "severity", "first_step", "last_step", "evidence", "action",
)

# --- shared -----------------------------------------------------------------------------------
#: One-sided significance level of the Mann-Kendall trend tests.
TREND_ALPHA = 0.05
#: Share of a series whose median is its start or end level.
EDGE_FRACTION = 0.1
#: Fewest points of a start or end level.
EDGE_MIN_POINTS = 3
#: Fewest points a detector needs in a series; shorter series raise nothing.
MIN_POINTS = 8
#: The rolling median that smooths a reward before peaks are read spans ``n // SMOOTH_DIVISOR``
#: points (at least 3), so one lucky batch is no peak.
SMOOTH_DIVISOR = 10

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

# --- advantage degeneracy ---------------------------------------------------------------------
#: End level of ``frac_reward_zero_std`` from which the finding is "high" ...
DEGENERACY_HIGH = 0.9
#: ... and from which it is a "warning" when the fraction has been rising significantly.
DEGENERACY_WARNING = 0.5
#: A logged ``reward_std`` at most this is zero (every group's rewards equal: TRL logs the mean of
#: the per-group standard deviations), used when ``frac_reward_zero_std`` is not logged.
ZERO_STD_TOL = 1e-9

# --- policy concentration ---------------------------------------------------------------------
#: Entropy at the end below this share of its start level, and falling: "warning" ...
ENTROPY_WARNING_RATIO = 0.1
#: ... below this share: "high".
ENTROPY_HIGH_RATIO = 0.03

# --- reward hacking ---------------------------------------------------------------------------
#: A validation fall counts when its Theil-Sen change over the last half is at least this share of
#: the validation metric's range over the run.
HACK_MIN_VAL_DROP = 0.1
#: Completion length at the end at least this multiple of its start level, and rising over the
#: last half, is a runaway.
LENGTH_RUNAWAY_RATIO = 2.0
#: Validation metrics looked for, in order: an exact column name or a prefix.
VALIDATION_COLUMNS: tuple[str, ...] = ("val_reward", "val-core/", "val/", "test_score/", "val-aux/")
#: Completion-length metrics looked for, in order.
LENGTH_COLUMNS: tuple[str, ...] = ("completion_length", "response_length/mean")

# --- oscillation ------------------------------------------------------------------------------
#: Families fitted to one run: the oscillator and the overdamped families it must beat.
OSC_FAMILIES: tuple[str, ...] = ("oscillator", "exp", "weibull")
#: "Clearly better": the oscillator's ELPD exceeds the best overdamped family's by more than this
#: (a difference of a few units is within LOO's own noise: Sivula, Magnusson and Vehtari 2022) ...
OSC_MIN_ELPD_DIFF = 4.0
#: ... and by more than this many standard errors of the paired difference ...
OSC_SE_MULT = 2.0
#: ... with the oscillator ringing: ``P(zeta < 1)`` at least this.
OSC_PROB_UNDERDAMPED = 0.9
#: LOO points whose Pareto k exceeds ArviZ's threshold ``min(1 - 1/log10(S), PARETO_K_BAD)`` for
#: S draws (0.64 for 2 x 300) are unreliable (Vehtari et al. 2024); they are counted in the evidence.
PARETO_K_BAD = 0.7
#: Fewest finite points to look for oscillation.
OSC_MIN_POINTS = 20
#: Every run is fitted on this many points (binned by ``model.data.prepare`` when longer, padded
#: and masked when shorter), so one compiled model serves every run.
OSC_MAX_POINTS = 60
#: Prior scale of ``log tau`` in the single-run fits. The population model's (1, around 0.3 of
#: the span) puts a ringing run with several periods (``tau`` about 0.01: ``tau = 2 zeta /
#: omega``) three scales out; 2 reaches it. Used for every family, so the comparison is fair.
OSC_TAU_LOG_SCALE = 2.0
#: Smallest noise scale of one point, in normalised reward (as the population model's).
OSC_NOISE_FLOOR = 0.01
#: Sampler settings of each single-run fit.
OSC_DRAWS = 300
OSC_TUNE = 300
OSC_CHAINS = 2
OSC_TARGET_ACCEPT = 0.9

_ACTIONS = {
    "collapse": (
        "Stop the run and restart from the checkpoint before the fall (step {peak_step:g}); lower "
        "the learning rate, raise the KL penalty or clip ratio, and check the reward function and "
        "the rollouts after the fall."
    ),
    "stall": (
        "The run is not improving and is far below comparable runs: stop it, or change what "
        "limits it (learning rate, prompt difficulty, group size, reward shaping)."
    ),
    "stall_never": (
        "The reward has not risen at all: check that the reward function can be satisfied (look "
        "at a few completions and their rewards), the learning rate and that gradients flow."
    ),
    "stall_early": (
        "No gain yet, but runs that learn often start this slowly: keep it running if a few "
        "completions show the reward can be earned; otherwise check the reward function, the "
        "learning rate and that gradients flow."
    ),
    "advantage_degeneracy": (
        "Most groups give every completion the same reward, so GRPO advantages are zero: if the "
        "reward is at its ceiling the prompts are solved (add harder ones or stop); otherwise "
        "raise the group size or temperature, or use a denser reward."
    ),
    "policy_concentration": (
        "The policy's entropy has collapsed, so exploration has stopped: raise the sampling "
        "temperature or an entropy bonus, lower the learning rate, or use a clip-higher rule."
    ),
    "oscillation": (
        "The reward rings around its level (damping ratio {zeta:.2f}, period about {period:.0f} "
        "steps): updates overshoot. Lower the learning rate, or raise the KL penalty or tighten "
        "the clip range; judge the level from the fitted asymptote, not from a peak or a trough."
    ),
    "reward_hacking": (
        "The training reward rises while {what}: inspect completions for exploits of the reward "
        "function, evaluate on held-out prompts, and consider a length penalty or a stronger KL."
    ),
}


@dataclass(frozen=True)
class Finding:
    """One problem found in one run.

    Attributes
    ----------
    run_id : str
    name : str
        ``"collapse"``, ``"stall"``, ``"advantage_degeneracy"``, ``"policy_concentration"``,
        ``"reward_hacking"`` or ``"oscillation"``.
    severity : str
        One of :data:`SEVERITIES`.
    first_step, last_step : int
        The steps the finding covers.
    evidence : dict
        The signals and values that raised it (plain floats, ints and strings).
    action : str
        What to do about it.
    """

    run_id: str
    name: str
    severity: str
    first_step: int
    last_step: int
    evidence: dict[str, Any] = field(default_factory=dict)
    action: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise BayesGRPOError(f"severity {self.severity!r} is not one of {SEVERITIES}.")


# --------------------------------------------------------------------------------------------
# Robust trend and level statistics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Trend:
    """Robust trend of a series: Theil-Sen slope and Mann-Kendall one-sided p-values.

    Attributes
    ----------
    slope, slope_low, slope_high : float
        Theil-Sen slope per step with its 90% interval.
    tau : float
        Kendall's tau of value against step (0 for a constant series).
    p_increase, p_decrease : float
        One-sided p-values of "rising" and "falling" (1 for a constant series).
    change : float
        ``slope * (last step - first step)``: the change the slope makes over the series.
    n : int
    """

    slope: float
    slope_low: float
    slope_high: float
    tau: float
    p_increase: float
    p_decrease: float
    change: float
    n: int

    def rising(self, alpha: float = TREND_ALPHA) -> bool:
        return self.tau > 0 and self.p_increase < alpha

    def falling(self, alpha: float = TREND_ALPHA) -> bool:
        return self.tau < 0 and self.p_decrease < alpha


def _clean(steps: Any, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Finite (step, value) pairs, sorted by step."""
    x = np.asarray(steps, dtype=float)
    y = np.asarray(values, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise BayesGRPOError(
            f"steps and values must be 1-d arrays of one length; got shapes {x.shape} and {y.shape}."
        )
    keep = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[keep], kind="stable")
    return x[keep][order], y[keep][order]


def trend(steps: Any, values: Any) -> Trend:
    """Theil-Sen slope and Mann-Kendall test of ``values`` against ``steps``.

    Parameters
    ----------
    steps, values : array_like, shape (n,)
        Non-finite pairs are dropped.

    Returns
    -------
    Trend
    """
    x, y = _clean(steps, values)
    n = len(x)
    if n < 3 or np.ptp(y) == 0 or np.ptp(x) == 0:
        return Trend(0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, n)
    slope, _, low, high = stats.theilslopes(y, x, alpha=0.90)
    tau, p_up = stats.kendalltau(x, y, alternative="greater")
    _, p_down = stats.kendalltau(x, y, alternative="less")
    return Trend(
        slope=float(slope), slope_low=float(low), slope_high=float(high), tau=float(tau),
        p_increase=float(p_up), p_decrease=float(p_down), change=float(slope * (x[-1] - x[0])), n=n,
    )


def _edge_count(n: int) -> int:
    return min(n, max(EDGE_MIN_POINTS, math.ceil(EDGE_FRACTION * n)))


def _start_level(y: np.ndarray) -> float:
    return float(np.median(y[: _edge_count(len(y))]))


def _end_level(y: np.ndarray) -> float:
    return float(np.median(y[-_edge_count(len(y)):]))


def _smooth(y: np.ndarray) -> np.ndarray:
    window = max(3, len(y) // SMOOTH_DIVISOR)
    return pd.Series(y).rolling(window, center=True, min_periods=1).median().to_numpy()


def _noise(y: np.ndarray) -> float:
    """Robust scale of point-to-point noise: MAD of first differences / sqrt(2)."""
    if len(y) < 3:
        return 0.0
    d = np.diff(y)
    return float(1.4826 * np.median(np.abs(d - np.median(d))) / math.sqrt(2.0))


def _last_half(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    start = len(x) // 2
    return x[start:], y[start:]


def _trend_evidence(prefix: str, tr: Trend) -> dict[str, float]:
    return {
        f"{prefix}_slope": tr.slope,
        f"{prefix}_change": tr.change,
        f"{prefix}_tau": tr.tau,
        f"{prefix}_p_increase": tr.p_increase,
        f"{prefix}_p_decrease": tr.p_decrease,
    }


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
    x, y = _clean(steps, reward)
    n = len(x)
    if n < MIN_POINTS:
        return []
    smooth = _smooth(y)
    base = min(_start_level(y), float(smooth.min())) if floor is None else float(floor)
    i_peak = int(np.argmax(smooth))
    peak = float(smooth[i_peak])
    noise = _noise(y)
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
        Finding(run_id, "collapse", "high", int(x[start]), int(x[-1]), evidence,
                _ACTIONS["collapse"].format(peak_step=x[i_peak]))
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
    x, y = _clean(steps, reward)
    if len(x) < MIN_POINTS:
        return []
    hx, hy = _last_half(x, y)
    tr = trend(hx, hy)
    end = _end_level(y)
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
        **_trend_evidence("last_half", tr),
    }
    if prob_no_gain is not None:
        evidence["prob_no_gain"] = float(prob_no_gain)
    severity = "high" if gap >= STALL_HIGH_GAP else "warning"
    return [Finding(run_id, "stall", severity, int(hx[0]), int(hx[-1]), evidence, _ACTIONS["stall"])]


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
    x, y = _clean(steps, values)
    if len(x) < 3:
        return math.inf, math.inf, 0.0
    low, high = np.quantile(y, [0.05, 0.95])
    spread = float(high - low)
    if spread <= 0:
        return 0.0, 0.0, 0.0
    hx, hy = _last_half(x, y)
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
    start, end = _start_level(y), _end_level(y)
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
        **_trend_evidence("run", whole),
        **_trend_evidence("last_half", last_half),
    }
    if prob_no_gain is not None:
        evidence["prob_no_gain"] = float(prob_no_gain)
        evidence["reason"] = "no significant gain so far and none expected (posterior); no comparable runs"
        return [Finding(run_id, "stall", "warning", int(x[0]), int(x[-1]), evidence,
                        _ACTIONS["stall_never"])]
    if max(run_bound, half_bound, level_gain) >= STALL_FLAT_FRACTION:
        # too short or noisy to rule a gain out, or it ends well above its start (a fast rise,
        # then a plateau or ringing that hides it from the trend test): no evidence of no gain
        return []
    if span >= STALL_NEVER_MIN_STEPS:
        evidence["reason"] = "no gain over the whole run (shown flat); no comparable runs to measure a gap"
        return [Finding(run_id, "stall", "warning", int(x[0]), int(x[-1]), evidence,
                        _ACTIONS["stall_never"])]
    evidence["reason"] = (
        f"no gain yet (shown flat) over {span:.0f} steps, fewer than the "
        f"{STALL_NEVER_MIN_STEPS} a slow start can last; no comparable runs to measure a gap"
    )
    return [Finding(run_id, "stall", "info", int(x[0]), int(x[-1]), evidence, _ACTIONS["stall_early"])]


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
    _, y = _clean(steps, reward)
    if len(y) < MIN_POINTS:
        return False
    k = _edge_count(len(y))
    tail = y[-k:]
    span = float(np.max(y) - np.min(y))
    if span <= 0:
        return False
    if reward_max is not None and np.isfinite(reward_max):
        return bool(float(np.mean(tail)) >= reward_max - 5 * CEILING_TOLERANCE * span)
    return bool(float(np.max(y) - np.mean(tail)) <= CEILING_TOLERANCE * span
                and float(np.ptp(tail)) <= CEILING_TOLERANCE * span)


def detect_advantage_degeneracy(
    steps: Any, frac_zero_std: Any, *, signal: str = "frac_reward_zero_std", run_id: str = "",
    solved: bool = False,
) -> list[Finding]:
    """The fraction of groups with zero reward spread rises toward 1.

    The end level is the *mean* of the last :data:`EDGE_FRACTION` of the series (so a 0/1 series
    "every group degenerate at this step" works too). ``"high"`` from :data:`DEGENERACY_HIGH`;
    ``"warning"`` from :data:`DEGENERACY_WARNING` when the fraction rose significantly over the run.
    A run whose reward sits at its ceiling (``solved``, see :func:`reward_at_ceiling`) gets
    ``"info"``: every completion succeeds, so groups agree because the prompts are solved; the run
    is healthy and further steps teach nothing.

    Parameters
    ----------
    steps, frac_zero_std : array_like, shape (n,)
        Values in [0, 1].
    signal : str
        The metric's name, for the evidence.
    run_id : str
    solved : bool
        The run's reward is at its ceiling.
    """
    x, f = _clean(steps, frac_zero_std)
    n = len(x)
    if n < MIN_POINTS:
        return []
    k = _edge_count(n)
    end = float(np.mean(f[-k:]))
    start = float(np.mean(f[:k]))
    tr = trend(x, f)
    if end >= DEGENERACY_HIGH:
        severity = "high"
    elif end >= DEGENERACY_WARNING and tr.rising():
        severity = "warning"
    else:
        return []
    action = _ACTIONS["advantage_degeneracy"]
    if solved:
        severity = "info"
        action = ("The reward sits at its ceiling: groups agree because every completion succeeds. "
                  "The run has learnt what these prompts teach; stop, or add harder prompts.")
    evidence = {"signal": signal, "start_level": start, "end_level": end, "reward_at_ceiling": solved,
                **_trend_evidence("run", tr)}
    return [Finding(run_id, "advantage_degeneracy", severity, int(x[-k]), int(x[-1]), evidence, action)]


def detect_policy_concentration(steps: Any, entropy: Any, *, run_id: str = "") -> list[Finding]:
    """Entropy collapse: the end level falls below a small share of the start level.

    ``ratio = end / start`` (medians of the first and last :data:`EDGE_FRACTION`); with the entropy
    falling significantly over the run, ``ratio < ENTROPY_WARNING_RATIO`` is a ``"warning"`` and
    ``ratio < ENTROPY_HIGH_RATIO`` ``"high"``.

    Parameters
    ----------
    steps, entropy : array_like, shape (n,)
    run_id : str
    """
    x, h = _clean(steps, entropy)
    n = len(x)
    if n < MIN_POINTS:
        return []
    start, end = _start_level(h), _end_level(h)
    if not start > 0:
        return []
    ratio = end / start
    tr = trend(x, h)
    if not tr.falling() or ratio >= ENTROPY_WARNING_RATIO:
        return []
    severity = "high" if ratio < ENTROPY_HIGH_RATIO else "warning"
    evidence = {"signal": "entropy", "start_level": start, "end_level": end, "ratio": ratio,
                **_trend_evidence("run", tr)}
    k = _edge_count(n)
    return [
        Finding(run_id, "policy_concentration", severity, int(x[-k]), int(x[-1]), evidence,
                _ACTIONS["policy_concentration"])
    ]


def detect_reward_hacking(
    steps: Any,
    reward: Any,
    *,
    val_steps: Any = None,
    val_reward: Any = None,
    length_steps: Any = None,
    length: Any = None,
    val_signal: str = "val_reward",
    length_signal: str = "completion_length",
    run_id: str = "",
) -> list[Finding]:
    """The training reward rises while validation falls or the completion length runs away.

    Over the last half of the run's steps (from the middle step of the reward to its last step):
    the reward rises significantly (Mann-Kendall) and either the validation reward falls
    significantly over the same steps, by at least :data:`HACK_MIN_VAL_DROP` of its range over the
    run (``"high"``), or the completion length ends at least
    :data:`LENGTH_RUNAWAY_RATIO` times its start level and rises significantly over those steps
    (``"warning"``).

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    val_steps, val_reward : array_like, optional
        The validation metric (logged more sparsely).
    length_steps, length : array_like, optional
        The mean completion length.
    val_signal, length_signal : str
        The metrics' names, for the evidence.
    run_id : str
    """
    x, y = _clean(steps, reward)
    if len(x) < MIN_POINTS:
        return []
    hx, hy = _last_half(x, y)
    tr_reward = trend(hx, hy)
    if not tr_reward.rising():
        return []
    lo, hi = hx[0], hx[-1]
    evidence: dict[str, Any] = {"signal": "reward", **_trend_evidence("reward", tr_reward)}
    reasons: list[str] = []
    severity = ""
    if val_steps is not None and val_reward is not None:
        vx, vy = _clean(val_steps, val_reward)
        window = (vx >= lo) & (vx <= hi)
        if window.sum() >= 4:
            tr_val = trend(vx[window], vy[window])
            val_range = float(np.ptp(vy))
            if tr_val.falling() and -tr_val.change >= HACK_MIN_VAL_DROP * val_range > 0:
                severity = "high"
                reasons.append(f"{val_signal} falls")
                evidence.update({"val_signal": val_signal, "val_peak": float(vy.max()),
                                 "val_end": _end_level(vy), **_trend_evidence("val", tr_val)})
    if length_steps is not None and length is not None:
        lx, ly = _clean(length_steps, length)
        if len(lx) >= MIN_POINTS:
            start = _start_level(ly)
            end = _end_level(ly)
            window = (lx >= lo) & (lx <= hi)
            tr_len = trend(lx[window], ly[window])
            if start > 0 and end / start >= LENGTH_RUNAWAY_RATIO and tr_len.rising():
                severity = severity or "warning"
                reasons.append(f"{length_signal} runs away")
                evidence.update({"length_signal": length_signal, "length_start": start,
                                 "length_end": end, "length_ratio": end / start,
                                 **_trend_evidence("length", tr_len)})
    if not reasons:
        return []
    what = " and ".join(reasons)
    return [
        Finding(run_id, "reward_hacking", severity, int(lo), int(hi), evidence,
                _ACTIONS["reward_hacking"].format(what=what))
    ]


# --------------------------------------------------------------------------------------------
# Oscillation: the oscillator family against overdamped ones, by LOO
# --------------------------------------------------------------------------------------------


def loo_difference(pointwise_a: Any, pointwise_b: Any) -> tuple[float, float]:
    """ELPD difference of two models and its standard error, from pointwise LOO values.

    The paired estimate of ``arviz.compare``: ``sum(a_i - b_i)`` and ``sqrt(n * var(a_i - b_i))``
    (``var`` with divisor ``n``, as ArviZ).

    Parameters
    ----------
    pointwise_a, pointwise_b : array_like, shape (n,)
        Pointwise ``elpd_loo`` of the two models on the same points (``arviz.loo(...,
        pointwise=True).loo_i``).

    Returns
    -------
    elpd_diff, se : float
        Positive ``elpd_diff``: model ``a`` predicts left-out points better.
    """
    a = np.asarray(pointwise_a, dtype=float)
    b = np.asarray(pointwise_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise BayesGRPOError(
            f"pointwise LOO values must be 1-d arrays of one length >= 2; got {a.shape} and {b.shape}."
        )
    diff = a - b
    return float(diff.sum()), float(math.sqrt(diff.size * np.var(diff)))


def oscillation_is_clear(elpd_diff: float, se: float, prob_underdamped: float) -> bool:
    """The decision rule: the oscillator predicts clearly better, and rings.

    ``elpd_diff > OSC_MIN_ELPD_DIFF`` and ``elpd_diff > OSC_SE_MULT * se`` (a difference of a
    few ELPD units is within LOO's own noise, and one within two standard errors may be chance),
    and ``P(zeta < 1) >= OSC_PROB_UNDERDAMPED`` (an oscillator fit that does not ring is no
    oscillation: with ``zeta >= 1`` it is another monotone curve).
    """
    return bool(
        elpd_diff > OSC_MIN_ELPD_DIFF
        and elpd_diff > OSC_SE_MULT * se
        and prob_underdamped >= OSC_PROB_UNDERDAMPED
    )


def oscillator_summary(
    tau: Any, zeta: Any, r0: Any, r1: Any, *, steps_per_unit: float, reward_range: float
) -> dict[str, np.ndarray]:
    """Ringing of oscillator draws: damping ratio, period and overshoot, per draw.

    Parameters
    ----------
    tau, zeta, r0, r1 : array_like, shape (S,)
        Draws of the oscillator's parameters (normalised progress and reward).
    steps_per_unit : float
        Steps per unit of normalised progress.
    reward_range : float
        Reward units per unit of normalised reward.

    Returns
    -------
    dict of str to ndarray, shape (S,)
        ``zeta``; ``period`` in steps, ``2 pi / (omega sqrt(1 - zeta^2))`` with
        ``omega = 2 zeta / tau`` (``inf`` where ``zeta >= 1``); ``overshoot``, the first peak's
        excess over the asymptote as a share of the gain, ``exp(-pi zeta / sqrt(1 - zeta^2))``
        (0 where ``zeta >= 1``); ``overshoot_reward``, the same in reward units.
    """
    tau, zeta, r0, r1 = (np.asarray(v, dtype=float) for v in (tau, zeta, r0, r1))
    under = zeta < 1.0
    root = np.sqrt(np.where(under, 1.0 - zeta**2, 1.0))
    omega = oscillator_omega(tau, zeta)
    period = np.where(under, 2.0 * np.pi / (omega * root), np.inf) * steps_per_unit
    overshoot = np.where(under, np.exp(-np.pi * zeta / root), 0.0)
    gain = asymptote_from_levels("oscillator", r0, r1, tau=tau, zeta=zeta) - r0
    return {
        "zeta": zeta,
        "period": period,
        "overshoot": overshoot,
        "overshoot_reward": overshoot * np.abs(gain) * reward_range,
    }


@dataclass(frozen=True)
class OscillationFit:
    """The oscillator and overdamped families fitted to one run, compared by LOO.

    Attributes
    ----------
    elpd : dict of str to float
        ``elpd_loo`` of each family.
    elpd_se : dict of str to float
    rival : str
        The overdamped family with the highest ``elpd_loo``.
    elpd_diff, elpd_diff_se : float
        ``elpd_loo(oscillator) - elpd_loo(rival)`` and its paired standard error.
    prob_underdamped : float
        Posterior ``P(zeta < 1)`` of the oscillator fit.
    ringing : dict of str to ndarray
        :func:`oscillator_summary` of the oscillator's draws.
    pareto_k_bad : dict of str to int
        Points whose Pareto k exceeds ArviZ's threshold (see :data:`PARETO_K_BAD`), per family:
        LOO is unreliable there.
    divergences : dict of str to int
    n_points : int
        Points fitted (after binning).
    seconds : float
        Wall time of the three fits and the LOO comparison.
    """

    elpd: dict[str, float]
    elpd_se: dict[str, float]
    rival: str
    elpd_diff: float
    elpd_diff_se: float
    prob_underdamped: float
    ringing: dict[str, np.ndarray]
    pareto_k_bad: dict[str, int]
    divergences: dict[str, int]
    n_points: int
    seconds: float

    @property
    def clear(self) -> bool:
        """:func:`oscillation_is_clear` of this fit."""
        return oscillation_is_clear(self.elpd_diff, self.elpd_diff_se, self.prob_underdamped)


def _shape_prior_scale(family: str, name: str) -> float:
    """Prior scale of a shape parameter's log in the single-run fits (see :data:`OSC_TAU_LOG_SCALE`)."""
    return OSC_TAU_LOG_SCALE if name == "tau" else CURVES[family].priors[name].log_scale


def _single_run_graph(family: str, n_points: int) -> tuple[list[str], list[Any], list[Any], Any]:
    """The single-run model of one family: PyMC variables, data inputs, outputs.

    ``logit r0, logit r1 ~`` the population model's default priors for a run (``r0_mu``,
    ``r1_mu``), log shape parameters as :data:`bayesgrpo.model.curves.CURVES` with ``tau``'s scale
    widened, ``log sigma`` and ``nu`` as the population model; ``y ~ StudentT(nu, R(t),
    sigma * scale)`` on the points where ``mask``.

    Returns
    -------
    names : list of str
        Names of the free (unconstrained) variables, in the order of ``value_vars``.
    value_vars : list of TensorVariable
    data_inputs : list of TensorVariable
        Symbolic ``t, y, scale, mask`` (length ``n_points``).
    outputs : tuple of TensorVariable
        The model's joint log density and the pointwise log-likelihood (0 where masked out).
    """
    import pymc as pm
    import pytensor.tensor as pt
    from pytensor.graph.replace import clone_replace

    from bayesgrpo.model.priors import curve_params, default_priors

    priors = default_priors(family)
    spec = CURVES[family]
    with pm.Model() as model:
        shared = {name: pm.Data(name, np.zeros(n_points)) for name in ("t", "y", "scale", "mask")}
        values = {}
        for p in curve_params(family):
            if p in spec.shape_params:
                values[p] = pm.Normal(f"log_{p}", spec.priors[p].log_centre, _shape_prior_scale(family, p))
            else:
                values[p] = priors[f"{p}_mu"].create_variable(f"logit_{p}")
        log_sigma = priors["sigma_mu"].create_variable("log_sigma")
        nu = priors["nu"].create_variable("nu_minus_one") + 1.0
        shape = {name: pt.exp(values[name]) for name in spec.shape_params}
        mean = reward_curve_by_levels(family, shared["t"], pt.sigmoid(values["r0"]),
                                      pt.sigmoid(values["r1"]), **shape)
        sigma = pt.sqrt(pt.exp(2.0 * log_sigma) + OSC_NOISE_FLOOR**2) * shared["scale"]
        observed = shared["mask"] > 0
        pointwise = pt.where(observed, pm.logp(pm.StudentT.dist(nu=nu, mu=mean, sigma=sigma), shared["y"]), 0.0)
        pm.Potential("loglike", pointwise.sum())
    inputs = {name: pt.vector(name, dtype="float64") for name in shared}
    replace = {shared[name]: inputs[name] for name in shared}
    (pointwise_values,) = model.replace_rvs_by_values([pointwise])  # in terms of the free variables
    outputs = clone_replace([model.logp(), pointwise_values], replace=replace)
    names = [v.name for v in model.value_vars]
    return names, list(model.value_vars), list(inputs.values()), outputs


@functools.cache
def _compiled_fit(
    family: str, n_points: int, draws: int, tune: int
) -> tuple[list[str], Callable[..., Any], Callable[..., Any]]:
    """One family's single-run sampler, compiled once (JAX) and reused for every run.

    Call it, and what it returns, inside ``jax.enable_x64(True)``.

    Returns
    -------
    names : list of str
        The free variables, in the order of a point's coordinates.
    sample : callable
        ``sample(keys, x0, t, y, scale, mask) -> (draws, divergent, loglik)``: numpyro's NUTS
        (``tune`` warm-up iterations, then ``draws``), one chain per key, all chains vectorised;
        ``draws`` (chains, draws, P) unconstrained, ``loglik`` (chains, draws, n_points).
    log_density : callable
        ``log_density(xs, t, y, scale, mask)`` of a batch of points ``xs`` (B, P).
    """
    import jax
    from numpyro.infer.hmc import hmc
    from pymc.sampling.jax import get_jaxified_graph

    names, value_vars, data_inputs, outputs = _single_run_graph(family, n_points)
    n_params = len(names)
    jax_fn = get_jaxified_graph(inputs=[*value_vars, *data_inputs], outputs=outputs)

    def logp_and_pointwise(x: Any, data: tuple[Any, ...]) -> tuple[Any, Any]:
        logp, pointwise = jax_fn(*(x[i] for i in range(n_params)), *data)
        return logp, pointwise

    def one_chain(key: Any, x0: Any, *data: Any) -> tuple[Any, Any, Any]:
        init_kernel, sample_kernel = hmc(potential_fn=lambda x: -logp_and_pointwise(x, data)[0], algo="NUTS")
        state = init_kernel(x0, num_warmup=tune, target_accept_prob=OSC_TARGET_ACCEPT, rng_key=key)

        def step(state: Any, _: Any) -> tuple[Any, tuple[Any, Any]]:
            state = sample_kernel(state)
            return state, (state.z, state.diverging)

        _, (z, divergent) = jax.lax.scan(step, state, None, length=tune + draws)
        z, divergent = z[tune:], divergent[tune:]
        loglik = jax.vmap(lambda x: logp_and_pointwise(x, data)[1])(z)
        return z, divergent, loglik

    sample = jax.jit(jax.vmap(one_chain, in_axes=(0, 0, None, None, None, None)))
    log_density = jax.jit(jax.vmap(lambda x, *data: logp_and_pointwise(x, data)[0],
                                   in_axes=(0, None, None, None, None)))
    return names, sample, log_density


def _logit_clipped(value: float) -> float:
    """Logit of a normalised level, clipped into [0.02, 0.98]."""
    v = min(max(value, 0.02), 0.98)
    return math.log(v / (1.0 - v))


def _start_grid(names: list[str], y: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Candidate starting points (B, P): the run's edge levels and noise, shapes on a grid.

    Ringing fits are multimodal in the period; NUTS starts from the best of these.
    """
    obs = y[mask > 0]
    k = _edge_count(len(obs))
    base = {
        "logit_r0": _logit_clipped(float(np.median(obs[:k]))),
        "logit_r1": _logit_clipped(float(np.median(obs[-k:]))),
        "log_sigma": math.log(max(_noise(obs), OSC_NOISE_FLOOR)),
        "nu_minus_one_log__": math.log(10.0),
    }
    grids = {
        "log_tau": np.log(np.geomspace(0.003, 3.0, 16)),
        "log_zeta": np.log([0.08, 0.15, 0.3, 0.6, 1.2, 2.5]),
        "log_k": np.log([0.5, 1.0, 2.0, 4.0]),
    }
    axes = [grids[n] if n in grids else np.array([base[n]]) for n in names]
    mesh = np.meshgrid(*axes, indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=-1)


def _fit_family(
    family: str, data: tuple[np.ndarray, ...], *, draws: int, tune: int, chains: int, seed: int
) -> tuple[dict[str, np.ndarray], np.ndarray, int]:
    """Sample one family's single-run model: (draws by name (chains, draws), loglik, divergences)."""
    import jax

    with jax.enable_x64(True):
        names, sample, log_density = _compiled_fit(family, len(data[0]), draws, tune)
        grid = _start_grid(names, data[1], data[3])
        scores = np.asarray(log_density(grid, *data))
        best = grid[int(np.nanargmax(np.where(np.isfinite(scores), scores, -np.inf)))]
        rng = np.random.default_rng(seed)
        x0 = best + rng.normal(0.0, 0.05, size=(chains, len(names)))
        keys = jax.random.split(jax.random.PRNGKey(seed), chains)
        z, divergent, loglik = sample(keys, x0, *data)
        z, loglik = np.asarray(z), np.asarray(loglik)
    posterior = {name: z[..., i] for i, name in enumerate(names)}
    return posterior, loglik, int(np.asarray(divergent).sum())


def _one_run_data(
    x: np.ndarray, y: np.ndarray, lower: float | None, upper: float | None
) -> tuple[tuple[np.ndarray, ...], float, float, int]:
    """Padded ``(t, y, scale, mask)`` of one run, normalised and binned by ``model.data.prepare``.

    Returns the arrays (length :data:`OSC_MAX_POINTS`), steps per unit of progress, the reward
    range of the normalisation, and the number of points.
    """
    from bayesgrpo.model.data import prepare
    from bayesgrpo.logs.table import RunsTable, coerce_metadata

    points = pd.DataFrame({"run_id": "run", "step": x.astype("int64"), "reward": y})
    meta = {"run_id": ["run"], "reward_min": [np.nan if lower is None else lower],
            "reward_max": [np.nan if upper is None else upper]}
    table = RunsTable(points=points.drop_duplicates("step", keep="last"),
                      runs=coerce_metadata(pd.DataFrame(meta)))
    data = prepare(table, horizon=float(x[-1]), max_points=OSC_MAX_POINTS)
    n = int(data.mask[0].sum())
    padded = []
    for values, fill in ((data.t, 0.0), (data.y, 0.0), (data.noise_scale, 1.0), (data.mask, 0.0)):
        row = np.full(OSC_MAX_POINTS, fill)
        row[:n] = values[0, :n]
        padded.append(row.astype(float))
    steps_per_unit = float(data.progress_scale[0] / data.step_to_progress[0])
    return tuple(padded), steps_per_unit, float(data.upper[0] - data.lower[0]), n


def fit_oscillation(
    steps: Any,
    reward: Any,
    *,
    lower: float | None = None,
    upper: float | None = None,
    draws: int = OSC_DRAWS,
    tune: int = OSC_TUNE,
    chains: int = OSC_CHAINS,
    random_seed: int = 0,
) -> OscillationFit:
    """Fit one run with the oscillator and the overdamped families and compare them by LOO.

    The reward is normalised and binned as for the population model (``model.data.prepare``,
    at most :data:`OSC_MAX_POINTS` points, progress 0 to 1 over the logged steps). Each family
    of :data:`OSC_FAMILIES` is a single-run model (no pooling) sampled by numpyro's NUTS,
    compiled once per family and reused for every run; its pointwise log-likelihood gives
    ``arviz.loo``.

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    lower, upper : float, optional
        Known reward bounds (else the observed range, widened as ``prepare`` does).
    draws, tune, chains : int
    random_seed : int

    Returns
    -------
    OscillationFit

    Raises
    ------
    BayesGRPOError
        With fewer than :data:`OSC_MIN_POINTS` finite points.
    """
    import arviz as az

    x, y = _clean(steps, reward)
    if len(x) < OSC_MIN_POINTS:
        raise BayesGRPOError(
            f"fit_oscillation needs at least {OSC_MIN_POINTS} finite points; got {len(x)}."
        )
    start = time.perf_counter()
    data, steps_per_unit, reward_range, n = _one_run_data(x, y, lower, upper)
    keep = data[3] > 0
    loo: dict[str, Any] = {}
    divergences: dict[str, int] = {}
    oscillator: dict[str, np.ndarray] = {}
    for i, family in enumerate(OSC_FAMILIES):
        posterior, loglik, divergences[family] = _fit_family(
            family, data, draws=draws, tune=tune, chains=chains, seed=random_seed + i
        )
        idata = az.from_dict(posterior=posterior, log_likelihood={"y": loglik[..., keep]})
        with warnings.catch_warnings():  # high Pareto k: counted in the result instead
            warnings.filterwarnings("ignore", message="Estimated shape parameter of Pareto")
            loo[family] = az.loo(idata, pointwise=True)
        if family == "oscillator":
            oscillator = posterior
    overdamped = [f for f in OSC_FAMILIES if f != "oscillator"]
    rival = max(overdamped, key=lambda f: float(loo[f].elpd_loo))
    diff, se = loo_difference(loo["oscillator"].loo_i.values, loo[rival].loo_i.values)
    flat = {name: v.ravel() for name, v in oscillator.items()}
    tau, zeta = np.exp(flat["log_tau"]), np.exp(flat["log_zeta"])
    ringing = oscillator_summary(
        tau, zeta, _sigmoid(flat["logit_r0"]), _sigmoid(flat["logit_r1"]),
        steps_per_unit=steps_per_unit, reward_range=reward_range,
    )
    return OscillationFit(
        elpd={f: float(loo[f].elpd_loo) for f in OSC_FAMILIES},
        elpd_se={f: float(loo[f].se) for f in OSC_FAMILIES},
        rival=rival,
        elpd_diff=diff,
        elpd_diff_se=se,
        prob_underdamped=float(np.mean(zeta < 1.0)),
        ringing=ringing,
        pareto_k_bad={f: int((np.asarray(loo[f].pareto_k) > float(loo[f].good_k)).sum()) for f in OSC_FAMILIES},
        divergences=divergences,
        n_points=n,
        seconds=time.perf_counter() - start,
    )


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    """Median and 90% interval (``inf`` allowed)."""
    low, mid, high = np.quantile(values, [0.05, 0.5, 0.95])
    return float(mid), float(low), float(high)


def detect_oscillation(
    steps: Any,
    reward: Any,
    *,
    lower: float | None = None,
    upper: float | None = None,
    run_id: str = "",
    draws: int = OSC_DRAWS,
    tune: int = OSC_TUNE,
    chains: int = OSC_CHAINS,
    random_seed: int = 0,
) -> list[Finding]:
    """The reward rings: the oscillator family predicts clearly better than overdamped ones.

    :func:`fit_oscillation` fits the run with the ``oscillator`` family and with ``exp`` and
    ``weibull`` and compares them by LOO (``arviz.loo``); :func:`oscillation_is_clear` decides.
    The evidence: the ELPD difference to the best overdamped family and its standard error, the
    damping ratio ``zeta``, the period ``2 pi / (omega sqrt(1 - zeta^2))`` in steps and the first
    overshoot (share of the gain and reward units), each as a median with its 90% interval (the
    period and overshoot over the underdamped draws), and the points where LOO is unreliable
    (Pareto k above ArviZ's threshold, see :data:`PARETO_K_BAD`).

    Parameters
    ----------
    steps, reward : array_like, shape (n,)
    lower, upper : float, optional
        Known reward bounds.
    run_id : str
    draws, tune, chains, random_seed
        As :func:`fit_oscillation`.

    Returns
    -------
    list of Finding
        Empty (also for series shorter than :data:`OSC_MIN_POINTS`), or one ``"oscillation"``
        finding of severity ``"warning"`` over the whole run.
    """
    x, y = _clean(steps, reward)
    if len(x) < OSC_MIN_POINTS:
        return []
    fit = fit_oscillation(x, y, lower=lower, upper=upper, draws=draws, tune=tune, chains=chains,
                          random_seed=random_seed)
    logger.debug("run %s: oscillator - %s elpd %.2f +- %.2f, P(zeta<1) %.2f (%.1f s)", run_id,
                 fit.rival, fit.elpd_diff, fit.elpd_diff_se, fit.prob_underdamped, fit.seconds)
    if not fit.clear:
        return []
    evidence: dict[str, Any] = {
        "signal": "reward",
        "test": "LOO (arviz.loo): oscillator against exp and weibull",
        "rival": fit.rival,
        "elpd_diff": fit.elpd_diff,
        "elpd_diff_se": fit.elpd_diff_se,
        **{f"elpd_{f}": v for f, v in fit.elpd.items()},
        "prob_underdamped": fit.prob_underdamped,
    }
    underdamped = fit.ringing["zeta"] < 1.0
    for name in ("zeta", "period", "overshoot", "overshoot_reward"):
        values = fit.ringing[name] if name == "zeta" else fit.ringing[name][underdamped]
        mid, low, high = _interval(values)
        evidence.update({name: mid, f"{name}_low": low, f"{name}_high": high})
    bad = {f: k for f, k in fit.pareto_k_bad.items() if k}
    evidence["pareto_k_bad"] = ", ".join(f"{f}: {k} of {fit.n_points}" for f, k in bad.items()) or "none"
    if any(fit.divergences.values()):
        evidence["divergences"] = ", ".join(f"{f}: {k}" for f, k in fit.divergences.items() if k)
    return [
        Finding(run_id, "oscillation", "warning", int(x[0]), int(x[-1]), evidence,
                _ACTIONS["oscillation"].format(zeta=evidence["zeta"], period=evidence["period"]))
    ]


# --------------------------------------------------------------------------------------------
# Over a runs table
# --------------------------------------------------------------------------------------------


def _series(frame: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray] | None:
    if column not in frame.columns:
        return None
    sub = frame[["step", column]].dropna()
    if len(sub) == 0:
        return None
    return sub["step"].to_numpy(dtype=float), sub[column].to_numpy(dtype=float)


def _find_column(frame: pd.DataFrame, candidates: Sequence[str]) -> str | None:
    present = [c for c in frame.columns if frame[c].notna().any()]
    for name in candidates:
        for column in present:
            if column == name or (name.endswith("/") and column.startswith(name)):
                return column
    return None


def _bound(meta: pd.Series, name: str) -> float | None:
    value = meta.get(name)
    if value is None or pd.isna(value):
        return None
    return float(value)


def _peer_references(
    runs: RunsTable, peer_keys: Sequence[str]
) -> dict[str, tuple[float, float, float]]:
    """Per run with comparable runs: (reference level, lower, upper) of its stall test.

    Runs are comparable when they share every metadata value in ``peer_keys`` (missing values
    match nothing). The reference is the best end level among the group (the run included); the
    range is the reward's known bounds, or the span of the group's smoothed rewards.
    """
    meta = runs.runs.set_index("run_id")
    finite = runs.points[np.isfinite(runs.points["reward"].to_numpy(dtype=float))]
    ends: dict[str, float] = {}
    spans: dict[str, tuple[float, float]] = {}
    for run_id, frame in finite.groupby("run_id", sort=False):
        _, y = _clean(frame["step"], frame["reward"])
        if len(y) >= MIN_POINTS:
            smooth = _smooth(y)
            ends[str(run_id)] = _end_level(y)
            spans[str(run_id)] = (float(smooth.min()), float(smooth.max()))
    keys = [k for k in peer_keys if k in meta.columns]
    if len(keys) != len(peer_keys):
        return {}
    out: dict[str, tuple[float, float, float]] = {}
    groups = meta.loc[[r for r in ends if r in meta.index], keys].dropna()
    for _, group in groups.groupby(keys, sort=False):
        members = [str(r) for r in group.index]
        if len(members) < 2:
            continue
        reference = max(ends[r] for r in members)
        span_lo = min(spans[r][0] for r in members)
        span_hi = max(spans[r][1] for r in members)
        for r in members:
            lower, upper = _bound(meta.loc[r], "reward_min"), _bound(meta.loc[r], "reward_max")
            if lower is None or upper is None or not upper > lower:
                lower, upper = span_lo, span_hi
            out[r] = (reference, lower, upper)
    return out


def _prob_no_gain(fitted_model: Any, last_steps: dict[str, float]) -> dict[str, float]:
    """``P(R(2s) - R(s) < STALL_EPS * range)`` per fitted run, at its last observed step ``s``."""
    from bayesgrpo.questions.stopping import prob_gain_below

    cd = fitted_model.curve_draws()
    ids = list(cd.run_ids or [])
    s = np.array([last_steps.get(r, np.nan) for r in ids], dtype=float)
    known = np.isfinite(s)
    if not known.any():
        return {}
    s = np.where(known, s, 0.0)
    probs = prob_gain_below(cd, s, 2.0 * s, eps=STALL_EPS, relative=True)
    return {r: float(p) for r, p, k in zip(ids, probs, known, strict=True) if k}


def findings_by_run(
    runs: RunsTable,
    fitted_model: Any = None,
    *,
    peer_keys: Sequence[str] = ("family", "task"),
    oscillation: bool = False,
    random_seed: int = 0,
) -> dict[str, list[Finding]]:
    """Every detector on every run of a table.

    Parameters
    ----------
    runs : RunsTable
    fitted_model : optional
        A fitted model with ``curve_draws()`` (:class:`bayesgrpo.model.RewardModel`); its posterior
        replaces the stall detector's trend test for the runs it was fitted on.
    peer_keys : sequence of str
        Metadata columns that make runs comparable for the stall detector's reference level.
    oscillation : bool
        Also run :func:`detect_oscillation`: three small MCMC fits per run, a few seconds each
        (plus about a minute to compile them once per process), so off by default.
    random_seed : int
        Seed of the oscillation fits.

    Returns
    -------
    dict of str to list of Finding
        Every run of the table, in its order, with its findings (possibly none).
    """
    references = _peer_references(runs, peer_keys)
    meta = runs.runs.set_index("run_id")
    grouped = dict(tuple(runs.points.groupby("run_id", sort=False)))
    out: dict[str, list[Finding]] = {}
    last_steps: dict[str, float] = {}
    for run_id in runs.run_ids:
        frame = grouped.get(run_id)
        series = None if frame is None else _series(frame, "reward")
        if series is not None:
            last_steps[run_id] = float(series[0].max())
    prob_no_gain = {} if fitted_model is None else _prob_no_gain(fitted_model, last_steps)
    for run_id in runs.run_ids:
        found: list[Finding] = []
        frame = grouped.get(run_id)
        out[run_id] = found
        if frame is None:
            continue
        frame = frame.dropna(axis=1, how="all")
        reward = _series(frame, "reward")
        if reward is not None:
            collapse = detect_collapse(*reward, floor=_bound(meta.loc[run_id], "reward_min"),
                                       run_id=run_id)
            found += collapse
            reference, lower, upper = references.get(run_id, (None, None, None))
            if not collapse:  # a collapsed run is not also called stalled
                found += detect_stall(*reward, reference=reference, lower=lower, upper=upper,
                                      prob_no_gain=prob_no_gain.get(run_id), run_id=run_id)
            if oscillation:
                found += detect_oscillation(
                    *reward, lower=_bound(meta.loc[run_id], "reward_min"),
                    upper=_bound(meta.loc[run_id], "reward_max"), run_id=run_id,
                    random_seed=random_seed,
                )
        solved = reward is not None and reward_at_ceiling(*reward, reward_max=_bound(meta.loc[run_id], "reward_max"))
        frac = _series(frame, "frac_reward_zero_std")
        if frac is not None:
            found += detect_advantage_degeneracy(*frac, run_id=run_id, solved=solved)
        else:
            spread = _series(frame, "reward_std")
            if spread is not None:
                zero = (np.abs(spread[1]) <= ZERO_STD_TOL).astype(float)
                found += detect_advantage_degeneracy(
                    spread[0], zero, signal="reward_std == 0 (every group)", run_id=run_id, solved=solved
                )
        entropy = _series(frame, "entropy")
        if entropy is not None:
            found += detect_policy_concentration(*entropy, run_id=run_id)
        if reward is not None:
            val_column = _find_column(frame, VALIDATION_COLUMNS)
            length_column = _find_column(frame, LENGTH_COLUMNS)
            val = _series(frame, val_column) if val_column else None
            length = _series(frame, length_column) if length_column else None
            found += detect_reward_hacking(
                *reward,
                val_steps=None if val is None else val[0],
                val_reward=None if val is None else val[1],
                length_steps=None if length is None else length[0],
                length=None if length is None else length[1],
                val_signal=val_column or "val_reward",
                length_signal=length_column or "completion_length",
                run_id=run_id,
            )
        if found:
            logger.debug("run %s: %s", run_id, ", ".join(f"{f.name} ({f.severity})" for f in found))
    return out


def diagnose(
    runs: RunsTable,
    fitted_model: Any = None,
    *,
    peer_keys: Sequence[str] = ("family", "task"),
    oscillation: bool = False,
    random_seed: int = 0,
) -> pd.DataFrame:
    """Findings of every run of a table, one row per finding.

    Parameters
    ----------
    runs, fitted_model, peer_keys, oscillation, random_seed
        As :func:`findings_by_run`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FINDING_COLUMNS`; ``evidence`` holds a dict per row. Sorted by run (table
        order), then severity (highest first).

    Examples
    --------
    >>> from bayesgrpo.model.datasets import load_bundled
    >>> table = diagnose(load_bundled())  # doctest: +SKIP
    >>> table[table["severity"] == "high"][["run_id", "name"]]  # doctest: +SKIP
    """
    found_by_run = findings_by_run(runs, fitted_model, peer_keys=peer_keys, oscillation=oscillation,
                                   random_seed=random_seed)
    rows = [asdict(f) for found in found_by_run.values() for f in found]
    table = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    if len(table):
        rank = table["severity"].map({s: -i for i, s in enumerate(SEVERITIES)})
        order = {r: i for i, r in enumerate(runs.run_ids)}
        table = (table.assign(_run=table["run_id"].map(order), _rank=rank)
                 .sort_values(["_run", "_rank"], kind="stable")
                 .drop(columns=["_run", "_rank"]).reset_index(drop=True))
    return table
