"""The live update's multivariate t and normal in numpy (bayesgrpo.model.laplace.MultivariateT)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from bayesgrpo.model.laplace import MultivariateT


@pytest.mark.parametrize("df", [5.0, np.inf])
def test_the_density_is_scipys_and_the_draws_have_its_moments(df):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 5))
    cov, location = a @ a.T + 0.1 * np.eye(5), rng.standard_normal(5)
    t = MultivariateT(location, cov, df)
    theta = 2 * rng.standard_normal((7, 5))
    reference = (
        stats.multivariate_normal(location, cov)
        if np.isinf(df)
        else stats.multivariate_t(location, cov, df=df)
    )
    np.testing.assert_allclose(t.log_density(theta), reference.logpdf(theta), rtol=1e-10)
    draws = t.draws(400_000, rng)
    scale = 1.0 if np.isinf(df) else df / (df - 2)  # a t's covariance is the shape x df / (df - 2)
    np.testing.assert_allclose(draws.mean(axis=0), location, atol=0.03)
    np.testing.assert_allclose(np.cov(draws.T), scale * cov, atol=0.03 * np.abs(cov).max())
