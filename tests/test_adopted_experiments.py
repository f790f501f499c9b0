"""What six adopted experiments measured, held as tests (``benchmarks/experiments/README.md``).

The experiments' scripts are deleted (git keeps them at 82b13ce); each test below measures the
reason its experiment gave for what was adopted, small enough for the fast lane, and fails when
the adopted behaviour is undone.

- ``jax_float32_divergences``: jax is capped below 0.10 in ``pyproject.toml`` because the default
  fit diverged on 0.10.2 (52 divergent draws of 1,000 at seed 3 against 2 on 0.9.2).
  :func:`test_jax_stays_below_the_release_whose_sampler_diverges` reads the pin; the sampling
  check is the seed-3 recovery fit of ``tests/model/test_recovery.py`` (slow lane, at most 5).
- ``dense_block_sim``: :data:`bayesgrpo.model.nuts.DENSE_MIN_TUNE`. A dense population block
  adapted in a 500-iteration warm-up left 100 simulated runs at r_hat 1.09 and bulk ESS 19
  (diagonal 1.019 and 240); one of 1,000 mixed. :func:`test_the_dense_block_needs_a_warm_up_of_1000`
  holds the shipped threshold where the default switches.
- ``live_fallback_budget``: the MCMC fallback's ensemble of 300 + 450 steps answers as the longer
  one did. :func:`test_the_shortened_fallback_answers_as_a_reliable_importance_sample` compares
  the forced fallback with importance sampling of the same run where its weights are good.
- ``live_newton_mode``: the live path's Laplace mode by Newton's method in numpy, steps capped at
  ``laplace.MODE_STEP``, is SciPy's L-BFGS-B mode. :func:`test_newton_finds_scipys_mode_on_bundled_runs`
  uses three bundled updates where steps up to 4 found a mode 15-23 nats below.
- ``live_sibling_reach``: ``LiveForecaster.update(reach=...)``.
  :func:`test_reach_keeps_a_flat_start_from_collapsing_the_band` forecasts a run flat at its
  start with and without the span of earlier runs of its recipe.
- ``stop_confirmation``: ``Confirmed`` and ``GainRateRule``, shipped as options.
  :func:`test_a_confirmed_stop_skips_a_one_check_dip` asks both rules along a simulated run with a
  dip; :func:`test_the_gain_rate_rule_stops_a_levelled_run_and_not_a_rising_one` asks the gain
  rate rule of two live updates.
"""

from __future__ import annotations

import tomllib
import warnings
from pathlib import Path

import jax
import jaxlib
import numpy as np
import pandas as pd
import pymc as pm
import pytest
from packaging.requirements import Requirement

from bayesgrpo.errors import ForecastDepartureWarning
from bayesgrpo.evaluate.backtest.cuts import cut_points, planned_horizon, prefix_table, run_points
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model import laplace, nuts
from bayesgrpo.model.curves import reward_curve
from bayesgrpo.model.datasets import bundled_population, load_bundled
from bayesgrpo.model.simulate import simulate_runs
from bayesgrpo.questions.live import LiveForecaster
from bayesgrpo.questions.stopping import Confirmed, GainRateRule, PlateauRule

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def shipped():
    """The bundled population as the live path ships it."""
    return bundled_population()


def _one_run(points: pd.DataFrame, stated: bool) -> RunsTable:
    """``points`` (step, reward) as the one run of a simulated table, with or without its range."""
    sim = simulate_runs(1, curve="weibull", n_steps=int(points["step"].max()), random_seed=0)
    runs = sim.table.runs
    if not stated:
        runs = runs.assign(reward_min=np.nan, reward_max=np.nan)
    return RunsTable(points=points.assign(run_id=runs["run_id"].iloc[0]), runs=runs, report=sim.table.report)


# jax_float32_divergences ------------------------------------------------------------------------


