"""Advantage degeneracy: groups whose completions all got the same reward, so GRPO's advantages vanish."""

from __future__ import annotations

from typing import Any

import numpy as np

from bayesgrpo.questions.diagnostics.finding import ACTIONS, Finding
from bayesgrpo.questions.diagnostics.trend import (
    MIN_POINTS,
    clean_series,
    edge_count,
    trend,
    trend_evidence,
)

# --- advantage degeneracy ---------------------------------------------------------------------
#: End level of ``frac_reward_zero_std`` from which the finding is "high" ...
DEGENERACY_HIGH = 0.9
#: ... and from which it is a "warning" when the fraction has been rising significantly.
DEGENERACY_WARNING = 0.5
#: A logged ``reward_std`` at most this is zero (every group's rewards equal: TRL logs the mean of
#: the per-group standard deviations), used when ``frac_reward_zero_std`` is not logged.
ZERO_STD_TOL = 1e-9


def detect_advantage_degeneracy(
    steps: Any,
    frac_zero_std: Any,
    *,
    signal: str = "frac_reward_zero_std",
    run_id: str = "",
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
    x, f = clean_series(steps, frac_zero_std)
    n = len(x)
    if n < MIN_POINTS:
        return []
    k = edge_count(n)
    end = float(np.mean(f[-k:]))
    start = float(np.mean(f[:k]))
    tr = trend(x, f)
    if end >= DEGENERACY_HIGH:
        severity = "high"
    elif end >= DEGENERACY_WARNING and tr.rising():
        severity = "warning"
    else:
        return []
    action = ACTIONS["advantage_degeneracy"]
    if solved:
        severity = "info"
        action = (
            "The reward sits at its ceiling: groups agree because every completion succeeds. "
            "The run has learnt what these prompts teach; stop, or add harder prompts."
        )
    evidence = {
        "signal": signal,
        "start_level": start,
        "end_level": end,
        "reward_at_ceiling": solved,
        **trend_evidence("run", tr),
    }
    return [Finding(run_id, "advantage_degeneracy", severity, int(x[-k]), int(x[-1]), evidence, action)]
