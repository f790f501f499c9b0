"""Paired differences of stop rules with a bootstrap over sources."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.evaluate.backtest import BacktestError, paired_rule_differences


def _stops(saved: dict[str, list[float]], given_up: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for rule in saved:
        for i, (s, g) in enumerate(zip(saved[rule], given_up[rule], strict=True)):
            rows.append({"run_id": f"r{i}", "rule": rule, "steps_saved": s, "reward_vs_end": g})
    return pd.DataFrame(rows)


def test_a_constant_shift_is_found_exactly_and_dominates_every_resample():
    rng = np.random.default_rng(1)
    base_saved, base_given = rng.uniform(0.3, 0.6, 12), rng.normal(0.0, 0.05, 12)
    stops = _stops(
        {"fixed 0.5": list(base_saved), "rule": list(base_saved + 0.1)},
        {"fixed 0.5": list(base_given), "rule": list(base_given - 0.02)},
    )
    sources = {f"r{i}": f"s{i % 4}" for i in range(12)}
    out = paired_rule_differences(stops, sources, ["rule"], ["fixed 0.5"]).iloc[0]
    assert out["runs"] == 12 and out["sources"] == 4
    assert out["saved_diff"] == pytest.approx(0.1) and out["given_up_diff"] == pytest.approx(-0.02)
    assert out["saved_low"] == pytest.approx(0.1) and out["given_up_high"] == pytest.approx(-0.02)
    assert out["share_dominating"] == 1.0


def test_the_interval_resamples_sources_not_runs():
    """Two sources, one far better than the other: the interval spans both, however many runs."""
    n = 40
    sources = {f"r{i}": ("a" if i < n // 2 else "b") for i in range(n)}
    diff = [-0.1 if sources[f"r{i}"] == "a" else 0.1 for i in range(n)]
    stops = _stops({"x": [0.5] * n, "y": [0.5] * n}, {"x": diff, "y": [0.0] * n})
    out = paired_rule_differences(stops, sources, ["x"], ["y"], n_resamples=4000).iloc[0]
    assert out["given_up_diff"] == pytest.approx(0.0)
    # a bootstrap over runs would put the 90% interval within about +-0.03
    assert out["given_up_low"] == pytest.approx(-0.1) and out["given_up_high"] == pytest.approx(0.1)
    assert 0.15 < out["share_dominating"] < 0.85


def test_bad_input_says_what_is_wrong():
    stops = _stops({"x": [0.5, 0.4], "y": [0.5, 0.5]}, {"x": [0.0, 0.1], "y": [0.0, 0.0]})
    with pytest.raises(BacktestError, match="no stopping rows for rule 'z'"):
        paired_rule_differences(stops, {"r0": "a", "r1": "a"}, ["z"], ["y"])
    with pytest.raises(BacktestError, match=r"no source given for runs \['r1'\]"):
        paired_rule_differences(stops, {"r0": "a"}, ["x"], ["y"])
    twice = pd.concat([stops, stops.iloc[[0]]], ignore_index=True)
    with pytest.raises(BacktestError, match="scored more than once"):
        paired_rule_differences(twice, {"r0": "a", "r1": "a"}, ["x"], ["y"])
    with pytest.raises(BacktestError, match="level must be in"):
        paired_rule_differences(stops, {"r0": "a", "r1": "a"}, ["x"], ["y"], level=1.0)
