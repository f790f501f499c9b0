"""Stopping questions on posterior draws of reward curves.

For a run at step ``s`` with a horizon ``T`` (the step it is planned to end at), from draws of its
curve parameters:

* :func:`remaining_gain` and :func:`prob_gain_below`: draws of ``R(T) - R(s)`` and
  ``P(R(T) - R(s) < eps)``;
* :func:`expected_gain`: the expected remaining gain with an equal-tailed interval;
* :func:`steps_to_fraction`: the step at which 80 / 90 / 95% of the run's *total* gain (the gain
  it makes in the limit, ``A - R0``) is first reached, with intervals, and how likely that step
  lies beyond the horizon;
* :func:`phase`: slow start, rapid improvement or plateau, with posterior probabilities;
* rules (:class:`PlateauRule`, :class:`BudgetRule`, :class:`GainRateRule`, :class:`GuardedBudgetRule`,
  :class:`TargetRule`) that
  turn these into a :class:`Decision` per run: stop or continue, the probability behind it and a
  one-line reason; :func:`default_rule` is the one the interfaces use unless given another.

Everything is a pure function of a :class:`CurveDraws` (the curve parameters per posterior draw,
in reward units, plus the map from steps to the curve's progress axis), vectorised over draws and
runs: arrays are ``(S, R)`` (draws x runs) and no function loops over draws. "Reward" here is the
expected curve ``R(t)``, not a noisy logged point.

Phases
------
The phase at progress ``t`` is read from the slope of the curve, ``R'(t) = (A - R0) g'(t)``, through
the *relative rate* ``rho(t) = g'(t) / g'(t_peak)``, where ``t_peak`` is the progress of the curve's
fastest gain (the mode of ``g'``), searched from the point where :data:`PEAK_FROM_GAIN` of the gain
is made (so that families whose rate is infinite at ``t = 0``, Weibull ``k < 1`` and logistic
``B < 1``, still have a finite peak). ``rho`` does not depend on the sign or size of the gain. Then

* ``"slow_start"``: before the peak and ``rho < LOW_RATE``;
* ``"plateau"``: after the peak, ``rho < LOW_RATE`` (a curve falling back from an overshoot has
  ``rho < 0`` and counts as low) and at least :data:`PLATEAU_MIN_GAIN` of the total gain made;
* ``"rapid"``: otherwise (the rate is high, or most of the gain is still ahead).

So ``exp`` and ``power`` (fastest at the start) begin in ``"rapid"`` and never have a slow start;
``exp`` reaches its plateau once ``1 - 0.99 * LOW_RATE`` (80.2%) of its gain is made; Weibull
``k > 1``, logistic ``B > 1`` and the oscillator (zero slope at ``t = 0``) begin in
``"slow_start"``. The probability of a phase is the share of draws in it.
"""

from __future__ import annotations

from bayesgrpo.model.draws import CurveDraws, reward_at
from bayesgrpo.questions.stopping.budget import (
    DEFAULT_BUDGET,
    FixedBudgetRule,
    GuardedBudgetRule,
    default_rule,
)
from bayesgrpo.questions.stopping.gain import (
    DEFAULT_FRACTIONS,
    expected_gain,
    fraction_step_draws,
    prob_gain_below,
    remaining_gain,
    steps_to_fraction,
)
from bayesgrpo.questions.stopping.phases import (
    LOW_RATE,
    PEAK_FROM_GAIN,
    PHASES,
    PLATEAU_MIN_GAIN,
    phase,
    phase_draws,
    rate_peak_time,
)
from bayesgrpo.questions.stopping.rules import (
    DEFAULT_PLATEAU_EPS,
    DEFAULT_PLATEAU_PROB,
    BudgetRule,
    Confirmed,
    Decision,
    GainRateRule,
    PlateauRule,
    StoppingRule,
    TargetRule,
    decisions_table,
)

__all__ = [
    "DEFAULT_BUDGET",
    "FixedBudgetRule",
    "DEFAULT_PLATEAU_EPS",
    "DEFAULT_PLATEAU_PROB",
    "DEFAULT_FRACTIONS",
    "LOW_RATE",
    "PEAK_FROM_GAIN",
    "PHASES",
    "PLATEAU_MIN_GAIN",
    "BudgetRule",
    "GainRateRule",
    "GuardedBudgetRule",
    "CurveDraws",
    "Decision",
    "Confirmed",
    "PlateauRule",
    "StoppingRule",
    "TargetRule",
    "decisions_table",
    "default_rule",
    "expected_gain",
    "fraction_step_draws",
    "phase",
    "phase_draws",
    "prob_gain_below",
    "rate_peak_time",
    "remaining_gain",
    "reward_at",
    "steps_to_fraction",
]
