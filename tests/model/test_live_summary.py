"""A saved model's live summary: read instead of the netCDF file, the same answers, never stale."""

from __future__ import annotations

import copy
import dataclasses
import logging
import pickle
import shutil

import numpy as np
import pytest
import xarray as xr

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model import datasets
from bayesgrpo.model.data import ModelData
from bayesgrpo.model.datasets import POPULATION_FILE, main
from bayesgrpo.model.live_summary import live_summary_path, read_live_summary
from bayesgrpo.model.population_draws import PopulationDraws
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster


def _assert_same_data(a: ModelData, b: ModelData) -> None:
    for field in dataclasses.fields(ModelData):
        left, right = getattr(a, field.name), getattr(b, field.name)
        if isinstance(left, np.ndarray):
            assert left.dtype == right.dtype, field.name
            np.testing.assert_array_equal(left, right, err_msg=field.name)
        else:
            assert left == right, field.name


def _assert_same_draws(a: PopulationDraws, b: PopulationDraws) -> None:
    assert set(a) == set(b) and a.levels == b.levels
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.fixture
def saved(population, tmp_path):
    model, sim = population
    path = model.save(tmp_path / "population.nc", live_summary=True)
    return model, sim, path


def test_the_shipped_population_has_a_current_summary():
    # a population refitted without its summary would fail here: the file's hash is recorded
    assert read_live_summary(POPULATION_FILE) is not None


def test_a_summary_is_read_alone_and_answers_as_the_whole_file(saved, tmp_path):
    model, sim, path = saved
    assert live_summary_path(path) == tmp_path / "population.live.npz" and live_summary_path(path).is_file()
    fast = RewardModel.load(path)
    assert fast._unread == path and not fast._groups and fast._idata is None  # nothing of the file read
    assert fast.is_fitted and fast.config_hash == model.config_hash
    assert fast.diagnostics.to_dict() == model.diagnostics.to_dict()
    _assert_same_data(fast.data, model.data)
    _assert_same_draws(fast.population_draws, PopulationDraws.from_posterior(model.posterior))
    run = sim.table.select([sim.table.run_ids[0]])
    steps = np.array([50.0, 150.0])
    with_summary = LiveForecaster(fast, random_seed=4).update(run).quantiles(steps)
    without = LiveForecaster(model, random_seed=4).update(run).quantiles(steps)
    np.testing.assert_array_equal(np.asarray(with_summary), np.asarray(without))
    assert fast._unread == path  # the update read no posterior
    # the posterior, when asked for, is the file's
    xr.testing.assert_identical(fast.posterior, model.posterior.assign_attrs(fast.posterior.attrs))
    assert fast._unread is None and fast.idata is not None


def test_a_summary_written_for_another_file_is_not_used(saved, tmp_path, caplog):
    model, sim, path = saved
    other = copy.copy(model)  # the same posterior, saved with other diagnostics: another file
    other.diagnostics = dataclasses.replace(model.diagnostics, max_r_hat=9.0)
    other.save(tmp_path / "other.nc")  # no summary of its own
    shutil.copy(live_summary_path(path), live_summary_path(tmp_path / "other.nc"))
    with caplog.at_level(logging.INFO, logger="bayesgrpo.model.live_summary"):
        loaded = RewardModel.load(tmp_path / "other.nc")
    assert loaded._unread is None and loaded._groups  # read from the file itself
    assert loaded.diagnostics.max_r_hat == 9.0
    assert "changed after it was written" in caplog.text


def test_a_damaged_summary_is_not_used(saved, caplog):
    model, sim, path = saved
    summary = live_summary_path(path)
    summary.write_bytes(summary.read_bytes()[:1000])  # truncated
    with caplog.at_level(logging.INFO, logger="bayesgrpo.model.live_summary"):
        loaded = RewardModel.load(path)
    assert loaded._unread is None and "could not be read" in caplog.text
    _assert_same_data(loaded.data, model.data)


def test_a_summary_is_added_to_a_saved_model_from_its_file(population, tmp_path):
    model, _ = population
    path = model.save(tmp_path / "model.nc")
    assert RewardModel.load(path)._unread is None
    assert main(["--live-summary", str(path)]) == 0
    loaded = RewardModel.load(path)
    assert loaded._unread == path
    _assert_same_draws(loaded.population_draws, PopulationDraws.from_posterior(model.posterior))


def test_a_model_read_from_its_summary_pickles_with_its_posterior(saved):
    model, _, path = saved
    clone = pickle.loads(pickle.dumps(RewardModel.load(path)))  # a Ray worker may not see the file
    assert clone._unread is None
    np.testing.assert_array_equal(clone.posterior["nu"].to_numpy(), model.posterior["nu"].to_numpy())


def test_population_draws_keep_group_level_variables_only(population):
    model, _ = population
    posterior = model.posterior
    draws = PopulationDraws.from_posterior(posterior)
    assert not any(name.endswith("_run") for name in draws) and "nu" in draws
    n = posterior.sizes["chain"] * posterior.sizes["draw"]
    assert draws.n_samples == n
    np.testing.assert_array_equal(draws["nu"], posterior["nu"].stack(sample=("chain", "draw")).to_numpy())
    for name, (dim, labels) in draws.levels.items():
        stacked = posterior[name].stack(sample=("chain", "draw"))
        assert labels == tuple(str(v) for v in posterior[dim].to_numpy())
        np.testing.assert_array_equal(
            draws.at_level(name, labels[-1]), stacked.sel({dim: labels[-1]}).to_numpy()
        )
    with pytest.raises(ValueError, match="read-only"):
        draws["nu"][0] = 0.0  # shared by every prior made from them
    _assert_same_draws(PopulationDraws.from_arrays(draws.to_arrays()), draws)


def test_population_draws_refuse_unlabelled_or_ragged_arrays():
    with pytest.raises(BayesGRPOError, match="no labels"):
        PopulationDraws({"r1_family": np.zeros((4, 2))}, {})
    with pytest.raises(BayesGRPOError, match="different lengths"):
        PopulationDraws({"a": np.zeros(4), "b": np.zeros(5)}, {})


def test_refitting_the_shipped_population_writes_its_summary(mocked, monkeypatch, tmp_path):
    bundled = datasets.load_bundled(warn=False)
    few = bundled.select(list(bundled.run_ids[::12]))  # five runs: the fit is mocked, the files are real
    monkeypatch.setattr(datasets, "load_bundled", lambda warn=True: few)
    path = datasets.fit_bundled_population(tmp_path / "population.nc", progressbar=False)
    assert live_summary_path(path).is_file() and read_live_summary(path) is not None
    loaded = datasets.bundled_population(path)
    assert loaded._unread == path and loaded.data.n_runs == 5
