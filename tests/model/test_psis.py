"""PSIS in numpy (bayesgrpo.model.psis) gives ArviZ's psislw on the same weights."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from bayesgrpo.model.psis import psis_log_weights


@pytest.mark.parametrize("tail", [0.3, 1.0, 2.5, 6.0])
@pytest.mark.parametrize("n", [40, 1000, 4000])
def test_the_same_smoothed_weights_and_k_as_arviz(tail, n):
    rng = np.random.default_rng(int(10 * tail) + n)
    log_w = tail * rng.standard_normal(n) + rng.standard_normal(n) ** 2  # heavier tails as tail grows
    expected, expected_k = az.psislw(log_w.copy())
    smoothed, k = psis_log_weights(log_w)
    assert k == pytest.approx(float(expected_k), rel=1e-10)
    assert np.allclose(smoothed, expected, rtol=1e-10, atol=1e-12)
    assert np.exp(smoothed).sum() == pytest.approx(1.0)


def test_a_tail_of_four_draws_has_no_shape():
    smoothed, k = psis_log_weights(np.log(np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])))
    assert k == np.inf and np.exp(smoothed).sum() == pytest.approx(1.0)
