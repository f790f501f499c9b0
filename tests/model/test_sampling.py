"""How the samplers use the machine: numpyro's chains one per CPU core, set before JAX starts; a seeded
fit reproduces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pymc as pm
import pytest

from bayesgrpo.errors import BayesGRPOError, FitTooLargeError
from bayesgrpo.model import nuts, sampling
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import BASELINE_BYTES, check_fit_fits_in_memory, fit_memory_bytes
from bayesgrpo.model.simulate import simulate_runs

PROBE = r"""
import json, os
from bayesgrpo.model.sampling import use_cores_for_chains
devices = use_cores_for_chains(2)
print(json.dumps({"devices": devices, "flags": os.environ.get("XLA_FLAGS", "")}))
"""


def _probe(env_flags: str | None, prelude: str = "") -> dict:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if env_flags is not None:
        env["XLA_FLAGS"] = env_flags
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run(
        [sys.executable, "-c", prelude + PROBE],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_fresh_process_gets_one_cpu_device_per_chain_up_to_the_cores() -> None:
    found = _probe(None)
    assert found["devices"] == min(2, os.cpu_count() or 1)
    assert f"--xla_force_host_platform_device_count={found['devices']}" in found["flags"]


def test_a_device_count_the_user_set_within_the_cores_is_kept() -> None:
    found = _probe("--xla_force_host_platform_device_count=1 --xla_cpu_enable_fast_math=false")
    assert found["devices"] == 1
    assert found["flags"] == "--xla_force_host_platform_device_count=1 --xla_cpu_enable_fast_math=false"


def test_pymcs_hundred_devices_become_one_per_chain_and_stay_so_after_its_import() -> None:
    prelude = "import pymc.sampling.jax\n"  # prepends --xla_force_host_platform_device_count=100
    found = _probe("--xla_cpu_enable_fast_math=false", prelude=prelude)
    assert found["devices"] == min(2, os.cpu_count() or 1)
    assert "=100" not in found["flags"] and "--xla_cpu_enable_fast_math=false" in found["flags"]
    again = _probe(
        None,
        prelude="from bayesgrpo.model.sampling import use_cores_for_chains\n"
        "use_cores_for_chains(2); import pymc.sampling.jax\n",
    )
    assert again["devices"] == min(2, os.cpu_count() or 1)


def test_jax_already_started_is_left_as_it_is() -> None:
    found = _probe(None, prelude="import jax; jax.devices()\n")
    assert found["devices"] == 1
    assert found["flags"] == ""


def test_a_fit_too_large_for_free_memory_is_refused_before_any_work_with_the_way_out() -> None:

    needed = fit_memory_bytes(10_000, 6, 1000, 2)
    check_fit_fits_in_memory(10_000, 6, 1000, 2, available=needed)  # just fits: no error
    with pytest.raises(FitTooLargeError) as raised:
        check_fit_fits_in_memory(10_000, 6, 1000, 2, available=needed // 2)
    message = str(raised.value)
    assert "10000 runs" in message and "GiB" in message and "advi" in message and "fewer draws" in message
    assert raised.value.needed_bytes == needed and isinstance(raised.value, MemoryError)


def test_fit_memory_grows_linearly_in_runs_and_draws() -> None:

    one = fit_memory_bytes(1000, 6, 1000, 2) - BASELINE_BYTES
    assert fit_memory_bytes(10_000, 6, 1000, 2) - BASELINE_BYTES == 10 * one
    assert fit_memory_bytes(1000, 6, 2000, 2) - BASELINE_BYTES == 2 * one


def test_reward_model_fit_checks_memory_before_building(monkeypatch) -> None:

    monkeypatch.setattr(sampling, "available_memory_bytes", lambda: 1)
    model = RewardModel()
    with pytest.raises(FitTooLargeError, match="3 runs"):
        model.fit(simulate_runs(3, random_seed=0).table, draws=10, tune=10)
    assert model.data is None  # nothing was built


def test_numpyro_chains_run_in_parallel_on_cpus_and_vectorised_on_a_gpu(monkeypatch) -> None:
    assert sampling.numpyro_chain_method() == ("parallel" if jax.default_backend() == "cpu" else "vectorized")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert sampling.numpyro_chain_method() == "vectorized"
    monkeypatch.setattr(jax, "default_backend", lambda: "cpu")
    assert sampling.numpyro_chain_method() == "parallel"


def test_the_numpyro_fit_passes_its_settings_to_the_nuts_driver(monkeypatch) -> None:
    seen: dict = {}

    def fake_sample(model, **kwargs):
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.setattr(nuts, "sample_numpyro", fake_sample)
    monkeypatch.setattr(sampling, "numpyro_chain_method", lambda: "vectorized")
    with pm.Model() as model:
        pm.Normal("x")
    with pytest.raises(RuntimeError, match="stop here"):
        sampling.sample_model(model, sampler="numpyro", draws=5, tune=5, thin=2)
    assert seen["chain_method"] == "vectorized"
    assert (seen["draws"], seen["tune"], seen["thin"]) == (5, 5, 2)
    assert seen["float32"] and seen["dense_population"] is None  # the driver decides by the warm-up


def test_thin_below_one_is_refused() -> None:
    with pm.Model() as model:
        pm.Normal("x")
    with pytest.raises(BayesGRPOError, match="thin=0"):
        sampling.sample_model(model, sampler="numpyro", draws=5, tune=5, thin=0)


SEEDED_FIT = r"""
import sys, warnings
import numpy as np
warnings.simplefilter("ignore")
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.simulate import simulate_runs
table = simulate_runs(3, random_seed=0).table
model = RewardModel().fit(table, draws=20, tune=20, random_seed=int(sys.argv[2]), progressbar=False)
np.savez(sys.argv[1], **{k: v.values for k, v in model.idata.posterior.data_vars.items()})
"""


@pytest.mark.slow
def test_a_seeded_fit_gives_the_same_posterior_in_another_process_and_another_seed_another(tmp_path) -> None:
    # real NUTS (numpyro, two chains on the CPU devices): a user who refits with the seed they
    # fitted with gets the population they had, draw for draw
    def fit_in_a_fresh_process(seed: int) -> dict[str, np.ndarray]:
        path = tmp_path / f"seed{seed}.npz"
        subprocess.run(
            [sys.executable, "-c", SEEDED_FIT, str(path), str(seed)],
            env={**os.environ, "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
        with np.load(path) as saved:
            return {name: saved[name] for name in saved.files}

    def fit_here(seed: int) -> dict[str, np.ndarray]:
        table = simulate_runs(3, random_seed=0).table
        model = RewardModel().fit(table, draws=20, tune=20, random_seed=seed, progressbar=False)
        return {name: values.values for name, values in model.idata.posterior.data_vars.items()}

    here, there, other_seed = fit_here(3), fit_in_a_fresh_process(3), fit_here(4)
    assert set(there) == set(here)
    for name, values in there.items():
        np.testing.assert_array_equal(values, here[name], err_msg=name)
    assert any(not np.array_equal(other_seed[name], here[name]) for name in here)
