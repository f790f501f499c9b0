"""Stopping rules: :class:`PlateauRule`, :class:`BudgetRule`, :class:`GainRateRule`,
:class:`TargetRule`, :class:`Confirmed` (the budget rules and :func:`default_rule` are in
:mod:`bayesgrpo.questions.stopping.budget`).

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
