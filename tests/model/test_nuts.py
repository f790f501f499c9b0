"""numpyro's NUTS driver: single precision, the dense population block, thinning, PyMC's layout."""

from __future__ import annotations

import arviz as az
import jax
import numpy as np
import pymc as pm
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model import nuts
from bayesgrpo.model.build import holds_run_values
from bayesgrpo.model.nuts import (
    DENSE_BLOCK,
    DIAGONAL_BLOCK,
    flat_layout,
    flatten,
    population_sites,
    sample_numpyro,
    unflatten,
)
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.simulate import simulate_runs

#: Eight schools (Rubin 1981), non-centred: a small hierarchical posterior with a population part
#: (mu, tau) and a per-school part, its answer known to two decimals from long reference runs.
EFFECTS = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
SES = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


def eight_schools() -> pm.Model:
    with pm.Model(coords={"run": [f"s{i}" for i in range(8)]}) as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        z = pm.Normal("z", 0.0, 1.0, dims="run")
        theta = pm.Deterministic("theta", mu + tau * z, dims="run")
        pm.Normal("y", theta, SES, observed=EFFECTS, dims="run")
    return model


def test_population_sites_are_the_free_variables_without_a_run_dimension() -> None:
    assert set(population_sites(eight_schools())) == {"mu", "tau_log__"}


def test_runs_sampled_apart_stay_out_of_the_population_block() -> None:
    # runs of mixed noise and length: some whitened, some centred, some non-centred, each kind a
    # free variable over a subset of the runs, with no run dim and not as long as the runs
    sim = simulate_runs(
        12,
        families=("qwen", "llama", "gemma"),
        n_steps=60,
        observed_fraction=[1.0, 0.2, 0.15] * 4,
        noise=[0.01, 0.08, 0.2] * 4,
        random_seed=4,
    )
    model = RewardModel().build(sim.table)
    point = model.initial_point()
    subsets = [
        value.name
        for value in model.value_vars
        if holds_run_values(model.values_to_rvs[value].name) and np.shape(point[value.name])[:1] != (12,)
    ]
    assert subsets, "the simulated runs should be sampled in more than one way"
    sites = population_sites(model, point)
    assert not set(subsets) & set(sites)
    assert {"r0_mu", "k_sd_log__"} <= set(sites)


def test_the_flat_blocks_hold_every_variable_once_and_give_it_back() -> None:
    shapes = {"mu": (), "run_z": (8, 3), "slopes": (2,), "sigma_run": (8,)}
    layout = flat_layout(shapes, dense=("mu", "slopes"))
    assert [name for name, *_ in layout[DENSE_BLOCK]] == ["mu", "slopes"]
    assert [name for name, *_ in layout[DIAGONAL_BLOCK]] == ["run_z", "sigma_run"]
    rng = np.random.default_rng(0)
    values = {name: rng.normal(size=(2, 5, *shape)) for name, shape in shapes.items()}  # chains x draws
    flat = flatten(values, layout, batch_ndim=2)
    assert flat[DENSE_BLOCK].shape == (2, 5, 3) and flat[DIAGONAL_BLOCK].shape == (2, 5, 32)
    back = unflatten(flat, layout)
    for name, value in values.items():
        np.testing.assert_array_equal(back[name], value)
    # inside JAX too (the potential unpacks one unbatched vector per block)
    one = unflatten({k: jax.numpy.asarray(v[0, 0]) for k, v in flat.items()}, layout)
    np.testing.assert_allclose(np.asarray(one["run_z"]), values["run_z"][0, 0], rtol=1e-6)


def test_one_population_coordinate_is_no_dense_block() -> None:
    layout = flat_layout({"mu": (), "z": (8,)}, dense=("mu",))
    assert DENSE_BLOCK not in layout
    assert [name for name, *_ in layout[DIAGONAL_BLOCK]] == ["mu", "z"]


@pytest.mark.parametrize("float32", [True, False])
def test_the_posterior_matches_the_known_answer_in_either_precision(float32: bool) -> None:
    idata, timings = sample_numpyro(
        eight_schools(), draws=1000, tune=500, chains=2, thin=2, random_seed=3, float32=float32
    )
    posterior = idata.posterior
    # PyMC's layout: chains x kept draws, free variables on their own scale, Deterministics, float64
    assert dict(posterior.sizes)["chain"] == 2 and dict(posterior.sizes)["draw"] == 1000
    assert {"mu", "tau", "z", "theta"} <= set(posterior.data_vars)
    assert "tau_log__" not in posterior.data_vars
    assert posterior["theta"].dtype == np.float64 and posterior["theta"].dims[-1] == "run"
    stats = idata.sample_stats
    assert {"lp", "step_size", "n_steps", "tree_depth", "acceptance_rate", "diverging", "energy"} <= set(
        stats.data_vars
    )
    assert idata.posterior.attrs["thinning"] == 2
    assert timings.sample > 0
    # mu 4.4 (sd 3.3) and theta[0] 6.2 (sd 5.6) in long reference runs of this model
    assert abs(float(posterior["mu"].mean()) - 4.4) < 0.6
    assert abs(float(posterior["theta"].sel(run="s0").mean()) - 6.2) < 1.0
    assert abs(float(posterior["mu"].std()) - 3.3) < 0.5