def test_jax_stays_below_the_release_whose_sampler_diverges():
    """jax/jaxlib 0.10.2 gave the recovery fit 52 / 9 / 8 divergent draws at seeds 3 / 4 / 5 where
    0.9.2 gave 2 / 3 / 2, with the model's float32 arithmetic, kernels and random stream equal
    (the compiled sampler loop changed). Lift the pin only once a newer jax fits as 0.9 does
    (``git show 82b13ce:benchmarks/experiments/jax_float32_divergences.py`` measures it).
    """
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    requirements = {r.name: r for r in map(Requirement, pins)}
    for name, installed in (("jax", jax.__version__), ("jaxlib", jaxlib.__version__)):
        specifier = requirements[name].specifier
        assert "0.9.2" in specifier and "0.10.2" not in specifier, f"{name}: {specifier}"
        assert installed in specifier, f"{name} {installed} installed against {specifier}"


# dense_block_sim --------------------------------------------------------------------------------


def _eight_schools() -> pm.Model:
    effects = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
    ses = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
    with pm.Model(coords={"run": [f"s{i}" for i in range(8)]}) as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        z = pm.Normal("z", 0.0, 1.0, dims="run")
        pm.Normal("y", mu + tau * z, ses, observed=effects, dims="run")
    return model


def test_the_dense_block_needs_a_warm_up_of_1000(monkeypatch):
    """On 100 simulated runs (56 population coordinates) the dense block adapted in 500 warm-up
    iterations ended at r_hat 1.092 and bulk ESS 19 where the diagonal matrix gave 1.019 and 240;
    after 1,000 it gave 1.016 and 297 in 46 s (diagonal 399 in 69 s). So the default takes the
    block only from a warm-up of 1,000 iterations: one short of it keeps the diagonal matrix.
    """
    assert nuts.DENSE_MIN_TUNE >= 1000

    class Chosen(Exception):
        pass

    def chosen(shapes, dense):  # the sampler's layout: the mass matrix is chosen, stop there
        raise Chosen(tuple(dense))

    monkeypatch.setattr(nuts, "flat_layout", chosen)
    model = _eight_schools()
    blocks = {}
    for tune in (nuts.DENSE_MIN_TUNE - 1, nuts.DENSE_MIN_TUNE):
        with pytest.raises(Chosen) as caught:
            nuts.sample_numpyro(model, draws=5, tune=tune, chains=1, random_seed=0)
        blocks[tune] = set(caught.value.args[0])
    assert blocks == {nuts.DENSE_MIN_TUNE - 1: set(), nuts.DENSE_MIN_TUNE: {"mu", "tau_log__"}}


# live_fallback_budget ---------------------------------------------------------------------------


def test_the_shortened_fallback_answers_as_a_reliable_importance_sample(shipped):
    """The fallback's 300 + 450 steps answered as 400 + 600 did (parameter means 0.17 reference sd
    off in the median run) in 1.7 s against 2.2 s, within the live path's 2 s. Forced on a run
    whose importance weights are good (Pareto k <= 0.5), it must give the same answer: parameter
    means and the final reward's median within half a posterior sd, each parameter's sd within a
    factor 2 (the tails of a few thousand
    draws differ by more: a 10,000-step ensemble's own 95% quantile sits 1 sd above importance's).
    The ensemble may not grow back past 750 steps (the 2 s budget; ``benchmarks/live_fallback.py``
    times it).
    """
    assert laplace.ENSEMBLE_BURN + laplace.ENSEMBLE_STEPS <= 750
    sim = simulate_runs(1, curve=shipped.curve, n_steps=200, noise=0.03, random_seed=3)
    prefix = RunsTable(
        points=sim.table.points[sim.table.points["step"] <= 100].reset_index(drop=True),
        runs=sim.table.runs,
        report=sim.table.report,
    )
    reference = LiveForecaster(shipped, n_draws=8000, random_seed=1).update(prefix, horizon=200)
    assert reference.method == laplace.IMPORTANCE and reference.posterior.pareto_k <= 0.5
    forced = LiveForecaster(shipped, n_draws=4000, random_seed=1, pareto_k_limit=-1.0).update(
        prefix, horizon=200
    )
    assert forced.method == laplace.ENSEMBLE
    theta, ref_theta = forced.posterior.theta, reference.posterior.theta
    sd = ref_theta.std(axis=0)
    assert np.max(np.abs(theta.mean(axis=0) - ref_theta.mean(axis=0)) / sd) < 0.5
    # walkers spread as far: shipped 1.8 at worst, an ensemble of 10 + 15 steps 2.7
    assert np.max(np.abs(np.log(theta.std(axis=0) / sd))) < np.log(2.0)
    final = float(forced.quantiles([200.0], band="curve")["q50"].iloc[0])
    ref_final = float(reference.quantiles([200.0], band="curve")["q50"].iloc[0])
    assert abs(final - ref_final) < 0.5 * reference.reward_draws([200.0], band="curve")[:, 0].std()


