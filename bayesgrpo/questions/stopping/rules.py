"""Stopping rules: :class:`PlateauRule`, :class:`BudgetRule`, :class:`GainRateRule`,
:class:`GuardedBudgetRule`, :class:`TargetRule`; :func:`default_rule`, the one the interfaces use
unless given another.

Each turns the curve draws of runs into one :class:`Decision` per run: stop or continue, the
probability behind it and a one-line reason. :func:`decisions_table` lays decisions out as a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import get_curve
from bayesgrpo.model.draws import CurveDraws, gain_share
from bayesgrpo.questions.stopping.gain import (
    check_eps,
    check_prob,
    checked_steps,
    eps_per_run,
    interval_bounds,
    remaining_gain,
)
from bayesgrpo.questions.stopping.momentum import (
    FLAT_WINDOW,
    RISE_WINDOW,
    RISE_Z,
    flat_upper_bounds,
    rising_runs,
)

#: Later steps at which :class:`BudgetRule` weighs continuing (evenly spaced up to the horizon).
BUDGET_GRID = 100

#: The plateau rule's ``eps`` (a share of the reward range) and ``prob`` where an interface is asked
#: for it without them (``bayesgrpo stop --eps`` alone, ``bayesgrpo report --prob`` alone).
DEFAULT_PLATEAU_EPS, DEFAULT_PLATEAU_PROB = 0.01, 0.9

# --------------------------------------------------------------------------------------------
# Decisions and rules
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What a stopping rule says about one run.

    Attributes
    ----------
    run_id : str or None
    rule : str
        The rule and its settings, e.g. ``"PlateauRule(eps=0.01, prob=0.9)"``.
    decision : {"stop", "continue", "undecided"}
        ``undecided``: the rule cannot tell at its probability either way (for
        :class:`PlateauRule`: neither the plateau nor a gain of at least eps is that probable;
        the run's noise is too large for the question asked). Training goes on meanwhile.
    probability : float
        The posterior probability the rule compared with its threshold, as named in ``reason``
        (for :class:`PlateauRule` ``P(gain < eps)`` whatever the decision).
    reason : str
        One line of plain words with the numbers.
    step, horizon_step : float
    expected_gain, gain_lower, gain_upper : float
        Expected remaining gain to the horizon and its interval (reward units).
    details : mapping of str to float
        Further numbers of the rule (e.g. the best later step of :class:`BudgetRule`).
    """

    run_id: str | None
    rule: str
    decision: str
    probability: float
    reason: str
    step: float
    horizon_step: float
    expected_gain: float
    gain_lower: float
    gain_upper: float
    details: Mapping[str, float] = field(default_factory=dict, compare=False, hash=False)

    @property
    def stop(self) -> bool:
        """Whether the decision is to stop."""
        return self.decision == "stop"

    @property
    def undecided(self) -> bool:
        """Whether the rule could not tell (see ``decision``)."""
        return self.decision == "undecided"


class StoppingRule(Protocol):
    """Anything with ``decide(cd, step_now, horizon_step=None) -> list[Decision]``.

    The package's rules also answer two questions interfaces ask of a rule without knowing its
    class (a rule of one's own may leave them out; callers then fall back to
    :data:`DEFAULT_PLATEAU_EPS` and to no threshold line):

    * ``plateau_eps``: the gain below which the rule reads a run as on its plateau (the TRL
      callback logs ``P(gain < plateau_eps)`` as ``bayesgrpo/p_plateau``), in the rule's units
      (a share of the reward range where its ``relative`` is true); None where the rule has none;
    * ``stop_probability``: the one probability the rule stops at (the report draws it as a line),
      None where it has none or two.
    """

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One decision per run of ``cd``, at ``step_now`` with the horizon ``horizon_step``."""
        ...


def _fmt_step(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:g}"


def _gain_numbers(
    cd: CurveDraws, s: np.ndarray, T: np.ndarray, interval: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    gain = remaining_gain(cd, s, T)
    return gain, *interval_bounds(gain, interval)


def _p_gain_below(gain: np.ndarray, eps: np.ndarray, done: np.ndarray) -> np.ndarray:
    """Per run, ``P(gain < eps)`` over the draws; 1 where no step is left (no gain to make, even
    with ``eps = 0``).
    """
    return np.where(done, 1.0, (gain < eps[None, :]).mean(axis=0))


def _reasons(s: np.ndarray, T: np.ndarray, explain: Callable[[int, float], str]) -> list[str]:
    """Each run's reason: that no step is left at the horizon, else ``explain(i, steps_left)``."""
    return [
        f"no steps remain before the horizon (step {_fmt_step(T[i])}): stop"
        if T[i] == s[i]
        else explain(i, float(T[i] - s[i]))
        for i in range(len(s))
    ]


