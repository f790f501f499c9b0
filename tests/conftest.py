"""Shared fixtures: sampling replaced by prior draws for tests of everything downstream of it."""

from __future__ import annotations

from collections.abc import Iterator

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytest
from filelock import FileLock

from bayesgrpo.model import reward_model as module
from bayesgrpo.model import reward_model as reward_model_module
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import FitDiagnostics
from bayesgrpo.model.simulate import simulate_runs


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow lane first, each lane in its collected order.

    Two workers share the tests (pytest-xdist): with the slow lane's minute-long fits, notebooks
    and Ray tests last in the order collected, one worker was left running them while the other
    had finished. Longest first is the classic order for the shortest makespan; the order is
    deterministic, as xdist requires of every worker's collection.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture
def ray_lock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One Ray at a time across pytest-xdist's workers: the modules that start a local Ray ask for
    it (``pytestmark``), since the fleet's Ctrl-C test counts Ray's processes and its fault test
    kills a busy Ray worker, which must be their own. xdist's recipe for a resource its workers
    share: a file lock in the folder above each worker's temp folder.
    """
    with FileLock(tmp_path_factory.getbasetemp().parent / "ray-tests.lock", timeout=3600):
        yield


def fake_sample(model, *, draws=40, chains=2, random_seed=None, **_):
    """Prior draws shaped like a posterior: enough to test everything downstream of sampling."""
    with model:
        prior = pm.sample_prior_predictive(draws=draws * chains, random_seed=random_seed).prior
    posterior = prior.isel(chain=0, drop=True).coarsen(draw=draws).construct(draw=("chain", "draw"))
    posterior = posterior.assign_coords(chain=np.arange(chains), draw=np.arange(draws)).transpose(
        "chain", "draw", ...
    )
    diagnostics = FitDiagnostics("fake", 0.1, draws, chains, 0, 1.0, 400.0, 400.0)
    return az.InferenceData(posterior=posterior), diagnostics


@pytest.fixture
def fast_compile():
    """Python-mode PyTensor: tests of plumbing, not speed, and C compiles are slow."""
    with pytensor.config.change_flags(mode="FAST_COMPILE"):
        yield


@pytest.fixture
def mocked(monkeypatch, fast_compile):
    """``RewardModel.fit`` draws from the prior instead of sampling the posterior."""
    monkeypatch.setattr(reward_model_module, "sample_model", fake_sample)


@pytest.fixture(scope="session")
def population():  # shared by the live, transfer, CLI, watch, report and integration tests (read-only)
    """A population 'fitted' by prior draws (mocked sampling) on simulated runs."""
    sim = simulate_runs(n_runs=8, curve="weibull", random_seed=3)
    original = module.sample_model
    module.sample_model = fake_sample
    try:
        with pytensor.config.change_flags(mode="FAST_COMPILE"):
            model = RewardModel(curve="weibull").fit(sim.table, random_seed=1)
    finally:
        module.sample_model = original
    return model, sim
