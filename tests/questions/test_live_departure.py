"""A run that leaves its forecast: the latest logged points against the update's own band."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import ForecastDepartureWarning, LiveUpdateWarning
from bayesgrpo.interfaces.cli import main
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.datasets import bundled_population
from bayesgrpo.questions.live import Departure, LiveForecaster, recent_departure
from bayesgrpo.questions.live.departure import DEPARTURE_LEVEL, MIN_RECENT_POINTS


class _StandardNormalBand:
    """An update whose every predictive draw is standard normal: its 90% band is +-1.645."""

    def reward_draws(self, steps: np.ndarray) -> np.ndarray:
        return np.random.default_rng(0).standard_normal((20_000, len(steps)))


def _points(rewards: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(1, len(rewards) + 1, dtype=float), "reward": rewards})


def test_points_inside_the_band_have_not_departed():
    rewards = np.random.default_rng(1).standard_normal(200)
    found = recent_departure(_StandardNormalBand().reward_draws, _points(rewards))
    assert found.n_points == 40  # the latest 20% of the points
    assert found.kind == "" and not found.departed
    assert "follows the run" in found.note()


def test_points_on_one_side_have_left_the_curve():
    rewards = np.random.default_rng(1).standard_normal(200)
    rewards[-30:] += 4.0  # a late jump
    found = recent_departure(_StandardNormalBand().reward_draws, _points(rewards))
    assert found.kind == "above" and found.departed
    assert found.above >= 25 and found.p_above < DEPARTURE_LEVEL
    assert "left every curve" in found.note() and "above it" in found.note()


def test_points_that_scatter_on_both_sides_say_the_noise_grew():
    rewards = np.random.default_rng(1).standard_normal(200)
    rewards[-40:] *= 4.0
    found = recent_departure(_StandardNormalBand().reward_draws, _points(rewards))
    assert found.kind == "noise" and found.departed
    assert found.above > 5 and found.below > 5
    assert "scatter more" in found.note()


def test_too_few_points_are_not_assessed_and_non_finite_rewards_are_not_read():
    found = recent_departure(
        _StandardNormalBand().reward_draws, _points(np.full(2 * MIN_RECENT_POINTS - 1, 9.0))
    )
    assert found == Departure() and not found.departed
    rewards = np.random.default_rng(1).standard_normal(200)
    rewards[-5:] = np.nan
    assert recent_departure(_StandardNormalBand().reward_draws, _points(rewards)).n_points == 39


def test_a_binomial_tail_matches_a_count_by_simulation():
    """The tail probability is that of at least ``above`` of ``n`` points above a calibrated band."""
    rewards = np.zeros(100)
    rewards[-20:] = [5.0] * 4 + [0.0] * 16  # 4 of the latest 20 above
    found = recent_departure(_StandardNormalBand().reward_draws, _points(rewards))
    counts = np.random.default_rng(2).binomial(20, 0.05, size=400_000)
    assert found.p_above == pytest.approx((counts >= 4).mean(), abs=0.002)


def _run(folder, rewards: np.ndarray) -> RunsTable:
    """The run as a user's plain ``step,reward`` CSV reads (no metadata), named ``jump``."""
    path = folder / "jump.csv"
    pd.DataFrame({"step": np.arange(1, len(rewards) + 1), "reward": rewards}).to_csv(path, index=False)
    return load_runs(path)


def _saturating(n: int, seed: int) -> np.ndarray:
    steps = np.arange(1, n + 1)
    return 0.2 + 0.5 * (1 - np.exp(-steps / 40.0)) + 0.03 * np.random.default_rng(seed).standard_normal(n)


def test_the_live_update_warns_when_a_run_jumps_past_its_forecast(tmp_path):
    live = LiveForecaster(bundled_population(), random_seed=0)
    steady = _saturating(200, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForecastDepartureWarning)
        update = live.update(_run(tmp_path, steady), horizon=400)
    assert update.departure is not None and not update.departure.departed

    jumped = steady.copy()
    jumped[160:] += 0.6  # twenty noise sds, for the last 40 points
    with pytest.warns(ForecastDepartureWarning, match="of the last 40 logged points"):
        update = live.update(_run(tmp_path, jumped), horizon=400)
    assert update.departure.kind == "above"
    assert issubclass(ForecastDepartureWarning, LiveUpdateWarning)  # one filter silences both


def test_stop_prints_the_departure_in_the_run_row(tmp_path, capsys):
    rewards = _saturating(200, seed=4)
    rewards[160:] += 0.6
    path = tmp_path / "run.csv"
    pd.DataFrame({"step": np.arange(1, 201), "reward": rewards}).to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForecastDepartureWarning)  # said once, in the row
        assert main(["stop", str(path), "--horizon", "400"]) == 0
    assert "(the run has left its forecast: of the last 40 logged points" in capsys.readouterr().out
    assert main(["stop", str(path), "--horizon", "400", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["departed"] is True and "left every curve" in row["departure_note"]


def test_a_departure_note_without_points_says_so():
    assert "too few" in Departure().note()