def _decisions(
    rule: str,
    cd: CurveDraws,
    s: np.ndarray,
    T: np.ndarray,
    stop: np.ndarray,
    probability: np.ndarray,
    reasons: Sequence[str],
    gain_stats: Sequence[np.ndarray],
    details: Mapping[str, np.ndarray] | None = None,
    undecided: np.ndarray | None = None,
) -> list[Decision]:
    mean, lower, upper = gain_stats
    unsure = np.zeros(cd.n_runs, dtype=bool) if undecided is None else np.asarray(undecided, dtype=bool)
    details = details or {}
    assert cd.run_ids is not None  # set by CurveDraws.__post_init__
    return [
        Decision(
            run_id=cd.run_ids[i],
            rule=rule,
            decision="stop" if stop[i] else ("undecided" if unsure[i] else "continue"),
            probability=float(probability[i]),
            reason=reasons[i],
            step=float(s[i]),
            horizon_step=float(T[i]),
            expected_gain=float(mean[i]),
            gain_lower=float(lower[i]),
            gain_upper=float(upper[i]),
            details={name: float(value[i]) for name, value in details.items()},
        )
        for i in range(cd.n_runs)
    ]


@dataclass(frozen=True)
class PlateauRule:
    """Stop when the run is on its plateau: ``P(R(T) - R(s) < eps) >= prob``.

    Three answers: ``stop`` when the plateau is that probable; ``continue`` when a gain of at
    least ``eps`` is (``P(gain < eps) <= 1 - prob``); ``undecided`` in between: the posterior
    cannot tell a gain of ``eps`` from none at that probability (the run's noise is too large for
    the question; more points, a larger ``eps`` or a lower ``prob`` will tell). Only ``stop``
    stops a run (``Decision.stop``).

    Parameters
    ----------
    eps : float
        Gain that counts as nothing, ``>= 0``, in reward units (a fraction of each run's
        ``reward_scale`` when ``relative``).
    prob : float
        Required posterior probability, in (0, 1).
    relative : bool
    interval : float
        Interval of the expected gain reported with the decision.
    """

    eps: float
    prob: float = 0.9
    relative: bool = False
    interval: float = 0.9

    def __post_init__(self) -> None:
        check_eps(self.eps)
        check_prob(self.prob, "prob")
        check_prob(self.interval, "interval")

    def __str__(self) -> str:
        unit = " of the reward range" if self.relative else ""
        return f"PlateauRule(eps={self.eps:g}{unit}, prob={self.prob:g})"

    @property
    def plateau_eps(self) -> float:
        """The gain below which the run is on its plateau: ``eps``."""
        return self.eps

    @property
    def stop_probability(self) -> float:
        """The probability of the plateau the rule stops at: ``prob``."""
        return self.prob

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = checked_steps(cd, step_now, horizon_step)
        gain, *stats = _gain_numbers(cd, s, T, self.interval)
        eps = eps_per_run(cd, self.eps, self.relative)
        p = _p_gain_below(gain, eps, T == s)
        stop = p >= self.prob
        undecided = ~stop & ((1.0 - p) < self.prob)  # nor is a gain of at least eps that probable

        def explain(i: int, left: float) -> str:
            head = f"P(gain over the remaining {_fmt_step(left)} steps < {eps[i]:.3g}) = {p[i]:.2f}"
            interval = f"expected gain {stats[0][i]:+.3g} ({stats[1][i]:+.3g} to {stats[2][i]:+.3g})"
            if stop[i]:
                return f"{head} >= {self.prob:.2f}: the run is on its plateau"
            if undecided[i]:
                return (
                    f"{head}: neither it nor a gain of at least {eps[i]:.3g} reaches {self.prob:.2f}; "
                    f"{interval}: the run's noise is too large to tell a gain of {eps[i]:.3g} at this "
                    "probability yet (more points will tell; keep training meanwhile)"
                )
            return f"{head} <= {1.0 - self.prob:.2f}: {interval}, keep training"

        reasons = _reasons(s, T, explain)
        return _decisions(str(self), cd, s, T, stop, p, reasons, stats, undecided=undecided)


