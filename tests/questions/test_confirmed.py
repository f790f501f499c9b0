"""``Confirmed``: a rule's stop kept only at its k-th consecutive check of the same run."""

from __future__ import annotations

import pickle

import pytest

from bayesgrpo.questions.stopping import Confirmed, Decision, PlateauRule


class Scripted:
    """A rule that answers each run's calls from a script (one decision a call)."""

    def __init__(self, script: dict[str, list[str]]) -> None:
        self.script = {run: list(answers) for run, answers in script.items()}

    def __str__(self) -> str:
        return "scripted"

    def decide(self, cd, step_now, horizon_step=None):
        run_id = cd  # the tests pass the run id where curve draws go
        answer = self.script[run_id].pop(0)
        return [Decision(run_id, "scripted", answer, 0.95, "because", float(step_now), 100.0, 0.0, 0.0, 0.0)]


def answers(rule, run_id, steps):
    return [rule.decide(run_id, step)[0].decision for step in steps]


def test_a_stop_is_kept_at_the_kth_consecutive_check_only():
    rule = Confirmed(Scripted({"a": ["stop", "continue", "stop", "stop", "stop"]}), checks=2)
    assert answers(rule, "a", [10, 20, 30, 40, 50]) == ["continue", "continue", "continue", "stop", "stop"]


def test_undecided_resets_the_count_and_is_passed_on():
    rule = Confirmed(Scripted({"a": ["stop", "undecided", "stop", "stop"]}), checks=2)
    assert answers(rule, "a", [1, 2, 3, 4]) == ["continue", "undecided", "continue", "stop"]


def test_runs_are_counted_apart_and_a_restarted_run_starts_again():
    rule = Confirmed(Scripted({"a": ["stop", "stop", "stop"], "b": ["stop", "stop"]}), checks=2)
    assert rule.decide("a", 10)[0].decision == "continue"
    assert rule.decide("b", 10)[0].decision == "continue"  # run a's stop does not count for b
    assert rule.decide("a", 5)[0].decision == "continue"  # an earlier step: a restarted run
    assert rule.decide("b", 20)[0].decision == "stop"
    assert rule.decide("a", 6)[0].decision == "stop"


def test_the_reason_says_how_many_more_checks_and_one_check_is_the_rule_itself():
    first = Confirmed(Scripted({"a": ["stop"]}), checks=3).decide("a", 1)[0]
    assert first.decision == "continue" and "waiting for 2 more checks" in first.reason
    assert first.reason.startswith("because") and "confirmed at 3 checks" in first.rule
    assert Confirmed(Scripted({"a": ["stop"]}), checks=1).decide("a", 1)[0].decision == "stop"
    with pytest.raises(ValueError, match="whole number >= 1"):
        Confirmed(Scripted({}), checks=0)


def test_the_wrapped_rules_settings_show_through_and_it_pickles():
    rule = Confirmed(PlateauRule(eps=0.02, prob=0.8, relative=True), checks=2)
    assert (rule.eps, rule.prob, rule.relative) == (0.02, 0.8, True)
    copy = pickle.loads(pickle.dumps(rule))
    assert copy.checks == 2 and copy.eps == 0.02
    with pytest.raises(AttributeError):
        rule.no_such_setting  # noqa: B018
