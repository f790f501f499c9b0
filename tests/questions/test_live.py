"""Live single-run update: Laplace + importance sampling on a Gaussian population prior."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import special, stats

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.build import centering
from bayesgrpo.model.curves import reward_curve_by_levels
from bayesgrpo.model.data import prepare
from bayesgrpo.model.datasets import load_bundled
from bayesgrpo.model.laplace import (
    GaussianRunPrior,
    condition_run,
    condition_start,
    laplace_fit,
    log_posterior,
)
from bayesgrpo.model.precondition import run_laplace
from bayesgrpo.model.predict import new_run_draws, size_effect_draws
from bayesgrpo.model.priors import merge_priors
from bayesgrpo.model.reward_model import RewardModel
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import PlateauRule, expected_gain
from bayesgrpo.questions.stopping.momentum import recent_rise


def _prior(curve: str = "weibull", spread: float = 1.0) -> GaussianRunPrior:
    names = ("r0", "r1", "tau", "k", "log_sigma") if curve == "weibull" else ("r0", "r1", "tau", "log_sigma")
    mean = {"r0": -1.0, "r1": 0.5, "tau": np.log(0.3), "k": 0.0, "log_sigma": np.log(0.05)}
    return GaussianRunPrior(
        curve=curve,
        names=names,
        mean=np.array([mean[n] for n in names]),
        cov=np.eye(len(names)) * spread**2 * 0.25,
        nu=30.0,
    )


def _simulate(prior: GaussianRunPrior, theta: np.ndarray, t: np.ndarray, seed: int = 0) -> np.ndarray:
    shape = {name: np.exp(theta[2 + i]) for i, name in enumerate(prior.names[2:-1])}
    mean = reward_curve_by_levels(prior.curve, t, special.expit(theta[0]), special.expit(theta[1]), **shape)
    return mean + np.exp(theta[-1]) * np.random.default_rng(seed).standard_normal(len(t))


def test_no_points_gives_the_prior():
    prior = _prior()
    post = condition_run(prior, [], [], n_draws=4000, random_seed=1)
    assert post.n_points == 0
    np.testing.assert_allclose(post.theta.mean(axis=0), prior.mean, atol=0.05)
    np.testing.assert_allclose(np.cov(post.theta, rowvar=False), prior.cov, atol=0.03)


@pytest.mark.parametrize("curve", ["weibull", "exp"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_many_points_recover_the_truth(curve, seed):
    prior = _prior(curve)
    truth = prior.mean + np.random.default_rng(100 + seed).multivariate_normal(np.zeros(prior.dim), prior.cov)
    t = np.linspace(0.0, 0.6, 40)
    y = _simulate(prior, truth, t, seed)
    post = condition_run(prior, t, y, n_draws=3000, random_seed=seed)
    assert post.pareto_k < 0.7
    low, high = np.quantile(post.theta, [0.005, 0.995], axis=0)
    # the levels and the noise are what 40 points pin down
    for i in (0, -1):
        assert low[i] <= truth[i] <= high[i], (prior.names[i], low[i], truth[i], high[i])
    # and the posterior is narrower than the prior where data inform
    assert post.theta[:, 0].std() < 0.5 * np.sqrt(prior.cov[0, 0])


def test_importance_answer_matches_brute_force_prior_sampling():
    """With 4 noisy points the posterior is close to the prior, so 400k prior draws weighted by
    the likelihood are an exact reference the Laplace + PSIS answer must match.
    """
    prior = _prior("exp")
    truth = prior.mean + np.array([0.3, -0.2, 0.1, 0.0])
    t = np.array([0.0, 0.05, 0.1, 0.15])
    y = _simulate(prior, truth, t, seed=5)
    post = condition_run(prior, t, y, n_draws=8000, random_seed=3)
    rng = np.random.default_rng(4)
    reference = rng.multivariate_normal(prior.mean, prior.cov, size=400_000)
    log_w = log_posterior(reference, prior, t, y, np.ones_like(t)) - log_posterior(
        reference, prior, t[:0], y[:0], t[:0]
    )
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    reference_mean = w @ reference
    reference_sd = np.sqrt(w @ (reference - reference_mean) ** 2)
    np.testing.assert_allclose(post.theta.mean(axis=0), reference_mean, atol=0.1 * reference_sd.max() + 0.02)
    np.testing.assert_allclose(post.theta.std(axis=0), reference_sd, rtol=0.15)


def test_a_collapse_is_still_sampled_reliably():
    """Data far from what the prior expects (a collapse an exp curve cannot make): the adapted
    proposal still gives trustworthy weights, and the posterior sits between the two levels.
    """
    prior = _prior("exp", spread=0.2)
    t = np.linspace(0, 1, 30)
    y = np.where(t < 0.5, 0.9, 0.1)
    post = condition_run(prior, t, y, noise_scale=np.full_like(t, 0.05), n_draws=2000, random_seed=0)
    assert post.pareto_k <= 0.7
    assert post.ess > 200


def _correlated_prior() -> GaussianRunPrior:
    """The exp prior with the end level following the start (correlation 0.8) and tau not at all."""
    prior = _prior("exp")
    cov = prior.cov.copy()
    cov[0, 1] = cov[1, 0] = 0.8 * 0.25
    return GaussianRunPrior(prior.curve, prior.names, prior.mean, cov, prior.nu)


@pytest.mark.parametrize("start", [0.05, 0.2, 0.6])
def test_condition_start_matches_brute_force_weighting(start):
    """A measured start, exactly: 1M prior draws weighted by Normal(start | expit(r0), sd) are
    the reference for the start, the end level it drags along and the untouched tau.
    """
    prior, sd = _correlated_prior(), 0.02
    post = condition_start(prior, start, sd, n_draws=20_000, random_seed=1)
    reference = np.random.default_rng(2).multivariate_normal(prior.mean, prior.cov, size=1_000_000)
    log_w = -0.5 * ((start - special.expit(reference[:, 0])) / sd) ** 2
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    mean = w @ reference
    sd_ref = np.sqrt(w @ (reference - mean) ** 2)
    np.testing.assert_allclose(post.theta.mean(axis=0), mean, atol=0.03 + 0.05 * sd_ref.max())
    np.testing.assert_allclose(post.theta.std(axis=0), sd_ref, rtol=0.1)
    # on the reward scale the start is where it was measured
    assert abs(np.median(special.expit(post.theta[:, 0])) - start) < 2 * sd
    assert post.n_points == 0


def test_a_measured_start_moves_the_end_by_the_population_correlation():
    prior = _correlated_prior()
    low = condition_start(prior, 0.05, 0.02, random_seed=0).theta[:, 1].mean()
    high = condition_start(prior, 0.6, 0.02, random_seed=0).theta[:, 1].mean()
    assert high - low > 1.0  # 0.8 of the start's logit change of about 3.3
    # a start measured at the bound (a 0/1 reward never solved) stays within a few errors of it
    at_zero = special.expit(condition_start(prior, 0.0, 0.02, random_seed=0).theta[:, 0])
    assert np.quantile(at_zero, 0.95) < 4 * 0.02  # against a prior 4 sd away from it
    with pytest.raises(BayesGRPOError, match="positive error"):
        condition_start(prior, 0.5, 0.0)


def test_bad_points_are_errors():
    prior = _prior()
    with pytest.raises(BayesGRPOError, match="not finite"):
        condition_run(prior, [0.1, np.nan], [0.2, 0.3])
    with pytest.raises(BayesGRPOError, match="differ in length"):
        condition_run(prior, [0.1, 0.2], [0.2])


def test_from_draws_moment_matches():
    rng = np.random.default_rng(0)
    draws = {name: rng.normal(i, 0.5, 5000) for i, name in enumerate(("r0", "r1", "tau", "log_sigma"))}
    draws["nu"] = np.full(5000, 7.0)
    prior = GaussianRunPrior.from_draws(draws, "exp")
    np.testing.assert_allclose(prior.mean, [0, 1, 2, 3], atol=0.05)
    assert prior.nu == 7.0
    draws["tau"][0] = np.nan
    with pytest.raises(BayesGRPOError, match="non-finite"):
        GaussianRunPrior.from_draws(draws, "exp")


def test_new_run_draws_place_a_new_family_by_the_between_family_spread(population):
    model, _ = population
    posterior = model.idata.posterior
    known = new_run_draws(
        posterior, "weibull", family_level=str(posterior["r0_family"].family.values[0]), random_seed=0
    )
    new = new_run_draws(posterior, "weibull", family_level="a family never fitted", random_seed=0)
    unknown = new_run_draws(posterior, "weibull", family_level=None, random_seed=0)
    assert set(known) == {"r0", "r1", "tau", "k", "log_sigma", "nu"}
    # a new family adds the between-family spread: wider than an unknown one (effect 0)
    assert new["r0"].std() > unknown["r0"].std()
    assert all(v.shape == known["r0"].shape for v in known.values())


def test_size_effect_draws_take_one_size_per_draw():
    slope = np.array([1.0, 2.0, 3.0])
    rng = np.random.default_rng(0)
    np.testing.assert_allclose(
        size_effect_draws(slope, np.array([0.5, -1.0, 0.0]), (-1.0, 1.0), 0.5, rng), [0.5, -2.0, 0.0]
    )
    beyond = size_effect_draws(np.zeros(2000), np.full(2000, 3.0), (-1.0, 1.0), 0.5, rng)
    assert beyond.std() == pytest.approx(0.5 * 2.0, rel=0.1)  # 2 sd of log size past the edge


def test_live_forecaster_updates_one_run(population):
    model, sim = population
    live = LiveForecaster(model, n_draws=1000, random_seed=0)
    run_id = sim.table.run_ids[0]
    one = sim.table.select([run_id])
    cut = one.points[one.points["step"] <= one.points["step"].quantile(0.3)]

    partial = RunsTable(points=cut.reset_index(drop=True), runs=one.runs, report=one.report)
    update = live.update(partial, horizon=float(one.points["step"].max()))
    assert update.run_id == run_id
    assert update.curve_draws.n_runs == 1 and update.curve_draws.n_draws == 1000
    gain = expected_gain(update.curve_draws, update.step)
    assert np.isfinite(gain[["mean", "lower", "upper"]].to_numpy()).all()
    decision = PlateauRule(eps=0.01).decide(update.curve_draws, update.step)[0]
    assert decision.decision in ("stop", "continue", "undecided") and decision.reason
    # the prior is cached per metadata
    assert len(live._priors) == 1
    live.update(partial, horizon=float(one.points["step"].max()))
    assert len(live._priors) == 1
    # the run's own latest rise rides along with the draws, as the logged points give it
    horizon = float(one.points["step"].max())
    found = recent_rise(cut["step"].to_numpy(), cut["reward"].to_numpy(), horizon)
    assert update.curve_draws.recent_rise[0] == pytest.approx(found.rise)
    assert update.curve_draws.recent_rise_se[0] == pytest.approx(found.se)


def test_live_forecaster_needs_a_partial_pooling_fit():
    with pytest.raises(BayesGRPOError):
        LiveForecaster(RewardModel())


@pytest.mark.slow
def test_laplace_fit_survives_a_line_search_that_overshoots():
    """Regression: preconditioning the bundled runs without this one sent L-BFGS to log tau
    near -745 (tau = 0), an error that ended a leave-one-run-out fit; such a point is refused now.
    """
    table = load_bundled(warn=False)
    held = "verl_pr3389_dp_2_gpu_20251111_044742"
    data = prepare(table.select([r for r in table.run_ids if r != held]))
    candidates = np.flatnonzero(centering(data, 4.0)["levels"])
    mean, chol, _ = run_laplace(data, "two_timescale", merge_priors("two_timescale", None), candidates)
    assert np.isfinite(mean).all() and np.isfinite(chol).all()


@pytest.mark.parametrize("curve", ["weibull", "exp"])
def test_newton_and_lbfgsb_give_the_same_laplace_fit(curve):
    """The live path's numpy optimiser and the population preconditioning's L-BFGS-B agree."""
    prior = _prior(curve)
    truth = prior.mean + 0.3
    t = np.linspace(0.0, 0.6, 60)
    y = _simulate(prior, truth, t, 5)
    newton_mode, newton_cov = laplace_fit(prior, t, y, np.ones_like(t))
    lbfgsb_mode, lbfgsb_cov = laplace_fit(prior, t, y, np.ones_like(t), optimizer="lbfgsb")
    np.testing.assert_allclose(newton_mode, lbfgsb_mode, atol=2e-3)
    np.testing.assert_allclose(newton_cov, lbfgsb_cov, rtol=0.05, atol=1e-4)
    with pytest.raises(BayesGRPOError, match="optimizer"):
        laplace_fit(prior, t, y, np.ones_like(t), optimizer="bfgs")


def _t_prior(df: float, curve: str = "exp", spread: float = 1.0) -> GaussianRunPrior:
    return dataclasses.replace(_prior(curve, spread), df=df)


@pytest.mark.parametrize("df", [4.0, np.inf])
def test_a_t_prior_has_scipys_density_and_draws(df):
    prior = _t_prior(df)
    rng = np.random.default_rng(0)
    theta = prior.mean + rng.standard_normal((6, prior.dim))
    reference = (
        stats.multivariate_normal(prior.mean, prior.cov)
        if np.isinf(df)
        else stats.multivariate_t(prior.mean, prior.cov, df=df)
    )
    np.testing.assert_allclose(prior.log_density(theta), reference.logpdf(theta), rtol=1e-10)
    post = condition_run(prior, [], [], n_draws=200_000, random_seed=1)  # no point: the prior's draws
    kurtosis = ((post.theta - prior.mean) ** 4).mean(axis=0) / post.theta.var(axis=0) ** 2
    assert np.all(kurtosis > 4.5) if not np.isinf(df) else np.allclose(kurtosis, 3.0, atol=0.1)


def test_a_t_prior_lets_points_far_from_their_kin_take_over():
    # a run whose level sits 3 prior sds from what the population expects: the Gaussian prior
    # holds its posterior back, the t prior (same centre and shape) much less
    t = np.linspace(0.0, 1.0, 60)
    truth = _prior("exp", spread=0.4).mean + np.array([0.0, 3 * 0.2, 0.0, 0.0])
    y = _simulate(_prior("exp"), truth, t, seed=3)
    gaussian = condition_run(_prior("exp", spread=0.4), t, y, n_draws=4000, random_seed=0)
    heavy = condition_run(_t_prior(2.0, "exp", spread=0.4), t, y, n_draws=4000, random_seed=0)
    assert heavy.pareto_k <= 0.7
    gap_gaussian = abs(gaussian.theta[:, 1].mean() - truth[1])
    gap_heavy = abs(heavy.theta[:, 1].mean() - truth[1])
    assert gap_heavy < 0.7 * gap_gaussian


def test_a_measured_start_conditions_a_t_prior_exactly():
    # reference: joint draws of the t prior weighted by the start's likelihood
    prior = _t_prior(4.0, "exp")
    correlated = prior.cov + 0.15 * (np.ones((4, 4)) - np.diag([0.0, 1.0, 1.0, 1.0]))
    prior = dataclasses.replace(prior, cov=correlated)
    start, start_sd = 0.4, 0.05
    post = condition_start(prior, start, start_sd, n_draws=200_000, random_seed=2)
    reference = prior.draws(2_000_000, np.random.default_rng(3))
    w = np.exp(-0.5 * ((start - special.expit(reference[:, 0])) / start_sd) ** 2)
    w /= w.sum()
    mean = w @ reference
    sd = np.sqrt(w @ (reference - mean) ** 2)
    np.testing.assert_allclose(post.theta.mean(axis=0), mean, atol=0.02)
    np.testing.assert_allclose(post.theta.std(axis=0), sd, rtol=0.03)


def test_a_tempered_likelihood_weighs_the_points_against_the_prior():
    prior = _prior("exp")
    t = np.linspace(0.0, 0.6, 40)
    y = _simulate(prior, prior.mean, t)
    theta = prior.draws(5, np.random.default_rng(0))
    full = log_posterior(theta, prior, t, y, np.ones_like(t))
    tempered = log_posterior(theta, prior, t, y, np.ones_like(t), likelihood_weight=0.25)
    np.testing.assert_allclose(tempered - prior.log_density(theta), 0.25 * (full - prior.log_density(theta)))
    # counted for a quarter, 40 points pin the start down about half as tightly (1 / sqrt(0.25))
    sd_full = condition_run(prior, t, y, n_draws=3000, random_seed=1).theta[:, 0].std()
    sd_tempered = (
        condition_run(prior, t, y, n_draws=3000, random_seed=1, likelihood_weight=0.25).theta[:, 0].std()
    )
    assert 1.5 < sd_tempered / sd_full < 2.5
    with pytest.raises(BayesGRPOError, match="likelihood_weight"):
        condition_run(prior, t, y, likelihood_weight=0.0)


def test_live_forecaster_tempers_its_update_when_asked(population):
    model, sim = population
    with pytest.raises(BayesGRPOError, match="likelihood_weight"):
        LiveForecaster(model, likelihood_weight=1.5)
    one = sim.table.select([sim.table.run_ids[0]])
    cut = one.points[one.points["step"] <= one.points["step"].quantile(0.4)]
    partial = RunsTable(points=cut.reset_index(drop=True), runs=one.runs, report=one.report)
    horizon = float(one.points["step"].max())
    widths = []
    for weight in (1.0, 0.2):
        update = LiveForecaster(model, n_draws=1000, random_seed=0, likelihood_weight=weight).update(
            partial, horizon=horizon
        )
        row = update.quantiles([horizon], (0.05, 0.95), band="curve").iloc[0]
        low, high = row["q05"], row["q95"]
        widths.append(high - low)
    assert widths[1] > widths[0]
