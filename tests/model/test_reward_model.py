"""The reward model without real sampling: data preparation, graph, priors, forecasts, save/load.

Sampling is replaced by prior draws standing in for a posterior (shapes and plumbing are what is
tested here); real NUTS recovery is in test_model_recovery.py (slow lane).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
import xarray as xr
from pymc_extras.prior import Prior
from scipy.special import expit

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.build import MIN_POINTS_CENTERED, _Whitening
from bayesgrpo.model.curves import CURVES
from bayesgrpo.model.data import prepare, signal_to_noise
from bayesgrpo.model.datasets import POPULATION_FILE
from bayesgrpo.model.precondition import run_laplace
from bayesgrpo.model.priors import default_priors
from bayesgrpo.model.reward_model import (
    SAVED_GROUPS,
    ModelConfigError,
    NotFittedError,
    RewardModel,
    _read_hdf5_groups,
)
from bayesgrpo.model.sampling import _runs_over, _split_chains
from bayesgrpo.model.simulate import simulate_runs

pytestmark = pytest.mark.usefixtures("fast_compile")


@pytest.fixture(scope="module")
def simulated():
    return simulate_runs(
        6, n_steps=[50, 80, 120, 60, 100, 40], observed_fraction=[1, 1, 0.5, 1, 0.3, 1], random_seed=3
    )


# data preparation ----------------------------------------------------------------------------
def test_prepare_normalises_bins_and_masks(simulated):
    data = prepare(simulated.table, max_points=30)
    assert data.t.shape[0] == 6 and data.t.shape[1] <= 30
    # the first logged reward (step 1: the policy before any update) sits at t = 0
    assert (prepare(simulated.table, max_points=200).t[:, 0] == 0).all()
    assert data.n_points.tolist() == [51, 81, 61, 61, 31, 41]
    # run 2 was observed for half of its 120 planned steps: t runs to 0.5 of its horizon
    assert data.horizon_step.tolist() == [50, 80, 120, 60, 100, 40]
    assert data.t[2, data.mask[2]].max() == pytest.approx(0.5, abs=0.02)
    # binned runs: noise scale 1/sqrt(count); counts add up to the points
    counts = np.where(data.mask, 1 / data.noise_scale**2, 0).sum(axis=1)
    np.testing.assert_allclose(counts, data.n_points)
    assert set(data.bounds_source) == {"metadata"} and data.lower.tolist() == [0.0] * 6


def test_data_driven_bounds_are_widened(simulated):
    table = simulated.table
    runs = table.runs.assign(reward_min=np.nan, reward_max=np.nan)
    data = prepare(type(table)(table.points, runs), bounds_margin=0.5)
    assert set(data.bounds_source) == {"data"}
    y = data.y[data.mask]
    assert y.min() == pytest.approx(0.25, abs=0.05) and y.max() == pytest.approx(0.75, abs=0.05)


@pytest.mark.parametrize(
    ("progress", "needs"), [("epoch", "steps_per_epoch"), ("samples", "samples_per_step")]
)
def test_progress_axes_say_what_metadata_they_need(simulated, progress, needs):
    with pytest.raises(BayesGRPOError, match=needs):
        prepare(simulated.table, progress=progress)


def test_model_data_round_trips_through_xarray(simulated):
    data = prepare(simulated.table)
    back = type(data).from_dataset(data.to_dataset())
    for name in ("t", "y", "noise_scale", "mask", "lower", "upper", "horizon_step", "log_size"):
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name))
    assert back.run_ids == data.run_ids and back.families == data.families


# priors ----------------------------------------------------------------------------------------
def test_unknown_prior_name_lists_valid_names():
    with pytest.raises(BayesGRPOError, match="tau_mu") as info:
        RewardModel(priors={"tau_muu": Prior("Normal", mu=0, sigma=1)})
    assert "did you mean 'tau_mu'" in str(info.value)


def test_user_prior_wins_and_defaults_are_not_mutated():
    model = RewardModel(priors={"tau_mu": Prior("Normal", mu=-2, sigma=0.1)})
    assert model.priors["tau_mu"].parameters == {"mu": -2, "sigma": 0.1}
    assert default_priors("weibull")["tau_mu"].parameters != {"mu": -2, "sigma": 0.1}


# graph -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("curve", "pooling"),
    [(curve, "partial") for curve in sorted(CURVES)] + [("weibull", "none"), ("weibull", "complete")],
)
def test_graph_has_run_parameters_and_finite_logp(simulated, curve, pooling):
    model = RewardModel(curve=curve, pooling=pooling).build(simulated.table)
    names = {v.name for v in model.deterministics}
    for p in ("r0", "r1", *CURVES[curve].shape_params):
        assert f"{p}_run" in names or f"{p}_run" in {v.name for v in model.free_RVs}
    logps = model.point_logps()
    assert all(np.isfinite(v) for v in logps.values()), logps


def test_centering_follows_signal_to_noise(simulated):
    model = RewardModel(whiten=False)
    model.build(simulated.table)
    threshold = float(np.median(model.data.signal_to_noise))
    n_centred = int((model.data.signal_to_noise >= threshold).sum())
    graph = RewardModel(centered_min_snr=threshold, whiten=False).build(simulated.table)
    free = {v.name: v for v in graph.free_RVs}
    assert free["tau_run_centered"].eval().shape == (n_centred,)
    assert free["tau_run_z"].eval().shape == (6 - n_centred,)
    # levels and noise are centred for every run with enough points, however flat
    assert free["r0_run_centered"].eval().shape == (6,)
    assert "tau_run_z" not in {
        v.name for v in RewardModel(centered_min_snr=0, whiten=False).build(simulated.table).free_RVs
    }


def test_runs_with_enough_points_are_sampled_whitened(simulated):
    model = RewardModel()
    graph = model.build(simulated.table)
    free = {v.name: v for v in graph.free_RVs}
    index = np.flatnonzero(model.data.mask.sum(axis=1) >= MIN_POINTS_CENTERED)

    mean, chol, informed = run_laplace(model.data, "weibull", model.priors, index)
    assert informed.any()
    assert free["run_whitened"].eval().shape == (int(informed.sum()), 5)  # r0, r1, tau, k, log_sigma
    assert "r0_run_prior" in {p.name for p in graph.potentials}
    np.testing.assert_allclose(np.tril(chol), chol)
    assert np.all(np.diagonal(chol, axis1=1, axis2=2) > 0)
    # a run's Laplace mode recovers its start
    truth_r0 = (
        simulated.truth.set_index("run_id").loc[list(np.array(model.data.run_ids)[index]), "r0"].to_numpy()
    )

    np.testing.assert_allclose(expit(mean[:, 0]), truth_r0, atol=0.1)


def test_whitened_values_conditioned_on_the_non_centred_shapes_keep_the_laplace_fit():
    # with the non-centred shapes drawn as the Laplace fit has them given the start, the whitened
    # values must come out jointly as the Laplace fit: conditioning moved them, not changed them
    rng = np.random.default_rng(3)
    names = ("r0", "r1", "tau", "k", "odds", "ratio", "log_sigma")
    n_runs, n_draws = 4, 20_000
    factor = np.tril(rng.normal(size=(n_runs, 7, 7)), -1) * 0.5 + np.eye(7) * rng.uniform(
        0.3, 1.0, (n_runs, 1, 7)
    )
    cov = factor @ np.swapaxes(factor, -1, -2)
    mean = rng.normal(size=(n_runs, 7))
    # every draw of every run as a run of its own: one call of the graph
    copies = np.tile(np.arange(n_runs), n_draws)
    with pm.Model():
        whitening = _Whitening(np.arange(copies.size), names, ("odds", "ratio"), mean[copies], cov[copies])
        given = {name: pt.vector(name) for name in ("odds", "ratio")}
        rest = whitening.complete(given)
        compute = pytensor.function(
            [whitening.free, *given.values()],
            pt.stack([whitening.first(), *(rest[name] for name in ("r1", "tau", "k", "log_sigma"))], axis=1),
        )
    assert whitening.free_names == ("r0", "r1", "tau", "k", "log_sigma")
    order = [0, 4, 5, 1, 2, 3, 6]  # (r0, odds, ratio, ...): the shapes' rows of the factor are 1-2
    chol = np.linalg.cholesky(cov[:, order][:, :, order])[copies]
    free = rng.normal(size=(copies.size, 5))
    shapes = mean[copies][:, [4, 5]] + chol[:, 1:3, 0] * free[:, :1]
    shapes += np.einsum("rij,rj->ri", chol[:, 1:3, 1:3], rng.normal(size=(copies.size, 2)))
    draws = np.empty((copies.size, 7))
    draws[:, [4, 5]] = shapes
    draws[:, [0, 1, 2, 3, 6]] = compute(free, shapes[:, 0], shapes[:, 1])
    for run in range(n_runs):
        own = draws[copies == run]
        scale = cov[run].diagonal().max()
        np.testing.assert_allclose(own.mean(axis=0), mean[run], atol=0.05 * np.sqrt(scale))
        np.testing.assert_allclose(np.cov(own.T), cov[run], atol=0.05 * scale)


def test_runs_their_data_barely_pin_down_are_left_to_the_population():
    sim = simulate_runs(
        12, curve="weibull", n_steps=200, observed_fraction=[1.0, 1.0, 0.15], noise=0.05, random_seed=21
    )
    model = RewardModel()
    model.build(sim.table)
    _, _, informed = run_laplace(model.data, "weibull", model.priors, np.arange(12))
    # every third run is observed for 15% of its horizon: its rate and shape are the population's
    np.testing.assert_array_equal(informed, [True, True, False] * 4)


def test_signal_to_noise_separates_moving_from_flat_runs():
    rng = np.random.default_rng(0)
    flat = rng.normal(0, 0.1, 200)
    moving = np.linspace(0, 1, 200) + rng.normal(0, 0.1, 200)
    assert signal_to_noise(flat) < 3 < 20 < signal_to_noise(moving)


# fit, forecast, save, load (sampling mocked) -----------------------------------------------------
def test_forecast_table_and_draws(mocked, simulated):
    model = RewardModel().fit(simulated.table, random_seed=1)
    forecast = model.forecast(steps=[0, 10, 20], observed=simulated.table, random_seed=1)
    assert list(forecast.table.columns) == [
        "run_id",
        "step",
        "mean",
        "q05",
        "q25",
        "q50",
        "q75",
        "q95",
        "observed",
    ]
    assert len(forecast.table) == 6 * 3
    assert forecast.draws.dims == ("sample", "run", "step")
    ordered = forecast.table[["q05", "q25", "q50", "q75", "q95"]].to_numpy()
    assert (np.diff(ordered, axis=1) >= -1e-12).all()
    observed = forecast.table.dropna(subset=["observed"])
    assert len(observed) == 18  # every run logged steps 0, 10, 20
    noisy = model.forecast(steps=[10], include_noise=True, random_seed=1).table
    plain = model.forecast(steps=[10]).table
    assert ((noisy["q95"] - noisy["q05"]) >= (plain["q95"] - plain["q05"]) - 1e-9).all()


def test_final_reward_is_at_each_horizon(mocked, simulated):
    model = RewardModel().fit(simulated.table)
    final = model.final_reward()
    assert final["horizon_step"].tolist() == [50, 80, 120, 60, 100, 40]
    assert (final["q05"] <= final["q50"]).all() and (final["q50"] <= final["q95"]).all()


def test_unfitted_model_says_so():
    with pytest.raises(NotFittedError):
        RewardModel().forecast()


def test_save_load_round_trip_is_exact(mocked, simulated, tmp_path):
    model = RewardModel(curve="exp", priors={"tau_mu": Prior("Normal", mu=-1, sigma=0.5)}).fit(
        simulated.table
    )
    path = model.save(tmp_path / "model.nc")
    loaded = RewardModel.load(path)
    assert loaded.config == model.config and loaded.config_hash == model.config_hash
    for name in model.idata.posterior.data_vars:
        np.testing.assert_array_equal(loaded.idata.posterior[name].values, model.idata.posterior[name].values)
    pd.testing.assert_frame_equal(loaded.final_reward(), model.final_reward())
    assert loaded.diagnostics.to_dict() == model.diagnostics.to_dict()
    # the file is closed once loaded: the loaded model can be saved over it, and still answers
    loaded.save(path)
    pd.testing.assert_frame_equal(RewardModel.load(path).final_reward(), loaded.final_reward())


def _xarray_groups(path):
    groups = {}
    for group in SAVED_GROUPS:
        try:
            with xr.open_dataset(path, group=group, engine="h5netcdf") as dataset:
                groups[group] = dataset.load()
        except OSError:  # no such group: a fit without sample stats
            continue
    return groups


@pytest.mark.parametrize("which", ["shipped", "saved here"])
def test_a_saved_model_is_read_from_hdf5_exactly_as_xarray_reads_it(mocked, simulated, tmp_path, which):
    if which == "shipped":
        path = POPULATION_FILE
    else:
        path = RewardModel(curve="weibull").fit(simulated.table).save(tmp_path / "model.nc")
    fast, reference = _read_hdf5_groups(path), _xarray_groups(path)
    assert set(fast) == set(reference) >= {"posterior", "constant_data"}
    assert which == "saved here" or set(fast) == set(SAVED_GROUPS)  # the shipped fit has sample stats
    for group in fast:
        xr.testing.assert_identical(fast[group], reference[group])


def test_a_file_the_hdf5_reader_does_not_know_is_read_by_xarray(mocked, simulated, tmp_path):
    model = RewardModel(curve="exp").fit(simulated.table)
    path = model.save(tmp_path / "model.nc")
    idata = az.from_netcdf(str(path))
    idata.posterior["nu"].attrs["units"] = "degrees of freedom"  # a CF attribute xarray decodes
    encoded = tmp_path / "encoded.nc"
    idata.to_netcdf(str(encoded))
    with pytest.raises(ValueError, match="CF encoding"):
        _read_hdf5_groups(encoded)
    loaded = RewardModel.load(encoded)
    np.testing.assert_array_equal(loaded.posterior["nu"].values, model.posterior["nu"].values)


def test_a_loaded_model_builds_its_inference_data_on_demand_and_pickles(tmp_path):
    loaded = RewardModel.load(POPULATION_FILE)
    assert loaded.is_fitted and loaded._idata is None  # read, not yet made into InferenceData
    reference = az.from_netcdf(str(POPULATION_FILE))
    xr.testing.assert_identical(loaded.posterior, reference.posterior)
    clone = pickle.loads(pickle.dumps(loaded))  # as Ray ships a population to its workers
    assert clone.config_hash == loaded.config_hash and clone.prior_config == loaded.prior_config
    idata = clone.idata
    assert set(idata.groups()) == {"posterior", "sample_stats"}
    xr.testing.assert_identical(idata.posterior, reference.posterior)
    assert clone.posterior is idata.posterior and clone.idata is idata
    assert set(clone.priors) == set(clone.prior_config)  # the Prior objects, built when asked


def test_a_live_update_on_the_shipped_population_loads_no_heavy_module():
    # its live summary is read, not the netCDF file (h5py, xarray); the update needs no SciPy
    code = (
        "import sys\n"
        "from bayesgrpo.model.datasets import bundled_population, load_bundled\n"
        "from bayesgrpo.questions.live import LiveForecaster\n"
        "table = load_bundled(warn=False)\n"
        "run = table.select([table.run_ids[0]])\n"
        "LiveForecaster(bundled_population(), random_seed=0).update(run)\n"
        "heavy = ('pymc', 'pytensor', 'arviz', 'jax', 'numpyro', 'pymc_extras', 'scipy', 'emcee',\n"
        "         'xarray', 'h5py')\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_load_detects_a_changed_configuration(mocked, simulated, tmp_path):
    model = RewardModel().fit(simulated.table)
    path = model.save(tmp_path / "model.nc")
    idata = az.from_netcdf(str(path))
    config = json.loads(idata.posterior.attrs["bayesgrpo_config"])
    config["pooling"] = "none"
    idata.posterior.attrs["bayesgrpo_config"] = json.dumps(config, sort_keys=True)
    tampered = tmp_path / "tampered.nc"
    idata.to_netcdf(str(tampered))
    with pytest.raises(ModelConfigError, match="changed after saving"):
        RewardModel.load(tampered)


def test_load_rejects_foreign_files(tmp_path):
    path = tmp_path / "other.nc"
    az.from_dict(posterior={"x": np.zeros((2, 5))}).to_netcdf(str(path))
    with pytest.raises(ModelConfigError, match="not written by RewardModel.save"):
        RewardModel.load(path)


def test_load_names_a_missing_file_or_a_folder(tmp_path):
    with pytest.raises(BayesGRPOError, match="no saved model at"):
        RewardModel.load(tmp_path / "missing.nc")
    with pytest.raises(BayesGRPOError, match="is a folder, not a saved model"):
        RewardModel.load(tmp_path)


def test_approximation_draws_are_split_into_pseudo_chains():
    idata = az.from_dict(posterior={"x": np.arange(10.0)[None, :], "y": np.zeros((1, 10, 3))})
    split = _split_chains(idata, 2)
    assert dict(split.posterior["x"].sizes) == {"chain": 2, "draw": 5}
    assert split.posterior["y"].shape == (2, 5, 3)
    np.testing.assert_array_equal(split.posterior["x"].values.ravel(), np.arange(10.0))


def test_fit_summary_reports_how_runs_are_parametrised(mocked):
    sim = simulate_runs(
        12, curve="weibull", n_steps=200, observed_fraction=[1.0, 1.0, 0.15], noise=0.05, random_seed=21
    )
    model = RewardModel().fit(sim.table, random_seed=1)
    counts = model.fit_summary()["parametrisation"]
    assert counts["whitened"] == 8 and sum(counts.values()) == 12


def test_poorly_mixed_runs_are_named_worst_first():

    r_hat = xr.Dataset(
        {"a_run": ("run", [1.0, 1.3, 1.02]), "b_run": ("run", [1.5, 1.0, 1.0]), "mu": ((), 1.2)},
        coords={"run": ["x", "y", "z"]},
    )
    assert _runs_over(r_hat, ["a_run", "b_run", "mu"], 1.01) == ["x", "y", "z"]
    assert _runs_over(r_hat, ["a_run"], 1.01) == ["y", "z"]
