"""New-run draws of group effects (bayesgrpo.model.predict)."""

from __future__ import annotations

import numpy as np
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.population_draws import PopulationDraws
from bayesgrpo.model.predict import _group_effect_draws, new_level_scale


def test_new_level_scale_is_the_spread_of_a_new_iid_effect_about_the_fitted_mean():
    # The model behind ZeroSumNormal(sd): K iid N(0, sd^2) effects seen about their mean.
    rng = np.random.default_rng(0)
    for k in (2, 5, 12):
        effects = rng.normal(0.0, 1.0, size=(200_000, k + 1))
        about_mean = effects[:, -1] - effects[:, :-1].mean(axis=1)
        assert about_mean.std() == pytest.approx(new_level_scale(k), rel=0.01)
    with pytest.raises(BayesGRPOError, match="at least 1"):
        new_level_scale(0)


def _posterior(sd: float, n_levels: int, n: int = 40_000) -> PopulationDraws:
    rng = np.random.default_rng(1)
    z = rng.normal(size=(n, n_levels))
    z -= z.mean(axis=1, keepdims=True)
    levels = tuple(f"fam{i}" for i in range(n_levels))
    return PopulationDraws(
        {"r1_family": sd * z, "r1_family_sd": np.full(n, sd)}, {"r1_family": ("family", levels)}
    )


def test_a_new_level_is_drawn_wider_than_the_between_group_sd():
    posterior = _posterior(sd=0.5, n_levels=4)
    rng = np.random.default_rng(2)
    new = _group_effect_draws(posterior, "r1", "family", "a family never fitted", rng)
    assert new.std() == pytest.approx(0.5 * np.sqrt(1.25), rel=0.02)
    known = _group_effect_draws(posterior, "r1", "family", "fam0", rng)
    np.testing.assert_array_equal(known, posterior["r1_family"][:, 0])
    assert not _group_effect_draws(posterior, "r1", "family", None, rng).any()
