"""Diagnostics: signals beyond the reward curve that say a run is in trouble.

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

from bayesgrpo.questions.diagnostics.advantage import (
    DEGENERACY_HIGH,
    DEGENERACY_WARNING,
    detect_advantage_degeneracy,
)
from bayesgrpo.questions.diagnostics.by_run import diagnose, findings_by_run
from bayesgrpo.questions.diagnostics.entropy import (
    ENTROPY_HIGH_RATIO,
    ENTROPY_WARNING_RATIO,
    detect_policy_concentration,
)
from bayesgrpo.questions.diagnostics.finding import SEVERITIES, Finding
from bayesgrpo.questions.diagnostics.hacking import (
    HACK_MIN_VAL_DROP,
    LENGTH_RUNAWAY_RATIO,
    detect_reward_hacking,
)
from bayesgrpo.questions.diagnostics.oscillation import (
    OSC_MIN_ELPD_DIFF,
    OSC_PROB_UNDERDAMPED,
    OSC_SE_MULT,
    PARETO_K_BAD,
    OscillationFit,
    detect_oscillation,
    fit_oscillation,
    loo_difference,
    oscillation_is_clear,
    oscillator_summary,
)
from bayesgrpo.questions.diagnostics.reward import (
    CEILING_TOLERANCE,
    COLLAPSE_LEVEL,
    STALL_FLAT_FRACTION,
    STALL_GAP,
    STALL_HIGH_GAP,
    STALL_NEVER_MIN_STEPS,
    detect_collapse,
    detect_stall,
    flat_bounds,
    reward_at_ceiling,
)
from bayesgrpo.questions.diagnostics.trend import TREND_ALPHA, Trend, trend

__all__ = [
    "CEILING_TOLERANCE",
    "COLLAPSE_LEVEL",
    "DEGENERACY_HIGH",
    "DEGENERACY_WARNING",
    "ENTROPY_HIGH_RATIO",
    "ENTROPY_WARNING_RATIO",
    "Finding",
    "HACK_MIN_VAL_DROP",
    "LENGTH_RUNAWAY_RATIO",
    "OSC_MIN_ELPD_DIFF",
    "OSC_PROB_UNDERDAMPED",
    "OSC_SE_MULT",
    "OscillationFit",
    "PARETO_K_BAD",
    "SEVERITIES",
    "STALL_FLAT_FRACTION",
    "STALL_GAP",
    "STALL_HIGH_GAP",
    "STALL_NEVER_MIN_STEPS",
    "TREND_ALPHA",
    "Trend",
    "detect_advantage_degeneracy",
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
    "reward_at_ceiling",
    "trend",
]