# live_newton_mode -------------------------------------------------------------------------------

#: Bundled updates (run, stated range kept, cut) where Newton's method with steps up to 4 stopped at
#: a mode 15-23 nats below SciPy's; with ``MODE_STEP`` 0.25 it finds SciPy's.
NEWTON_CASES = [
    ("verl_asyncRA_q3b_fsdp_base", True, 0.1),
    ("verl_asyncRA_q3b_mcore_off_ppl", True, 0.1),
    ("verl_gpg_qwen2-7b_math_megatron", False, 0.5),
]


@pytest.mark.slow  # reading the bundled runs takes 5 s of its 10-12 s
def test_newton_finds_scipys_mode_on_bundled_runs(shipped, monkeypatch):
    """Newton's method (numpy) replaced SciPy's L-BFGS-B in the live path to save SciPy's import;
    on every live update of the bundled runs it found the same mode in 248 of 252 (other local
    modes in 4, 0.16-1.3 nats apart either way). Its steps are capped (``laplace.MODE_STEP``)
    because longer ones left the basin it starts in: in these three updates the live path's own
    Laplace fit must reach L-BFGS-B's mode.
    """
    table = load_bundled(warn=False)
    original = laplace.laplace_fit
    fits = []

    def recorded(prior, t, y, noise_scale, likelihood_weight=1.0, start=None):
        mode, cov = original(prior, t, y, noise_scale, likelihood_weight, start)
        fits.append((prior, t, y, noise_scale, likelihood_weight, mode))
        return mode, cov

    monkeypatch.setattr(laplace, "laplace_fit", recorded)
    live = LiveForecaster(shipped, n_draws=500, random_seed=1)
    for run_id, stated, cut in NEWTON_CASES:
        one = table.select([run_id])
        if not stated:
            one = RunsTable(one.points, one.runs.assign(reward_min=np.nan, reward_max=np.nan), one.report)
        points = run_points(one, run_id)
        fits.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            live.update(prefix_table(one, cut_points(points, cut).observed), horizon=planned_horizon(one))
        prior, t, y, noise, weight, newton = fits[0]
        scipy_mode, _ = original(prior, t, y, noise, weight, optimizer="lbfgsb")

        def log_posterior(mode, prior=prior, t=t, y=y, noise=noise, weight=weight):
            return float(laplace.log_posterior(mode[None, :], prior, t, y, noise, weight)[0])

        assert log_posterior(newton) > log_posterior(scipy_mode) - 0.01, (run_id, cut)
        np.testing.assert_allclose(newton, scipy_mode, atol=0.02, err_msg=f"{run_id} at {cut}")


# live_sibling_reach -----------------------------------------------------------------------------


def test_reach_keeps_a_flat_start_from_collapsing_the_band(shipped):
    """A run without a stated range is normalised by its prefix's range; flat at its start that is
    little more than its noise, and a late rise lies above every draw. With ``reach`` = the span
    of earlier runs of the same recipe the band opens to the rise (on 49 bundled runs the 90%
    band held 0.69 / 0.70 / 0.81 of later points without it, 0.83 / 0.80 / 0.86 with it).
    Here three runs of one late-rising curve (noise sd 0.02), the first cut at 15% and 20%.
    """
    steps = np.arange(0, 201, dtype=float)
    true = reward_curve("weibull", steps / 200, 0.2, 0.75, tau=0.55, k=4.0)
    rng = np.random.default_rng(0)
    rewards = [true + 0.02 * rng.standard_normal(steps.size) for _ in range(3)]
    siblings = np.concatenate(rewards[1:])
    reach = (float(siblings.min()), float(siblings.max()))
    run = _one_run(pd.DataFrame({"step": steps, "reward": rewards[0]}), stated=False)
    live = LiveForecaster(shipped, n_draws=1000, random_seed=0)
    for cut in (30, 40):
        prefix = RunsTable(run.points[run.points["step"] <= cut].reset_index(drop=True), run.runs, run.report)
        later, y = steps[cut + 1 :], rewards[0][cut + 1 :]
        width, held = {}, {}
        for given in (None, reach):
            update = live.update(prefix, horizon=200, reach=given)
            draws = update.reward_draws(later, band="predictive", random_seed=1)
            low, high = np.quantile(draws, [0.05, 0.95], axis=0)
            width[given is not None] = high[-1] - low[-1]
            held[given is not None] = float(np.mean((y >= low) & (y <= high)))
        # without reach the end's band is a few noise sds wide and misses the rise
        assert width[False] < 0.15 and held[False] < 0.15, (cut, width, held)
        assert width[True] > 3 * width[False] and held[True] > held[False] + 0.2, (cut, width, held)