def test_the_dense_block_waits_for_a_warm_up_long_enough_to_estimate_it(monkeypatch) -> None:
    monkeypatch.setattr(nuts, "DENSE_MIN_TUNE", 30)
    short, _ = sample_numpyro(eight_schools(), draws=10, tune=20, chains=1, random_seed=0)
    long, _ = sample_numpyro(eight_schools(), draws=10, tune=30, chains=1, random_seed=0)
    forced, _ = sample_numpyro(
        eight_schools(), draws=10, tune=20, chains=1, random_seed=0, dense_population=True
    )
    assert short.posterior.attrs["dense_block_size"] == 0
    assert long.posterior.attrs["dense_block_size"] == 2  # mu and tau
    assert forced.posterior.attrs["dense_block_size"] == 2


def test_the_parallel_chains_in_short_calls_are_numpyros_own_draws(monkeypatch) -> None:
    """Calls of 5 iterations (a warm-up of 21 and 7 draws of 2 cut across calls) against numpyro's
    MCMC, the whole run at once, from the same keys and starting points (double precision: in
    single precision the two compiled programs round apart by about 1e-4).
    """
    assert jax.local_device_count() >= 2, "PyMC's JAX module gives JAX one CPU device per chain"
    monkeypatch.setattr(nuts, "ITERATIONS_PER_CALL", 5)  # 2 draws a call; warm-up 5 x 4 + 1
    model = eight_schools()
    calls, _ = sample_numpyro(model, draws=7, tune=21, chains=2, thin=2, random_seed=1, float32=False)
    whole, _ = sample_numpyro(
        model, draws=7, tune=21, chains=2, thin=2, random_seed=1, float32=False, chain_method="sequential"
    )
    assert dict(calls.posterior.sizes) == {"chain": 2, "draw": 7, "run": 8}
    for name in ("mu", "tau", "z"):
        np.testing.assert_allclose(calls.posterior[name], whole.posterior[name], rtol=1e-8)
    for name in ("n_steps", "diverging", "step_size"):
        np.testing.assert_allclose(calls.sample_stats[name], whole.sample_stats[name], rtol=1e-8)


def test_a_jax_left_in_double_precision_stays_so() -> None:
    before = jax.config.read("jax_enable_x64")
    sample_numpyro(eight_schools(), draws=20, tune=20, chains=1, random_seed=0, float32=True)
    assert jax.config.read("jax_enable_x64") == before


def test_thin_below_one_is_refused() -> None:
    with pytest.raises(BayesGRPOError, match="thin=0"):
        sample_numpyro(eight_schools(), draws=5, tune=5, chains=1, thin=0)


@pytest.mark.parametrize(("draws", "tune", "chains"), [(0, 5, 2), (5, -1, 2), (5, 5, 0)])
def test_no_draw_no_chain_or_a_negative_warm_up_is_refused(draws: int, tune: int, chains: int) -> None:
    with pytest.raises(BayesGRPOError, match="at least one draw"):
        sample_numpyro(eight_schools(), draws=draws, tune=tune, chains=chains)


@pytest.mark.slow
def test_single_and_double_precision_fit_the_same_population() -> None:
    """The reward model of simulated runs, fitted both ways: every parameter's mean agrees.

    Within its Monte Carlo error: 4 combined standard errors, with a floor of 0.02 of its
    posterior sd.
    """
    runs = simulate_runs(8, random_seed=11).table
    fits = {}
    for float32 in (True, False):
        model = RewardModel().build(runs)
        fits[float32], _ = sample_numpyro(
            model, draws=500, tune=500, chains=2, thin=2, random_seed=5, float32=float32
        )
    names = [n for n in fits[True].posterior.data_vars if not n.endswith("_z") and "whitened" not in n]
    for name in names:
        a, b = fits[True].posterior[name], fits[False].posterior[name]
        se = np.sqrt(az.mcse(a).to_array() ** 2 + az.mcse(b).to_array() ** 2).values
        sd = float(np.mean(b.std(dim=("chain", "draw")).values))
        gap = np.abs(a.mean(dim=("chain", "draw")).values - b.mean(dim=("chain", "draw")).values)
        assert np.all(gap <= 4 * se + 0.02 * sd + 1e-6), name
