"""Shared fixtures: sampling replaced by prior draws for tests of everything downstream of it."""

from __future__ import annotations

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import pytest

from bayesgrpo.model import reward_model as module
from bayesgrpo.model import reward_model as reward_model_module
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.sampling import FitDiagnostics
from bayesgrpo.model.simulate import simulate_runs

#: Test modules that start a local Ray. Under pytest-xdist they share one worker and run one after
#: the other: a test that counts Ray's processes (the fleet's Ctrl-C test) must see its own Ray only.
RAY_MODULES = frozenset(
    {
        "tests/evaluate/test_backtest.py",
        "tests/interfaces/test_fleet.py",
        "tests/interfaces/test_fleet_report.py",
    }
)


def _uses_a_module_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a fixture built once per module or class (a fit, a server)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:  # pytest's fixture bookkeeping moved: keep the module together
        return True
    return any(
        d.scope in ("module", "class", "package") for defs in info.name2fixturedefs.values() for d in defs
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group the tests for pytest-xdist's ``--dist loadgroup`` ([tool.pytest.ini_options]).

    The modules that start Ray run on one worker, one test after the other; a test that uses a
    module-scoped fixture stays with its module's other tests on one worker, so the fixture is
    built once; every other test goes to whichever worker is free.
    """
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if module in RAY_MODULES:
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif _uses_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(module))


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
