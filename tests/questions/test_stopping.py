"""Tests of the stopping questions and rules (bayesgrpo.questions.stopping).

Every number is checked against a closed form, a known distribution of draws, or a threshold
computed by hand; no sampling.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.optimize import brentq

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.curves import CURVES, asymptote_from_levels, get_curve, time_to_fraction
from bayesgrpo.model.data import prepare
from bayesgrpo.model.predict import mean_curve_draws, reward_draws, run_draws
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.simulate import simulate_runs
from bayesgrpo.questions import stopping
from bayesgrpo.questions.stopping import (
    LOW_RATE,
    PEAK_FROM_GAIN,
    PHASES,
    BudgetRule,
    CurveDraws,
    GainRateRule,
    GuardedBudgetRule,
    PlateauRule,
    TargetRule,
    momentum,
)
from bayesgrpo.questions.stopping import rules as stopping_rules

SHAPES = {
    "exp": {"tau": 0.3},
    "weibull": {"tau": 0.4, "k": 2.5},
    "logistic": {"t_mid": 0.35, "B": 2.0},
    "power": {"tau": 0.2, "alpha": 0.8},
    "oscillator": {"tau": 0.3, "zeta": 0.4},
    "two_timescale": {"tau": 0.2, "k": 2.0, "odds": 0.3, "ratio": 5.0},
}


def fixed(curve: str, n_draws: int = 3, r0: float = 0.2, asymptote: float = 0.7, **kwargs) -> CurveDraws:
    """One run with no posterior spread: every draw the same curve."""
    shape = kwargs.pop("shape", SHAPES[curve])
    params = {"r0": np.full(n_draws, r0), "asymptote": np.full(n_draws, asymptote)}
    params.update({name: np.full(n_draws, value) for name, value in shape.items()})
    return CurveDraws(curve, params, **kwargs)


def exp_with(asymptote: np.ndarray, r0: float = 0.1, tau: float = 0.25, **kwargs) -> CurveDraws:
    n = len(asymptote)
    return CurveDraws("exp", {"r0": np.full(n, r0), "asymptote": asymptote, "tau": np.full(n, tau)}, **kwargs)


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step_now", "horizon"), [(0, 1000), (150, 1000), (400, 600), (999, 1000), (500, 500)]
)
def test_remaining_gain_of_exp_is_closed_form(step_now, horizon):
    tau, scale, r0, a = 0.3, 800.0, 0.15, 0.65
    cd = fixed("exp", r0=r0, asymptote=a, shape={"tau": tau}, step_scale=scale)
    gain = stopping.remaining_gain(cd, step_now, horizon)
    expected = (a - r0) * (math.exp(-step_now / scale / tau) - math.exp(-horizon / scale / tau))
    assert gain.shape == (3, 1)
    np.testing.assert_allclose(gain, expected, rtol=1e-12, atol=1e-15)
    frame = stopping.expected_gain(cd, step_now, horizon)
    assert frame[["mean", "lower", "upper"]].to_numpy() == pytest.approx(np.full((1, 3), expected), abs=1e-14)


def test_exp_fraction_steps_are_tau_log_of_one_over_remaining():
    tau, scale = 0.3, 1000.0
    cd = fixed("exp", shape={"tau": tau}, step_scale=scale, horizon_step=500)
    frame = stopping.steps_to_fraction(cd)
    expected = tau * scale * np.log([5.0, 10.0, 20.0])  # t80, t90, t95
    np.testing.assert_allclose(frame["median"], expected, rtol=1e-12)
    np.testing.assert_allclose(frame["lower"], expected, rtol=1e-12)
    np.testing.assert_allclose(frame["upper"], expected, rtol=1e-12)
    # t80 = 483 <= 500 < t90 = 691
    assert frame["prob_beyond_horizon"].tolist() == [0.0, 1.0, 1.0]
    assert frame["fraction"].tolist() == [0.8, 0.9, 0.95]


def test_weibull_fraction_steps_are_closed_form():
    tau, k, scale = 0.4, 3.0, 250.0
    cd = fixed("weibull", shape={"tau": tau, "k": k}, step_scale=scale)
    frame = stopping.steps_to_fraction(cd, fractions=(0.5, 0.8))
    expected = tau * scale * (-np.log1p(-np.array([0.5, 0.8]))) ** (1 / k)
    np.testing.assert_allclose(frame["median"], expected, rtol=1e-12)
    assert frame["prob_beyond_horizon"].isna().all()  # no horizon known


def test_oscillator_fraction_step_is_the_first_crossing():
    cd = fixed("oscillator", shape={"tau": 0.3, "zeta": 0.2}, step_scale=100.0)
    step = stopping.steps_to_fraction(cd, fractions=(0.9,))["median"].iloc[0]
    g = get_curve("oscillator").g
    assert g(step / 100.0, tau=0.3, zeta=0.2) == pytest.approx(0.9, abs=1e-9)
    before = np.linspace(0, step / 100.0, 400)[:-1]
    assert np.all(g(before, tau=0.3, zeta=0.2) < 0.9)


def test_fraction_steps_of_lognormal_tau_have_lognormal_quantiles():
    rng = np.random.default_rng(0)
    log_tau = rng.normal(math.log(0.3), 0.4, 100_000)
    n = log_tau.size
    params = {"r0": np.zeros(n), "asymptote": np.ones(n), "tau": np.exp(log_tau)}
    cd = CurveDraws("exp", params, step_scale=1000.0)
    frame = stopping.steps_to_fraction(cd, fractions=(0.8,), interval=0.9, horizon_step=600.0)
    z = stats.norm.ppf(0.95)
    t80 = 1000.0 * math.log(5.0) * np.exp(math.log(0.3) + np.array([-z, 0.0, z]) * 0.4)
    row = frame.iloc[0]
    np.testing.assert_allclose([row["lower"], row["median"], row["upper"]], t80, rtol=0.01)
    beyond = 1 - stats.norm.cdf((math.log(0.6 / math.log(5.0)) - math.log(0.3)) / 0.4)
    assert row["prob_beyond_horizon"] == pytest.approx(beyond, abs=0.005)


def test_levels_r1_give_the_asymptote():
    shape = {"tau": np.array([0.5]), "k": np.array([2.0])}
    cd = CurveDraws("weibull", {"r0": np.array([0.1]), "r1": np.array([0.5]), **shape})
    g1 = 1 - math.exp(-((1 / 0.5) ** 2))
    assert cd.params["asymptote"][0, 0] == pytest.approx(0.1 + 0.4 / g1)
    assert stopping.reward_at(cd, [1.0])[0, 0, 0] == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------
# Probabilities from draws of a known distribution
# --------------------------------------------------------------------------------------------

MU_A, SD_A, R0, TAU = 0.6, 0.1, 0.1, 0.25


@pytest.fixture(scope="module")
def normal_asymptote() -> CurveDraws:
    """Exp curves whose asymptote is Normal(MU_A, SD_A): every gain is normal."""
    draws = np.random.default_rng(1).normal(MU_A, SD_A, 200_000)
    return exp_with(draws, r0=R0, tau=TAU, step_scale=1000.0, horizon_step=1000.0)


@pytest.mark.parametrize(
    ("step_now", "eps"), [(300, 0.01), (600, 0.01), (600, 0.02), (800, 0.005), (100, 0.3)]
)
def test_prob_gain_below_matches_normal_cdf(normal_asymptote, step_now, eps):
    delta = math.exp(-step_now / 1000 / TAU) - math.exp(-1 / TAU)
    expected = stats.norm.cdf((eps - (MU_A - R0) * delta) / (SD_A * delta))
    p = stopping.prob_gain_below(normal_asymptote, step_now, eps=eps)
    assert p.shape == (1,)
    assert p[0] == pytest.approx(expected, abs=0.005)  # Monte Carlo sd <= 0.0011


def test_expected_gain_interval_matches_normal_quantiles(normal_asymptote):
    delta = math.exp(-0.4 / TAU) - math.exp(-1 / TAU)
    frame = stopping.expected_gain(normal_asymptote, 400, interval=0.8)
    z = stats.norm.ppf(0.9)
    row = frame.iloc[0]
    assert row["mean"] == pytest.approx((MU_A - R0) * delta, rel=0.005)
    assert row["lower"] == pytest.approx((MU_A - R0 - z * SD_A) * delta, rel=0.01)
    assert row["upper"] == pytest.approx((MU_A - R0 + z * SD_A) * delta, rel=0.01)
    assert row["step"] == 400 and row["horizon_step"] == 1000


def test_relative_eps_is_a_share_of_the_reward_range():
    cd = exp_with(np.linspace(0.2, 1.0, 9), reward_scale=4.0, horizon_step=1000.0, step_scale=1000.0)
    absolute = stopping.prob_gain_below(cd, 300, eps=0.04)
    relative = stopping.prob_gain_below(cd, 300, eps=0.01, relative=True)
    np.testing.assert_array_equal(absolute, relative)


def test_target_probability_matches_normal_cdf(normal_asymptote):
    g_T, g_s = 1 - math.exp(-1 / TAU), 1 - math.exp(-0.5 / TAU)
    target = 0.55
    mean_T = R0 + (MU_A - R0) * g_T
    expected = 1 - stats.norm.cdf((target - mean_T) / (SD_A * g_T))
    [decision] = TargetRule(target, prob=0.9).decide(normal_asymptote, 500)
    assert decision.details["prob_reach_by_horizon"] == pytest.approx(expected, abs=0.005)
    now = 1 - stats.norm.cdf((target - R0 - (MU_A - R0) * g_s) / (SD_A * g_s))
    assert decision.details["prob_reached_now"] == pytest.approx(now, abs=0.005)


# --------------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", list(CURVES))
@pytest.mark.parametrize("variant", [0, 1, 2])
def test_rate_peak_time_is_the_largest_rate(family, variant):
    grids = {
        "exp": [{"tau": 0.05}, {"tau": 0.3}, {"tau": 3.0}],
        "weibull": [{"tau": 0.3, "k": 0.5}, {"tau": 0.3, "k": 1.2}, {"tau": 1.0, "k": 4.0}],
        "logistic": [{"t_mid": 0.3, "B": 0.6}, {"t_mid": 0.3, "B": 1.5}, {"t_mid": 2.0, "B": 5.0}],
        "power": [{"tau": 0.1, "alpha": 0.3}, {"tau": 0.3, "alpha": 1.0}, {"tau": 1.0, "alpha": 4.0}],
        "oscillator": [{"tau": 0.3, "zeta": 0.2}, {"tau": 0.3, "zeta": 1 + 1e-8}, {"tau": 0.5, "zeta": 3.0}],
        "two_timescale": [
            {"tau": 0.1, "k": 0.8, "odds": 1.0, "ratio": 10.0},
            {"tau": 0.3, "k": 2.0, "odds": 0.25, "ratio": 4.0},
            {"tau": 0.3, "k": 4.0, "odds": 2.0, "ratio": 0.5},
        ],
    }
    assert set(grids) == set(CURVES)
    shape = {k: np.array(v) for k, v in grids[family][variant].items()}
    curve = get_curve(family)
    t_peak = stopping.rate_peak_time(family, **shape)
    start = time_to_fraction(family, PEAK_FROM_GAIN, **shape)
    t = np.linspace(start, 50 * float(shape.get("tau", shape.get("t_mid"))), 200_001)
    assert t_peak >= start
    rates = curve.dg_dt(t, **shape)
    assert curve.dg_dt(t_peak, **shape) >= rates.max() * (1 - 1e-6)


@pytest.mark.parametrize("family", ["exp", "power"])
def test_fastest_at_start_families_never_have_a_slow_start(family):
    rng = np.random.default_rng(2)
    n = 500
    shape = {"tau": np.exp(rng.normal(np.log(0.3), 1.0, n))}
    if family == "power":
        shape["alpha"] = np.exp(rng.normal(0.0, 0.7, n))
    cd = CurveDraws(family, {"r0": np.zeros(n), "asymptote": np.ones(n), **shape}, step_scale=100.0)
    for step in [0, 1, 5, 20, 50, 100, 300]:
        assert stopping.phase(cd, step)["slow_start"].iloc[0] == 0.0
    assert stopping.phase(cd, 0)["rapid"].iloc[0] == 1.0


def test_exp_plateau_starts_where_the_rate_falls_below_its_threshold():
    tau, scale = 0.2, 1000.0
    cd = fixed("exp", shape={"tau": tau}, step_scale=scale)
    # rho(t) = exp(-t/tau) / (1 - PEAK_FROM_GAIN) < LOW_RATE  <=>  t > -tau log(LOW_RATE (1 - PEAK_FROM_GAIN))
    edge = -tau * math.log(LOW_RATE * (1 - PEAK_FROM_GAIN)) * scale
    assert stopping.phase(cd, edge - 0.5)["phase"].iloc[0] == "rapid"
    assert stopping.phase(cd, edge + 0.5)["phase"].iloc[0] == "plateau"


@pytest.mark.parametrize(
    ("family", "shape", "steps"),
    [
        (
            "weibull",
            {"tau": 0.4, "k": 3.0},
            {"slow_start": [0, 20, 100], "rapid": [200, 400, 550], "plateau": [700, 1000, 3000]},
        ),
        (
            "logistic",
            {"t_mid": 0.4, "B": 4.0},
            {"slow_start": [0, 100], "rapid": [400], "plateau": [2000, 5000]},
        ),
        ("oscillator", {"tau": 0.3, "zeta": 0.5}, {"slow_start": [0, 5], "rapid": [150], "plateau": [3000]}),
    ],
)
def test_sigmoidal_curves_go_through_three_phases(family, shape, steps):
    cd = fixed(family, shape=shape, step_scale=1000.0)
    for expected, at in steps.items():
        for step in at:
            row = stopping.phase(cd, step).iloc[0]
            assert (row["phase"], row["probability"]) == (expected, 1.0), (step, row.to_dict())


def test_phase_at_the_weibull_slow_start_edge():
    # k = 2: g'(t) = 2 t e^{-t^2} (tau = 1), peak at 1/sqrt(2); g' = LOW_RATE g'(peak) near t = 0.087
    peak = 2 / math.sqrt(2) * math.exp(-0.5)

    edge = brentq(lambda t: 2 * t * math.exp(-t * t) - LOW_RATE * peak, 1e-6, 0.5)
    cd = fixed("weibull", shape={"tau": 1.0, "k": 2.0}, step_scale=1.0)
    assert stopping.phase(cd, edge - 1e-6)["phase"].iloc[0] == "slow_start"
    assert stopping.phase(cd, edge + 1e-6)["phase"].iloc[0] == "rapid"


def test_phase_probability_is_the_share_of_draws():
    # 30 draws plateaued long ago (tau small), 70 still rising fast (tau large)
    tau = np.r_[np.full(30, 0.01), np.full(70, 5.0)]
    cd = CurveDraws("exp", {"r0": np.zeros(100), "asymptote": np.ones(100), "tau": tau}, step_scale=1.0)
    row = stopping.phase(cd, 0.5).iloc[0]
    assert (row["plateau"], row["rapid"], row["slow_start"]) == (0.3, 0.7, 0.0)
    assert (row["phase"], row["probability"]) == ("rapid", 0.7)
    codes = stopping.phase_draws(cd, 0.5)
    assert codes.shape == (100, 1)
    assert set(np.unique(codes)) == {PHASES.index("rapid"), PHASES.index("plateau")}


def test_long_tail_is_not_a_plateau_before_half_its_gain():
    # Weibull k = 0.5: the rate collapses early, yet at t = 0.01 tau only 9.5% of the gain is made
    cd = fixed("weibull", shape={"tau": 1.0, "k": 0.5}, step_scale=1.0)
    assert stopping.phase(cd, 0.01)["phase"].iloc[0] == "rapid"
    assert stopping.phase(cd, 2.0)["phase"].iloc[0] == "plateau"


# --------------------------------------------------------------------------------------------
# Rules: each decision flips at a threshold computed by hand
# --------------------------------------------------------------------------------------------


def test_plateau_rule_flips_at_its_probability():
    # ten draws whose remaining gains are 0.01, 0.02, ..., 0.10: P(gain < 0.065) = 0.6
    tau, s, T = 0.25, 500.0, 1000.0
    delta = math.exp(-0.5 / tau) - math.exp(-1 / tau)
    gains = 0.01 * np.arange(1, 11)
    cd = exp_with(0.1 + gains / delta, r0=0.1, tau=tau, step_scale=1000.0)
    np.testing.assert_allclose(stopping.remaining_gain(cd, s, T)[:, 0], gains, rtol=1e-12)
    assert stopping.prob_gain_below(cd, s, T, eps=0.065)[0] == pytest.approx(0.6)
    assert PlateauRule(0.065, prob=0.6).decide(cd, s, T)[0].decision == "stop"
    # P = 0.6 is below 0.61 and above 1 - 0.61: it cannot tell either way
    unsure = PlateauRule(0.065, prob=0.61).decide(cd, s, T)[0]
    assert unsure.decision == "undecided" and unsure.undecided and not unsure.stop
    assert unsure.probability == pytest.approx(0.6)
    assert unsure.reason.startswith(
        "P(gain over the remaining 500 steps < 0.065) = 0.60: neither it nor a gain of at least 0.065 "
        "reaches 0.61; expected gain +0.055"
    )
    # P(gain < 0.025) = 0.2: a gain of at least eps is 80% probable, enough at prob 0.8
    stay = PlateauRule(0.025, prob=0.8).decide(cd, s, T)[0]
    assert stay.decision == "continue" and stay.probability == pytest.approx(0.2)
    assert stay.reason.startswith(
        "P(gain over the remaining 500 steps < 0.025) = 0.20 <= 0.20: expected gain"
    )
    assert PlateauRule(0.025, prob=0.81).decide(cd, s, T)[0].decision == "undecided"


def test_plateau_rule_reason_and_gain_numbers():
    cd = fixed("exp", r0=0.1, asymptote=0.5, shape={"tau": 0.1}, step_scale=1000.0, run_ids=("run-a",))
    [d] = PlateauRule(0.01, prob=0.9).decide(cd, 400, 1000)
    gain = 0.4 * (math.exp(-4) - math.exp(-10))  # 0.0073 < 0.01
    assert d.decision == "stop" and d.stop and d.probability == 1.0 and d.run_id == "run-a"
    assert d.reason == "P(gain over the remaining 600 steps < 0.01) = 1.00 >= 0.90: the run is on its plateau"
    assert (d.expected_gain, d.gain_lower, d.gain_upper) == pytest.approx((gain, gain, gain))
    for eps in (0.0, 0.01):  # no gain is left to make, even with eps = 0
        [at_end] = PlateauRule(eps).decide(cd, 1000, 1000)
        assert at_end.decision == "stop" and at_end.probability == 1.0 and "no steps remain" in at_end.reason


@pytest.mark.parametrize(("factor", "decision"), [(1 - 1e-6, "continue"), (1 + 1e-6, "stop")])
def test_budget_rule_to_horizon_flips_where_value_equals_cost(factor, decision):
    tau, s, T, value = 0.3, 200.0, 1000.0, 50.0
    cd = fixed("exp", r0=0.1, asymptote=0.8, shape={"tau": tau}, step_scale=1000.0)
    gain = 0.7 * (math.exp(-0.2 / tau) - math.exp(-1 / tau))
    cost = factor * value * gain / (T - s)
    [d] = BudgetRule(cost, value, n_grid=1).decide(cd, s, T)
    assert d.decision == decision
    assert d.details["best_step"] == T
    assert d.details["expected_net_value"] == pytest.approx(value * gain - cost * (T - s))


@pytest.mark.parametrize(("factor", "decision"), [(1 - 1e-6, "continue"), (1 + 1e-6, "stop")])
def test_budget_rule_weighs_every_later_step(factor, decision):
    # exp gains are concave: the best value per step is at the first grid point u1 = s + (T - s)/n
    tau, s, T, value, n = 0.3, 200.0, 1000.0, 50.0, 100
    cd = fixed("exp", r0=0.1, asymptote=0.8, shape={"tau": tau}, step_scale=1000.0)
    u1 = s + (T - s) / n
    cost = factor * value * 0.7 * (math.exp(-s / 1000 / tau) - math.exp(-u1 / 1000 / tau)) / (u1 - s)
    # at that cost, running to the horizon loses money: the rule must look at earlier steps
    assert value * 0.7 * (math.exp(-0.2 / tau) - math.exp(-1 / tau)) < cost * (T - s)
    [d] = BudgetRule(cost, value, n_grid=n).decide(cd, s, T)
    assert d.decision == decision
    if decision == "continue":
        assert d.details["best_step"] == u1 and d.probability == 1.0
        assert d.reason.startswith("continuing to step 208 has expected net value +")


@pytest.mark.parametrize(("factor", "decision"), [(1 - 1e-6, "stop"), (1 + 1e-6, "continue")])
def test_gain_rate_rule_flips_where_the_expected_gain_meets_its_share_of_the_rate(factor, decision):
    # an exp curve on progress t = step / 1000: at step 200 of 1000, 80% of the run is left
    tau, s, T = 0.3, 200.0, 1000.0
    cd = fixed("exp", r0=0.1, asymptote=0.8, shape={"tau": tau}, step_scale=1000.0, reward_scale=2.0)
    gain = 0.7 * (math.exp(-0.2 / tau) - math.exp(-1 / tau))
    rate = gain / (0.8 * 2.0) / factor  # relative: a share of the reward range (2.0) per whole run
    [d] = GainRateRule(rate).decide(cd, s, T)
    assert d.decision == decision
    assert d.details["share_left"] == pytest.approx(0.8)
    assert d.details["gain_bar"] == pytest.approx(rate * 2.0 * 0.8)
    assert d.expected_gain == pytest.approx(gain)
    assert ("not worth its steps" in d.reason) == (decision == "stop")
    [absolute] = GainRateRule(rate * 2.0, relative=False).decide(cd, s, T)
    assert absolute.decision == decision


def test_gain_rate_rule_asks_less_gain_of_less_run_left():
    cd = fixed("exp", r0=0.1, asymptote=0.8, shape={"tau": 0.3}, step_scale=1000.0)
    rule = GainRateRule(0.05)
    early, late = rule.decide(cd, 100.0, 1000.0)[0], rule.decide(cd, 900.0, 1000.0)[0]
    assert late.details["gain_bar"] == pytest.approx(early.details["gain_bar"] / 9)
    [done] = rule.decide(cd, 1000.0, 1000.0)
    assert done.decision == "stop" and done.probability == 1.0
    with pytest.raises(BayesGRPOError):
        GainRateRule(-0.1)


@pytest.mark.parametrize(
    ("step", "decision"),
    [(200.0, "continue"), (500.0, "continue"), (800.0, "continue"), (900.0, "stop")],
)
def test_guarded_budget_goes_past_its_budget_while_the_curve_still_rises(step, decision):
    # exp on progress step / 1000, reward range 1: the gain left at 800 is 0.7 (e^-2.67 - e^-3.33)
    # = 0.023 > 2%, at 900 it is 0.010 < 2%
    cd = fixed("exp", r0=0.1, asymptote=0.8, shape={"tau": 0.3}, step_scale=1000.0)
    [d] = GuardedBudgetRule(fraction=0.5, eps=0.02, prob=0.5).decide(cd, step, 1000.0)
    assert d.decision == decision
    assert d.details["progress"] == pytest.approx(step / 1000.0)
    if step >= 500.0:
        assert ("past the budget" in d.reason) and (("still rising" in d.reason) == (decision == "continue"))
    else:  # before the budget the reason gives the early stop's probability against its threshold
        assert f"P(gain < 0.01) = {d.probability:.2f} < 0.90, not a sure plateau" in d.reason


def test_guarded_budget_stops_a_flat_run_at_its_budget_or_before_it_on_a_sure_plateau():
    flat = fixed("exp", r0=0.5, asymptote=0.5 + 1e-6, shape={"tau": 0.3}, step_scale=1000.0)
    [early] = GuardedBudgetRule(fraction=0.5).decide(flat, 200.0, 1000.0)
    assert early.decision == "stop" and "stop early" in early.reason and early.probability == 1.0
    no_early = GuardedBudgetRule(fraction=0.5, early_prob=None)
    assert no_early.decide(flat, 200.0, 1000.0)[0].decision == "continue"
    assert no_early.decide(flat, 500.0, 1000.0)[0].decision == "stop"
    assert no_early.decide(flat, 1000.0, 1000.0)[0].decision == "stop"
    for bad in ({"fraction": 0.0}, {"fraction": 1.5}, {"eps": -0.1}, {"prob": 1.0}, {"early_prob": 0.0}):
        with pytest.raises(BayesGRPOError):
            GuardedBudgetRule(**bad)


def test_recent_rise_recovers_a_known_slope_and_its_error():
    rng = np.random.default_rng(0)
    steps = np.arange(1.0, 1001.0)
    slope, sd = 2e-4, 0.05  # a rise of 0.02 over the latest 100 steps
    rises, ses = [], []
    for _ in range(400):
        reward = 0.3 + slope * steps + sd * rng.standard_normal(steps.size)
        found = momentum.recent_rise(steps, reward, 1000.0)
        rises.append(found.rise)
        ses.append(found.se)
        assert found.n_points == 100 and found.window_steps == 100.0
    # unbiased, and its standard error is the sd of the estimates (the least-squares one: sd
    # sqrt(12 / n) over a window of n evenly spaced points)
    assert np.mean(rises) == pytest.approx(slope * 100, abs=3 * np.std(rises) / 20)
    assert np.mean(ses) == pytest.approx(np.std(rises), rel=0.1)
    assert np.mean(ses) == pytest.approx(sd * math.sqrt(12 / 100), rel=0.1)
    # too few points, non-finite rewards left out
    assert np.isnan(momentum.recent_rise(steps[:4], steps[:4], 1000.0).rise)
    reward = np.where(steps % 2 == 0, np.nan, 0.001 * steps)
    found = momentum.recent_rise(steps, reward, 1000.0)
    assert found.n_points == 50 and found.rise == pytest.approx(0.1)
    assert found.se == pytest.approx(0.0, abs=1e-12)


def test_with_recent_rise_attaches_each_runs_rise_and_select_keeps_it():
    steps = np.arange(1.0, 201.0)
    points = pd.concat(
        [
            pd.DataFrame({"run_id": "up", "step": steps, "reward": 0.001 * steps}),
            pd.DataFrame({"run_id": "flat", "step": steps, "reward": 0.5 + 0.0 * steps}),
        ]
    )
    params = {"r0": np.full((3, 3), 0.2), "asymptote": np.full((3, 3), 0.7), "tau": np.full((3, 3), 0.3)}
    cd = CurveDraws("exp", params, step_scale=200.0, horizon_step=200.0, run_ids=("up", "flat", "none"))
    attached = momentum.with_recent_rise(cd, points)
    # a line through the latest 20 steps rises 0.001 x 20 across them; the flat run's residuals are 0
    assert attached.recent_rise[0] == pytest.approx(0.02)
    assert attached.recent_rise[1] == pytest.approx(0.0) and attached.recent_rise_se[1] == pytest.approx(0.0)
    assert np.isnan(attached.recent_rise[2])  # no points: no evidence either way
    picked = attached.select(["flat", "up"])
    assert list(picked.recent_rise) == pytest.approx([0.0, 0.02])
    without_horizon = dataclasses.replace(cd, horizon_step=None)
    assert momentum.with_recent_rise(without_horizon, points).recent_rise is None


def test_guarded_budget_holds_a_sure_plateau_while_the_logged_reward_still_rises():
    flat = fixed("exp", r0=0.5, asymptote=0.5 + 1e-6, shape={"tau": 0.3}, step_scale=1000.0)
    rising = dataclasses.replace(flat, recent_rise=np.array([0.05]), recent_rise_se=np.array([0.01]))
    rule = GuardedBudgetRule(fraction=0.5)
    for step in (200.0, 600.0):  # an early stop and the budget's stop are both held
        [held] = rule.decide(rising, step, 1000.0)
        assert held.decision == "continue" and held.details["held_while_rising"] == 1.0
        assert "rose +0.05 over the run's latest 10%" in held.reason and "still rises" in held.reason
        assert held.details["recent_rise_lower"] == pytest.approx(0.05 - 1.645 * 0.01)
        assert rule.decide(flat, step, 1000.0)[0].decision == "stop"  # no rise attached: not held
    # a rise whose lower bound is under rising_eps, the guard off, or no step left: not held
    unsure = dataclasses.replace(flat, recent_rise=np.array([0.05]), recent_rise_se=np.array([0.03]))
    assert rule.decide(unsure, 600.0, 1000.0)[0].decision == "stop"
    assert GuardedBudgetRule(rising_eps=None).decide(rising, 600.0, 1000.0)[0].decision == "stop"
    assert rule.decide(rising, 1000.0, 1000.0)[0].decision == "stop"
    for bad in ({"rising_eps": -0.1}, {"rising_z": -1.0}, {"rising_z": float("inf")}):
        with pytest.raises(BayesGRPOError):
            GuardedBudgetRule(**bad)


def test_with_recent_rise_attaches_the_long_window_a_flat_stop_reads():
    steps = np.arange(1.0, 201.0)
    # flat for the first 160 steps, then a rise of 0.001 a step: the latest 10% (20 steps) and the
    # latest 20% (40 steps) both lie on the rise; a run rising from step 170 on differs between them
    bent = np.where(steps > 170.0, 0.001 * (steps - 170.0), 0.0)
    points = pd.DataFrame({"run_id": "bent", "step": steps, "reward": 0.5 + bent})
    params = {"r0": np.full((2, 1), 0.2), "asymptote": np.full((2, 1), 0.7), "tau": np.full((2, 1), 0.3)}
    cd = CurveDraws("exp", params, step_scale=200.0, horizon_step=200.0, run_ids=("bent",))
    attached = momentum.with_recent_rise(cd, points)
    short = momentum.recent_rise(steps, points["reward"].to_numpy(), 200.0, momentum.RISE_WINDOW)
    long = momentum.recent_rise(steps, points["reward"].to_numpy(), 200.0, momentum.FLAT_WINDOW)
    assert attached.recent_rise[0] == pytest.approx(short.rise) and attached.long_rise[0] == pytest.approx(
        long.rise
    )
    assert attached.long_rise_se[0] == pytest.approx(long.se) and long.n_points == 40
    assert attached.recent_rise[0] == pytest.approx(0.02) and attached.long_rise[0] != pytest.approx(0.04)
    assert list(attached.select(["bent"]).long_rise) == pytest.approx([long.rise])


def test_flat_stop_is_opt_in_and_reads_the_long_rise_upper_bound():
    # the curve expects a gain of 0.023 left at 800 and more before: the default rule goes on
    rising_curve = fixed("exp", r0=0.1, asymptote=0.8, shape={"tau": 0.3}, step_scale=1000.0)
    flat_points = dataclasses.replace(
        rising_curve,
        recent_rise=np.array([0.0]),
        recent_rise_se=np.array([0.005]),
        long_rise=np.array([0.001]),
        long_rise_se=np.array([0.005]),
    )
    default = GuardedBudgetRule(fraction=0.5, eps=0.02, prob=0.5)
    flat_rule = GuardedBudgetRule(fraction=0.5, eps=0.02, prob=0.5, flat_eps=0.02)
    assert default.decide(flat_points, 300.0, 1000.0)[0].decision == "continue"
    [d] = flat_rule.decide(flat_points, 300.0, 1000.0)
    assert d.decision == "stop" and d.details["stopped_flat"] == 1.0 and "no longer climbs" in d.reason
    upper = 0.001 + 1.645 * 0.005
    assert d.details["flat_rise_upper"] == pytest.approx(upper)
    assert f"at most {upper:+.3g}" in d.reason and "latest 20%" in d.reason
    assert "from 0.2 of the run" in str(flat_rule) and "latest 20%" in str(flat_rule)
    # not before flat_from, not where the bound reaches flat_eps, not without the long rise, and
    # never while the rise guard holds the run
    assert flat_rule.decide(flat_points, 150.0, 1000.0)[0].decision == "continue"
    assert (
        GuardedBudgetRule(flat_eps=0.005, eps=0.02, prob=0.5).decide(flat_points, 300.0, 1000.0)[0].decision
        == "continue"
    )
    assert flat_rule.decide(rising_curve, 300.0, 1000.0)[0].decision == "continue"
    assert np.isnan(flat_rule.decide(rising_curve, 300.0, 1000.0)[0].details["flat_rise_upper"])
    still_rising = dataclasses.replace(
        flat_points, recent_rise=np.array([0.05]), recent_rise_se=np.array([0.01])
    )
    assert flat_rule.decide(still_rising, 300.0, 1000.0)[0].decision == "continue"
    # flat_eps is a share of the range (0.2 on a range of 10), or reward units with relative=False
    wide = dataclasses.replace(flat_points, reward_scale=10.0)
    assert (
        GuardedBudgetRule(flat_eps=0.005, eps=0.02, prob=0.5).decide(wide, 300.0, 1000.0)[0].decision
        == "stop"
    )
    absolute = GuardedBudgetRule(flat_eps=0.005, eps=0.02, prob=0.5, relative=False)
    assert absolute.decide(wide, 300.0, 1000.0)[0].decision == "continue"  # 0.0092 > 0.005
    for bad, named in (
        ({"flat_eps": -0.1}, "flat_eps"),
        ({"flat_from": 0.0}, "flat_from"),
        ({"flat_from": 1.5}, "flat_from"),
    ):
        with pytest.raises(BayesGRPOError, match=f"^{named} must be"):
            GuardedBudgetRule(**bad)


def test_flat_stop_stops_a_simulated_flat_run_and_spares_a_rising_one():
    rng = np.random.default_rng(3)
    steps = np.arange(1.0, 301.0)
    flat_reward = 0.4 + 0.05 * rng.standard_normal(steps.size)
    rising_reward = 0.2 + 0.5 * steps / 1000.0 + 0.05 * rng.standard_normal(steps.size)
    points = pd.concat(
        [
            pd.DataFrame({"run_id": "flat", "step": steps, "reward": flat_reward}),
            pd.DataFrame({"run_id": "rising", "step": steps, "reward": rising_reward}),
        ]
    )
    # a curve that expects both to rise a lot (as a population of climbing runs would)
    params = {"r0": np.full((3, 2), 0.1), "asymptote": np.full((3, 2), 0.8), "tau": np.full((3, 2), 0.3)}
    cd = CurveDraws("exp", params, step_scale=1000.0, horizon_step=1000.0, run_ids=("flat", "rising"))
    cd = momentum.with_recent_rise(cd, points)
    decisions = GuardedBudgetRule(flat_eps=0.02).decide(cd, 300.0, 1000.0)
    assert [d.decision for d in decisions] == ["stop", "continue"]
    assert [d.decision for d in GuardedBudgetRule().decide(cd, 300.0, 1000.0)] == ["continue", "continue"]


def test_budget_rule_stops_when_nothing_is_left():
    cd = fixed("exp", step_scale=1000.0)
    [d] = BudgetRule(0.0, 1.0).decide(cd, 700, 700)
    assert d.decision == "stop" and "no steps remain" in d.reason


def test_target_rule_three_outcomes_with_a_known_curve():
    tau, s, T = 0.25, 300.0, 1000.0
    cd = fixed("exp", r0=0.1, asymptote=0.6, shape={"tau": tau}, step_scale=1000.0)
    now = 0.1 + 0.5 * (1 - math.exp(-0.3 / tau))
    end = 0.1 + 0.5 * (1 - math.exp(-1 / tau))
    cases = [
        (now - 1e-9, "stop", "target reached"),
        (now + 1e-9, "continue", "still possible"),
        (end - 1e-9, "continue", "still possible"),
        (end + 1e-9, "stop", "out of reach"),
    ]
    for target, decision, words in cases:
        [d] = TargetRule(target).decide(cd, s, T)
        assert (d.decision, words in d.reason) == (decision, True), (target, d.reason)


def test_target_rule_stops_at_the_horizon_whatever_the_odds():
    cd = exp_with(np.array([0.5, 0.7]), r0=0.1, tau=0.1, step_scale=1.0)  # R(1) = 0.5 or 0.7
    [d] = TargetRule(0.6, prob=0.9).decide(cd, 1.0, 1.0)
    assert d.decision == "stop" and d.probability == 0.5 and "no steps remain" in d.reason
    [d] = TargetRule(0.6, prob=0.9).decide(cd, 0.9, 1.0)
    assert d.decision == "continue" and d.probability == 0.5


def test_target_rule_out_of_reach_flips_at_one_minus_prob():
    # ten draws, asymptotes 0.55..1.0; the target lies between the 8th and 9th level at T: P = 0.2
    a = np.linspace(0.55, 1.0, 10)
    cd = exp_with(a, r0=0.1, tau=0.1, step_scale=1.0)
    level_T = 0.1 + (a - 0.1) * (1 - math.exp(-10))
    target = 0.5 * (level_T[7] + level_T[8])
    d = TargetRule(target, prob=0.81).decide(cd, 0.2, 1.0)[0]  # 0.2 >= 1 - 0.81
    assert d.decision == "continue" and d.probability == pytest.approx(0.2)
    assert d.details["prob_reached_now"] == 0.0
    d = TargetRule(target, prob=0.79).decide(cd, 0.2, 1.0)[0]  # 0.2 < 1 - 0.79
    assert d.decision == "stop" and d.probability == pytest.approx(0.2)
    assert d.reason == f"P(reward reaches {target:g} by step 1) = 0.20 < 0.21: target out of reach"


def test_target_rule_sees_an_oscillator_overshoot_between_now_and_the_horizon():
    shape = {"tau": 0.05, "zeta": 0.2}  # first peak of g at pi / omega_d = 0.4, 1.53 high
    cd = fixed("oscillator", r0=0.0, asymptote=1.0, shape=shape, step_scale=1.0)
    g = get_curve("oscillator").g
    t = np.linspace(0.0, 1.0, 200_001)
    peak = g(t, **shape).max()
    assert peak > 1.5 and g(1.0, **shape) < peak - 0.2  # the overshoot lies inside [0, 1], not at an end
    assert TargetRule(peak - 1e-6).decide(cd, 0.0, 1.0)[0].decision == "continue"
    assert TargetRule(peak + 1e-6).decide(cd, 0.0, 1.0)[0].decision == "stop"


def test_max_reward_of_oscillators_agrees_with_a_dense_grid():
    rng = np.random.default_rng(5)
    n = 50
    params = {
        "r0": rng.uniform(0, 0.5, n),
        "asymptote": rng.uniform(-0.5, 1.5, n),
        "tau": np.exp(rng.normal(np.log(0.3), 0.7, n)),
        "zeta": np.exp(rng.normal(np.log(0.5), 0.8, n)),
    }
    cd = CurveDraws("oscillator", params, step_scale=1.0)
    for s, T in [(0.0, 1.0), (0.37, 0.9), (0.8, 3.0), (2.5, 6.0), (4.0, 4.3)]:
        exact = stopping_rules._max_reward(cd, np.array([s]), np.array([T]))
        dense = stopping.reward_at(cd, np.linspace(s, T, 20_001)).max(axis=2)
        assert np.all(exact >= dense - 1e-12)
        np.testing.assert_allclose(exact, dense, atol=1e-6)


# --------------------------------------------------------------------------------------------
# Vectorised over runs = one run at a time
# --------------------------------------------------------------------------------------------


RULES = (PlateauRule(0.01, 0.8, relative=True), BudgetRule(1e-4, 1.0, n_grid=7), TargetRule(0.6, 0.8))


def all_answers(cd: CurveDraws, step: np.ndarray) -> dict:
    """Every stopping answer for the runs of ``cd``: arrays with runs last, frames with a run_id."""
    decisions = stopping.decisions_table([d for rule in RULES for d in rule.decide(cd, step)])
    return {
        "gain": stopping.remaining_gain(cd, step),
        "p": stopping.prob_gain_below(cd, step, eps=0.02),
        "expected": stopping.expected_gain(cd, step),
        "fractions": stopping.steps_to_fraction(cd),
        "phase": stopping.phase(cd, step),
        "decisions": decisions.sort_values(["rule", "run_id"], ignore_index=True),
    }


@pytest.mark.parametrize("family", list(CURVES))
def test_many_runs_at_once_equal_one_run_at_a_time(family):
    rng = np.random.default_rng(7)
    size = (64, 4)  # draws x runs
    params = {"r0": rng.uniform(0.0, 0.4, size), "asymptote": rng.uniform(0.3, 1.0, size)}
    for name, value in SHAPES[family].items():
        params[name] = value * np.exp(rng.normal(0, 0.3, size))
    runs = {
        "step_scale": np.array([100.0, 500.0, 1000.0, 250.0]),
        "horizon_step": np.array([100.0, 800.0, 1200.0, 400.0]),
        "reward_scale": np.array([1.0, 2.0, 0.5, 1.0]),
    }
    step = np.array([30.0, 500.0, 600.0, 400.0])
    ids = ("a", "b", "c", "d")
    together = all_answers(CurveDraws(family, params, run_ids=ids, **runs), step)
    alone = [
        all_answers(
            CurveDraws(
                family,
                {k: v[:, r] for k, v in params.items()},
                run_ids=(ids[r],),
                **{k: v[r] for k, v in runs.items()},
            ),
            step[r],
        )
        for r in range(4)
    ]
    np.testing.assert_allclose(np.hstack([a["gain"] for a in alone]), together["gain"], rtol=1e-12)
    np.testing.assert_array_equal(np.hstack([a["p"] for a in alone]), together["p"])
    for name in ("expected", "fractions", "phase", "decisions"):
        stacked = pd.concat([a[name] for a in alone], ignore_index=True)
        if name == "decisions":
            stacked = stacked.sort_values(["rule", "run_id"], ignore_index=True)
        pd.testing.assert_frame_equal(stacked, together[name], rtol=1e-9)
    # the runs differ: the comparison is not between copies of one answer
    assert together["phase"]["phase"].nunique() > 1 or together["decisions"]["decision"].nunique() > 1


def test_decisions_table_columns():
    cd = fixed("exp", step_scale=1000.0, horizon_step=1000.0)
    decisions = [*PlateauRule(0.01).decide(cd, 100), *BudgetRule(0.001, 1.0).decide(cd, 100)]
    table = stopping.decisions_table(decisions)
    assert list(table.columns[:10]) == [
        "run_id",
        "rule",
        "decision",
        "probability",
        "reason",
        "step",
        "horizon_step",
        "expected_gain",
        "gain_lower",
        "gain_upper",
    ]
    assert {"best_step", "expected_net_value"} <= set(table.columns)
    assert table["rule"].tolist() == [
        "PlateauRule(eps=0.01, prob=0.9)",
        "BudgetRule(cost_per_step=0.001, value_per_unit_reward=1)",
    ]
    assert np.isnan(table["best_step"].iloc[0])
    assert list(stopping.decisions_table([]).columns)[:3] == ["run_id", "rule", "decision"]


# --------------------------------------------------------------------------------------------
# From the model's posterior form
# --------------------------------------------------------------------------------------------


def test_from_model_data_reproduces_the_models_reward_curves():
    data = prepare(simulate_runs(3, n_steps=[40, 60, 80], random_seed=4).table)
    # non-trivial bounds and progress axis: t = step * step_to_progress / progress_scale
    data = dataclasses.replace(
        data,
        lower=np.array([-1.0, 0.0, 2.0]),
        upper=np.array([1.0, 0.5, 5.0]),
        step_to_progress=np.array([1.0, 0.5, 2.0]),
        progress_scale=np.array([40.0, 30.0, 100.0]),
    )
    rng = np.random.default_rng(3)
    draws = {
        "r0": rng.uniform(0.1, 0.4, (20, 3)),
        "r1": rng.uniform(0.4, 0.9, (20, 3)),
        "tau": np.exp(rng.normal(-1, 0.3, (20, 3))),
        "k": np.exp(rng.normal(0.4, 0.2, (20, 3))),
        "sigma": np.full((20, 3), 0.05),
        "nu": np.full((20, 1), 4.0),
    }
    draws["asymptote"] = asymptote_from_levels(
        "weibull", draws["r0"], draws["r1"], tau=draws["tau"], k=draws["k"]
    )
    cd = CurveDraws.from_model_data(draws, data)
    assert cd.curve == "weibull" and cd.run_ids == data.run_ids
    np.testing.assert_array_equal(cd.horizon_step, data.horizon_step)
    np.testing.assert_allclose(cd.reward_scale, [2.0, 0.5, 3.0])
    steps = np.array([0.0, 10.0, 35.0, 80.0])
    expected = data.to_reward(mean_curve_draws(draws, "weibull", data.to_t(steps)), run_axis=1)
    np.testing.assert_allclose(stopping.reward_at(cd, steps), expected, rtol=1e-12, atol=1e-12)
    # the level at t = 1 is r1 in reward units, at step progress_scale / step_to_progress + 1
    # (the reward logged at step s comes from the policy after s - 1 updates)
    at_one = stopping.reward_at(cd, np.array([[41.0], [61.0], [51.0]]))[:, :, 0]
    np.testing.assert_allclose(at_one, data.lower + draws["r1"] * (data.upper - data.lower), rtol=1e-12)
    with pytest.raises(BayesGRPOError, match=r"expected \(S, 3\)"):
        CurveDraws.from_model_data({k: v[:, :2] for k, v in draws.items()}, data)


def test_from_a_fitted_model_agrees_with_its_forecast(mocked):
    table = simulate_runs(3, n_steps=[40, 60, 80], observed_fraction=[1, 0.5, 1], random_seed=2).table
    curve = "weibull"
    model = RewardModel(curve=curve).fit(table, random_seed=1)
    cd = CurveDraws.from_model_data(run_draws(model.idata.posterior, curve), model.data)
    steps = np.array([0.0, 15.0, 40.0, 80.0])
    expected = reward_draws(model.idata.posterior, model.data, curve, steps).to_numpy()
    np.testing.assert_allclose(stopping.reward_at(cd, steps), expected, rtol=1e-9, atol=1e-12)
    final = model.final_reward()  # read at each run's horizon
    gain = stopping.expected_gain(cd, 0)
    start = stopping.reward_at(cd, [0.0])[:, :, 0].mean(axis=0)
    np.testing.assert_allclose(start + gain["mean"], final["mean"], rtol=1e-9)
    # prior draws stand in for the posterior here: wide, extreme curves, all answered
    answers = all_answers(cd, 0.5 * cd.horizon_step)
    assert np.isfinite(answers["p"]).all() and np.isfinite(answers["gain"]).all()
    assert answers["phase"][list(PHASES)].sum(axis=1).to_numpy() == pytest.approx(np.ones(3))
    assert answers["decisions"]["probability"].between(0, 1).all()
    assert not answers["fractions"][["median", "prob_beyond_horizon"]].isna().any().any()


# --------------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------------


def _good_params(n: int = 4) -> dict[str, np.ndarray]:
    return {"r0": np.zeros(n), "asymptote": np.ones(n), "tau": np.full(n, 0.3)}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda cd: stopping.remaining_gain(cd, 1200, 1000),
            r"step_now=1200 is past the horizon 1000 of run '0'",
        ),
        (lambda cd: stopping.remaining_gain(cd, -1, 1000), r"step_now must be finite and >= 0"),
        (lambda cd: stopping.remaining_gain(cd, [1, 2], 1000), r"step_now has shape \(2,\)"),
        (lambda cd: stopping.prob_gain_below(cd, 10, 1000, eps=-0.01), r"eps must be a finite number >= 0"),
        (
            lambda cd: stopping.expected_gain(cd, 10, 1000, interval=1.0),
            r"interval must lie strictly between 0 and 1",
        ),
        (lambda cd: stopping.steps_to_fraction(cd, fractions=(0.5, 1.0)), r"fractions of the gain must lie"),
        (lambda cd: stopping.remaining_gain(cd, 10), r"no horizon: pass horizon_step"),
        (lambda cd: stopping.phase(cd, np.nan), r"step_now must be finite"),
        (lambda cd: stopping.reward_at(cd, np.zeros((2, 3))), r"steps must have shape"),
    ],
)
def test_bad_questions_raise_clear_errors(call, message):
    cd = CurveDraws("exp", _good_params(), step_scale=1000.0)
    with pytest.raises(BayesGRPOError, match=message):
        call(cd)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PlateauRule(0.01, prob=0.0), r"prob must lie strictly between 0 and 1; got 0"),
        (lambda: PlateauRule(0.01, prob=1.0), r"prob must lie strictly between 0 and 1; got 1"),
        (lambda: PlateauRule(-0.1), r"eps must be a finite number >= 0"),
        (lambda: TargetRule(0.5, prob=1.5), r"prob must lie strictly between 0 and 1"),
        (lambda: TargetRule(float("nan")), r"target must be a finite reward"),
        (lambda: BudgetRule(-1.0, 1.0), r"cost_per_step must be finite and >= 0"),
        (lambda: BudgetRule(1.0, 0.0), r"value_per_unit_reward must be finite and > 0"),
        (lambda: BudgetRule(1.0, 1.0, n_grid=0), r"n_grid must be a positive integer"),
        (lambda: CurveDraws("exponential", _good_params()), r"unknown curve family 'exponential'"),
        (
            lambda: CurveDraws("exp", {**_good_params(), "tua": np.ones(4)}),
            r"unknown curve parameters \['tua'\]",
        ),
        (
            lambda: CurveDraws("exp", {"r0": np.zeros(4), "tau": np.ones(4)}),
            r"curve parameters \['asymptote \(or r1\)'\] are missing",
        ),
        (lambda: CurveDraws("exp", {**_good_params(), "tau": np.ones(3)}), r"'tau' has shape \(3,\)"),
        (lambda: CurveDraws("exp", {**_good_params(), "tau": -np.ones(4)}), r"'tau' must be > 0"),
        (lambda: CurveDraws("exp", {**_good_params(), "r0": np.full(4, np.nan)}), r"'r0' has non-finite"),
        (lambda: CurveDraws("exp", _good_params(), step_scale=0.0), r"step_scale must be finite and > 0"),
        (lambda: CurveDraws("exp", _good_params(), run_ids=("a", "b")), r"2 run_ids given for 1 runs"),
        (lambda: CurveDraws.from_model_data({"r0": np.zeros((2, 1))}, None), r"cannot tell the curve family"),
    ],
)
def test_bad_settings_raise_clear_errors(make, message):
    with pytest.raises(BayesGRPOError, match=message):
        make()


def test_curve_draws_are_read_only():
    cd = CurveDraws("exp", _good_params())
    with pytest.raises(ValueError):
        cd.params["tau"][0, 0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        cd.curve = "weibull"  # type: ignore[misc]


def test_select_keeps_each_runs_draws_and_scales_in_the_order_given():
    draws = CurveDraws(
        "exp",
        {
            "r0": np.array([[0.1, 0.2, 0.3]] * 2),
            "asymptote": np.array([[0.5, 0.6, 0.7]] * 2),
            "tau": np.array([[1.0, 2.0, 3.0]] * 2),
        },
        step_scale=[10.0, 20.0, 30.0],
        reward_scale=[1.0, 2.0, 3.0],
        horizon_step=[100.0, 200.0, 300.0],
        run_ids=("a", "b", "c"),
        step_offset=1.0,
    )
    picked = draws.select(["c", "a"])
    assert picked.run_ids == ("c", "a") and picked.step_offset == 1.0
    np.testing.assert_array_equal(picked.params["tau"], [[3.0, 1.0]] * 2)
    np.testing.assert_array_equal(picked.step_scale, [30.0, 10.0])
    np.testing.assert_array_equal(picked.horizon_step, [300.0, 100.0])
    np.testing.assert_array_equal(
        stopping.remaining_gain(picked, [5.0, 5.0]), stopping.remaining_gain(draws, [5.0] * 3)[:, [2, 0]]
    )
    with pytest.raises(BayesGRPOError, match=r"\['z'\] are not in"):
        draws.select(["z"])
