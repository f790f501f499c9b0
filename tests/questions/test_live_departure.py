"""A run that leaves its forecast: the latest logged points against the update's own band."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import BayesGRPOError, ForecastDepartureWarning, LiveUpdateWarning
from bayesgrpo.interfaces.cli import main
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.logs.table import RunsTable
from bayesgrpo.model.datasets import bundled_population
from bayesgrpo.model.draws import CurveDraws, predictive_at, reward_at
from bayesgrpo.questions.band_stretch import BandStretch
from bayesgrpo.questions.live import (
    DEPARTURE_LEVEL,
    MIN_LEVEL_POINTS,
    MIN_RECENT_POINTS,
    Departure,
    LiveForecaster,
    departure_level,
    noise_widening,
    recent_departure,
)
from bayesgrpo.questions.stopping import TargetRule, expected_gain


class _StandardNormalBand:
    """An update whose every predictive draw is standard normal: its 90% band is +-1.645."""

    def reward_draws(self, steps: np.ndarray) -> np.ndarray:
        return np.random.default_rng(0).standard_normal((20_000, len(steps)))


def _points(rewards: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(1, len(rewards) + 1, dtype=float), "reward": rewards})


def test_points_inside_the_band_have_not_departed():
    rewards = np.random.default_rng(1).standard_normal(200)
    found = recent_departure(_StandardNormalBand(), _points(rewards))
    assert found.n_points == 40  # the latest 20% of the points
    assert found.kind == "" and not found.departed
    assert "follows the run" in found.note()


def test_points_on_one_side_have_left_the_curve():
    rewards = np.random.default_rng(1).standard_normal(200)
    rewards[-30:] += 4.0  # a late jump
    found = recent_departure(_StandardNormalBand(), _points(rewards))
    assert found.kind == "above" and found.departed
    assert found.above >= 25 and found.p_above < DEPARTURE_LEVEL
    assert "left every curve" in found.note() and "above it" in found.note()


def test_points_that_scatter_on_both_sides_say_the_noise_grew():
    rewards = np.random.default_rng(1).standard_normal(200)
    rewards[-40:] *= 4.0
    found = recent_departure(_StandardNormalBand(), _points(rewards))
    assert found.kind == "noise" and found.departed
    assert found.above > 5 and found.below > 5
    assert "scatter more" in found.note()


def test_too_few_points_are_not_assessed_and_non_finite_rewards_are_not_read():
    found = recent_departure(_StandardNormalBand(), _points(np.full(2 * MIN_RECENT_POINTS - 1, 9.0)))
    assert found == Departure() and not found.departed
    rewards = np.random.default_rng(1).standard_normal(200)
    rewards[-5:] = np.nan
    assert recent_departure(_StandardNormalBand(), _points(rewards)).n_points == 39


def test_a_binomial_tail_matches_a_count_by_simulation():
    """The tail probability is that of at least ``above`` of ``n`` points above a calibrated band."""
    rewards = np.zeros(100)
    rewards[-20:] = [5.0] * 4 + [0.0] * 16  # 4 of the latest 20 above
    found = recent_departure(_StandardNormalBand(), _points(rewards))
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


def test_the_departure_is_read_on_the_band_as_drawn_not_its_stretch_for_the_steps_ahead(tmp_path):
    wide = BandStretch((0.5,), (12.0,), (12.0,), (12.0,), (12.0,), window=(0.3, 0.7))
    jumped = _saturating(200, seed=4)
    jumped[160:] += 0.6
    with pytest.warns(ForecastDepartureWarning):
        update = LiveForecaster(bundled_population(), random_seed=0, band_stretch=wide).update(
            _run(tmp_path, jumped), horizon=400
        )
    assert update.departure.kind == "above" and update.predictive_stretch == (12.0, 12.0)


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
    assert row["departure_level"] == pytest.approx(0.6, abs=0.15)  # the level the forecast follows


def test_a_departure_note_without_points_says_so():
    assert "too few" in Departure().note()


# --------------------------------------------------------------------------------------------
# The forecast follows a run that left its curve: departure_level and the update
# --------------------------------------------------------------------------------------------


def _flat_draws(n_draws: int = 4000, level: float = 0.5, noise: float = 0.05) -> CurveDraws:
    """Draws of a flat curve at ``level`` (every draw alike), with normal noise of sd ``noise``."""
    ones = np.ones(n_draws)
    return CurveDraws(
        "exp",
        {"r0": level * ones, "asymptote": level * ones, "tau": 0.2 * ones},
        step_scale=200.0,
        horizon_step=400.0,
        noise_sd=noise * ones,
    )


def test_departure_level_recovers_a_known_jump_and_its_uncertainty():
    rng = np.random.default_rng(3)
    rewards = 0.5 + 0.05 * rng.standard_normal(200)
    rewards[150:] += 0.3  # the run sits 0.3 above its curve for its last 50 points
    shift, from_step = departure_level(_flat_draws(), _points(rewards), rng=1)
    assert from_step == 181.0  # the latest 10% of 200 points: steps 181..200
    assert np.median(shift) == pytest.approx(rewards[-20:].mean() - 0.5, abs=0.005)
    assert np.median(shift) == pytest.approx(0.3, abs=0.03)
    assert shift.std() == pytest.approx(0.05 / np.sqrt(20), rel=0.35)  # the mean of 20 points' error


def test_departure_level_needs_one_run_and_enough_points():
    with pytest.raises(BayesGRPOError, match="at least"):
        departure_level(_flat_draws(), _points(np.full(MIN_LEVEL_POINTS - 1, 0.5)))
    two = CurveDraws("exp", {"r0": np.zeros((5, 2)), "asymptote": np.ones((5, 2)), "tau": np.ones((5, 2))})
    with pytest.raises(BayesGRPOError, match="one run"):
        departure_level(two, _points(np.zeros(50)))


def test_a_level_moves_both_bands_from_its_step_on_and_no_gain():
    draws = _flat_draws(n_draws=50)
    shifted = replace(draws, level_shift=np.full((50, 1), 0.3), level_from_step=[100.0])
    assert np.allclose(reward_at(shifted, [50.0, 99.0])[:, 0, :], 0.5)  # before the level: the curve
    assert np.allclose(reward_at(shifted, [100.0, 400.0])[:, 0, :], 0.8)
    assert np.median(predictive_at(shifted, [300.0], rng=0)) == pytest.approx(0.8, abs=0.02)
    gains = [expected_gain(d, step_now=150.0)["mean"] for d in (shifted, draws)]
    assert np.allclose(*gains)
    # a target is read on the level the run is at
    reached = TargetRule(target=0.7, prob=0.9).decide(shifted, step_now=150.0)[0]
    assert reached.stop and "target reached" in reached.reason
    assert "out of reach" in TargetRule(target=0.7, prob=0.9).decide(draws, step_now=150.0)[0].reason
    assert shifted.select(["0"]).level_from_step[0] == 100.0


def test_a_level_is_checked():
    draws = _flat_draws(n_draws=10)
    with pytest.raises(BayesGRPOError, match="needs level_from_step"):
        replace(draws, level_shift=np.zeros((10, 1)))
    with pytest.raises(BayesGRPOError, match="without level_shift"):
        replace(draws, level_from_step=[1.0])
    with pytest.raises(BayesGRPOError, match="shape"):
        replace(draws, level_shift=np.zeros((9, 1)), level_from_step=[1.0])
    with pytest.raises(BayesGRPOError, match="finite"):
        replace(draws, level_shift=np.full((10, 1), np.nan), level_from_step=[1.0])
    never = replace(draws, level_shift=np.ones((10, 1)), level_from_step=[np.nan])  # NaN: never applies
    assert np.allclose(reward_at(never, [400.0]), 0.5)


def _jumped_run(seed: int, n: int = 200, jump: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """A saturating run that jumps ``jump`` at 80% of its prefix and stays there, with its future."""
    whole = _saturating(2 * n, seed=seed)
    whole[int(0.8 * n) :] += jump
    return whole[:n], whole[n:]


def test_the_update_follows_a_jumped_run_and_its_predictive_band_holds_its_later_points(tmp_path):
    """Known noise and a known jump: followed, the 90% band holds about 90% of the later points;
    left with the curve, it holds almost none. The stop rules' gains are the same either way. The
    band's noise is the Student-t here (resampled from the run's recent residuals about a curve
    that stayed, it would span both levels: ``test_live_residual_band.py``).
    """
    followed, kept = [], []
    for seed in range(6):
        prefix, future = _jumped_run(seed)
        run = _run(tmp_path, prefix)
        later = np.arange(201, 401, dtype=float)
        with pytest.warns(ForecastDepartureWarning, match="follows its latest level"):
            update = LiveForecaster(
                bundled_population(), random_seed=seed, recent_residuals_from=None
            ).update(run, horizon=400)
        with pytest.warns(ForecastDepartureWarning, match="stays with the curve"):
            still = LiveForecaster(
                bundled_population(), random_seed=seed, follow_departure=False, recent_residuals_from=None
            ).update(run, horizon=400)
        assert update.departure.followed and update.departure.level == pytest.approx(0.6, abs=0.15)
        assert "at the run's latest level (+" in update.band_note() and "latest level" in update.band_note(
            "curve"
        )
        assert "latest level" not in still.band_note()
        for target, answer in ((followed, update), (kept, still)):
            low, high = np.quantile(answer.reward_draws(later), [0.05, 0.95], axis=0)
            target.append(np.mean((future >= low) & (future <= high)))
        assert np.allclose(
            expected_gain(update.curve_draws, step_now=update.step)["mean"],
            expected_gain(still.curve_draws, step_now=still.step)["mean"],
        )
    assert np.mean(followed) > 0.8 and np.mean(kept) < 0.2


def test_noise_widening_recovers_a_known_growth_of_the_noise():
    rng = np.random.default_rng(5)
    rewards = 0.5 + 0.05 * rng.standard_normal(200)
    rewards[-40:] = 0.5 + 0.15 * rng.standard_normal(40)  # the latest points scatter 3x as much
    factor = noise_widening(_flat_draws(), _points(rewards), rng=1)
    assert 2.25 <= factor <= 3.75
    assert noise_widening(_flat_draws(), _points(0.5 + 0.05 * rng.standard_normal(200)), rng=1) <= 1.25
    assert noise_widening(_flat_draws(), _points(np.full(2 * MIN_RECENT_POINTS - 1, 0.5))) == 1.0
    with pytest.raises(BayesGRPOError, match="with their noise"):
        noise_widening(replace(_flat_draws(), noise_sd=None), _points(rewards))


def test_the_update_widens_the_noise_of_a_run_whose_points_scatter_more_and_keeps_its_curve(tmp_path):
    """The latest 40 of 200 points and every later one scatter five times the run's noise: the
    widened band holds most of the later points, the band as fitted far fewer; the curve (and so
    every stop rule's gain) is the same either way. The widening is of the Student-t noise (a band
    resampling the run's recent residuals has no noise scale to widen).
    """
    held, kept = [], []
    for seed in range(4):
        whole = _saturating(400, seed=seed)
        whole[160:] = (whole[160:] - 0.2 - 0.5 * (1 - np.exp(-np.arange(161, 401) / 40.0))) * 5 + (
            0.2 + 0.5 * (1 - np.exp(-np.arange(161, 401) / 40.0))
        )
        prefix, future = whole[:200], whole[200:]
        run = _run(tmp_path, prefix)
        later = np.arange(201, 401, dtype=float)
        with pytest.warns(ForecastDepartureWarning, match="noise is widened"):
            update = LiveForecaster(
                bundled_population(), random_seed=seed, recent_residuals_from=None
            ).update(run, horizon=400)
        with pytest.warns(ForecastDepartureWarning, match="too narrow"):
            still = LiveForecaster(
                bundled_population(), random_seed=seed, follow_departure=False, recent_residuals_from=None
            ).update(run, horizon=400)
        assert update.departure.kind == "noise" and update.departure.noise_factor >= 1.5
        assert not update.departure.followed  # no level: the points scatter about the curve
        assert "noise widened x" in update.band_note() and "widened" not in update.band_note("curve")
        for target, answer in ((held, update), (kept, still)):
            low, high = np.quantile(answer.reward_draws(later), [0.05, 0.95], axis=0)
            target.append(np.mean((future >= low) & (future <= high)))
        assert np.allclose(
            reward_at(update.curve_draws, later), reward_at(still.curve_draws, later)
        )  # the curve band and every gain: unchanged
    assert np.mean(held) > 0.8 and np.mean(kept) < np.mean(held) - 0.2
