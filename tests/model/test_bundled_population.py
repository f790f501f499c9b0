"""The population shipped with the package: current, fitted on every run, well mixed where it matters."""

from __future__ import annotations

import arviz as az
import numpy as np
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.model.datasets import POPULATION_FILE, bundled_population, load_bundled


def test_shipped_population_loads_in_this_model_format():
    model = bundled_population()
    assert model.pooling == "partial"
    assert model.data is not None and model.data.n_runs == 60
    assert set(model.data.run_ids) == set(load_bundled(warn=False).runs["run_id"])
    assert bundled_population() is model  # loaded once per process


def test_population_level_parameters_mixed():
    """A live update's prior comes from the population-level parameters only: those must agree
    across chains (one run's own bimodal start does not matter to a new run).
    """
    posterior = bundled_population().idata.posterior
    population = [
        name for name, var in posterior.data_vars.items() if not any("run" in d for d in var.dims[2:])
    ]
    assert {"nu", "r0_mu", "r1_mu", "tau_mu", "k_mu"} <= set(population)
    r_hat = az.rhat(posterior[population])
    worst = max(float(np.nanmax(r_hat[name].to_numpy())) for name in population)
    assert worst < 1.1


def test_missing_population_file_says_how_to_build_it(tmp_path):
    with pytest.raises(BayesGRPOError, match="python -m bayesgrpo.model.datasets --population"):
        bundled_population(tmp_path / "nothing.nc")


def test_population_file_is_package_data():
    assert POPULATION_FILE.parent.name == "_data" and POPULATION_FILE.parent.parent.name == "bayesgrpo"