@dataclass(frozen=True)
class BudgetRule:
    """Stop when no later step is worth its cost in expectation.

    Continuing from ``s`` to a later step ``u`` is worth
    ``value_per_unit_reward * (R(u) - R(s)) - cost_per_step * (u - s)``. The rule weighs
    ``n_grid`` evenly spaced later steps up to the horizon (``n_grid=1``: the horizon alone, i.e.
    "is the expected value of the remaining gain below the cost of the remaining steps") and
    stops when none has a positive expected net value. It keeps going when an intermediate step
    pays even if running to the horizon does not.

    Parameters
    ----------
    cost_per_step : float
        Cost of one more step (>= 0), in any currency.
    value_per_unit_reward : float
        Value of one unit of reward (> 0), in the same currency.
    n_grid : int
        Number of later steps weighed.
    interval : float
        Interval of the expected gain reported with the decision.

    Notes
    -----
    The decision rests on expected values; ``probability`` is the posterior probability that
    continuing to the best later step pays (net value > 0).
    """

    cost_per_step: float
    value_per_unit_reward: float
    n_grid: int = BUDGET_GRID
    interval: float = 0.9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cost_per_step) and self.cost_per_step >= 0):
            raise BayesGRPOError(f"cost_per_step must be finite and >= 0; got {self.cost_per_step:g}.")
        if not (math.isfinite(self.value_per_unit_reward) and self.value_per_unit_reward > 0):
            raise BayesGRPOError(
                f"value_per_unit_reward must be finite and > 0; got {self.value_per_unit_reward:g}."
            )
        if int(self.n_grid) != self.n_grid or self.n_grid < 1:
            raise BayesGRPOError(f"n_grid must be a positive integer; got {self.n_grid!r}.")
        check_prob(self.interval, "interval")

    def __str__(self) -> str:
        return (
            f"BudgetRule(cost_per_step={self.cost_per_step:g}, "
            f"value_per_unit_reward={self.value_per_unit_reward:g})"
        )

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = checked_steps(cd, step_now, horizon_step)
        _, *stats = _gain_numbers(cd, s, T, self.interval)
        gain = cd.total_gain
        g_now = gain_share(cd, cd.to_t(s))
        best_value = np.full(cd.n_runs, -np.inf)
        best_step = s.copy()
        best_prob = np.zeros(cd.n_runs)
        # a loop over the later steps weighed (memory (S, R) per step), never over draws
        for j in range(1, int(self.n_grid) + 1):
            u = s + (T - s) * (j / self.n_grid)
            value_of_gain = self.value_per_unit_reward * gain * (gain_share(cd, cd.to_t(u)) - g_now)
            net = value_of_gain - self.cost_per_step * (u - s)
            value = net.mean(axis=0)
            better = value > best_value
            best_value = np.where(better, value, best_value)
            best_step = np.where(better, u, best_step)
            best_prob = np.where(better, (net > 0).mean(axis=0), best_prob)
        stop = best_value <= 0
        reasons = []
        for i in range(cd.n_runs):
            left = T[i] - s[i]
            if left == 0:
                reasons.append(f"no steps remain before the horizon (step {_fmt_step(T[i])}): stop")
            elif stop[i]:
                reasons.append(
                    f"no later step pays: the best, step {_fmt_step(best_step[i])}, has expected net value "
                    f"{best_value[i]:+.3g} (value of the gain minus the cost of "
                    f"{_fmt_step(best_step[i] - s[i])} steps)"
                )
            else:
                reasons.append(
                    f"continuing to step {_fmt_step(best_step[i])} has expected net value "
                    f"{best_value[i]:+.3g} "
                    f"(P(net value > 0) = {best_prob[i]:.2f}): keep training"
                )
        details = {"best_step": best_step, "expected_net_value": best_value}
        return _decisions(str(self), cd, s, T, stop, best_prob, reasons, stats, details)


