"""The live path's numpy special functions and optimiser, against SciPy's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special

from bayesgrpo.model.numerics import binomial_tail, expit, gammaln, logit, logsumexp, newton_minimize


def test_expit_and_logit_match_scipy_over_the_whole_float_range():
    x = np.concatenate([np.linspace(-800, 800, 4001), [-np.inf, np.inf, 0.0, 1e-300, -1e-300]])
    np.testing.assert_allclose(expit(x), special.expit(x), rtol=1e-15, atol=1e-300)  # subnormals aside
    p = np.concatenate([np.linspace(0, 1, 1001), [1e-300, 1 - 1e-16]])
    np.testing.assert_allclose(logit(p), special.logit(p), rtol=1e-12)
    inner = np.linspace(-20, 20, 401)  # near 1, expit keeps ~1e-16 of 1 - p
    np.testing.assert_allclose(logit(expit(inner)), inner, atol=1e-6)


@pytest.mark.parametrize("x", [0.5, 1.0, 2.5, 3.7, 10.0, 151.3, 1e-3])
def test_gammaln_matches_scipy(x):
    assert gammaln(x) == pytest.approx(float(special.gammaln(x)), rel=1e-14, abs=1e-14)


def test_logsumexp_matches_scipy_with_infinities():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 300, size=1000)
    assert logsumexp(a) == pytest.approx(float(special.logsumexp(a)), rel=1e-14)
    with_inf = np.concatenate([a, [-np.inf] * 5])
    assert logsumexp(with_inf) == pytest.approx(float(special.logsumexp(with_inf)), rel=1e-14)
    assert logsumexp(np.full(3, -np.inf)) == -np.inf


@pytest.mark.parametrize("n", [1, 10, 40, 200])
@pytest.mark.parametrize("share", [0.05, 0.1, 0.5, 0.93])
def test_binomial_tail_matches_scipys_bdtrc(n, share):
    for count in range(-1, n + 2):
        want = float(special.bdtrc(count - 1, n, share)) if count > 0 else 1.0
        assert binomial_tail(count, n, share) == pytest.approx(want, rel=1e-9, abs=1e-300)


def _rosenbrock(points: np.ndarray) -> np.ndarray:
    x, y = points[:, 0], points[:, 1]
    return (1 - x) ** 2 + 100 * (y - x * x) ** 2


def test_newton_finds_the_rosenbrock_minimum_from_afar():
    found = newton_minimize(_rosenbrock, np.array([-1.5, 2.0]))
    assert found.converged
    np.testing.assert_allclose(found.x, [1.0, 1.0], atol=1e-4)


def test_newton_agrees_with_lbfgsb_on_a_student_t_posterior():
    """A curve fit's shape: a saturating mean, Student-t noise, a Gaussian prior (five parameters)."""
    rng = np.random.default_rng(4)
    t = np.linspace(0, 1, 150)
    y = 0.2 + 0.5 * (1 - np.exp(-t / 0.3)) + 0.05 * rng.standard_t(5, size=t.size)
    mean0 = np.array([0.0, 0.0, np.log(0.5), np.log(0.1), 0.0])

    def negative(points: np.ndarray) -> np.ndarray:
        a, b, log_tau, log_sigma, c = points.T
        curve = a[:, None] + (b - a)[:, None] * (1 - np.exp(-t[None, :] / np.exp(log_tau)[:, None]))
        curve = curve + 0.01 * c[:, None] * t[None, :]
        z = (y[None, :] - curve) / np.exp(log_sigma)[:, None]
        loglik = (-log_sigma[:, None] - 3.0 * np.log1p(z * z / 5.0)).sum(axis=1)
        return -(loglik - 0.5 * np.sum((points - mean0) ** 2, axis=1))

    found = newton_minimize(negative, mean0)
    reference = optimize.minimize(lambda v: float(negative(v[None, :])[0]), mean0, method="L-BFGS-B")
    assert found.converged
    assert found.value <= reference.fun + 1e-7
    np.testing.assert_allclose(found.x, reference.x, atol=2e-3)


def test_newton_steps_back_from_points_where_the_function_is_not_finite():
    def bowl_with_a_wall(points: np.ndarray) -> np.ndarray:
        values = np.sum((points - 3.0) ** 2, axis=1)
        return np.where(points[:, 0] < 3.5, values, np.nan)  # beyond x = 3.5: nothing

    found = newton_minimize(bowl_with_a_wall, np.array([-10.0, -10.0]))
    assert found.converged
    np.testing.assert_allclose(found.x, [3.0, 3.0], atol=1e-6)


def test_newton_takes_an_accepted_full_step_and_its_derivatives_in_one_call():
    """On a quadratic the first full Newton step lands on the minimum: the differences at the start
    and one call holding every step length and the differences about the full step.
    """
    calls = []

    def quadratic(points: np.ndarray) -> np.ndarray:
        calls.append(len(points))
        return np.sum((points - np.array([0.3, -0.2])) ** 2 * np.array([1.0, 4.0]), axis=1)

    found = newton_minimize(quadratic, np.array([0.1, 0.1]), max_step=10.0)
    assert found.converged
    np.testing.assert_allclose(found.x, [0.3, -0.2], atol=1e-6)
    assert len(calls) == 2
