"""Forecast scores from draws, checked against closed forms and hand-computed values."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from bayesgrpo.evaluate.scores import (
    ScoreInputError,
    crps_from_draws,
    final_reward_error,
    interval_bounds,
    interval_coverage,
    interval_width,
    log_predictive_density,
    pit_histogram,
    pit_values,
)


def _normal_crps(mu: float, sigma: float, y: np.ndarray) -> np.ndarray:
    """Closed-form CRPS of N(mu, sigma^2) (Gneiting and Raftery 2007)."""
    z = (y - mu) / sigma
    return sigma * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))


def test_crps_matches_the_brute_force_pair_formula():
    rng = np.random.default_rng(0)
    draws = rng.standard_t(3, size=(37, 4))
    y = np.array([-1.0, 0.0, 0.4, 5.0])
    pairs = np.abs(draws[:, None, :] - draws[None, :, :]).mean(axis=(0, 1))
    expected = np.abs(draws - y).mean(axis=0) - 0.5 * pairs
    np.testing.assert_allclose(crps_from_draws(draws, y), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mu, sigma", [(0.0, 1.0), (2.0, 0.3), (-1.0, 4.0)])
def test_crps_of_many_normal_draws_is_the_closed_form(mu, sigma):
    rng = np.random.default_rng(1)
    y = mu + sigma * np.array([-2.5, -1.0, 0.0, 0.3, 1.7, 4.0])
    draws = mu + sigma * rng.standard_normal((40_000, 1)) * np.ones((1, y.size))
    np.testing.assert_allclose(
        crps_from_draws(draws, y), _normal_crps(mu, sigma, y), rtol=0.02, atol=0.003 * sigma
    )


@pytest.mark.parametrize(
    "draws, y, expected",
    [
        ([[1.0], [1.0]], [1.0], 0.0),  # a point mass on the truth
        ([[0.0]], [2.0], 2.0),  # one draw: the absolute error
        ([[0.0], [1.0]], [0.0], 0.5 - 0.25),  # E|X-y| = 0.5, E|X-X'|/2 = 0.25
    ],
)
def test_crps_hand_computed(draws, y, expected):
    assert crps_from_draws(np.array(draws), np.array(y))[0] == pytest.approx(expected)


def test_crps_is_divided_by_the_scale():
    rng = np.random.default_rng(2)
    draws = rng.normal(size=(200, 3))
    y = np.array([0.1, -0.4, 2.0])
    np.testing.assert_allclose(crps_from_draws(draws * 10, y * 10, scale=10.0), crps_from_draws(draws, y))


def test_lpd_of_many_normal_draws_is_the_normal_logpdf():
    rng = np.random.default_rng(3)
    mu, sigma = 1.0, 0.2
    y = mu + sigma * np.array([-2.0, -0.5, 0.0, 1.0, 2.0])
    n = 100_000
    draws = mu + sigma * rng.standard_normal((n, y.size))
    # a Gaussian KDE of normal draws is a normal widened by the bandwidth (Silverman: 0.9 sd n^-1/5)
    smoothed_sd = sigma * np.sqrt(1 + (0.9 * n**-0.2) ** 2)
    lpd = log_predictive_density(draws, y)
    np.testing.assert_allclose(lpd, stats.norm.logpdf(y, mu, smoothed_sd), atol=0.05)
    np.testing.assert_allclose(lpd, stats.norm.logpdf(y, mu, sigma), atol=0.06)


def test_lpd_is_the_density_of_y_over_scale():
    rng = np.random.default_rng(4)
    draws = 50.0 + 5.0 * rng.standard_normal((5000, 2))
    y = np.array([48.0, 55.0])
    scale = 10.0
    # density of y/scale = density of y times scale: logpdf + log(scale)
    np.testing.assert_allclose(
        log_predictive_density(draws, y, scale=scale),
        stats.norm.logpdf(y, 50.0, 5.0) + np.log(scale),
        atol=0.05,
    )


def test_lpd_bandwidth_floor_bounds_a_point_mass():
    draws = np.full((100, 1), 0.3)
    floor = 0.01
    lpd = log_predictive_density(draws, np.array([0.3]), min_bandwidth=floor)[0]
    assert lpd == pytest.approx(stats.norm.logpdf(0.0, 0.0, floor))
    # a miss by ten bandwidths is punished, not infinite
    miss = log_predictive_density(draws, np.array([0.4]), min_bandwidth=floor)[0]
    assert miss == pytest.approx(stats.norm.logpdf(0.1, 0.0, floor))


def test_interval_coverage_of_a_normal_is_its_level():
    rng = np.random.default_rng(5)
    n_points = 4000
    draws = rng.standard_normal((2000, n_points))
    y = rng.standard_normal(n_points)
    for level in (0.5, 0.9):
        coverage = interval_coverage(draws, y, level)
        assert set(np.unique(coverage)) <= {0.0, 1.0}
        assert coverage.mean() == pytest.approx(level, abs=0.03)


@pytest.mark.parametrize("level", [0.5, 0.9])
def test_interval_width_of_a_normal(level):
    rng = np.random.default_rng(6)
    draws = 3.0 * rng.standard_normal((50_000, 2))
    expected = 2 * 3.0 * stats.norm.ppf(0.5 + level / 2)
    np.testing.assert_allclose(interval_width(draws, level, scale=3.0), expected / 3.0, rtol=0.02)


def test_interval_bounds_hand_computed():
    draws = np.arange(0.0, 101.0)[:, None]  # quantile q is exactly 100 q
    lower, upper = interval_bounds(draws, 0.9)
    assert (lower[0], upper[0]) == pytest.approx((5.0, 95.0))
    coverage = interval_coverage(np.repeat(draws, 4, axis=1), np.array([4.9, 5.0, 95.0, 95.1]), 0.9)
    np.testing.assert_array_equal(coverage, [0.0, 1.0, 1.0, 0.0])


def test_final_reward_error_uses_the_median_of_the_mean_over_the_last_points():
    draws = np.array([[1.0, 3.0], [2.0, 2.0], [10.0, 10.0]])  # means 2, 2, 10 -> median 2
    assert final_reward_error(draws, np.array([3.0, 5.0]), scale=2.0) == pytest.approx(abs(2.0 - 4.0) / 2.0)
    assert final_reward_error(np.array([[0.0], [1.0], [5.0]]), np.array([0.5])) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "draws, y, scale, match",
    [
        (np.ones((3, 2)), np.ones(3), 1.0, "values for 2 points"),
        (np.array([[np.nan, 1.0]]), np.ones(2), 1.0, "not finite"),
        (np.ones((3, 2)), np.array([1.0, np.inf]), 1.0, "finite"),
        (np.ones((3, 2)), np.ones(2), 0.0, "scale"),
        (np.ones((0, 2)), np.ones(2), 1.0, "shape"),
    ],
)
def test_bad_inputs_are_errors(draws, y, scale, match):
    with pytest.raises(ScoreInputError, match=match):
        crps_from_draws(draws, y, scale)


@pytest.mark.parametrize(
    "fn, level", list(itertools.product([interval_width, interval_bounds], [0.0, 1.0, 1.5]))
)
def test_levels_outside_zero_one_are_errors(fn, level):
    with pytest.raises(ScoreInputError, match="level"):
        fn(np.ones((3, 2)), level)


def test_pit_is_uniform_when_calibrated_and_u_shaped_when_too_narrow():
    rng = np.random.default_rng(8)
    y = rng.standard_normal(5000)
    calibrated = pit_histogram(rng.standard_normal((1000, 5000)), y)
    narrow = pit_histogram(0.5 * rng.standard_normal((1000, 5000)), y)
    assert calibrated.sum() == pytest.approx(1.0) and np.allclose(calibrated, 0.1, atol=0.02)
    assert narrow[0] > 0.2 and narrow[-1] > 0.2 and narrow[4:6].max() < 0.08


def test_pit_values_by_hand():
    draws = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    np.testing.assert_allclose(pit_values(draws, np.array([1.5, 1.0])), [0.5, 0.5])
    np.testing.assert_allclose(pit_values(draws, np.array([-1.0, 2.0])), [0.0, 1.0])
