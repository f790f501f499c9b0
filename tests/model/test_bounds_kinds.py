"""Runs on a stated reward range and runs normalised by their own range, in one population.

A run without ``reward_min``/``reward_max`` is normalised by its own observed range, so its levels
say where it sits in that range, not how good it is. These tests pin down how the model keeps
such levels apart from the levels of runs on a stated range (``model.structure.bounds_from_data``).
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.build import create_reward_model
from bayesgrpo.model.data import prepare
from bayesgrpo.model.predict import new_run_draws
from bayesgrpo.model.priors import default_priors
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.simulate import simulate_runs
from bayesgrpo.model.structure import bounds_from_data, effect_grouping, run_location
from bayesgrpo.questions.shrinkage import scaling_table

pytestmark = pytest.mark.usefixtures("fast_compile")


def _table(stated: list[bool], families: tuple[str, ...] = ("qwen", "llama", "gemma")) -> RunsTable:
    """Simulated runs; those not ``stated`` lose their reward range (normalised by their own)."""
    sim = simulate_runs(len(stated), n_steps=40, families=families, random_seed=5)
    runs = sim.table.runs.copy()
    for column in ("reward_min", "reward_max"):
        runs[column] = np.where(stated, runs[column], np.nan)
    return RunsTable(points=sim.table.points, runs=runs, report=sim.table.report)


def test_bounds_from_data_flags_only_a_mixed_fit():
    mixed = prepare(_table([True, True, False, False, False]))
    assert bounds_from_data(mixed).tolist() == [0, 0, 1, 1, 1]
    # one kind alone, or one run of a kind: nothing to keep apart
    assert not bounds_from_data(prepare(_table([False] * 4))).any()
    assert not bounds_from_data(prepare(_table([True] * 4))).any()
    assert not bounds_from_data(prepare(_table([True, False, False, False]))).any()


def test_level_groupings_count_only_runs_on_a_stated_range():
    # families in turn: qwen, llama, gemma, qwen, llama, gemma, qwen; gemma only without bounds
    data = prepare(_table([True, True, False, True, True, False, True]))
    index, levels, coord = effect_grouping(data, "family", levels_param=True)
    assert coord == "level_family" and set(levels) == {"qwen", "llama"}
    assert (index[bounds_from_data(data) == 1] == -1).all()
    index, levels, coord = effect_grouping(data, "family", levels_param=False)
    assert coord == "family" and set(levels) == {"qwen", "llama", "gemma"}


def test_run_location_gates_levels_and_the_start_pull():
    mu, effects, pull, offset = 1.0, np.array([0.5, 0.5]), np.array([0.2, 0.2]), -3.0
    bounded = np.array([0.0, 1.0])
    np.testing.assert_allclose(run_location("r1", mu, effects, pull, bounded, offset), [1.7, -2.0])
    np.testing.assert_allclose(run_location("tau", mu, effects, pull, bounded, None), [1.7, 1.5])
    # without an offset (an unmixed fit) every run is placed alike
    np.testing.assert_allclose(run_location("r1", mu, effects, pull, np.zeros(2), None), [1.7, 1.7])


def test_the_graph_has_offsets_and_level_groupings_only_when_mixed():
    priors = default_priors("exp")
    mixed = create_reward_model(prepare(_table([True, True, False, True, True, False, True])), "exp", priors)
    names = set(mixed.named_vars)
    assert {
        "r0_data_offset",
        "r1_data_offset",
        "sigma_data_offset",
    } <= names and "tau_data_offset" not in names
    assert "level_family" in mixed.coords and "family" in mixed.coords
    plain = create_reward_model(prepare(_table([True] * 7)), "exp", priors)
    assert not {"r0_data_offset", "r1_data_offset", "sigma_data_offset"} & set(plain.named_vars)
    assert "level_family" not in plain.coords


def _posterior(with_offset: bool) -> xr.Dataset:
    """A two-sample posterior with round numbers, for checking where a new run is placed."""
    values = {
        "r0_mu": -1.0,
        "r1_mu": 1.0,
        "tau_mu": -1.0,
        "r0_sd": 1e-9,
        "r1_sd": 1e-9,
        "tau_sd": 1e-9,
        "r1_r0_slope": 0.5,
        "tau_r0_slope": 0.5,
        "sigma_mu": -3.0,
        "sigma_sd": 1e-9,
        "nu": 5.0,
        "r0_size_slope": 0.1,
        "r1_size_slope": 0.2,
        "tau_size_slope": 0.3,
    }
    if with_offset:
        values.update({"r0_data_offset": -0.5, "r1_data_offset": 2.0, "sigma_data_offset": 1.5})
    data = {name: (("chain", "draw"), np.full((1, 2), value)) for name, value in values.items()}
    effect = np.full((1, 2, 1), 0.7)
    data["r1_level_family"] = (("chain", "draw", "level_family"), effect)
    data["r1_level_family_sd"] = (("chain", "draw"), np.full((1, 2), 0.1))
    data["tau_family"] = (("chain", "draw", "family"), effect)
    data["tau_family_sd"] = (("chain", "draw"), np.full((1, 2), 0.1))
    return xr.Dataset(data, coords={"level_family": ["qwen"], "family": ["qwen"]})


def test_a_new_run_is_placed_by_its_kind_of_bounds():
    posterior = _posterior(with_offset=True)
    stated = new_run_draws(posterior, "exp", family_level="qwen", log_size=1.0, random_seed=0)
    # r0 = mu + size slope; r1 = mu + family + size slope + pull (0.5 x (r0 - r0_mu))
    np.testing.assert_allclose(stated["r0"], -0.9, atol=1e-6)
    np.testing.assert_allclose(stated["r1"], 1.0 + 0.7 + 0.2 + 0.5 * 0.1, atol=1e-6)
    np.testing.assert_allclose(stated["tau"], -1.0 + 0.7 + 0.3 + 0.5 * 0.1, atol=1e-6)
    own = new_run_draws(
        posterior, "exp", family_level="qwen", log_size=1.0, bounds_from_data=True, random_seed=0
    )
    # levels: the data-bounded means alone; the shape keeps its family and size, loses the pull
    np.testing.assert_allclose(own["r0"], -1.5, atol=1e-6)
    np.testing.assert_allclose(own["r1"], 3.0, atol=1e-6)
    np.testing.assert_allclose(own["tau"], -1.0 + 0.7 + 0.3, atol=1e-6)
    # and its noise level: runs on their own range are noisier on it
    np.testing.assert_allclose(stated["log_sigma"], -3.0, atol=1e-6)
    np.testing.assert_allclose(own["log_sigma"], -1.5, atol=1e-6)
    # a population without the offset (every run on one kind of bounds) places both alike
    plain = _posterior(with_offset=False)
    a = new_run_draws(plain, "exp", family_level="qwen", log_size=1.0, random_seed=0)
    b = new_run_draws(plain, "exp", family_level="qwen", log_size=1.0, bounds_from_data=True, random_seed=0)
    np.testing.assert_allclose(a["r1"], b["r1"])


def test_scaling_leaves_runs_on_their_own_range_out_of_the_levels(mocked):
    stated = [True, True, False, True, True, False, True]
    model = RewardModel(curve="exp").fit(_table(stated), random_seed=0)
    for param in ("r1", "asymptote"):
        levels = scaling_table(model, param)
        assert len(levels.runs) == 5 and levels.n_own_range == 2
    shape = scaling_table(model, "tau")
    assert len(shape.runs) == 7 and shape.n_own_range == 0
