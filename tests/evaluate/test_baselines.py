"""Tests of the forecasting and stopping baselines (bayesgrpo.evaluate.baselines).

Forecasters are checked against simulated curves with known parameters (recovery, bootstrap
interval coverage, predictive coverage of noisy held-out points), closed forms (persistence on a
line, the 11 Domhan families at a point) and odd inputs (constant, 3 points, 0/1-ish, falling);
stopping rules against hand-computed answers. MCMC settings are tiny: every test runs in well
under a few seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import least_squares

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.evaluate.baselines import (
    BASELINE_FORECASTERS,
    DOMHAN_FAMILIES,
    BaselineForecast,
    BaselineInputError,
    domhan,
    domhan_p_better,
    forecast_domhan_ensemble,
    forecast_exp_least_squares,
    forecast_persistence,
    forecast_scalerl_sigmoid,
    scalerl_sigmoid,
    stop_fixed_fraction,
    stop_median_pruning,
    stop_patience,
    stopping_rules,
)
from bayesgrpo.evaluate.baselines import exp_law as exp_law_module
from bayesgrpo.evaluate.baselines import least_squares as batched_least_squares

# Tiny MCMC for every test that runs the Domhan ensemble.
TINY_MCMC = {"n_walkers": 10, "n_steps": 60, "n_ml_starts": 2}


def options(name: str) -> dict:
    return TINY_MCMC if name == "domhan_ensemble" else {"n_boot": 40} if name != "persistence" else {}


def exp_law(steps: np.ndarray, horizon: float, a: float, r0: float, tau: float) -> np.ndarray:
    return a - (a - r0) * np.exp(-(steps / horizon) / tau)


def sigmoid_law(steps: np.ndarray, horizon: float, a: float, r0: float, c_mid: float, b: float) -> np.ndarray:
    c = steps / horizon
    with np.errstate(divide="ignore"):
        return r0 + (a - r0) / (1.0 + (c_mid / c) ** b)


HORIZON = 1000.0
STEPS = np.arange(0.0, 400.0, 4.0)  # a prefix cut at 40% of the horizon
TARGET = np.array([500.0, 700.0, 1000.0])


# ------------------------------------------------------------------------------------------
# Shapes, seeds, the common contract
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BASELINE_FORECASTERS))
def test_draws_shape_seed_and_info(name: str) -> None:
    rng = np.random.default_rng(0)
    y = exp_law(STEPS, HORIZON, 0.8, 0.2, 0.3) + 0.02 * rng.standard_normal(STEPS.size)
    forecast = BASELINE_FORECASTERS[name]
    first = forecast(STEPS, y, TARGET, n_draws=50, random_seed=3, **options(name))
    again = forecast(STEPS, y, TARGET, n_draws=50, random_seed=3, **options(name))
    assert isinstance(first, BaselineForecast)
    assert first.name == name
    assert first.draws.shape == (50, TARGET.size)
    assert np.all(np.isfinite(first.draws))
    np.testing.assert_array_equal(first.draws, again.draws)
    np.testing.assert_array_equal(first.target_steps, TARGET)
    assert first.info["status"] == "ok" and first.info["fallback"] is None
    assert first.info["horizon"] == HORIZON and first.info["n_points"] == STEPS.size
    assert first.quantile([0.05, 0.95]).shape == (2, TARGET.size)


# ------------------------------------------------------------------------------------------
# Persistence
# ------------------------------------------------------------------------------------------


def test_persistence_on_a_line_is_exact() -> None:
    # 20 points on a line: the tail is the last max(3, ceil(2)) = 3 points, level = 18; the
    # residuals around a centred rolling mean of a line are 0, so there is no noise at all.
    steps = np.arange(20.0)
    forecast = forecast_persistence(steps, steps.copy(), np.array([30.0, 40.0]), n_draws=7, random_seed=0)
    assert forecast.info["level"] == pytest.approx(18.0)
    assert forecast.info["noise_sd"] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(forecast.draws, 18.0)


def test_persistence_noise_matches_white_noise_sd() -> None:
    rng = np.random.default_rng(1)
    y = 0.5 + 0.1 * rng.standard_normal(400)
    forecast = forecast_persistence(np.arange(400.0), y, np.array([800.0]), n_draws=4000, random_seed=0)
    assert forecast.info["n_tail"] == 40
    assert forecast.info["level"] == pytest.approx(y[-40:].mean())
    assert forecast.info["noise_sd"] == pytest.approx(0.1, rel=0.12)
    held_out = 0.5 + 0.1 * rng.standard_normal(4000)
    low, high = np.quantile(forecast.draws[:, 0], [0.05, 0.95])
    assert 0.83 <= np.mean((held_out >= low) & (held_out <= high)) <= 0.97


# ------------------------------------------------------------------------------------------
# Least-squares laws: recovery, bootstrap coverage, predictive coverage
# ------------------------------------------------------------------------------------------


EXP_TRUTH = {"A": 0.8, "R0": 0.2, "tau": 0.3}
# B = 3: a slow start, so the mean of the first points measures R0 (as ScaleRL does) without bias.
SIGMOID_TRUTH = {"A": 0.8, "R0": 0.2, "C_mid": 0.3, "B": 3.0}
SEEDS = [0, 1, 2, 3]


def test_exp_least_squares_recovers_parameters_and_covers_them() -> None:
    covered = {name: 0 for name in EXP_TRUTH}
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        y = exp_law(STEPS, HORIZON, 0.8, 0.2, 0.3) + 0.01 * rng.standard_normal(STEPS.size)
        forecast = forecast_exp_least_squares(STEPS, y, TARGET, n_boot=100, random_seed=seed)
        params = forecast.info["params"]
        assert params["A"] == pytest.approx(0.8, abs=0.04)
        assert params["R0"] == pytest.approx(0.2, abs=0.01)
        assert params["tau"] == pytest.approx(0.3, rel=0.15)
        assert forecast.info["tau_steps"] == pytest.approx(params["tau"] * HORIZON)
        assert forecast.info["sigma"] == pytest.approx(0.01, rel=0.25)
        for name, truth in EXP_TRUTH.items():
            covered[name] += forecast.info["params_q05"][name] <= truth <= forecast.info["params_q95"][name]
    assert all(count >= 3 for count in covered.values()), covered


@pytest.mark.parametrize("fit_r0", [False, True])
def test_scalerl_sigmoid_recovers_parameters_and_covers_them(fit_r0: bool) -> None:
    steps = np.arange(4.0, 600.0, 4.0)  # cut at 60%, past C_mid = 30%
    covered = {name: 0 for name in ("A", "C_mid", "B")}
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        y = sigmoid_law(steps, HORIZON, 0.8, 0.2, 0.3, 3.0) + 0.01 * rng.standard_normal(steps.size)
        forecast = forecast_scalerl_sigmoid(steps, y, TARGET, n_boot=100, random_seed=seed, fit_r0=fit_r0)
        params = forecast.info["params"]
        assert forecast.info["r0_fitted"] is fit_r0
        assert params["A"] == pytest.approx(0.8, abs=0.04)
        assert params["R0"] == pytest.approx(0.2, abs=0.02)
        assert params["C_mid"] == pytest.approx(0.3, rel=0.1)
        assert params["B"] == pytest.approx(3.0, rel=0.1)
        assert forecast.info["c_mid_steps"] == pytest.approx(params["C_mid"] * HORIZON)
        for name in covered:
            covered[name] += (
                forecast.info["params_q05"][name] <= SIGMOID_TRUTH[name] <= forecast.info["params_q95"][name]
            )
    assert all(count >= 3 for count in covered.values()), covered


def test_sigmoid_is_r0_at_zero_compute() -> None:
    # C = 0 (step 0) is allowed and gives R0 exactly.
    theta = np.array([[0.8, math.log(0.3), math.log(2.0)]])
    values = scalerl_sigmoid._sigmoid_curve_fixed_r0(theta, np.array([0.0, 0.3]), np.array([0.2]))
    np.testing.assert_allclose(values, [[0.2, 0.5]])


@pytest.mark.parametrize("name", ["exp_least_squares", "persistence"])
def test_predictive_draws_include_observation_noise(name: str) -> None:
    # With the right law and sizeable noise, 90% intervals of the draws hold ~90% of noisy
    # held-out points: the draws are of the observed reward, not of the mean curve.
    rng = np.random.default_rng(5)
    truth = (
        (lambda s: exp_law(s, HORIZON, 0.8, 0.2, 0.3)) if name != "persistence" else (lambda s: 0.5 + 0 * s)
    )
    y = truth(STEPS) + 0.05 * rng.standard_normal(STEPS.size)
    held_steps = np.arange(500.0, 1000.0, 10.0)
    held = truth(held_steps) + 0.05 * rng.standard_normal(held_steps.size)
    forecast = BASELINE_FORECASTERS[name](STEPS, y, held_steps, n_draws=1000, random_seed=0)
    low, high = forecast.quantile([0.05, 0.95])
    assert 0.75 <= np.mean((held >= low) & (held <= high)) <= 1.0
    assert np.median(high - low) == pytest.approx(2 * 1.645 * 0.05, rel=0.35)


def test_batched_lm_reaches_the_scipy_optimum() -> None:
    rng = np.random.default_rng(2)
    t = STEPS / HORIZON
    y = exp_law(STEPS, HORIZON, 0.8, 0.2, 0.3) + 0.01 * rng.standard_normal(STEPS.size)
    lower, upper = np.array([-1.0, -1.0, math.log(1e-3)]), np.array([2.0, 2.0, math.log(1e2)])
    nan_r0 = np.array([np.nan])
    reference = least_squares(
        lambda p: exp_law_module._exp_curve(p[None], t, nan_r0)[0] - y,
        [0.7, 0.25, math.log(0.5)],
        bounds=(lower, upper),
        method="trf",
        x_scale="jac",
    )
    starts = reference.x[None, :] + np.array([[0.0, 0.0, 0.0], [0.05, -0.02, 0.2], [-0.05, 0.03, -0.3]])
    theta, cost = batched_least_squares.batched_lm(
        lambda th: exp_law_module._exp_curve(th, t, nan_r0) - y[None, :], starts, lower, upper
    )
    np.testing.assert_allclose(theta, np.repeat(reference.x[None, :], 3, axis=0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(cost, reference.cost, rtol=1e-6)


# ------------------------------------------------------------------------------------------
# Fallbacks and odd inputs
# ------------------------------------------------------------------------------------------


FITTED = ["exp_least_squares", "scalerl_sigmoid", "domhan_ensemble"]


@pytest.mark.parametrize("name", FITTED)
@pytest.mark.parametrize(
    "case, steps, rewards, reason",
    [
        ("constant", np.arange(0.0, 100.0, 2.0), np.full(50, 0.3), "constant"),
        ("three points", np.array([0.0, 10.0, 20.0]), np.array([0.1, 0.3, 0.2]), "3 points"),
        ("one point", np.array([5.0]), np.array([0.4]), "1 points"),
    ],
)
def test_fallback_to_persistence(
    name: str, case: str, steps: np.ndarray, rewards: np.ndarray, reason: str
) -> None:
    forecast = BASELINE_FORECASTERS[name](
        steps, rewards, np.array([200.0, 300.0]), n_draws=20, random_seed=0, **options(name)
    )
    persistence = forecast_persistence(steps, rewards, np.array([200.0, 300.0]), n_draws=20, random_seed=0)
    assert forecast.name == name and forecast.fell_back
    assert forecast.info["fallback"].startswith("persistence") and reason in forecast.info["fallback"]
    assert forecast.draws.shape == (20, 2)
    np.testing.assert_allclose(forecast.info["persistence"]["level"], persistence.info["level"])


def _sparse_binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    # A GRPO reward over 4 completions of one prompt per step: values in {0, .25, .5, .75, 1},
    # mostly 0, slowly rising success probability.
    rng = np.random.default_rng(seed)
    steps = np.arange(n, dtype=float)
    p = 0.05 + 0.2 * steps / n
    return steps, rng.binomial(4, p) / 4.0


ODD_INPUTS = {
    "sparse 0/1-ish": _sparse_binary(60, 0),
    "falling": (np.arange(40.0), 0.8 - 0.01 * np.arange(40.0) + 0.01 * np.sin(np.arange(40.0))),
    "oscillating": (np.arange(50.0), 0.5 + 0.2 * np.sin(np.arange(50.0) / 3.0)),
    "unsorted with a nan": (
        np.array([3.0, 1.0, 2.0, 0.0, 4.0, 5.0, 6.0]),
        np.array([0.3, 0.1, np.nan, 0.0, 0.35, 0.4, 0.42]),
    ),
    "rise then collapse": (np.arange(80.0), np.concatenate([np.linspace(0.1, 0.7, 50), np.full(30, 0.05)])),
}


@pytest.mark.parametrize("name", list(BASELINE_FORECASTERS))
@pytest.mark.parametrize("case", list(ODD_INPUTS))
def test_odd_inputs_never_raise(name: str, case: str) -> None:
    steps, rewards = ODD_INPUTS[case]
    target = np.array([steps.max() + 10.0, 4 * steps.max()])
    forecast = BASELINE_FORECASTERS[name](steps, rewards, target, n_draws=30, random_seed=1, **options(name))
    assert forecast.draws.shape == (30, 2)
    assert np.all(np.isfinite(forecast.draws))
    assert forecast.info["status"] in ("ok", "fallback")
    assert forecast.info["n_dropped"] == int(np.isnan(rewards).sum())


@pytest.mark.parametrize(
    "steps, rewards, target, match",
    [
        (np.arange(5.0), np.arange(4.0), np.array([10.0]), "one length"),
        (np.array([]), np.array([]), np.array([10.0]), "no finite"),
        (np.array([np.nan]), np.array([1.0]), np.array([10.0]), "no finite"),
        (np.arange(5.0), np.arange(5.0), np.array([]), "target_steps"),
        (np.arange(5.0), np.arange(5.0), np.array([np.inf]), "target_steps"),
        (np.arange(5.0) - 2, np.arange(5.0), np.array([10.0]), ">= 0"),
    ],
)
@pytest.mark.parametrize("name", list(BASELINE_FORECASTERS))
def test_bad_inputs_raise_package_error(name: str, steps, rewards, target, match: str) -> None:
    with pytest.raises(BaselineInputError, match=match) as info:
        BASELINE_FORECASTERS[name](steps, rewards, target, **options(name))
    assert isinstance(info.value, BayesGRPOError)


# ------------------------------------------------------------------------------------------
# Domhan et al. (2015) ensemble
# ------------------------------------------------------------------------------------------


# Each family at x = 4 with simple parameters, computed by hand from the published formulas.
FAMILY_VALUES = {
    "vap": ((0.0, -4.0, 1.0), math.exp(-1.0 + math.log(4.0))),  # exp(a + b/x + c log x)
    "pow3": ((1.0, 0.5, 0.5), 0.75),  # c - a x^-alpha
    "loglog_linear": ((1.0, 1.0), math.log(math.log(4.0) + 1.0)),  # log(a log x + b)
    "hill3": ((1.0, 2.0, 4.0), 0.5),  # theta x^eta / (kappa^eta + x^eta)
    "log_power": ((1.0, math.log(4.0), -1.0), 0.5),  # a / (1 + (x / e^b)^c)
    "pow4": ((1.0, 1.0, 0.0, 1.0), 0.75),  # c - (a x + b)^-alpha
    "mmf": ((1.0, 0.0, 0.25, 2.0), 0.5),  # alpha - (alpha - beta) / (1 + (kappa x)^delta)
    "exp4": ((1.0, 0.5, 0.0, 0.5), 1.0 - math.exp(-1.0)),  # c - exp(-a x^alpha + b)
    "janoschek": ((1.0, 0.0, 0.25, 1.0), 1.0 - math.exp(-1.0)),  # a - (a - beta) exp(-k x^delta)
    "weibull": ((1.0, 0.0, 0.25, 2.0), 1.0 - math.exp(-1.0)),  # alpha - (alpha-beta) exp(-(kappa x)^delta)
    "ilog2": ((1.0, 1.0), 1.0 - 1.0 / math.log(5.0)),  # c - a / log(x + 1)
}


def test_domhan_has_the_11_published_families() -> None:
    assert [f.name for f in DOMHAN_FAMILIES] == list(FAMILY_VALUES)
    assert sum(len(f.params) for f in DOMHAN_FAMILIES) == 36


@pytest.mark.parametrize("family", DOMHAN_FAMILIES, ids=lambda f: f.name)
def test_domhan_family_formula(family: domhan._DomhanFamily) -> None:
    params, expected = FAMILY_VALUES[family.name]
    value = family.fn(np.array([4.0]), np.array([params, params]))  # two walker rows
    np.testing.assert_allclose(value, [[expected], [expected]], rtol=1e-12)
    assert len(family.start) == len(family.params) == len(params)


def _ensemble() -> domhan._Ensemble:
    families = (DOMHAN_FAMILIES[1], DOMHAN_FAMILIES[10])  # pow3, ilog2
    x = np.linspace(1.0, 30.0, 20)
    return domhan._Ensemble(
        families, (slice(0, 3), slice(3, 5)), x, 1.0 - x**-0.5, np.array([1.0, 100.0]), (-1.0, 2.0)
    )


@pytest.mark.parametrize(
    "change, finite",
    [
        ({}, True),
        ({6: -0.1}, False),  # a negative weight
        ({5: 0.0}, False),  # sigma = 0
        ({5: 1.5}, False),  # sigma > 1
        ({1: -0.5}, False),  # pow3 with a < 0 decreases
        ({0: 50.0}, False),  # pow3 far above the sane range at the horizon
    ],
)
def test_domhan_prior_support(change: dict[int, float], finite: bool) -> None:
    ensemble = _ensemble()
    theta = np.array([1.0, 1.0, 0.5, 1.0, 0.1, 0.05, 1.0, 1.0])  # pow3 (c, a, alpha), ilog2 (c, a), sigma, w
    for index, value in change.items():
        theta[index] = value
    assert ensemble.ndim == theta.size
    assert np.isfinite(ensemble.log_prob(theta[None, :])[0]) == finite


def test_domhan_weights_are_normalised() -> None:
    ensemble = _ensemble()
    theta = np.array([[1.0, 1.0, 0.5, 1.0, 0.1, 0.05, 3.0, 1.0]])
    pow3 = 1.0 - ensemble.x**-0.5
    ilog2 = 1.0 - 0.1 / np.log(ensemble.x + 1.0)
    np.testing.assert_allclose(ensemble.mean(theta, ensemble.x)[0], 0.75 * pow3 + 0.25 * ilog2)


@pytest.mark.parametrize(
    "truth",
    [
        lambda x: 0.9 - 0.6 * x**-0.5,  # pow3
        lambda x: 0.85 - 0.6 * np.exp(-(x - 1.0) / 25.0),  # exponential saturation
    ],
    ids=["pow3", "exp"],
)
def test_domhan_forecast_near_truth_on_a_clean_curve(truth) -> None:
    steps = np.arange(0.0, 500.0, 5.0)  # half of the horizon observed

    def x_of(s):
        return 1.0 + 99.0 * s / HORIZON

    rng = np.random.default_rng(0)
    y = truth(x_of(steps)) + 0.005 * rng.standard_normal(steps.size)
    forecast = forecast_domhan_ensemble(
        steps, y, np.array([HORIZON]), n_draws=300, random_seed=0, n_walkers=10, n_steps=150
    )
    assert forecast.info["status"] == "ok"
    assert len(forecast.info["families"]) >= 6
    assert sum(forecast.info["weights"].values()) == pytest.approx(1.0)
    gain_left = truth(x_of(HORIZON)) - y[-5:].mean()
    median = float(np.median(forecast.draws[:, 0]))
    assert abs(median - truth(x_of(HORIZON))) < 0.35 * gain_left + 0.005  # persistence misses by gain_left
    assert 0.0 < forecast.info["sigma"] < 0.05  # noise 0.005; a tiny chain has not settled it


@pytest.mark.parametrize(
    "draws, best, expected",
    [
        ([0.0, 1.0, 2.0, 3.0], 1.5, 0.5),
        ([0.0, 1.0, 2.0, 3.0], 3.0, 0.0),
        ([[1.0, 2.0], [3.0, np.nan]], 0.0, 1.0),
    ],
)
def test_domhan_p_better(draws, best: float, expected: float) -> None:
    assert domhan_p_better(np.array(draws), best) == pytest.approx(expected)


def test_domhan_p_better_needs_a_draw() -> None:
    with pytest.raises(BaselineInputError):
        domhan_p_better(np.array([np.nan]), 0.0)


# ------------------------------------------------------------------------------------------
# Stopping rules
# ------------------------------------------------------------------------------------------

TEN_STEPS = np.arange(0.0, 101.0, 10.0)  # 0, 10, ..., 100


@pytest.mark.parametrize(
    "steps, total, fraction, expected",
    [
        (TEN_STEPS, 100, 0.8, 80),
        (TEN_STEPS, 100, 0.85, 90),
        (TEN_STEPS, 100, 1.0, None),
        (TEN_STEPS[:6], 100, 0.8, None),  # the log ends at 50: the rule never fires
        (TEN_STEPS, 200, 0.4, 80),
    ],
)
def test_stop_fixed_fraction(steps, total, fraction, expected) -> None:
    assert stop_fixed_fraction(steps, total, fraction) == expected


@pytest.mark.parametrize(
    "rewards, patience, min_delta, window, expected_index",
    [
        ([0.1, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3], 3, 0.0, 1, 5),  # flat from index 2: 3 misses at 3, 4, 5
        ([0.1, 0.2, 0.3, 0.3, 0.3, 0.3, 0.3], 5, 0.0, 1, None),
        ([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], 1, 0.0, 1, None),  # always improving
        ([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], 1, 0.15, 1, 1),  # +0.1 < min_delta: stops at once
        ([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], 2, 0.15, 1, None),  # every second point clears min_delta
        ([0.0, 0.1, 0.9, 0.2, 0.3, 0.4, 0.5, 0.6], 3, 0.0, 1, 5),  # the spike is the best
        ([0.0, 0.1, 0.9, 0.2, 0.3, 0.4, 0.5, 0.6], 3, 0.0, 2, 6),  # smoothed: .05 .5 .55 .25 .35 .45
    ],
)
def test_stop_patience(rewards, patience, min_delta, window, expected_index) -> None:
    steps = 10.0 * np.arange(len(rewards))
    expected = None if expected_index is None else int(steps[expected_index])
    assert stop_patience(steps, np.array(rewards), patience, min_delta, window) == expected


def test_smoothers_by_hand() -> None:
    rewards = np.array([0.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(stopping_rules._smooth(rewards, 2, "rolling"), [0.0, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(
        stopping_rules._smooth(rewards, 3, "ema"), [0.0, 0.5, 0.75, 0.875]
    )  # alpha = 0.5
    with pytest.raises(BaselineInputError):
        stopping_rules._smooth(rewards, 3, "median")  # type: ignore[arg-type]


def _median_case() -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    # Five completed runs with reward c * progress, c = 1..5 (median 3 * progress); one of them
    # twice as long, to check that progress, not steps, is compared. This run rises as
    # 4 * progress to 2.0 at progress 0.5, then stays flat: its best (2.0) falls below the median
    # (3 p) once p > 2/3.
    others = [(TEN_STEPS, c * TEN_STEPS / 100.0) for c in (1.0, 2.0, 4.0, 5.0)]
    others.append((2 * TEN_STEPS, 3.0 * TEN_STEPS / 100.0))
    progress = TEN_STEPS / 100.0
    rewards = np.where(progress <= 0.5, 4.0 * progress, 2.0)
    return TEN_STEPS, rewards, others


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, 70),  # every logged point is checked: first failure at p = 0.7
        ({"check_every": 0.25}, 80),  # checks at p = 0, 0.3, 0.5, 0.8
        ({"warmup_fraction": 0.9}, 90),
        ({"n_startup_trials": 6}, None),  # only 5 completed runs
        ({"n_min_trials": 6}, None),
        ({"total_steps": 200.0}, None),  # only half the run logged: best 2.0 >= 3 * 0.5
    ],
)
def test_stop_median_pruning(kwargs: dict, expected) -> None:
    steps, rewards, others = _median_case()
    assert stop_median_pruning(steps, rewards, others, **kwargs) == expected


def test_median_pruning_uses_best_so_far_not_last_value() -> None:
    # Optuna compares the trial's best intermediate value: a run that peaked high early and then
    # collapsed is not pruned while its early best stays above the median.
    steps, _, others = _median_case()
    rewards = np.where(steps <= 10, 10.0, 0.0)
    assert stop_median_pruning(steps, rewards, others) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: stop_fixed_fraction(np.array([10.0, 5.0]), 100),  # not increasing
        lambda: stop_fixed_fraction(TEN_STEPS, 0),
        lambda: stop_patience(TEN_STEPS, np.ones(3), 2),  # shape mismatch
        lambda: stop_patience(TEN_STEPS, np.ones(TEN_STEPS.size), 0),  # patience 0
        lambda: stop_patience(TEN_STEPS, np.full(TEN_STEPS.size, np.nan), 2),
        lambda: stop_median_pruning(TEN_STEPS, np.ones(TEN_STEPS.size), [], warmup_fraction=2.0),
    ],
)
def test_stopping_rules_reject_bad_input(call) -> None:
    with pytest.raises(BaselineInputError):
        call()
