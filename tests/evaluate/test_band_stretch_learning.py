"""Learning the live band's stretch from held-out forecasts: known factors recovered, cross-fitted."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.evaluate.backtest import BacktestError, cross_fitted_band_stretch, learn_band_stretch
from bayesgrpo.evaluate.backtest.band_stretch import coverage_matched_factor, side_share
from bayesgrpo.evaluate.backtest.engine import population_specs
from bayesgrpo.questions.band_stretch import shipped_band_stretch

Z95 = 1.6448536269514722


def _forecasts(
    sd_rising: float, sd_other: float, n_runs: int = 30, sources: int = 3, seed: int = 0
) -> pd.DataFrame:
    """Standard-normal forecasts (q05, q50, q95 = -1.645, 0, 1.645) of points whose true sd differs
    above the median: ``sd_rising`` for the rising runs, ``sd_other`` for the rest; 1 below.
    """
    rng = np.random.default_rng(seed)
    frames = []
    for cut in (0.4, 0.5):
        for i in range(n_runs):
            rising = i % 2 == 0
            z = rng.standard_normal(400)
            y = np.where(z > 0, (sd_rising if rising else sd_other) * z, z)
            frames.append(
                pd.DataFrame(
                    {
                        "run_id": f"run{i}",
                        "source": f"s{i % sources}",
                        "cut": cut,
                        "rising": rising,
                        "y": y,
                        "q05": -Z95,
                        "q50": 0.0,
                        "q95": Z95,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def test_known_factors_are_recovered_apart_for_rising_and_other_runs():
    stretch = learn_band_stretch(_forecasts(4.0, 1.5), (0.35, 0.65), learnt_on="simulated")
    assert stretch.knots == (0.4, 0.5)
    np.testing.assert_allclose(stretch.rising_above, 4.0, atol=0.3)
    np.testing.assert_allclose(stretch.other_above, 1.5, atol=0.1)
    np.testing.assert_allclose(stretch.rising_below, 1.0, atol=0.1)
    np.testing.assert_allclose(stretch.other_below, 1.0, atol=0.1)
    assert stretch.learnt_on == "simulated"


def test_a_matched_side_leaves_five_percent_beyond_it():
    frame = _forecasts(3.0, 3.0)
    factor = coverage_matched_factor(frame, "above")
    assert side_share(frame, factor, "above") == pytest.approx(0.05, abs=0.01)
    assert side_share(frame, 1.0, "above") > 0.2  # as drawn, far too narrow above
    with pytest.raises(BacktestError, match="side"):
        side_share(frame, 1.0, "up")


def test_too_few_runs_keep_factor_1():
    frame = _forecasts(4.0, 1.5, n_runs=6)  # three rising runs a cut
    stretch = learn_band_stretch(frame, (0.35, 0.65))
    assert stretch.rising_above == (1.0, 1.0)
    assert stretch.other_above == (1.0, 1.0)  # three other runs too
    assert learn_band_stretch(frame, (0.35, 0.65), min_runs=3).rising_above != (1.0, 1.0)


def test_cross_fitted_factors_never_see_the_held_out_source():
    frame = _forecasts(2.0, 2.0)
    wide = frame["source"] == "s0"
    frame.loc[wide & (frame["y"] > 0), "y"] *= 4.0  # one source far wider above than the others
    sources = dict(zip(frame["run_id"], frame["source"], strict=False))
    stretches = cross_fitted_band_stretch(frame, sources, (0.35, 0.65), learnt_on="sim")
    assert set(stretches) == {"s0", "s1", "s2"}
    np.testing.assert_allclose(stretches["s0"].rising_above, 2.0, atol=0.25)  # learnt on s1, s2 alone
    assert min(stretches["s1"].rising_above) > 2.5  # s0 among what it was learnt on
    assert stretches["s0"].learnt_on == "sim without source s0"
    with pytest.raises(BacktestError, match="no source"):
        cross_fitted_band_stretch(frame, {"run0": "s0"}, (0.35, 0.65))
    with pytest.raises(BacktestError, match="lack columns"):
        learn_band_stretch(frame.drop(columns="rising"), (0.35, 0.65))


def test_a_backtests_forecasters_take_each_runs_stretch_one_per_population_and_stretch():
    frame = _forecasts(2.0, 2.0)
    stretches = cross_fitted_band_stretch(
        frame, dict(zip(frame["run_id"], frame["source"], strict=False)), (0.35, 0.65)
    )
    shared, other = object(), object()
    populations = {"a": shared, "b": shared, "c": other, "d": shared}
    given = {"a": stretches["s0"], "b": stretches["s0"], "c": stretches["s1"], "d": stretches["s1"]}
    specs, index = population_specs(populations, ["a", "b", "c", "d"], 100, 0, given)
    # a and b share one forecaster; d, of a's population but learnt without another source, its own
    assert index == {"a": 0, "b": 0, "c": 1, "d": 2}
    assert [spec.band_stretch for spec in specs] == [stretches["s0"], stretches["s1"], stretches["s1"]]
    assert specs[0].model is specs[2].model is shared
    default, index = population_specs(populations, ["a", "c", "d"], 100, 0)
    assert all(spec.band_stretch == shipped_band_stretch() for spec in default) and len(default) == 2


Z75 = 0.6744897501960817


def test_factors_by_level_recover_a_50_band_too_narrow_inside_a_right_90_band():
    frame = _forecasts(1.0, 1.0)  # the truth is standard normal: the 90% band is right
    frame = frame.assign(q25=-Z75 / 1.6, q75=Z75 / 1.6)  # ... but the 50% band 1.6 times too narrow
    stretch = learn_band_stretch(frame, (0.35, 0.85), by_level=True)
    assert stretch.by_level
    for name in ("rising_below", "rising_above", "other_below", "other_above"):
        np.testing.assert_allclose(getattr(stretch, name), 1.0, atol=0.1)
        np.testing.assert_allclose(getattr(stretch, f"{name}_inner"), 1.6, atol=0.15)
    assert not learn_band_stretch(frame, (0.35, 0.85)).by_level  # one factor a side unless asked
    with pytest.raises(BacktestError, match="50% band"):
        learn_band_stretch(_forecasts(1.0, 1.0), (0.35, 0.85), by_level=True)
    sources = dict(zip(frame["run_id"], frame["source"], strict=False))
    assert all(
        s.by_level for s in cross_fitted_band_stretch(frame, sources, (0.35, 0.85), by_level=True).values()
    )


def test_the_50_band_alone_is_learnt_with_the_90_band_kept_as_drawn():
    frame = _forecasts(2.0, 2.0)  # the 90% band too narrow above ...
    frame = frame.assign(q25=-Z75 / 1.6, q75=Z75 / 1.6)  # ... and the 50% band below and above
    stretch = learn_band_stretch(frame, (0.0, 0.35), by_level=True, outer_as_drawn=True)
    for name in ("rising_below", "rising_above", "other_below", "other_above"):
        assert getattr(stretch, name) == (1.0, 1.0)  # kept as drawn
    np.testing.assert_allclose(stretch.other_below_inner, 1.6, atol=0.15)
    assert stretch.other_above_inner[0] > 2.0  # the points above spread twice as far
    with pytest.raises(BacktestError, match="by_level"):
        learn_band_stretch(frame, (0.0, 0.35), outer_as_drawn=True)
