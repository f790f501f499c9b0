"""Every interface decides with :func:`bayesgrpo.questions.stopping.default_rule` unless given
another rule, and that rule is the fixed budget chosen on the corpus's source folds
(``benchmarks/results/defaults.md``).
"""

from __future__ import annotations

import argparse

import numpy as np

from bayesgrpo.integrations.trl import BayesStopCallback
from bayesgrpo.integrations.verl import BayesStopHook
from bayesgrpo.interfaces.fleet import FleetSettings
from bayesgrpo.interfaces.html_report.page import _report_rule, _single_threshold
from bayesgrpo.questions.stopping import (
    BudgetRule,
    Confirmed,
    CurveDraws,
    FixedBudgetRule,
    GuardedBudgetRule,
    PlateauRule,
    TargetRule,
    default_rule,
)


def test_the_default_rule_is_the_fixed_budget_at_65_percent_of_the_run():
    rule = default_rule()
    assert rule == FixedBudgetRule(fraction=0.65, eps=0.01)
    assert rule.relative and rule.plateau_eps == 0.01 and rule.stop_probability is None


def test_every_interface_takes_the_default_rule_unless_given_another():
    assert BayesStopCallback().rule == default_rule()
    # the callback's bayesgrpo/p_plateau asks the default rule's plateau threshold, 1% of the range
    assert BayesStopCallback().eps == 0.01 and BayesStopCallback().relative
    assert BayesStopHook().rule == default_rule()
    assert FleetSettings().rule == default_rule()
    mine = PlateauRule(eps=0.03, prob=0.8, relative=True)
    assert BayesStopCallback(rule=mine).rule is mine and BayesStopHook(rule=mine).rule is mine


def test_the_report_asks_the_plateau_rule_only_when_its_options_are_given():
    def args(eps: float | None, prob: float | None) -> argparse.Namespace:
        return argparse.Namespace(eps=eps, prob=prob)

    assert _report_rule(args(None, None)) == default_rule()
    assert _report_rule(args(0.02, None)) == PlateauRule(eps=0.02, prob=0.9, relative=True)
    assert _report_rule(args(None, 0.8)) == PlateauRule(eps=0.01, prob=0.8, relative=True)


def test_the_default_rule_never_answers_undecided_and_stops_a_flat_run_at_its_budget():
    """It stops every run at its budget, flat or rising, and says what the posterior thinks of it."""
    n = 400
    rng = np.random.default_rng(0)
    flat = CurveDraws(
        "exp",
        {"r0": rng.normal(0.5, 0.001, n), "asymptote": rng.normal(0.6, 0.001, n), "tau": np.full(n, 0.01)},
        step_scale=1000.0,
        reward_scale=1.0,
    )
    rising = CurveDraws(
        "exp",
        {"r0": np.full(n, 0.1), "asymptote": rng.normal(0.9, 0.01, n), "tau": np.full(n, 2.0)},
        step_scale=1000.0,
        reward_scale=1.0,
    )
    for step in (100.0, 400.0, 500.0, 700.0):
        for cd in (flat, rising):
            [decision] = default_rule().decide(cd, step, 1000.0)
            assert decision.decision in ("stop", "continue")
    [before] = default_rule().decide(rising, 600.0, 1000.0)
    [flat_at_budget] = default_rule().decide(flat, 650.0, 1000.0)
    [rising_at_budget] = default_rule().decide(rising, 650.0, 1000.0)
    assert not before.stop and flat_at_budget.stop and rising_at_budget.stop
    # the posterior's answer rides along as information: a flat run is sure of its plateau, a rising one not
    assert flat_at_budget.probability > 0.9 > 0.1 > rising_at_budget.probability
    assert "as information: P(gain <" in rising_at_budget.reason


def test_the_report_draws_no_single_threshold_for_the_guarded_budget():
    assert _single_threshold(default_rule()) is None
    assert _single_threshold(Confirmed(default_rule(), 2)) is None
    assert _single_threshold(PlateauRule(eps=0.01, prob=0.8)) == 0.8
    assert _single_threshold(Confirmed(PlateauRule(eps=0.01, prob=0.8), 2)) == 0.8


def test_every_package_rule_answers_its_plateau_threshold_and_stop_probability():
    guarded = GuardedBudgetRule(0.6, eps=0.03, early_eps=0.005)
    assert guarded.plateau_eps == 0.005 and guarded.stop_probability is None
    assert PlateauRule(eps=0.02, prob=0.8).plateau_eps == 0.02
    assert TargetRule(0.7, prob=0.85).stop_probability == 0.85
    # a Confirmed rule answers for the rule it wraps
    assert Confirmed(guarded, 2).plateau_eps == 0.005
    assert Confirmed(PlateauRule(eps=0.02, prob=0.8), 3).stop_probability == 0.8
    # the TRL callback's p_plateau follows the threshold; a rule without one falls back to 1%
    assert BayesStopCallback(rule=Confirmed(guarded, 2)).eps == 0.005
    assert BayesStopCallback(rule=PlateauRule(eps=0.02, prob=0.8)).eps == 0.02
    assert BayesStopCallback(rule=BudgetRule(cost_per_step=1e-4, value_per_unit_reward=1.0)).eps == 0.01
