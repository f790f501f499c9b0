"""The live predictive band later in a run: a logged point's noise resampled from the run's residuals."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.cli import main
from bayesgrpo.logs.readers import load_runs
from bayesgrpo.model.datasets import bundled_population
from bayesgrpo.model.draws import CurveDraws, predictive_at, residuals_about
from bayesgrpo.questions.live import (
    MAX_RESIDUALS,
    MIN_RESIDUALS,
    RECENT_RESIDUALS_FROM,
    LiveForecaster,
    with_recent_residuals,
)


def _flat(n_draws: int = 400, n_runs: int = 1, level: float = 0.5) -> CurveDraws:
    """Draws of a curve that stays at ``level`` (a tiny gain), noise sd 0.05."""
    return CurveDraws(
        "exp",
        {
            "r0": np.full((n_draws, n_runs), level),
            "asymptote": np.full((n_draws, n_runs), level + 1e-9),
            "tau": np.full((n_draws, n_runs), 0.3),
        },
        step_scale=100.0,
        noise_sd=np.full((n_draws, n_runs), 0.05),
        noise_df=np.inf,
    )


def _points(rewards: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(1, len(rewards) + 1, dtype=float), "reward": rewards})


def test_residuals_are_the_rewards_about_each_draws_curve():
    cd = _flat(n_draws=3)
    residuals = residuals_about(cd, [1.0, 2.0, 3.0], [0.6, 0.5, 0.3])
    assert residuals.shape == (3, 1, 3)
    assert np.allclose(residuals, [[[0.1, 0.0, -0.2]]] * 3)


def test_the_band_resamples_the_residuals_it_carries_and_other_runs_keep_the_student_t():
    """One run's residuals are a known skewed sample: the band about its curve has their quantiles;
    the run without residuals keeps its Gaussian noise, drawn as before.
    """
    rng = np.random.default_rng(3)
    skewed = -rng.exponential(0.1, size=200)  # only dips, like a run's occasional bad batch
    residuals = np.full((400, 2, 200), np.nan)
    residuals[:, 0, :] = skewed
    cd = replace(_flat(n_runs=2), noise_residuals=residuals)
    assert list(cd.residual_counts) == [200, 0] and cd.has_noise
    draws = predictive_at(cd, np.arange(1.0, 51.0), rng=1)
    offsets = draws - 0.5
    assert np.max(offsets[:, 0, :]) <= 0.0  # never above the curve: no residual was
    expected = np.quantile(skewed, [0.05, 0.5])
    assert np.quantile(offsets[:, 0, :], [0.05, 0.5]) == pytest.approx(expected, abs=0.01)
    assert np.std(offsets[:, 1, :]) == pytest.approx(0.05, rel=0.05)  # the Gaussian noise
    plain = predictive_at(replace(_flat(n_runs=2), noise_residuals=None), np.arange(1.0, 51.0), rng=1)
    assert np.array_equal(plain[:, 1, :], draws[:, 1, :])  # the same noise stream where no residuals


def test_residuals_are_checked_packed_and_kept_by_select():
    cd = _flat(n_draws=4, n_runs=2)
    residuals = np.full((4, 2, 3), np.nan)
    residuals[:, 1, [0, 2]] = [1.0, 2.0]  # a NaN between them: packed to the front
    packed = replace(cd, noise_residuals=residuals)
    assert np.array_equal(np.asarray(packed.noise_residuals)[0, 1, :2], [1.0, 2.0])
    assert list(packed.select(["1"]).residual_counts) == [2]
    with pytest.raises(BayesGRPOError, match="noise_residuals must be finite or NaN and of shape"):
        replace(cd, noise_residuals=np.zeros((4, 3, 2)))
    uneven = residuals.copy()
    uneven[0, 1, 1] = 3.0
    with pytest.raises(BayesGRPOError, match="same number of residuals"):
        replace(cd, noise_residuals=uneven)
    without = replace(cd, noise_sd=None)
    with pytest.raises(BayesGRPOError, match="no noise"):
        predictive_at(replace(without, noise_residuals=residuals), [1.0])  # run 0 has none at all


def test_with_recent_residuals_keeps_the_latest_half_of_the_points():
    rewards = np.r_[np.full(60, 0.9), np.full(60, 0.5) + 0.01 * np.arange(60) / 60]
    kept = with_recent_residuals(_flat(), _points(rewards))
    assert list(kept.residual_counts) == [60]
    assert np.allclose(np.asarray(kept.noise_residuals)[0, 0, :60], 0.01 * np.arange(60) / 60, atol=1e-6)
    short = with_recent_residuals(_flat(), _points(np.full(2 * MIN_RESIDUALS - 3, 0.5)))
    assert list(short.residual_counts) == [MIN_RESIDUALS]  # fewer in the latest half: MIN_RESIDUALS
    few = with_recent_residuals(_flat(), _points(np.full(MIN_RESIDUALS - 1, 0.5)))
    assert few.noise_residuals is None  # fewer than MIN_RESIDUALS in all: the Student-t
    many = with_recent_residuals(_flat(), _points(np.full(4 * MAX_RESIDUALS, 0.5)))
    assert list(many.residual_counts) == [MAX_RESIDUALS]
    with pytest.raises(BayesGRPOError, match="one run"):
        with_recent_residuals(_flat(n_runs=2), _points(rewards))


def _skewed_run(n: int, seed: int) -> np.ndarray:
    """A saturating run whose noise is skewed: small scatter and, one point in ten, a deep dip."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, n + 1)
    dips = np.where(rng.random(n) < 0.1, -rng.uniform(0.15, 0.3, n), 0.0)
    return 0.3 + 0.4 * (1 - np.exp(-steps / 60.0)) + 0.01 * rng.standard_normal(n) + dips


