"""Budget rules: stop at a share of the planned steps. :class:`FixedBudgetRule`, the default
(:func:`default_rule`), and :class:`GuardedBudgetRule`, a budget the posterior may move both ways.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.draws import CurveDraws
from bayesgrpo.questions.stopping.gain import check_eps, check_prob, checked_steps, eps_per_run
from bayesgrpo.questions.stopping.momentum import (
    FLAT_WINDOW,
    RISE_WINDOW,
    RISE_Z,
    flat_upper_bounds,
    rising_runs,
)
from bayesgrpo.questions.stopping.rules import (
    DEFAULT_PLATEAU_EPS,
    Decision,
    _decisions,
    _gain_numbers,
    _p_gain_below,
    _reasons,
)

__all__ = ["DEFAULT_BUDGET", "FixedBudgetRule", "GuardedBudgetRule", "default_rule"]


@dataclass(frozen=True)
class GuardedBudgetRule:
    """A fixed budget the posterior may move: stop at ``fraction`` of the run unless the curve is
    likely still rising; before it, stop only on a sure plateau.

    Many runs are planned with a budget (the seed paper's answer is about 80% of an epoch) and a
    plateau rule alone stops noisy runs in their dips. This rule keeps the budget as the default
    and lets the posterior overrule it both ways:

    * before ``fraction`` of the run (``step_now / horizon_step``, the share of the planned steps,
      as a fixed budget counts them): continue, unless ``P(gain < early_eps) >= early_prob`` (a
      sure plateau; ``early_prob=None``: never before the budget);
    * from ``fraction`` on: stop, unless ``P(gain < eps) < prob`` (with ``prob=0.3``, the
      default: a gain of at least ``eps`` is more than 70% likely): then go on, and stop at the
      first later check where it no longer is;
    * opt-in (``flat_eps``), from ``flat_from`` of the run on, before the budget and past it: stop
      where the run's own logged reward no longer climbs, whatever the curve expects.

    Parameters
    ----------
    fraction : float
        The budget, a share of the run in (0, 1].
    eps : float
        Gain that is worth going past the budget for, ``>= 0`` (reward units, or a fraction of the
        reward range when ``relative``).
    prob : float
        Past the budget, the run stops once ``P(gain < eps)`` reaches this, in (0, 1): 0.3
        (default) goes on only while a gain of ``eps`` is at least 70% likely.
    early_eps, early_prob : float
        Before the budget, the run stops only where ``P(gain < early_eps) >= early_prob``.
    rising_eps : float or None
        No stop, early or at the budget, while the run's own logged reward rose by more than
        this over its latest tenth (:data:`~bayesgrpo.questions.stopping.momentum.RISE_WINDOW`)
        at the rise's one-sided lower bound (``rise - rising_z se``): a curve fitted through a
        steep rise can be sure of a plateau the run's latest points contradict. Read from the
        draws' ``recent_rise`` (the live update attaches it); draws without it are not held.
        None: never held.
    rising_z : float
        The normal quantile of the rise's one-sided bounds, the guard's lower and the flat stop's
        upper (1.645: one-sided 95%).
    flat_eps : float or None
        Opt-in flat stop: from ``flat_from`` of the run on, stop where the logged reward rose less
        than this over the run's latest fifth
        (:data:`~bayesgrpo.questions.stopping.momentum.FLAT_WINDOW`) at the rise's one-sided
        upper bound (``rise + rising_z se``), unless the rise guard holds the run. Read from the
        draws' ``long_rise`` (the live update attaches it). None (default): the curve decides
        alone. It stops flat and falling runs the curve expects to rise (on simulated runs on a
        stated range ``flat_eps=0.02`` saved 52.1% of steps where the default saves 34.1%) and
        late risers in their slow start (the simulated ones at 45% of their steps; on the bundled
        runs without a stated range it gave up 3.4 points of the range more than the default):
        ``benchmarks/experiments/README.md``: stop_flat_evidence, flat_stop.
    flat_from : float
        The share of the run from which the flat stop is asked, in (0, 1].
    relative : bool
    interval : float
        Interval of the expected gain reported with the decision.

    Notes
    -----
    Measured on the bundled runs under leave one source out and on simulated runs of known truth
    (``benchmarks/experiments/README.md: stop_guarded_budget``, ``benchmarks/stopping_simulated.py``;
    the rise guard: ``benchmarks/experiments/README.md: stop_momentum``).
    """

    fraction: float = 0.5
    eps: float = 0.02
    prob: float = 0.3
    early_eps: float = 0.01
    early_prob: float | None = 0.9
    rising_eps: float | None = 0.01
    rising_z: float = RISE_Z
    flat_eps: float | None = None
    flat_from: float = 0.2
    relative: bool = True
    interval: float = 0.9

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise BayesGRPOError(f"fraction must be in (0, 1]; got {self.fraction}")
        if not 0.0 < self.flat_from <= 1.0:
            raise BayesGRPOError(f"flat_from must be in (0, 1]; got {self.flat_from}")
        if self.flat_eps is not None:
            check_eps(self.flat_eps, "flat_eps")
        check_eps(self.eps)
        check_eps(self.early_eps, "early_eps")
        if self.rising_eps is not None:
            check_eps(self.rising_eps, "rising_eps")
        if not (np.isfinite(self.rising_z) and self.rising_z >= 0):
            raise BayesGRPOError(f"rising_z must be finite and >= 0; got {self.rising_z}")
        check_prob(self.prob, "prob")
        if self.early_prob is not None:
            check_prob(self.early_prob, "early_prob")
        check_prob(self.interval, "interval")

    def __str__(self) -> str:
        unit = " of the reward range" if self.relative else ""
        early = (
            f", before it only if P(gain < {self.early_eps:g}{unit}) >= {self.early_prob:g}"
            if self.early_prob is not None
            else ""
        )
        rising = (
            f"; never while the logged reward rose > {self.rising_eps:g}{unit} over the run's latest "
            f"{RISE_WINDOW:.0%}"
            if self.rising_eps is not None
            else ""
        )
        flat = (
            f"; from {self.flat_from:g} of the run, stop where the logged reward rose < "
            f"{self.flat_eps:g}{unit} over the run's latest {FLAT_WINDOW:.0%}"
            if self.flat_eps is not None
            else ""
        )
        return (
            f"GuardedBudgetRule(stop at {self.fraction:g} of the run unless P(gain < {self.eps:g}{unit}) "
            f"< {self.prob:g}{early}{rising}{flat})"
        )

    @property
    def plateau_eps(self) -> float:
        """The gain below which the run is on its plateau: ``early_eps`` (``eps`` is the gain worth
        going past the budget for).
        """
        return self.early_eps

    @property
    def stop_probability(self) -> None:
        """None: the rule compares one probability with ``early_prob`` before its budget and
        another with ``prob`` after it, so no one threshold stands for both.
        """
        return None

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = checked_steps(cd, step_now, horizon_step)
        gain, *stats = _gain_numbers(cd, s, T, self.interval)
        done = T == s
        progress = np.where(T > 0, s / np.where(T > 0, T, 1.0), 1.0)  # the share of the steps
        past = progress >= self.fraction - 1e-9
        eps = eps_per_run(cd, self.eps, self.relative)
        p = _p_gain_below(gain, eps, done)
        if self.early_prob is not None:
            early_eps = eps_per_run(cd, self.early_eps, self.relative)
            p_early = _p_gain_below(gain, early_eps, done)
            early = p_early >= self.early_prob
        else:
            early_eps, p_early, early = eps, p, np.zeros_like(past)
        stop = done | np.where(past, p >= self.prob, early)
        probability = np.where(past, p, p_early)
        rise, rise_lower, rising_eps = _recent_rise_bounds(cd, self.rising_eps, self.rising_z, self.relative)
        rising = (
            np.zeros(cd.n_runs, dtype=bool)
            if self.rising_eps is None
            else rising_runs(cd, self.rising_eps, self.rising_z, relative=self.relative)
        )
        held = stop & ~done & rising
        stop = stop & ~held
        flat_upper = flat_upper_bounds(cd, self.rising_z)  # NaN (never below a threshold): unknown
        flat = np.zeros(cd.n_runs, dtype=bool)
        if self.flat_eps is not None:
            flat_eps = eps_per_run(cd, self.flat_eps, self.relative)
            flat = (flat_upper < flat_eps) & (progress >= self.flat_from - 1e-9) & ~rising & ~stop
        stop = stop | flat

        def explain(i: int, left: float) -> str:
            at = f"at {progress[i]:.0%} of the run"
            if flat[i]:
                assert cd.long_rise is not None  # flat only where the draws carry the long rise
                return (
                    f"{at}: the logged reward rose {float(cd.long_rise[i]):+.3g} over the run's latest "
                    f"{FLAT_WINDOW:.0%} (at most {flat_upper[i]:+.3g} at the one-sided "
                    f"{_normal_level(self.rising_z):.0%} bound), less than {flat_eps[i]:.3g}: it no longer "
                    "climbs, stop"
                )
            if held[i]:
                said = (
                    f"past the budget of {self.fraction:.0%}: P(gain < {eps[i]:.3g}) = {p[i]:.2f} >= "
                    f"{self.prob:.2f}"
                    if past[i]
                    else f"before the budget of {self.fraction:.0%}: P(gain < {early_eps[i]:.3g}) = "
                    f"{p_early[i]:.2f} >= {self.early_prob:.2f}"
                )
                return (
                    f"{at}, {said}, but the logged reward rose {rise[i]:+.3g} over the run's latest "
                    f"{RISE_WINDOW:.0%} (at least {rise_lower[i]:+.3g} at the one-sided "
                    f"{_normal_level(self.rising_z):.0%} bound), more than {rising_eps[i]:.3g}: not a "
                    "plateau while it still rises, keep training"
                )
            if past[i]:
                head = f"{at}, past the budget of {self.fraction:.0%}: P(gain < {eps[i]:.3g}) = {p[i]:.2f}"
                if stop[i]:
                    return f"{head} >= {self.prob:.2f}: stop"
                return f"{head} < {self.prob:.2f}: the curve is likely still rising, keep training"
            if stop[i]:
                return (
                    f"{at}, before the budget of {self.fraction:.0%}: P(gain < {early_eps[i]:.3g}) = "
                    f"{p_early[i]:.2f} >= {self.early_prob:.2f}: the run is on its plateau, stop early"
                )
            if self.early_prob is None:
                return f"{at}, before the budget of {self.fraction:.0%}: keep training"
            return (
                f"{at}, before the budget of {self.fraction:.0%}: P(gain < {early_eps[i]:.3g}) = "
                f"{p_early[i]:.2f} < {self.early_prob:.2f}, not a sure plateau: keep training"
            )

        reasons = _reasons(s, T, explain)
        details = {
            "progress": progress,
            "p_gain_below_eps": p,
            "p_gain_below_early_eps": p_early,
            "recent_rise": rise,
            "recent_rise_lower": rise_lower,
            "held_while_rising": held.astype(float),
        }
        if self.flat_eps is not None:  # the flat stop's evidence, where it was asked
            details["flat_rise_upper"] = flat_upper
            details["stopped_flat"] = flat.astype(float)
        return _decisions(str(self), cd, s, T, stop, probability, reasons, stats, details)


def _recent_rise_bounds(
    cd: CurveDraws, rising_eps: float | None, z: float, relative: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per run: the logged reward's recent rise, its lower bound ``rise - z se`` and the
    threshold in reward units; the bound is NaN (never above the threshold) where the draws carry
    no rise or the guard is off.
    """
    nan = np.full(cd.n_runs, np.nan)
    if rising_eps is None or cd.recent_rise is None or cd.recent_rise_se is None:
        return nan, nan, nan
    rise = np.asarray(cd.recent_rise, dtype=float)
    return rise, rise - z * np.asarray(cd.recent_rise_se, dtype=float), eps_per_run(cd, rising_eps, relative)


def _normal_level(z: float) -> float:
    """The one-sided normal level of quantile ``z`` (0.95 for 1.645)."""
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


#: The share of its planned steps a run stops at by default (:func:`default_rule`).
DEFAULT_BUDGET = 0.65


@dataclass(frozen=True)
class FixedBudgetRule:
    """Stop at a fixed share of the planned steps; the posterior's answer beside it, as information.

    The decision reads the run's progress alone. Its :class:`Decision` still carries what the
    posterior says of the run (``probability``: ``P(gain < eps)`` to the horizon; the expected
    remaining gain and its interval), and its reason says both, so that a person can overrule the
    budget where the posterior disagrees.

    Parameters
    ----------
    fraction : float
        The share of the planned steps to stop at, in (0, 1]; default :data:`DEFAULT_BUDGET`.
    eps : float
        The gain ``P(gain < eps)`` is reported for (a share of the reward range when
        ``relative``; default :data:`DEFAULT_PLATEAU_EPS`, the plateau's), information only.
    relative : bool
    interval : float
        Interval of the expected gain reported with the decision.
    """

    fraction: float = DEFAULT_BUDGET
    eps: float = DEFAULT_PLATEAU_EPS
    relative: bool = True
    interval: float = 0.9

    def __post_init__(self) -> None:
        if not 0.0 < self.fraction <= 1.0:
            raise BayesGRPOError(f"fraction must be in (0, 1]; got {self.fraction}")
        check_eps(self.eps)
        check_prob(self.interval, "interval")

    def __str__(self) -> str:
        return f"FixedBudgetRule(stop at {self.fraction:g} of the run)"

    @property
    def plateau_eps(self) -> float:
        """The gain whose probability the decision reports (it does not decide by it)."""
        return self.eps

    @property
    def stop_probability(self) -> None:
        """None: the rule does not decide by a probability."""
        return None

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = checked_steps(cd, step_now, horizon_step)
        gain, *stats = _gain_numbers(cd, s, T, self.interval)
        done = T == s
        progress = np.where(T > 0, s / np.where(T > 0, T, 1.0), 1.0)
        stop = done | (progress >= self.fraction - 1e-9)
        eps = eps_per_run(cd, self.eps, self.relative)
        p = _p_gain_below(gain, eps, done)

        def explain(i: int, left: float) -> str:
            where = "past" if stop[i] else "before"
            action = "stop" if stop[i] else "keep training"
            return (
                f"at {progress[i]:.0%} of the run, {where} the budget of {self.fraction:.0%}: {action} "
                f"(the posterior, as information: P(gain < {eps[i]:.3g}) = {p[i]:.2f})"
            )

        details = {"progress": progress, "p_gain_below_eps": p}
        return _decisions(str(self), cd, s, T, stop, p, _reasons(s, T, explain), stats, details)


def default_rule() -> FixedBudgetRule:
    """The rule every interface decides with unless given another: ``FixedBudgetRule(0.65)``.

    ``bayesgrpo stop`` and ``watch`` (without ``--rule``, ``--eps``, ``--prob`` or ``--absolute``),
    the TRL callback, the verl hook, the fleet and the HTML report's stop histories use it: stop
    at 65% of the planned steps, with the posterior's ``P(gain < 1%)`` and expected remaining gain
    beside the decision as information.

    On the corpus's source folds 0-4 (``python benchmarks/defaults.py``,
    ``benchmarks/results/defaults.md``) no posterior rule tried (guarded budgets, plateau rules)
    dominated both ``fixed 0.5`` and ``fixed 0.6`` in steps saved and reward given up against the
    run's end. The fixed budget saving the most steps at no more than 1% of the range given up,
    chosen on four folds for the fifth, wanders between 0.4 and 0.65 (0.6, 0.4, 0.6, 0.65, 0.45):
    the criterion cannot tell those budgets apart. 0.65, the most cautious of them, is the default;
    on folds 0-4 it gives up -1.7% [-5.1%, 1.5%] of the range against the run's end.
    Its answer is ``"stop"`` or ``"continue"``, never ``"undecided"``; ask :class:`PlateauRule`
    for a plateau at a chosen probability, or :class:`GuardedBudgetRule` for a budget the
    posterior may extend.

    Returns
    -------
    FixedBudgetRule
    """
    return FixedBudgetRule()