# stop_confirmation ------------------------------------------------------------------------------


def test_a_confirmed_stop_skips_a_one_check_dip(shipped):
    """A prefix that ends in a dip looks flat, and a plateau rule asked there stops at the low
    point; ``Confirmed(rule, 2)`` keeps a stop only at its second check in a row (eps 3%, p 0.8,
    no stated range: k = 2 saved 54% at -0.2% given up). A simulated rising run with its reward
    held 0.12 low over steps 41-60 of 200, checked every 5%: the plain rule stops at step 60,
    the confirmed one goes on, and both stop once the run has levelled off.
    """
    sim = simulate_runs(1, curve=shipped.curve, n_steps=200, noise=0.02, random_seed=5)
    points = sim.table.points.copy()
    dip = (points["step"] > 40) & (points["step"] <= 60)
    before = points.loc[(points["step"] > 30) & (points["step"] <= 40), "reward"].mean()
    points.loc[dip, "reward"] = before - 0.12 + 0.02 * np.random.default_rng(1).standard_normal(dip.sum())
    live = LiveForecaster(shipped, n_draws=1000, random_seed=0)
    plain = PlateauRule(eps=0.03, prob=0.8, relative=True)
    confirmed = Confirmed(PlateauRule(eps=0.03, prob=0.8, relative=True), checks=2)
    decisions = {}
    for step in (50, 60, 70, 80, 140, 150, 160, 170):
        prefix = RunsTable(
            points[points["step"] <= step].reset_index(drop=True), sim.table.runs, sim.table.report
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ForecastDepartureWarning)  # the dip leaves the band, rightly
            update = live.update(prefix, horizon=200)
        decisions[step] = (
            plain.decide(update.curve_draws, update.step)[0].decision,
            confirmed.decide(update.curve_draws, update.step)[0].decision,
        )
    assert decisions[60] == ("stop", "continue"), decisions  # the dip: one check only
    assert decisions[70][0] == "continue", decisions  # the run rises again
    assert all(c != "stop" for step, (_, c) in decisions.items() if step <= 80), decisions
    assert decisions[170] == ("stop", "stop"), decisions  # the plateau lasts: both stop


def test_the_gain_rate_rule_stops_a_levelled_run_and_not_a_rising_one(shipped):
    """``GainRateRule(0.2)``: stop when the expected remaining gain is below 20% of the range per
    whole run. On simulated runs with a stated range it saved 54% at -3.1% given up, better than
    either fixed budget (it stays an option: on the bundled runs it stopped 76-93% early). At half
    of a stated-range run, it stops a run that has levelled off and lets a still-rising one go on.
    """
    steps = np.arange(0, 201, dtype=float)
    rng = np.random.default_rng(0)
    rule = GainRateRule(0.2)
    answers = {}
    for name, tau in (("levelled", 0.1), ("rising", 0.8)):
        true = reward_curve("weibull", steps / 200, 0.2, 0.8, tau=tau, k=1.5)
        run = _one_run(
            pd.DataFrame({"step": steps, "reward": true + 0.02 * rng.standard_normal(steps.size)}), True
        )
        prefix = RunsTable(run.points[run.points["step"] <= 100].reset_index(drop=True), run.runs, run.report)
        update = LiveForecaster(shipped, n_draws=1000, random_seed=0).update(prefix, horizon=200)
        answers[name] = rule.decide(update.curve_draws, update.step)[0].decision
    assert answers == {"levelled": "stop", "rising": "continue"}
