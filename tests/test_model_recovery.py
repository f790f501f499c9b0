"""Real NUTS on simulated runs: known parameters are recovered (slow lane; CI runs it)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.simulate import simulate_runs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def simulated():
    return simulate_runs(
        12,
        curve="weibull",
        n_steps=[150, 200, 250],
        observed_fraction=[1.0, 1.0, 0.6, 1.0],
        noise=[0.02, 0.04, 0.08],
        random_seed=11,
    )


@pytest.fixture(scope="module")
def fitted(simulated):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RewardModel(curve="weibull").fit(simulated.table, draws=500, tune=700, chains=2, random_seed=5, progressbar=False)


def test_truth_lies_in_the_90_percent_interval(simulated, fitted):
    parameters = fitted.run_parameters().set_index(["run_id", "parameter"])
    truth = simulated.truth.set_index("run_id")
    hits = []
    for run_id in truth.index:
        for name in ("r0", "r1", "tau", "k", "sigma"):
            row = parameters.loc[(run_id, name)]
            hits.append(row["q05"] <= truth.loc[run_id, name] <= row["q95"])
    coverage = float(np.mean(hits))
    assert coverage >= 0.85, f"90% intervals hold only {coverage:.0%} of the true parameters"


def test_fit_reports_its_diagnostics(fitted):
    summary = fitted.fit_summary()
    assert summary["n_runs"] == 12 and summary["sampler"] == "nutpie"
    assert summary["max_r_hat"] < 1.05