def _csv_run(folder, rewards: np.ndarray):
    path = folder / "skewed.csv"
    pd.DataFrame({"step": np.arange(1, len(rewards) + 1), "reward": rewards}).to_csv(path, index=False)
    return load_runs(path)


def test_later_in_a_run_the_band_has_the_runs_own_noise_and_holds_90_percent(tmp_path):
    """Known skewed noise (a deep dip one point in ten): from RECENT_RESIDUALS_FROM of a run on the
    update's predictive band resamples the run's residuals and holds about 90% of the later points,
    its lower tail far longer than its upper one, as the noise's is; the curve band holds fewer.
    Before that share of the run the band keeps the Student-t.
    """
    inside = {"predictive": [], "curve": []}
    for seed in range(4):
        whole = _skewed_run(400, seed)
        run = _csv_run(tmp_path, whole[:240])  # 60% of the run
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # its range estimated from the prefix, not read as a score on 0 .. 1: the curve band
            # is then the narrow one this test sets the resampled noise against
            update = LiveForecaster(
                bundled_population(), random_seed=seed, band_stretch=None, read_unit_score=False
            ).update(run, horizon=400)
        assert update.noise_source == "recent residuals" and "latest 120 residuals" in update.band_note()
        later = np.arange(241, 401, dtype=float)
        for band in inside:
            low, high = np.quantile(update.reward_draws(later, band=band), [0.05, 0.95], axis=0)
            inside[band].append(np.mean((whole[240:] >= low) & (whole[240:] <= high)))
        q05, q50, q95 = np.quantile(update.reward_draws([400.0])[:, 0], [0.05, 0.5, 0.95])
        assert q50 - q05 > 3 * (q95 - q50)  # the dips: a long lower tail, as the run's noise has
    assert 0.85 <= np.mean(inside["predictive"]) <= 0.95, inside
    # the curve band leaves out the dips and part of the scatter (by less since the range of a run
    # planned for 400 steps is placed by the population's long runs, whose range a prefix of 60%
    # spans less of: its curve may still climb, 0.76 against 0.95 at these seeds)
    assert np.mean(inside["curve"]) < np.mean(inside["predictive"]) - 0.15
    early = _csv_run(tmp_path, _skewed_run(400, 0)[: int(0.9 * RECENT_RESIDUALS_FROM * 400)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = LiveForecaster(bundled_population(), random_seed=0).update(early, horizon=400)
        never = LiveForecaster(bundled_population(), random_seed=0, recent_residuals_from=None).update(
            run, horizon=400
        )
    assert first.noise_source == never.noise_source == "student-t"
    assert "Student-t noise" in first.band_note() and "residuals" not in never.band_note()


def test_stop_json_says_where_the_bands_noise_comes_from(tmp_path, capsys):
    rewards = _skewed_run(400, 1)
    path = tmp_path / "run.csv"
    pd.DataFrame({"step": np.arange(1, 241), "reward": rewards[:240]}).to_csv(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["stop", str(path), "--horizon", "400", "--json"])
    assert code == 0
    row = json.loads(capsys.readouterr().out)
    row = row[0] if isinstance(row, list) else row
    assert row["band"] == "predictive" and row["band_noise"] == "recent residuals"
    assert "residuals" in row["band_note"]
