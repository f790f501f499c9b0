"""The range a live run is normalised by: stated, or its logged range widened by the margin."""

from __future__ import annotations

import numpy as np
import pytest

from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.data import prepare
from bayesgrpo.model.draws import band_draws
from bayesgrpo.questions.live import LiveForecaster, reach_bounds


def test_reach_bounds_cover_the_prefix_and_the_reach_widened_by_the_margin():
    rewards = np.array([0.2, np.nan, 0.4, 0.3])
    assert reach_bounds(rewards, (0.0, 1.0), margin=0.5) == pytest.approx((-0.5, 1.5))
    assert reach_bounds(rewards, (0.3, 0.35), margin=0.5) == pytest.approx((0.1, 0.5))  # inside the prefix
    assert reach_bounds(rewards, None, margin=0.5) is None
    assert reach_bounds(rewards, (0.0, np.inf), margin=0.5) is None
    assert reach_bounds(np.array([np.nan]), (0.0, 1.0), margin=0.5) is None
    assert reach_bounds(np.array([0.5]), (0.5, 0.5), margin=0.5) is None  # no span


def _prefix(sim, stated: bool) -> tuple[RunsTable, float]:
    one = sim.table.select([sim.table.run_ids[0]])
    points = one.points[one.points["step"] <= one.points["step"].quantile(0.3)].reset_index(drop=True)
    runs = one.runs if stated else one.runs.drop(columns=["reward_min", "reward_max"], errors="ignore")
    return RunsTable(points=points, runs=runs, report=one.report), float(one.points["step"].max())


def test_a_live_update_without_a_stated_range_is_normalised_by_its_prefix(population):
    model, sim = population
    partial, horizon = _prefix(sim, stated=False)
    update = LiveForecaster(model, n_draws=500, random_seed=0).update(partial, horizon=horizon)
    raw = prepare(partial, horizon=horizon, max_points=model.max_points, bounds_margin=model.bounds_margin)
    assert (update.data.lower[0], update.data.upper[0]) == pytest.approx((raw.lower[0], raw.upper[0]))
    assert update.data.bounds_source == ("data",) and update.reward_range[2] == "estimated"
    # the curve draws are read back in reward units with those bounds
    assert float(np.ravel(update.curve_draws.reward_scale)[0]) == pytest.approx(raw.upper[0] - raw.lower[0])


def test_a_live_update_reads_a_reach_for_an_own_range_only(population):
    model, sim = population
    one = sim.table.select([sim.table.run_ids[0]])
    points = one.points[one.points["step"] <= one.points["step"].quantile(0.3)].reset_index(drop=True)
    horizon = float(one.points["step"].max())
    live = LiveForecaster(model, n_draws=500, random_seed=0)
    stated = live.update(
        RunsTable(points=points, runs=one.runs, report=one.report), horizon=horizon, reach=(-5, 5)
    )
    assert (stated.data.lower[0], stated.data.upper[0]) == (0.0, 1.0)
    own = one.runs.drop(columns=[c for c in ("reward_min", "reward_max") if c in one.runs.columns])
    reached = live.update(
        RunsTable(points=points, runs=own, report=one.report), horizon=horizon, reach=(-5, 5)
    )
    assert reached.data.lower[0] < -5 and reached.data.upper[0] > 5


def test_a_live_update_on_a_stated_range_is_untouched(population):
    model, sim = population
    one = sim.table.select([sim.table.run_ids[0]])
    points = one.points[one.points["step"] <= one.points["step"].quantile(0.3)].reset_index(drop=True)
    partial = RunsTable(points=points, runs=one.runs, report=one.report)
    update = LiveForecaster(model, n_draws=500, random_seed=0).update(
        partial, horizon=float(one.points["step"].max())
    )
    assert (update.data.lower[0], update.data.upper[0]) == (0.0, 1.0)


def test_a_run_inside_0_1_is_not_read_as_a_score(population):
    model, sim = population
    unstated, horizon = _prefix(sim, stated=False)
    points = unstated.points.copy()
    points.loc[points.index[-1], "reward"] = 1.3  # a summed reward climbing past 1
    left = RunsTable(points=points, runs=unstated.runs, report=unstated.report)
    update = LiveForecaster(model, n_draws=500, random_seed=0).update(left, horizon=horizon)
    assert update.reward_range[2] == "estimated" and update.data.bounds_source == ("data",)
    assert update.reward_range[1] > 1.3
    assert "read as a score" not in update.range_note()
    inside = LiveForecaster(model, n_draws=500, random_seed=0).update(unstated, horizon=horizon)
    assert inside.reward_range[2] == "estimated"  # a score is a range a user states
    assert "--reward-range 0 1" in inside.range_note()


def test_a_band_never_leaves_the_range_a_run_states(population):
    # issue 75/76: a score on 0 .. 1 was forecast above 1 (the predictive noise added to a curve near the top)
    model, sim = population
    stated, horizon = _prefix(sim, stated=True)
    points = stated.points.copy()
    points["reward"] = np.clip(0.97 + 0.04 * np.random.default_rng(0).standard_normal(len(points)), 0.0, 1.0)
    near_top = RunsTable(points=points, runs=stated.runs, report=stated.report)
    update = LiveForecaster(model, n_draws=500, random_seed=0).update(near_top, horizon=horizon)
    assert update.reward_range[2] == "stated" and update.known_bounds == (0.0, 1.0)
    unclipped = band_draws(update.curve_draws, np.array([horizon]), "predictive", update.noise_seed)[:, 0, 0]
    assert unclipped.max() > 1.0  # without the bound the band would leave the range
    for band in ("predictive", "curve"):
        draws = update.reward_draws(np.linspace(1.0, horizon, 20), band=band)
        assert draws.min() >= 0.0 and draws.max() <= 1.0
        lower, _, upper = update.final_interval(band=band)
        assert 0.0 <= lower <= upper <= 1.0
    # a run whose rewards leave its stated range keeps what it logged inside the band's reach
    points.loc[points.index[-1], "reward"] = 1.2
    beyond = RunsTable(points=points, runs=stated.runs, report=stated.report)
    update = LiveForecaster(model, n_draws=500, random_seed=0).update(beyond, horizon=horizon)
    assert update.known_bounds == (0.0, 1.2)
    # an estimated range bounds nothing
    unstated, _ = _prefix(sim, stated=False)
    assert (
        LiveForecaster(model, n_draws=500, random_seed=0).update(unstated, horizon=horizon).known_bounds
        is None
    )