@dataclass(frozen=True)
class GainRateRule:
    """Stop when the gain still expected is worth less than the share of the run it would take.

    The rest of a run, from step ``s`` to its horizon ``T``, takes ``(T - s) / T`` of the run (on
    the curve's progress axis). The rule keeps training while the expected remaining gain
    ``E[R(T) - R(s)]`` is at least ``rate`` times that share, in reward units (a fraction of each
    run's ``reward_scale`` when ``relative``), and stops below it: with ``rate = 0.1`` the last
    half of a run must be expected to add at least 5% of the reward range, its last fifth 2%. It
    is the expected gain per remaining step, measured against the run's own length, so one
    ``rate`` serves runs of any length. It decides on the expected value, as :class:`BudgetRule`
    does; ``probability`` is the posterior probability that the gain falls short of the bar.

    Parameters
    ----------
    rate : float
        Gain per whole run that is worth its steps, ``>= 0`` (reward units, or a fraction of the
        reward range when ``relative``).
    relative : bool
    interval : float
        Interval of the expected gain reported with the decision.
    """

    rate: float
    relative: bool = True
    interval: float = 0.9

    def __post_init__(self) -> None:
        check_eps(self.rate, "rate")
        check_prob(self.interval, "interval")

    def __str__(self) -> str:
        unit = " of the reward range" if self.relative else ""
        return f"GainRateRule(rate={self.rate:g}{unit} per run)"

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = checked_steps(cd, step_now, horizon_step)
        gain, *stats = _gain_numbers(cd, s, T, self.interval)
        t_now, t_end = cd.to_t(s), cd.to_t(T)
        share_left = np.where(t_end > 0, (t_end - t_now) / np.where(t_end > 0, t_end, 1.0), 0.0)
        bar = eps_per_run(cd, self.rate, self.relative) * share_left
        expected = gain.mean(axis=0)
        stop = (expected < bar) | (T == s)
        p = np.where(T == s, 1.0, (gain < bar[None, :]).mean(axis=0))

        def explain(i: int, left: float) -> str:
            head = (
                f"expected gain over the remaining {_fmt_step(left)} steps {expected[i]:+.3g} "
                f"({stats[1][i]:+.3g} to {stats[2][i]:+.3g}) against {bar[i]:.3g} for "
                f"{share_left[i]:.0%} of the run"
            )
            return f"{head}: not worth its steps" if stop[i] else f"{head}: keep training"

        reasons = _reasons(s, T, explain)
        details = {"gain_bar": bar, "share_left": share_left}
        return _decisions(str(self), cd, s, T, stop, p, reasons, stats, details)


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
    run's end; the fixed budget saving the most steps at no more than 1% of the range given up,
    chosen on four folds and scored on the fifth, was 0.65 on four of the five (0.45 on one).
    Its answer is ``"stop"`` or ``"continue"``, never ``"undecided"``; ask :class:`PlateauRule`
    for a plateau at a chosen probability, or :class:`GuardedBudgetRule` for a budget the
    posterior may extend.

    Returns
    -------
    FixedBudgetRule
    """
    return FixedBudgetRule()


def _max_reward(cd: CurveDraws, s: np.ndarray, T: np.ndarray) -> np.ndarray:
    """Draws of ``max R(t)`` over ``[s, T]``, (S, R), exact for every family.

    Monotone families reach it at an end. An underdamped oscillator has its extrema at
    ``n pi / omega_d`` with amplitudes that shrink, so the first maximum and the first minimum of
    ``g`` after ``s`` are the largest of their kind: with the two ends they hold the maximum.
    """
    t_s, t_T = cd.to_t(s), cd.to_t(T)
    size = (cd.n_draws, cd.n_runs)
    candidates = [np.broadcast_to(t_s, size), np.broadcast_to(t_T, size)]
    if cd.curve == "oscillator":
        tau, zeta = cd.params["tau"], cd.params["zeta"]
        under = zeta < 1.0
        half_period = np.pi / ((2.0 * zeta / tau) * np.sqrt(np.where(under, 1.0 - zeta**2, 1.0)))
        first = np.maximum(np.ceil(t_s[None, :] / half_period), 1.0)
        for offset in (0.0, 1.0):
            t = np.clip((first + offset) * half_period, t_s[None, :], t_T[None, :])
            candidates.append(np.where(under, t, t_s[None, :]))
    r0, gain = cd.params["r0"], cd.total_gain
    best = np.full((cd.n_draws, cd.n_runs), -np.inf)
    for t in candidates:
        best = np.maximum(best, r0 + gain * get_curve(cd.curve).g(t, **cd.shape))
    return best


@dataclass(frozen=True)
class TargetRule:
    """Stop when a target reward is reached, or out of reach before the horizon.

    * reached: ``P(R(s) >= target) >= prob``;
    * out of reach: ``P(max over [s, T] of R >= target) < 1 - prob``;
    * otherwise continue.

    Rewards are to be maximised; ``R`` is the expected curve, not a noisy logged point.

    Parameters
    ----------
    target : float
        Target reward, in reward units.
    prob : float
        Required posterior probability, in (0, 1).
    interval : float
        Interval of the expected gain reported with the decision.
    """

    target: float
    prob: float = 0.9
    interval: float = 0.9

    def __post_init__(self) -> None:
        if not math.isfinite(self.target):
            raise BayesGRPOError(f"target must be a finite reward; got {self.target!r}.")
        check_prob(self.prob, "prob")
        check_prob(self.interval, "interval")

    def __str__(self) -> str:
        return f"TargetRule(target={self.target:g}, prob={self.prob:g})"

    @property
    def stop_probability(self) -> float:
        """The probability of the target reached the rule stops at: ``prob``."""
        return self.prob

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """One :class:`Decision` per run of ``cd`` at ``step_now`` with horizon ``horizon_step``."""
        s, T = checked_steps(cd, step_now, horizon_step)
        _, *stats = _gain_numbers(cd, s, T, self.interval)
        now = cd.params["r0"] + cd.total_gain * gain_share(cd, cd.to_t(s))
        p_now = (now >= self.target).mean(axis=0)
        p_reach = (_max_reward(cd, s, T) >= self.target).mean(axis=0)
        reached = p_now >= self.prob
        out_of_reach = ~reached & (p_reach < 1.0 - self.prob)
        done = T == s
        stop = reached | out_of_reach | done
        probability = np.where(reached, p_now, p_reach)
        reasons = []
        for i in range(cd.n_runs):
            by = f"P(reward reaches {self.target:g} by step {_fmt_step(T[i])}) = {p_reach[i]:.2f}"
            if done[i] and not reached[i]:
                reasons.append(
                    f"no steps remain before the horizon (step {_fmt_step(T[i])}) and "
                    f"P(reward >= {self.target:g} now) = {p_now[i]:.2f} < {self.prob:.2f}: stop"
                )
            elif reached[i]:
                reasons.append(
                    f"P(reward >= {self.target:g} now) = {p_now[i]:.2f} >= {self.prob:.2f}: target reached"
                )
            elif out_of_reach[i]:
                reasons.append(f"{by} < {1.0 - self.prob:.2f}: target out of reach")
            else:
                reasons.append(f"{by}: target still possible, keep training")
        details = {"prob_reached_now": p_now, "prob_reach_by_horizon": p_reach}
        return _decisions(str(self), cd, s, T, stop, probability, reasons, stats, details)


class Confirmed:
    """A rule's ``stop`` only once it has said so at ``checks`` checks in a row of the same run.

    A noisy run's reward dips and recovers; a prefix that ends in a dip looks flat or falling, and
    a plateau rule asked there says "stop" at the low point. Asking again at the next check (the
    dip over, or not) keeps the stops that last and drops those a dip made. Until the ``checks``-th
    consecutive ``stop``, the answer is ``continue`` with the reason saying how many more are
    needed; ``undecided`` and ``continue`` reset the count.

    The wrapper remembers each run's count by its run id (``CurveDraws.run_ids``); a call at a step
    earlier than the run's last one starts the run's count again (a restarted run). Give each
    training loop, watcher or backtest its own ``Confirmed``. The count lives in the process that
    asks: a backtest sends each run's checks to one worker together, but a watcher on Ray
    (``workers=``) sends a fresh copy of its rule at every poll, so the count would not carry
    over: use ``Confirmed`` with a watcher in this process.

    Parameters
    ----------
    rule : StoppingRule
        The rule asked (``PlateauRule`` and the others).
    checks : int
        Consecutive ``stop`` answers needed, ``>= 1`` (1: the rule as it is).

    Examples
    --------
    >>> rule = Confirmed(PlateauRule(eps=0.02, prob=0.9, relative=True), checks=2)
    >>> rule.decide(update.curve_draws, update.step)[0].decision  # doctest: +SKIP
    """

    def __init__(self, rule: StoppingRule, checks: int = 2) -> None:
        if int(checks) != checks or checks < 1:
            raise ValueError(f"checks must be a whole number >= 1; got {checks}")
        self.rule = rule
        self.checks = int(checks)
        self._counts: dict[str, tuple[float, int]] = {}

    def __getattr__(self, name: str) -> Any:
        # the wrapped rule's settings (eps, prob, relative), for callers that read them
        if name.startswith("_") or name in ("rule", "checks"):
            raise AttributeError(name)
        return getattr(self.rule, name)

    def __str__(self) -> str:
        return f"{self.rule}, confirmed at {self.checks} checks in a row"

    def __repr__(self) -> str:
        return f"Confirmed({self.rule!r}, checks={self.checks})"

    def decide(self, cd: CurveDraws, step_now: Any, horizon_step: Any = None) -> list[Decision]:
        """The rule's decisions, a ``stop`` kept only at its ``checks``-th consecutive one."""
        decisions = self.rule.decide(cd, step_now, horizon_step)
        out = []
        for i, decision in enumerate(decisions):
            key = str(decision.run_id if decision.run_id is not None else i)
            last_step, count = self._counts.get(key, (-np.inf, 0))
            if decision.step < last_step:  # the run started again
                count = 0
            count = count + 1 if decision.stop else 0
            self._counts[key] = (decision.step, count)
            if decision.stop and count < self.checks:
                more = self.checks - count
                decision = replace(
                    decision,
                    rule=str(self),
                    decision="continue",
                    reason=f"{decision.reason}; waiting for {more} more check{'s' if more > 1 else ''} "
                    f"saying so before stopping ({count} of {self.checks})",
                )
            else:
                decision = replace(decision, rule=str(self))
            out.append(decision)
        return out


def decisions_table(decisions: Iterable[Decision]) -> pd.DataFrame:
    """Decisions as a table: one row each, the fields of :class:`Decision` and its details.

    Parameters
    ----------
    decisions : iterable of Decision
        E.g. ``rule.decide(cd, step)`` or the concatenation of several rules' decisions.

    Returns
    -------
    DataFrame
        Columns ``run_id, rule, decision, probability, reason, step, horizon_step,
        expected_gain, gain_lower, gain_upper``, then one column per detail (NaN where a rule
        has none).
    """
    names = [f.name for f in fields(Decision) if f.name != "details"]
    rows = [{**{name: getattr(d, name) for name in names}, **d.details} for d in decisions]
    return pd.DataFrame(rows, columns=None if rows else names)
