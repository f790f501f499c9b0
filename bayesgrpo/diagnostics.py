"""Diagnostics: signals beyond the reward curve that say a run is in trouble (DESIGN.md section 4).

:func:`diagnose` reads a :class:`~bayesgrpo.table.RunsTable` and returns one row per
:class:`Finding`: a named problem of one run, its severity, the step range it covers, the evidence
that raised it (which signals, what values) and a suggested action. Each detector is a pure
function of ``(steps, values)`` arrays, so it can be run on any series and tested on simulated
ones:

* :func:`detect_collapse`: the reward rose, then fell back to (near) its floor and stayed there;
* :func:`detect_stall`: no significant gain over the last half of the run while the reward is far
  below the best level of comparable runs (same family and task); with a fitted model, "no gain"
  is the posterior probability :func:`bayesgrpo.stopping.prob_gain_below` instead of a trend test;
* :func:`detect_advantage_degeneracy`: the fraction of groups whose completions all got the same
  reward (TRL's ``frac_reward_zero_std``) rises toward 1, so GRPO's advantages vanish;
* :func:`detect_policy_concentration`: the policy's entropy collapses;
* :func:`detect_reward_hacking`: the training reward rises while a validation reward falls, or
  while the completion length runs away.

Trends are judged with robust, rank-based statistics that suit the noisy, sparse rewards TRL logs:
the Mann-Kendall test (Kendall's tau of value against step, :func:`scipy.stats.kendalltau`) for
"is it rising / falling", and the Theil-Sen slope (:func:`scipy.stats.theilslopes`) for "by how
much". Levels are medians of the first or last :data:`EDGE_FRACTION` of a series.

Not yet here (issue 8, later pass): oscillation / instability, which compares the oscillator
family with overdamped ones by LOO (ArviZ) on a fitted model and reports the damping ratio and
period.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from bayesgrpo.errors import BayesGRPOError

if TYPE_CHECKING:
    from bayesgrpo.table import RunsTable

__all__ = [
    "COLLAPSE_LEVEL",
    "DEGENERACY_HIGH",
    "DEGENERACY_WARNING",
    "ENTROPY_HIGH_RATIO",
    "ENTROPY_WARNING_RATIO",
    "HACK_MIN_VAL_DROP",
    "LENGTH_RUNAWAY_RATIO",
    "SEVERITIES",
    "STALL_GAP",
    "STALL_HIGH_GAP",
    "TREND_ALPHA",
    "Finding",
    "Trend",
    "detect_advantage_degeneracy",
    "detect_collapse",
    "detect_policy_concentration",
    "detect_reward_hacking",
    "detect_stall",
    "diagnose",
    "findings_by_run",
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
    "advantage_degeneracy": (
        "Most groups give every completion the same reward, so GRPO advantages are zero: if the "
        "reward is at its ceiling the prompts are solved (add harder ones or stop); otherwise "
        "raise the group size or temperature, or use a denser reward."
    ),
    "policy_concentration": (
        "The policy's entropy has collapsed, so exploration has stopped: raise the sampling "
        "temperature or an entropy bonus, lower the learning rate, or use a clip-higher rule."
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
        ``"collapse"``, ``"stall"``, ``"advantage_degeneracy"``, ``"policy_concentration"`` or
        ``"reward_hacking"``.
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

    With no reference (no comparable runs), a run that never learned is a ``"warning"``: no
    significant rise over the whole run nor over its last half (or, with a model, no gain ahead
    with probability :data:`STALL_PROB`).

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
        whole = trend(x, y)
        if whole.rising():
            return []
        evidence_flat: dict[str, Any] = {
            "signal": "reward",
            "reason": "no significant gain over the whole run; no comparable runs to measure a gap",
            "start_level": _start_level(y),
            "end_level": end,
            **_trend_evidence("run", whole),
            **_trend_evidence("last_half", tr),
        }
        if prob_no_gain is not None:
            evidence_flat["prob_no_gain"] = float(prob_no_gain)
        return [Finding(run_id, "stall", "warning", int(x[0]), int(x[-1]), evidence_flat,
                        _ACTIONS["stall_never"])]
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


def detect_advantage_degeneracy(
    steps: Any, frac_zero_std: Any, *, signal: str = "frac_reward_zero_std", run_id: str = ""
) -> list[Finding]:
    """The fraction of groups with zero reward spread rises toward 1.

    The end level is the *mean* of the last :data:`EDGE_FRACTION` of the series (so a 0/1 series
    "every group degenerate at this step" works too). ``"high"`` from :data:`DEGENERACY_HIGH`;
    ``"warning"`` from :data:`DEGENERACY_WARNING` when the fraction rose significantly over the run.

    Parameters
    ----------
    steps, frac_zero_std : array_like, shape (n,)
        Values in [0, 1].
    signal : str
        The metric's name, for the evidence.
    run_id : str
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
    evidence = {"signal": signal, "start_level": start, "end_level": end, **_trend_evidence("run", tr)}
    return [
        Finding(run_id, "advantage_degeneracy", severity, int(x[-k]), int(x[-1]), evidence,
                _ACTIONS["advantage_degeneracy"])
    ]


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
    from bayesgrpo.stopping import prob_gain_below

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
        frac = _series(frame, "frac_reward_zero_std")
        if frac is not None:
            found += detect_advantage_degeneracy(*frac, run_id=run_id)
        else:
            spread = _series(frame, "reward_std")
            if spread is not None:
                zero = (np.abs(spread[1]) <= ZERO_STD_TOL).astype(float)
                found += detect_advantage_degeneracy(
                    spread[0], zero, signal="reward_std == 0 (every group)", run_id=run_id
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
) -> pd.DataFrame:
    """Findings of every run of a table, one row per finding.

    Parameters
    ----------
    runs, fitted_model, peer_keys
        As :func:`findings_by_run`.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`FINDING_COLUMNS`; ``evidence`` holds a dict per row. Sorted by run (table
        order), then severity (highest first).

    Examples
    --------
    >>> from bayesgrpo.datasets import load_bundled
    >>> table = diagnose(load_bundled())  # doctest: +SKIP
    >>> table[table["severity"] == "high"][["run_id", "name"]]  # doctest: +SKIP
    """
    rows = [asdict(f) for found in findings_by_run(runs, fitted_model, peer_keys=peer_keys).values()
            for f in found]
    table = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    if len(table):
        rank = table["severity"].map({s: -i for i, s in enumerate(SEVERITIES)})
        order = {r: i for i, r in enumerate(runs.run_ids)}
        table = (table.assign(_run=table["run_id"].map(order), _rank=rank)
                 .sort_values(["_run", "_rank"], kind="stable")
                 .drop(columns=["_run", "_rank"]).reset_index(drop=True))
    return table
