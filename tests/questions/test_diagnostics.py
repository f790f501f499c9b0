"""Diagnostics: each detector on simulated series with a known answer, then on the bundled runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.table import RunsTable, coerce_metadata
from bayesgrpo.model.curves import reward_curve
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.questions import diagnostics as dg
from bayesgrpo.questions.diagnostics.finding import ACTIONS, FINDING_COLUMNS
from bayesgrpo.questions.stopping import CurveDraws

STEPS = np.arange(1, 101, dtype=float)


def _noise(n: int, scale: float, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, scale, n)


def _names(findings):
    return [(f.name, f.severity) for f in findings]


# --------------------------------------------------------------------------------------------
# Trend statistics
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "rising", "falling", "slope"),
    [
        (2.0 + 0.5 * STEPS, True, False, 0.5),
        (3.0 - 0.1 * STEPS, False, True, -0.1),
        (np.full(100, 4.0), False, False, 0.0),
    ],
)
def test_trend_on_exact_lines(values, rising, falling, slope):
    tr = dg.trend(STEPS, values)
    assert tr.rising() is rising and tr.falling() is falling
    assert tr.slope == pytest.approx(slope)
    assert tr.change == pytest.approx(slope * 99)


def test_trend_is_robust_to_outliers_and_ignores_nan():
    values = 0.01 * STEPS
    values[::10] = 50.0  # wild outliers (10% of points)
    values[5] = np.nan
    tr = dg.trend(STEPS, values)
    assert tr.slope == pytest.approx(0.01, rel=0.05)
    assert tr.n == 99


def test_finding_rejects_unknown_severity():
    with pytest.raises(BayesGRPOError, match="severity"):
        dg.Finding("r", "collapse", "fatal", 0, 1)


def test_mismatched_shapes_raise():
    with pytest.raises(BayesGRPOError, match="shapes"):
        dg.detect_collapse(STEPS, STEPS[:-1])


# --------------------------------------------------------------------------------------------
# Collapse
# --------------------------------------------------------------------------------------------


def _rise_then(level: float, tail: int, n: int = 100) -> np.ndarray:
    """0 for 10 steps, 1 until the tail, then ``level`` for the last ``tail`` steps."""
    values = np.ones(n)
    values[:10] = 0.0
    values[n - tail :] = level
    return values


@pytest.mark.parametrize(
    ("level", "tail", "fires"),
    [
        (0.1, 40, True),  # lost 90% of the gain (limit: 80%)
        (0.0, 40, True),
        (0.3, 40, False),  # lost 70%
        (0.1, 5, False),  # too short: needs 10% of 100 points
        (0.1, 20, True),
    ],
)
def test_collapse_boundaries_with_known_floor(level, tail, fires):
    found = dg.detect_collapse(STEPS, _rise_then(level, tail), floor=0.0, run_id="sim")
    assert bool(found) is fires
    if fires:
        (f,) = found
        assert (f.name, f.severity, f.run_id, f.last_step) == ("collapse", "high", "sim", 100)
        assert f.evidence["peak"] == pytest.approx(1.0)
        assert f.evidence["tail_level"] == pytest.approx(level)
        assert abs(f.first_step - (101 - tail)) <= 5  # the rolling median blurs the edge
        assert "step" in f.action


def test_collapse_needs_a_rise_above_the_noise():
    flat = 0.5 + _noise(100, 0.1, 0)
    assert dg.detect_collapse(STEPS, flat) == []
    rising = 0.5 * (1 - np.exp(-STEPS / 20)) + _noise(100, 0.02, 1)
    assert dg.detect_collapse(STEPS, rising) == []


def test_collapse_below_the_start_without_a_known_floor():
    # starts at 5, rises to 9, falls to -3 and stays: the floor is the smoothed minimum
    values = np.r_[np.full(20, 5.0), np.full(40, 9.0), np.full(40, -3.0)] + _noise(100, 0.1, 2)
    (f,) = dg.detect_collapse(STEPS, values)
    assert f.evidence["floor"] == pytest.approx(-3.0, abs=0.2)
    assert f.evidence["tail_points"] >= 35


def test_short_series_raise_nothing():
    assert dg.detect_collapse(STEPS[:5], _rise_then(0.0, 2, n=5)) == []
    assert dg.detect_stall(STEPS[:5], np.zeros(5)) == []


# --------------------------------------------------------------------------------------------
# Stall
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end", "severity"),
    [(0.35, "high"), (0.6, "warning"), (0.7, None)],  # gap 0.55, 0.3, 0.2 of the range (limits 0.5, 0.25)
)
def test_stall_gap_boundaries(end, severity):
    values = end + _noise(100, 0.02, 3)
    found = dg.detect_stall(STEPS, values, reference=0.9, lower=0.0, upper=1.0)
    assert _names(found) == ([] if severity is None else [("stall", severity)])
    if found:
        assert found[0].evidence["gap_fraction"] == pytest.approx(0.9 - end, abs=0.02)
        assert found[0].first_step == 51


def test_stall_not_raised_while_rising():
    values = 0.2 + 0.003 * STEPS + _noise(100, 0.02, 4)
    assert dg.detect_stall(STEPS, values, reference=0.9, lower=0.0, upper=1.0) == []


def test_stall_with_a_reference_needs_a_range():
    with pytest.raises(BayesGRPOError, match="range"):
        dg.detect_stall(STEPS, np.zeros(100), reference=1.0)


LONG = np.arange(1, 301, dtype=float)  # spans 299 steps, beyond STALL_NEVER_MIN_STEPS


@pytest.mark.parametrize(
    ("steps", "severity", "action"),
    [(LONG, "warning", "stall_never"), (STEPS, "info", "stall_early")],  # 299 and 99 steps spanned
)
def test_stall_never_learned_without_reference(steps, severity, action):
    (f,) = dg.detect_stall(steps, -7.0 + _noise(len(steps), 1.0, 1))
    assert (f.severity, f.first_step, f.last_step) == (severity, 1, len(steps))
    assert "no comparable runs" in f.evidence["reason"] and f.evidence["direction"] == "flat"
    assert f.action == ACTIONS[action]
    assert max(f.evidence["gain_bound_run"], f.evidence["gain_bound_last_half"]) < dg.STALL_FLAT_FRACTION
    learning = -7.0 + 0.05 * steps + _noise(len(steps), 0.5, 6)
    assert dg.detect_stall(steps, learning) == []


def test_stall_never_learned_needs_evidence_of_flatness():
    # 30 points rising by 0.6 under noise 0.5: Mann-Kendall misses the rise (p > 0.05), but the
    # gain it could hide is 0.84 of the spread: no evidence of "never learned", so no finding
    steps = np.arange(1, 31, dtype=float)
    values = 0.6 * steps / 30 + _noise(30, 0.5, 2)
    assert not dg.trend(steps, values).rising()
    run_bound, half_bound, _ = dg.flat_bounds(steps, values)
    assert max(run_bound, half_bound) >= dg.STALL_FLAT_FRACTION
    assert dg.detect_stall(steps, values) == []


def test_stall_falling_run_says_so():
    values = 5.0 - 0.01 * LONG + _noise(300, 0.3, 7)
    (f,) = dg.detect_stall(LONG, values)
    assert (f.severity, f.evidence["direction"]) == ("warning", "falling")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (np.full(100, 3.0), (0.0, 0.0, 0.0)),  # constant: nothing hidden
        # exact line 0 -> 0.99: spread (q95 - q05) = 0.9 * 0.99; changes 0.99 and 0.49
        (0.01 * (STEPS - 1), (0.99 / (0.9 * 0.99), 0.49 / (0.9 * 0.99), 0.9 * 0.99)),
    ],
)
def test_flat_bounds_closed_forms(values, expected):
    assert dg.flat_bounds(STEPS, values) == pytest.approx(expected)


@pytest.mark.parametrize(("prob", "fires"), [(0.95, True), (0.9, True), (0.5, False)])
def test_stall_uses_the_posterior_probability_when_given(prob, fires):
    rising = 0.2 + 0.003 * STEPS + _noise(100, 0.02, 7)  # the data alone say "rising"
    found = dg.detect_stall(STEPS, rising, reference=0.9, lower=0.0, upper=1.0, prob_no_gain=prob)
    assert bool(found) is fires
    if fires:
        assert found[0].evidence["prob_no_gain"] == prob


# --------------------------------------------------------------------------------------------
# Advantage degeneracy, policy concentration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frac", "severity"),
    [
        (np.linspace(0.1, 0.95, 100), "high"),  # end level (mean of last 10) 0.91
        (np.linspace(0.1, 0.7, 100), "warning"),  # 0.67 and rising
        (np.full(100, 0.6), None),  # high-ish but not rising
        (np.full(100, 0.95), "high"),
        (np.linspace(0.0, 0.4, 100), None),
    ],
)
def test_advantage_degeneracy(frac, severity):
    found = dg.detect_advantage_degeneracy(STEPS, frac)
    assert _names(found) == ([] if severity is None else [("advantage_degeneracy", severity)])


@pytest.mark.parametrize(
    ("end", "severity"),
    [(0.05, "warning"), (0.01, "high"), (0.2, None)],
)
def test_policy_concentration(end, severity):
    # from ~1 down to `end`; the levels are medians of the first and last 10 points (steps 5.5
    # and 95.5), so the ratio is end ** 0.9: 0.067, 0.016, 0.23 against limits 0.1 and 0.03
    entropy = np.exp(np.log(end) * STEPS / 100)
    found = dg.detect_policy_concentration(STEPS, entropy)
    assert _names(found) == ([] if severity is None else [("policy_concentration", severity)])
    if found:
        assert found[0].evidence["ratio"] == pytest.approx(end**0.9)


def test_rising_entropy_is_not_concentration():
    assert dg.detect_policy_concentration(STEPS, np.linspace(0.01, 1.0, 100)) == []


# --------------------------------------------------------------------------------------------
# Reward hacking
# --------------------------------------------------------------------------------------------

VAL_STEPS = np.arange(0, 101, 5, dtype=float)
RISING = 0.3 + 0.005 * STEPS + _noise(100, 0.01, 8)


def _val(drop: float) -> np.ndarray:
    """Validation rising 0.3 -> 0.8 by step 50, then falling by ``drop`` to step 100."""
    return np.where(VAL_STEPS <= 50, 0.3 + 0.01 * VAL_STEPS, 0.8 - drop * (VAL_STEPS - 50) / 50)


@pytest.mark.parametrize(
    ("reward", "drop", "fires"),
    [
        (RISING, 0.2, True),  # falls 0.2 of a 0.5 range
        (RISING, 0.02, False),  # falls 4% of the range: below HACK_MIN_VAL_DROP
        (0.5 - 0.001 * STEPS + _noise(100, 0.01, 9), 0.2, False),  # the reward does not rise
    ],
)
def test_reward_hacking_validation(reward, drop, fires):
    found = dg.detect_reward_hacking(STEPS, reward, val_steps=VAL_STEPS, val_reward=_val(drop))
    assert _names(found) == ([("reward_hacking", "high")] if fires else [])
    if fires:
        assert "val_reward falls" in found[0].action


@pytest.mark.parametrize(("ratio", "fires"), [(3.0, True), (2.3, True), (2.1, False), (1.5, False)])
def test_reward_hacking_length_runaway(ratio, fires):
    # end / start levels = ratio ** 0.9 (medians of the first and last 10 points): 2.69, 2.12,
    # 1.95, 1.44 against LENGTH_RUNAWAY_RATIO = 2
    length = 200.0 * np.exp(np.log(ratio) * STEPS / 100)
    found = dg.detect_reward_hacking(STEPS, RISING, length_steps=STEPS, length=length)
    assert _names(found) == ([("reward_hacking", "warning")] if fires else [])
    if fires:
        assert found[0].evidence["length_ratio"] == pytest.approx(ratio**0.9)


# --------------------------------------------------------------------------------------------
# diagnose on a hand-made table, with and without a fitted model
# --------------------------------------------------------------------------------------------


def _table() -> RunsTable:
    good = 0.9 * (1 - np.exp(-STEPS / 15)) + _noise(100, 0.01, 10)
    slow = 0.2 + 0.001 * STEPS + _noise(100, 0.005, 11)  # rising, barely, and far below "good"
    collapsed = _rise_then(0.0, 40)
    points = pd.DataFrame(
        {
            "run_id": np.repeat(["good", "slow", "collapsed"], 100),
            "step": np.tile(STEPS.astype("int64"), 3),
            "reward": np.r_[good, slow, collapsed],
            "frac_reward_zero_std": np.r_[np.full(100, 0.1), np.full(100, 0.1), np.full(100, 0.97)],
        }
    )
    runs = coerce_metadata(
        pd.DataFrame(
            {
                "run_id": ["good", "slow", "collapsed"],
                "family": ["Q", "Q", "L"],
                "task": ["t", "t", "t"],
                "reward_min": 0.0,
                "reward_max": 1.0,
            }
        )
    )
    return RunsTable(points=points, runs=runs)


def test_diagnose_table():
    table = dg.diagnose(_table())
    assert list(table.columns) == list(FINDING_COLUMNS)
    assert list(zip(table["run_id"], table["name"], table["severity"], strict=True)) == [
        ("collapsed", "collapse", "high"),
        ("collapsed", "advantage_degeneracy", "high"),
    ]
    assert isinstance(table.loc[0, "evidence"], dict)
    by_run = dg.findings_by_run(_table())
    assert list(by_run) == ["good", "slow", "collapsed"] and by_run["good"] == []


class _FakeModel:
    """Stands in for a fitted RewardModel: only ``curve_draws`` is used."""

    def __init__(self, no_gain_run: str):
        ids = ("good", "slow")
        tau = np.where(np.array(ids) == no_gain_run, 0.001, 5.0)  # t = step / 100
        shape = (50, 2)
        self.cd = CurveDraws(
            curve="exp",
            params={
                "r0": np.zeros(shape),
                "asymptote": np.full(shape, 0.9),
                "tau": np.broadcast_to(tau, shape).copy(),
            },
            step_scale=100.0,
            reward_scale=1.0,
            run_ids=ids,
        )

    def curve_draws(self) -> CurveDraws:
        return self.cd


def test_diagnose_uses_the_fitted_model_for_stall():
    table = _table()
    assert "stall" not in set(dg.diagnose(table)["name"])  # data alone: "slow" still rises
    with_model = dg.diagnose(table, _FakeModel(no_gain_run="slow"))
    stall = with_model[with_model["name"] == "stall"]
    assert list(stall["run_id"]) == ["slow"] and list(stall["severity"]) == ["high"]
    assert stall.iloc[0]["evidence"]["prob_no_gain"] == pytest.approx(1.0)
    other = dg.diagnose(table, _FakeModel(no_gain_run="good"))  # "good" is at the reference
    assert "stall" not in set(other["name"])


# --------------------------------------------------------------------------------------------
# Real bundled runs
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundled():
    return load_bundled(warn=False)


@pytest.fixture(scope="module")
def real(bundled):
    return dg.findings_by_run(bundled)


def _find(real, fragment: str) -> list[dg.Finding]:
    (run_id,) = [r for r in real if fragment in r]
    return real[run_id]


HEALTHY = [
    "verl_asyncRA_q7b_fsdp_base",
    "verl_asyncRA_q3b_fsdp_base",
    "verl_asyncRA_gsm8k_qwen2_7b_base",
    "verl_asyncRA_q7b_mcore_off",  # its validation dips by 0.007 at the end: not hacking
    "verl_gpg_qwen2-7b_math_megatron",
    "verldata_ppo_Qwen2.5-0.5B-bsz256_2-prompt512-resp256-0.538",
    "Advanced_Llama3_1_3B_GRPO_LoRA_3fcca28",  # TRL run rising -0.8 -> 7.9
    "2048_Game_DGX_S_c4dcd30",  # solves the game (22) and stays there: degenerate groups are info
]


@pytest.mark.parametrize("fragment", HEALTHY)
def test_real_healthy_runs_raise_no_high_finding(real, fragment):
    assert [f for f in _find(real, fragment) if f.severity == "high"] == []


def test_no_real_verl_gsm8k_run_raises_a_high_finding(real):
    high = [
        (r, f.name)
        for r, found in real.items()
        if r.startswith("verl")
        for f in found
        if f.severity == "high"
    ]
    assert high == []


@pytest.mark.parametrize(
    ("fragment", "name", "severity"),
    [
        # wins at 20-32 points until step ~20, then never again: the reward sits at ~8.4
        ("Sudoku_Game_d5e51b2", "collapse", "high"),
        # reward -7.5 at every step, every group with zero spread: no gain, but over 99 steps only
        ("Qwen3_8B_FP8_GRPO_14ff169", "stall", "info"),
        ("Qwen3_8B_FP8_GRPO_14ff169", "advantage_degeneracy", "high"),
        # solved: reward 22 (the game's maximum) with zero spread for the last 900 steps: groups
        # agree because every completion wins, a healthy run (info), not lost signal (high)
        ("2048_Game_DGX_S_c4dcd30", "advantage_degeneracy", "info"),
        # entropy 0.166 -> 0.012 (7%), response length 245 -> 602 while the reward still rises
        ("verl_gpg_qwen2-7b_math", "policy_concentration", "warning"),
        ("verl_gpg_qwen2-7b_math", "reward_hacking", "warning"),
    ],
)
def test_real_runs_raise_the_matching_finding(real, fragment, name, severity):
    runs = [r for r in real if fragment in r and not r.endswith("megatron")]
    assert len(runs) == 1
    assert (name, severity) in _names(real[runs[0]])


@pytest.mark.parametrize(
    ("reward", "reward_max", "expected"),
    [
        (np.r_[np.zeros(30), np.full(70, 22.0)], None, True),  # pinned at its best: solved
        (np.r_[np.zeros(30), np.full(70, 22.0)], 32.0, False),  # 22 of a stated 32: not the ceiling
        (np.r_[np.zeros(30), np.full(70, 31.9)], 32.0, True),
        (np.r_[np.full(30, 22.0), np.zeros(70)], None, False),  # fell from its best
        (np.linspace(0.0, 1.0, 100), None, False),  # still rising at the end
        (np.zeros(100), None, False),  # never moved: no ceiling to sit at
    ],
)
def test_reward_at_ceiling(reward, reward_max, expected):
    assert dg.reward_at_ceiling(np.arange(len(reward)), reward, reward_max) is expected


def test_degenerate_groups_of_a_solved_run_are_info_with_the_solved_action():
    frac = np.r_[np.zeros(20), np.ones(80)]
    (finding,) = dg.detect_advantage_degeneracy(np.arange(100), frac, solved=True)
    assert finding.severity == "info" and finding.evidence["reward_at_ceiling"] is True
    assert "ceiling" in finding.action
    (lost,) = dg.detect_advantage_degeneracy(np.arange(100), frac)
    assert lost.severity == "high"


def test_real_runs_raise_no_stall_warning(real):
    # every bundled run without comparable runs that is shown flat spans at most 99 steps: "info"
    stall = [(r, f.severity) for r, found in real.items() for f in found if f.name == "stall"]
    assert len(stall) >= 10 and {s for _, s in stall} == {"info"}


@pytest.mark.parametrize(("last_step", "expected"), [(100, [("stall", "info")]), (None, [])])
def test_real_slow_start_is_not_called_never_learned(bundled, last_step, expected):
    # the 2048 game on the DGX: flat (at 0) for its first ~190 steps, then solves the game (22)
    (run_id,) = [r for r in bundled.run_ids if "2048_Game_DGX_S_c4dcd30" in r]
    frame = bundled.run(run_id)
    if last_step is not None:
        frame = frame[frame["step"] <= last_step]
    assert _names(dg.detect_stall(frame["step"], frame["reward"])) == expected


def test_stall_not_raised_after_a_fast_rise_that_rings():
    # rises 0.2 -> 0.7 within ~15 steps, then rings around 0.7: the overshoot hides the rise from
    # the trend test, but the run ends 0.3 (0.57 of its spread) above its start level

    steps = np.arange(1, 121, dtype=float)
    omega = 2 * np.pi / (0.3 * np.sqrt(1 - 0.2**2))
    values = reward_curve("oscillator", (steps - 1) / 119, 0.2, 0.7, tau=0.4 / omega, zeta=0.2)
    values = values + _noise(120, 0.04, 1)
    assert not dg.trend(steps, values).rising()
    assert dg.detect_stall(steps, values) == []
